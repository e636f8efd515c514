// Golden cases for the vendors beyond NVIDIA: what their device plugins register, the user's
// example pods (the multi-vendor examples of the user's documents) parsed with each vendor's
// resource names, the pod annotations a placement writes, and the reasons a pod that does not fit
// is given.
#include <gtest/gtest.h>

#include "device/config.h"
#include "device/vendor.h"
#include "device/vendors/annotated_vendor.h"
#include "device/vendors/ascend_vendor.h"
#include "device/vendors/neuron_vendor.h"
#include "scheduler/test_util.h"

namespace hami::scheduler {
namespace {

using device::Annotations;
using device::ContainerRequest;
using device::DeviceConfig;
using device::DeviceInfo;
using device::VendorRegistry;
using testing::Limits;
using testing::SchedulerWorld;

DeviceConfig Config(const std::string& yaml) {
  Result<DeviceConfig> c = device::ParseDeviceConfigYaml(yaml);
  EXPECT_TRUE(c.ok()) << c.status().ToString();
  return c.ok() ? std::move(c).value() : DeviceConfig{};
}

// Two Z100s as a DCU device plugin registers them: the 9-field text form, and the 7-field form
// of older plugins (index 0, hami-core).
constexpr char kDcuRegistration[] =
    "DCU-a,10,16368,100,DCU-Z100,0,true,0,hami-core:DCU-b,10,16368,100,DCU-Z100L,1,true:";

TEST(HygonDcu, RegistrationDecodesBothTextForms) {
  VendorRegistry reg = VendorRegistry::FromConfig(Config("hygon: {}\n")).value();
  const device::Vendor* dcu = reg.Find("DCU");
  ASSERT_NE(dcu, nullptr);
  EXPECT_EQ(reg.Find("NVIDIA"), nullptr);
  Result<std::vector<DeviceInfo>> devs =
      device::DecodeAnnotatedNode(*dcu, {{"hami.io/node-dcu-register", kDcuRegistration}});
  ASSERT_TRUE(devs.ok()) << devs.status().ToString();
  ASSERT_EQ(devs->size(), 2u);
  const DeviceInfo& a = (*devs)[0];
  EXPECT_EQ(a.id, "DCU-a");
  EXPECT_EQ(a.count, 10);
  EXPECT_EQ(a.devmem, 16368);
  EXPECT_EQ(a.devcore, 100);
  EXPECT_EQ(a.type, "DCU-Z100");
  EXPECT_TRUE(a.health);
  EXPECT_EQ(a.vendor, "DCU");
  const DeviceInfo& b = (*devs)[1];
  EXPECT_EQ(b.type, "DCU-Z100L");
  EXPECT_EQ(b.numa, 1);
  EXPECT_EQ(b.index, 0u);
  EXPECT_EQ(b.mode, "hami-core");
  // No registration: not this vendor's node. A broken one: the key is named.
  EXPECT_EQ(device::DecodeAnnotatedNode(*dcu, {}).status().code(), StatusCode::kNotFound);
  Result<std::vector<DeviceInfo>> bad = device::DecodeAnnotatedNode(
      *dcu, {{"hami.io/node-dcu-register", "DCU-a,ten,1,1,DCU,0,true:"}});
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("hami.io/node-dcu-register"), std::string::npos);
  EXPECT_EQ(dcu->annotation_keys().node_handshake, "hami.io/node-handshake-dcu");
  EXPECT_EQ(dcu->resource_names().count, "hygon.com/dcunum");
}

TEST(HygonDcu, TheUsersExamplePodAndTheDefaults) {
  VendorRegistry reg = VendorRegistry::FromConfig(Config("nvidia: {}\nhygon: {}\n")).value();
  const device::Vendor* dcu = reg.Find("DCU");
  ASSERT_NE(dcu, nullptr);
  // dcu-test: one card, 16000 MiB, 80 % of its compute.
  Result<std::optional<ContainerRequest>> r = dcu->ParseRequest(Limits(
      {{"hygon.com/dcunum", "1"}, {"hygon.com/dcumem", "16000"}, {"hygon.com/dcucores", "80"}},
      "app"));
  ASSERT_TRUE(r.ok() && r->has_value()) << r.status().ToString();
  EXPECT_EQ((*r)->vendor, "DCU");
  EXPECT_EQ((*r)->count, 1);
  EXPECT_EQ((*r)->mem_mib, 16000);
  EXPECT_EQ((*r)->cores, 80);
  // A count alone: whole cards (the chart's default cores, 100) with all their memory.
  r = dcu->ParseRequest(Limits({{"hygon.com/dcunum", "2"}}));
  ASSERT_TRUE(r.ok() && r->has_value());
  EXPECT_EQ((*r)->count, 2);
  EXPECT_EQ((*r)->cores, 100);
  EXPECT_EQ((*r)->mem_percent, 100);
  // Memory or cores without a count ask for nothing; NVIDIA's resources are not DCU's.
  r = dcu->ParseRequest(Limits({{"hygon.com/dcumem", "1000"}}));
  ASSERT_TRUE(r.ok());
  EXPECT_FALSE(r->has_value());
  r = dcu->ParseRequest(Limits({{"nvidia.com/gpu", "1"}}));
  ASSERT_TRUE(r.ok());
  EXPECT_FALSE(r->has_value());
  // Bad values are refused naming the resource.
  r = dcu->ParseRequest(Limits({{"hygon.com/dcunum", "1"}, {"hygon.com/dcucores", "150"}}));
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("hygon.com/dcucores"), std::string::npos);
  r = dcu->ParseRequest(Limits({{"hygon.com/dcunum", "-1"}}));
  EXPECT_FALSE(r.ok());

  // The user's section: defaultCores 0 (a count alone shares the card), a memory factor.
  VendorRegistry users =
      VendorRegistry::FromConfig(Config("hygon:\n  defaultCores: 0\n  memoryFactor: 2\n")).value();
  r = users.Find("DCU")->ParseRequest(
      Limits({{"hygon.com/dcunum", "1"}, {"hygon.com/dcumem", "1000"}}));
  ASSERT_TRUE(r.ok() && r->has_value());
  EXPECT_EQ((*r)->cores, 0);
  EXPECT_EQ((*r)->mem_mib, 2000);
}

// Vendor memory resources count MiB (times the section's memoryFactor): a unit is refused with
// the conversion, as for nvidia.com/gpumem.
TEST(HygonDcu, DcumemWithAUnitIsRefusedWithTheHint) {
  VendorRegistry reg = VendorRegistry::FromConfig(Config("hygon: {}\n")).value();
  const device::Vendor* dcu = reg.Find("DCU");
  ASSERT_NE(dcu, nullptr);
  auto r = dcu->ParseRequest(Limits({{"hygon.com/dcunum", "1"}, {"hygon.com/dcumem", "2Gi"}}));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(),
            "container \"main\": hygon.com/dcumem=\"2Gi\": counts MiB, without a unit: 2Gi is "
            "2048");
  r = dcu->ParseRequest(Limits({{"hygon.com/dcunum", "1"}, {"hygon.com/dcumem", "2048"}}));
  ASSERT_TRUE(r.ok() && r->has_value());
  EXPECT_EQ((*r)->mem_mib, 2048);
}

TEST(HygonDcu, PlacementWritesTheDcuAnnotationsAndExplainsMisses) {
  SchedulerWorld w({}, Config("nvidia: {}\nhygon: {}\n"));
  ASSERT_TRUE(w.AddNode("gpu-node", {testing::Gpu("GPU-1", 0, 32768)}).ok());
  ASSERT_TRUE(w.AddNode("dcu-node", {}, {{"hami.io/node-dcu-register", kDcuRegistration}}).ok());
  PodSpec pod = w.Pod(
      "dcu-test",
      {Limits(
          {{"hygon.com/dcunum", "1"}, {"hygon.com/dcumem", "16000"}, {"hygon.com/dcucores", "80"}},
          "app")});
  Result<Decision> d = w.Schedule(pod);
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  ASSERT_TRUE(d->fit()) << d->FailedMessage();
  EXPECT_EQ(d->node, "dcu-node");
  const PodObject& written = w.pod_objects().at("uid-dcu-test");
  std::string allocated = written.annotations.at("hami.io/dcu-devices-allocated");
  EXPECT_TRUE(allocated == "DCU-a,DCU,16000,80:;" || allocated == "DCU-b,DCU,16000,80:;")
      << allocated;
  EXPECT_EQ(written.annotations.at("hami.io/dcu-devices-to-allocate"), allocated);
  EXPECT_EQ(written.annotations.count("hami.io/vgpu-devices-allocated"), 0u);
  EXPECT_EQ(written.annotations.at(std::string(kAssignedNodeAnnotation)), "dcu-node");

  // The other card takes a second such pod; a third finds neither with 16000 MiB free.
  ASSERT_TRUE(w.Schedule(w.Pod("second", {Limits({{"hygon.com/dcunum", "1"},
                                                  {"hygon.com/dcumem", "16000"},
                                                  {"hygon.com/dcucores", "20"}})}))
                  ->fit());
  Result<Decision> third =
      w.Place(w.Pod("third", {Limits({{"hygon.com/dcunum", "1"}, {"hygon.com/dcumem", "16000"}})}));
  ASSERT_TRUE(third.ok());
  ASSERT_FALSE(third->fit());
  std::map<std::string, std::string> reasons;
  for (const auto& [node, reason] : third->FailedNodes()) reasons[std::string(node)] = reason;
  EXPECT_EQ(reasons["dcu-node"], "2/2 CardInsufficientMemory") << third->FailedMessage();
  EXPECT_EQ(reasons["gpu-node"], "NodeInsufficientDevice") << third->FailedMessage();

  // hygon.com/use-dcutype narrows by the registered type.
  Result<Decision> typed = w.Place(w.Pod(
      "typed",
      {Limits(
          {{"hygon.com/dcunum", "1"}, {"hygon.com/dcumem", "100"}, {"hygon.com/dcucores", "0"}})},
      {{"hygon.com/use-dcutype", "Z100L"}}));
  ASSERT_TRUE(typed.ok());
  std::string why;
  for (const auto& [node, reason] : typed->FailedNodes())
    why += std::string(node) + ": " + reason + "; ";
  ASSERT_TRUE(typed->fit()) << why;
  EXPECT_EQ(typed->devices.at("DCU")[0][0].uuid, "DCU-b");

  // A rebuilt ledger (a restarted scheduler) reads the DCU pods back from their annotations.
  EXPECT_EQ(w.Rebuild()->CanonicalDump(), w.ledger().CanonicalDump());
}

TEST(HygonDcu, ABrokenDcuRegistrationLeavesTheNodesGpusInService) {
  SchedulerWorld w({}, Config("nvidia: {}\nhygon: {}\n"));
  Status s = w.AddNode("mixed", {testing::Gpu("GPU-1", 0, 32768)},
                       {{"hami.io/node-dcu-register", "DCU-a,ten,1,1,DCU,0,true:"}});
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("hami.io/node-dcu-register"), std::string::npos) << s.message();
  Result<Decision> d = w.Place(w.Pod("gpu", {Limits({{"nvidia.com/gpu", "1"}})}));
  ASSERT_TRUE(d.ok());
  EXPECT_TRUE(d->fit()) << d->FailedMessage();
  // Fixed by the plugin: the DCU joins (the broken registration was not remembered as seen).
  ASSERT_TRUE(w.AddNode("mixed", {testing::Gpu("GPU-1", 0, 32768)},
                        {{"hami.io/node-dcu-register", kDcuRegistration}})
                  .ok());
  d = w.Place(w.Pod("dcu", {Limits({{"hygon.com/dcunum", "1"}})}));
  ASSERT_TRUE(d.ok());
  EXPECT_TRUE(d->fit()) << d->FailedMessage();
}

// ---------------------------------------------------------------------------------------------
// Huawei Ascend.

// The user's flat section (seed 001, 6.1.2), as written.
constexpr char kAscendSection[] =
    "ascend:\n"
    "  resourceCountName: \"huawei.com/Ascend910B3\"\n"
    "  resourceMemoryName: \"huawei.com/Ascend910B3-memory\"\n"
    "  defaultMem: 0\n"
    "  defaultCores: 0\n"
    "  deviceSplitCount: 10\n";

// Two 910B3 NPUs as Huawei's HAMi-mode plugin registers them (JSON).
constexpr char kAscendRegistration[] =
    R"([{"id":"NPU-0","index":0,"count":4,"devmem":65536,"devcore":20,"type":"Ascend910B3",)"
    R"("numa":0,"mode":"hami-core","health":true},)"
    R"({"id":"NPU-1","index":1,"count":4,"devmem":65536,"devcore":20,"type":"Ascend910B3",)"
    R"("numa":0,"mode":"hami-core","health":true}])";

// A container after the webhook's edits (limits only, as the seed's pod has).
device::ContainerResources Mutated(const device::Vendor& v, device::ContainerResources c,
                                   const Annotations& pod = {}) {
  Result<device::ContainerMutation> m = v.MutateContainer(c, pod);
  EXPECT_TRUE(m.ok()) << m.status().ToString();
  if (!m.ok()) return c;
  for (const auto& [k, q] : m->set_limits) c.limits[k] = q;
  for (const auto& [k, q] : m->set_requests) c.requests[k] = q;
  return c;
}

TEST(Ascend, TheUsersSectionRegistrationAndExamplePod) {
  VendorRegistry reg =
      VendorRegistry::FromConfig(Config(std::string("nvidia: {}\n") + kAscendSection)).value();
  const device::Vendor* npu = reg.Find("Ascend910B3");
  ASSERT_NE(npu, nullptr);
  EXPECT_EQ(npu->annotation_keys().node_register, "hami.io/node-register-Ascend910B3");
  EXPECT_EQ(npu->annotation_keys().node_handshake, "hami.io/node-handshake-Ascend910B3");
  EXPECT_EQ(npu->annotation_keys().allocated, "hami.io/Ascend910B3-devices-allocated");
  Result<std::vector<DeviceInfo>> devs = device::DecodeAnnotatedNode(
      *npu, {{"hami.io/node-register-Ascend910B3", kAscendRegistration}});
  ASSERT_TRUE(devs.ok()) << devs.status().ToString();
  ASSERT_EQ(devs->size(), 2u);
  EXPECT_EQ((*devs)[1].id, "NPU-1");
  EXPECT_EQ((*devs)[1].devmem, 65536);
  EXPECT_EQ((*devs)[1].vendor, "Ascend910B3");

  // ascend-test: 16000 MiB is rounded up to the vir05_1c_16g template (16384 MiB), written back.
  device::ContainerResources c =
      Limits({{"huawei.com/Ascend910B3", "1"}, {"huawei.com/Ascend910B3-memory", "16000"}}, "app");
  Result<device::ContainerMutation> m = npu->MutateContainer(c, Annotations{});
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_TRUE(m->found);
  EXPECT_EQ(m->set_limits.at("huawei.com/Ascend910B3-memory"), "16384");
  Result<std::optional<ContainerRequest>> r = npu->ParseRequest(Mutated(*npu, c));
  ASSERT_TRUE(r.ok() && r->has_value());
  EXPECT_EQ((*r)->count, 1);
  EXPECT_EQ((*r)->mem_mib, 16384);
  // No memory: a whole card's memoryAllocatable.
  m = npu->MutateContainer(Limits({{"huawei.com/Ascend910B3", "2"}}), Annotations{});
  ASSERT_TRUE(m.ok());
  EXPECT_EQ(m->set_limits.at("huawei.com/Ascend910B3-memory"), "65536");
  // Refusals name the resource: more than a card, a slice of several NPUs, -core outside
  // hami-core mode.
  auto refused = [&](device::ContainerResources rc, const Annotations& pod, const char* what) {
    Result<device::ContainerMutation> bad = npu->MutateContainer(rc, pod);
    ASSERT_FALSE(bad.ok()) << what;
    EXPECT_NE(bad.status().message().find(what), std::string::npos) << bad.status().message();
  };
  refused(Limits({{"huawei.com/Ascend910B3", "1"}, {"huawei.com/Ascend910B3-memory", "70000"}}), {},
          "huawei.com/Ascend910B3-memory=70000");
  refused(Limits({{"huawei.com/Ascend910B3", "2"}, {"huawei.com/Ascend910B3-memory", "8000"}}), {},
          "vNPU slice");
  refused(Limits({{"huawei.com/Ascend910B3", "1"}, {"huawei.com/Ascend910B3-core", "5"}}), {},
          "hami-core");
  // In hami-core mode the memory is kept as asked and -core is allowed.
  Annotations core_mode = {{"huawei.com/vnpu-mode", "hami-core"}};
  m = npu->MutateContainer(Limits({{"huawei.com/Ascend910B3", "1"},
                                   {"huawei.com/Ascend910B3-memory", "16000"},
                                   {"huawei.com/Ascend910B3-core", "5"}}),
                           core_mode);
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_EQ(m->set_limits.at("huawei.com/Ascend910B3-memory"), "16000");
}

TEST(Ascend, SuperPodChipsComeInModulesOfTwo) {
  device::DeviceConfig cfg = Config("vnpus: {}\n");
  VendorRegistry off = VendorRegistry::FromConfig(cfg).value();
  EXPECT_EQ(off.Find("Ascend910C"), nullptr) << "vnpus needs --enable-ascend";
  EXPECT_EQ(device::UnscheduledVendorSections(cfg).at(0),
            "vnpus: Ascend is scheduled only with --enable-ascend");
  VendorRegistry reg = VendorRegistry::FromConfig(cfg, {.enable_ascend = true}).value();
  EXPECT_EQ(reg.vendors().size(), 7u);
  const device::Vendor* c = reg.Find("Ascend910C");
  ASSERT_NE(c, nullptr);
  Result<device::ContainerMutation> m = c->MutateContainer(
      Limits({{"huawei.com/Ascend910C", "1"}, {"huawei.com/Ascend910C-memory", "16384"}}),
      Annotations{});
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_EQ(m->set_limits.at("huawei.com/Ascend910C"), "2");
  Result<device::ContainerMutation> odd =
      c->MutateContainer(Limits({{"huawei.com/Ascend910C", "3"}}), Annotations{});
  ASSERT_FALSE(odd.ok());
  EXPECT_NE(odd.status().message().find("modules of 2"), std::string::npos);
}

TEST(Ascend, PlacementWritesTheTemplateListForHuaweisPlugin) {
  SchedulerWorld w({}, Config(std::string("nvidia: {}\n") + kAscendSection));
  ASSERT_TRUE(w.AddNode("gpu-node", {testing::Gpu("GPU-1", 0, 32768)}).ok());
  ASSERT_TRUE(
      w.AddNode("npu-node", {}, {{"hami.io/node-register-Ascend910B3", kAscendRegistration}}).ok());
  const device::Vendor& npu = *w.vendors().Find("Ascend910B3");
  PodSpec pod =
      w.Pod("ascend-test", {Mutated(npu, Limits({{"huawei.com/Ascend910B3", "1"},
                                                 {"huawei.com/Ascend910B3-memory", "16000"}},
                                                "app"))});
  Result<Decision> d = w.Schedule(pod);
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  ASSERT_TRUE(d->fit()) << d->FailedMessage();
  EXPECT_EQ(d->node, "npu-node");
  const PodObject& written = w.pod_objects().at("uid-ascend-test");
  std::string allocated = written.annotations.at("hami.io/Ascend910B3-devices-allocated");
  std::string uuid = allocated.substr(0, allocated.find(','));
  EXPECT_EQ(allocated, uuid + ",Ascend910B3,16384,0:;");
  EXPECT_EQ(written.annotations.at("hami.io/Ascend910B3-devices-to-allocate"), allocated);
  EXPECT_EQ(written.annotations.at("huawei.com/Ascend910B3"),
            R"([{"UUID":")" + uuid + R"(","temp":"vir05_1c_16g","memory":16384}])");
  EXPECT_EQ(written.annotations.at("predicate-time"), std::to_string(w.clock().NowUnixSeconds()));

  // A whole card: no template named, its memory (v2.10 writes it beside the template). Then no
  // card has 65536 MiB free any more.
  PodSpec whole = w.Pod("whole", {Mutated(npu, Limits({{"huawei.com/Ascend910B3", "1"}}))});
  Result<Decision> dw = w.Schedule(whole);
  ASSERT_TRUE(dw.ok() && dw->fit()) << dw->FailedMessage();
  std::string wuuid = dw->devices.at("Ascend910B3")[0][0].uuid;
  EXPECT_EQ(w.pod_objects().at("uid-whole").annotations.at("huawei.com/Ascend910B3"),
            R"([{"UUID":")" + wuuid + R"(","memory":)" +
                std::to_string(dw->devices.at("Ascend910B3")[0][0].mem_mib) + "}]");
  Result<Decision> more =
      w.Place(w.Pod("more", {Mutated(npu, Limits({{"huawei.com/Ascend910B3", "1"}}))}));
  ASSERT_TRUE(more.ok());
  ASSERT_FALSE(more->fit());
  std::map<std::string, std::string> reasons;
  for (const auto& [node, reason] : more->FailedNodes()) reasons[std::string(node)] = reason;
  EXPECT_EQ(reasons["npu-node"], "2/2 CardInsufficientMemory") << more->FailedMessage();
  EXPECT_EQ(w.Rebuild()->CanonicalDump(), w.ledger().CanonicalDump());
}

// ---------------------------------------------------------------------------------------------
// Cambricon MLU: devices from node capacity.

TEST(CambriconMlu, DevicesFromCapacityAndTheUsersExamplePod) {
  VendorRegistry reg = VendorRegistry::FromConfig(Config("cambricon: {}\n")).value();
  const device::Vendor* mlu = reg.Find("MLU");
  ASSERT_NE(mlu, nullptr);
  EXPECT_EQ(mlu->registration_capacity(), "cambricon.com/mlu.smlu.vcore");
  // Four MLU370-X8 cards (48 GiB each): 400 vcore, 4 x 192 units of 256 MiB.
  Annotations none;
  device::NodeCapacity cap = {{"cambricon.com/mlu.smlu.vcore", 400},
                              {"cambricon.com/mlu.smlu.vmemory", 768},
                              {"cambricon.com/vmlu", 400}};
  Result<std::vector<DeviceInfo>> devs = mlu->DecodeNodeDevices({"mlu-node", none, cap});
  ASSERT_TRUE(devs.ok()) << devs.status().ToString();
  ASSERT_EQ(devs->size(), 4u);
  EXPECT_EQ((*devs)[3].id, "mlu-node-cambricon-mlu-3");
  EXPECT_EQ((*devs)[3].index, 3u);
  EXPECT_EQ((*devs)[3].devmem, 49152);
  EXPECT_EQ((*devs)[3].devcore, 100);
  EXPECT_EQ((*devs)[3].count, 100);
  EXPECT_EQ((*devs)[3].type, "MLU");
  EXPECT_TRUE((*devs)[3].health);
  device::NodeCapacity empty;
  EXPECT_EQ(mlu->DecodeNodeDevices({"x", none, empty}).status().code(), StatusCode::kNotFound);
  EXPECT_TRUE(device::VendorPresentOn(*mlu, {"mlu-node", none, cap}));
  EXPECT_FALSE(device::VendorPresentOn(*mlu, {"x", none, empty}));

  // mlu-test as written: vmemory 8000 counts 256 MiB units (2,000 GiB), so it fits nowhere;
  // "8GB" holds for a plugin counting MiB (memoryFactor: 1).
  device::ContainerResources c = Limits({{"cambricon.com/vmlu", "1"},
                                         {"cambricon.com/mlu.smlu.vmemory", "8000"},
                                         {"cambricon.com/mlu.smlu.vcore", "50"}},
                                        "app");
  Result<std::optional<ContainerRequest>> r = mlu->ParseRequest(c);
  ASSERT_TRUE(r.ok() && r->has_value());
  EXPECT_EQ((*r)->mem_mib, 8000 * 256);
  EXPECT_EQ((*r)->cores, 50);
  VendorRegistry mib =
      VendorRegistry::FromConfig(Config("cambricon:\n  memoryFactor: 1\n")).value();
  r = mib.Find("MLU")->ParseRequest(c);
  ASSERT_TRUE(r.ok() && r->has_value());
  EXPECT_EQ((*r)->mem_mib, 8000);
  // A count alone: a whole card (cores 100, all its memory).
  r = mlu->ParseRequest(Limits({{"cambricon.com/vmlu", "1"}}));
  ASSERT_TRUE(r.ok() && r->has_value());
  EXPECT_EQ((*r)->cores, 100);
  EXPECT_EQ((*r)->mem_percent, 100);
}

TEST(CambriconMlu, PlacementWritesTheProfileForCambriconsPlugin) {
  SchedulerWorld w({}, Config("nvidia: {}\ncambricon: {}\n"));
  ASSERT_TRUE(w.AddNode("gpu-node", {testing::Gpu("GPU-1", 0, 32768)}).ok());
  ASSERT_TRUE(
      w.AddNode("mlu-node", {}, {},
                {{"cambricon.com/mlu.smlu.vcore", 200}, {"cambricon.com/mlu.smlu.vmemory", 384}})
          .ok());
  PodSpec pod = w.Pod("mlu-small", {Limits({{"cambricon.com/vmlu", "1"},
                                            {"cambricon.com/mlu.smlu.vmemory", "20"},
                                            {"cambricon.com/mlu.smlu.vcore", "10"}})});
  Result<Decision> d = w.Schedule(pod);
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  ASSERT_TRUE(d->fit()) << d->FailedMessage();
  EXPECT_EQ(d->node, "mlu-node");
  const device::ContainerDevice& got = d->devices.at("MLU")[0][0];
  const PodObject& written = w.pod_objects().at("uid-mlu-small");
  EXPECT_EQ(written.annotations.at("hami.io/cambricon-mlu-devices-allocated"),
            got.uuid + ",MLU,5120,10:;");
  EXPECT_EQ(written.annotations.at("hami.io/cambricon-mlu-devices-to-allocate"),
            got.uuid + ",MLU,5120,10:;");
  EXPECT_EQ(written.annotations.at("CAMBRICON_DSMLU_ASSIGNED"), "false");
  EXPECT_EQ(written.annotations.at("CAMBRICON_DSMLU_PROFILE"),
            std::to_string(got.index) + "_10_20");
  // The user's mlu-test (8000 units = 2,000 GiB) is pending with the memory reason.
  Result<Decision> big =
      w.Place(w.Pod("mlu-test", {Limits({{"cambricon.com/vmlu", "1"},
                                         {"cambricon.com/mlu.smlu.vmemory", "8000"},
                                         {"cambricon.com/mlu.smlu.vcore", "50"}})}));
  ASSERT_TRUE(big.ok());
  ASSERT_FALSE(big->fit());
  std::map<std::string, std::string> reasons;
  for (const auto& [node, reason] : big->FailedNodes()) reasons[std::string(node)] = reason;
  EXPECT_EQ(reasons["mlu-node"], "2/2 CardInsufficientMemory") << big->FailedMessage();
  EXPECT_EQ(w.Rebuild()->CanonicalDump(), w.ledger().CanonicalDump());
}

// ---------------------------------------------------------------------------------------------
// The other vendors: registrations, requests, annotations.

TEST(OtherVendors, IluvatarBirenVastaiKunlunEnflameMthreads) {
  device::DeviceConfig cfg =
      Config("iluvatars: ~\nbiren: {}\nvastai: {}\nkunlun: {}\nenflame: {}\nmthreads: {}\n");
  EXPECT_EQ(VendorRegistry::FromConfig(cfg).value().Find("BI-V150"), nullptr)
      << "iluvatars needs --enable-iluvatar";
  SchedulerWorld w({}, cfg, {.enable_iluvatar = true});
  const VendorRegistry& reg = w.vendors();
  for (const char* key :
       {"BI-V150", "MR-V100", "Biren", "Vastai", "kunlun", "XPU", "GCU", "Mthreads"}) {
    EXPECT_NE(reg.Find(key), nullptr) << key;
  }

  // Iluvatar: legacy text registration, vMem in 256 MiB units, the webhook's rules.
  const device::Vendor& bi = *reg.Find("BI-V150");
  EXPECT_EQ(bi.annotation_keys().node_register, "hami.io/node-BI-V150-register");
  ASSERT_TRUE(w.AddNode("ilu-node", {},
                        {{"hami.io/node-BI-V150-register",
                          "ILU-0,4,32768,100,BI-V150,0,true:ILU-1,4,32768,100,BI-V150,0,true:"}})
                  .ok());
  device::ContainerResources ic = Limits({{"iluvatar.ai/BI-V150-vgpu", "1"},
                                          {"iluvatar.ai/BI-V150.vMem", "64"},
                                          {"iluvatar.ai/BI-V150.vCore", "50"}},
                                         "app");
  Result<device::ContainerMutation> im = bi.MutateContainer(ic, Annotations{});
  ASSERT_TRUE(im.ok());
  EXPECT_EQ(im->default_env.at("SOL_CONTINER_NAME"), "app");
  Result<Decision> d = w.Schedule(w.Pod("ilu", {ic}));
  ASSERT_TRUE(d.ok() && d->fit()) << (d.ok() ? d->FailedMessage() : d.status().ToString());
  EXPECT_EQ(d->node, "ilu-node");
  std::string ilu =
      w.pod_objects().at("uid-ilu").annotations.at("hami.io/BI-V150-devices-allocated");
  EXPECT_NE(ilu.find(",BI-V150,16384,50:;"), std::string::npos) << ilu;
  im = bi.MutateContainer(Limits({{"iluvatar.ai/BI-V150-vgpu", "2"}}), Annotations{});
  ASSERT_TRUE(im.ok());
  EXPECT_EQ(im->set_limits.at("iluvatar.ai/BI-V150.vCore"), "200");
  Result<std::optional<ContainerRequest>> ir = bi.ParseRequest(
      Limits({{"iluvatar.ai/BI-V150-vgpu", "2"}, {"iluvatar.ai/BI-V150.vCore", "200"}}));
  ASSERT_TRUE(ir.ok() && ir->has_value());
  EXPECT_EQ((*ir)->cores, 100);

  // Biren and Vastai: a count only; cards are shared by their slots.
  ASSERT_TRUE(w.AddNode("biren-node", {},
                        {{"hami.io/node-biren-register",
                          R"([{"id":"BR-0","count":2,"devmem":65536,"devcore":100,)"
                          R"("type":"Biren-106C","health":true}])"}})
                  .ok());
  for (const char* n : {"b1", "b2"}) {
    Result<Decision> b = w.Schedule(w.Pod(n, {Limits({{"birentech.com/gpu", "1"}})}));
    ASSERT_TRUE(b.ok() && b->fit()) << n;
    EXPECT_EQ(w.pod_objects()
                  .at(std::string("uid-") + n)
                  .annotations.at("hami.io/Biren-devices-allocated"),
              "BR-0,Biren,0,0:;");
  }
  Result<Decision> b3 = w.Place(w.Pod("b3", {Limits({{"birentech.com/gpu", "1"}})}));
  ASSERT_TRUE(b3.ok());
  EXPECT_FALSE(b3->fit());
  EXPECT_EQ(reg.Find("Vastai")->annotation_keys().to_allocate,
            "hami.io/Vastai-devices-to-allocate");
  EXPECT_EQ(reg.Find("Vastai")->annotation_keys().node_register, "hami.io/node-va-register");

  // Kunlunxin: whole cards from capacity (allocated list and card indices only); vXPU memory
  // rounded up to a partition.
  ASSERT_TRUE(w.AddNode("xpu-node", {}, {}, {{"kunlunxin.com/xpu", 8}}).ok());
  Result<Decision> k = w.Schedule(w.Pod("xpu", {Limits({{"kunlunxin.com/xpu", "2"}})}));
  ASSERT_TRUE(k.ok() && k->fit()) << (k.ok() ? k->FailedMessage() : "");
  const Annotations& ka = w.pod_objects().at("uid-xpu").annotations;
  EXPECT_EQ(ka.count("hami.io/kunlun-devices-to-allocate"), 0u);
  EXPECT_NE(ka.at("hami.io/kunlun-allocated").find("xpu-node-kunlun-"), std::string::npos);
  EXPECT_EQ(ka.count("BAIDU_COM_DEVICE_IDX"), 1u);
  const device::Vendor& vxpu = *reg.Find("XPU");
  Result<device::ContainerMutation> xm = vxpu.MutateContainer(
      Limits({{"kunlunxin.com/vxpu", "1"}, {"kunlunxin.com/vxpu-memory", "20000"}}), Annotations{});
  ASSERT_TRUE(xm.ok());
  EXPECT_EQ(xm->set_limits.at("kunlunxin.com/vxpu-memory"), "24576");
  Result<std::optional<ContainerRequest>> xr = vxpu.ParseRequest(
      Limits({{"kunlunxin.com/vxpu", "1"}, {"kunlunxin.com/vxpu-memory", "40000"}}));
  ASSERT_TRUE(xr.ok() && xr->has_value());
  EXPECT_EQ((*xr)->mem_mib, 49152);
  EXPECT_EQ((*xr)->cores, 50);
  EXPECT_FALSE(vxpu.ParseRequest(Limits({{"kunlunxin.com/vxpu", "1"},
                                         {"kunlunxin.com/vxpu-memory", "100000"}}))
                   .ok());

  // Enflame GCU whole cards from capacity: one task per card.
  ASSERT_TRUE(w.AddNode("gcu-node", {}, {}, {{"enflame.com/gcu", 1}}).ok());
  Result<Decision> g = w.Schedule(w.Pod("gcu", {Limits({{"enflame.com/gcu", "1"}})}));
  ASSERT_TRUE(g.ok() && g->fit());
  EXPECT_EQ(w.pod_objects().at("uid-gcu").annotations.at("hami.io/enflame-gcu-devices-allocated"),
            "gcu-node-GCU-0,GCU,100,100:;");
  Result<Decision> g2 = w.Place(w.Pod("gcu2", {Limits({{"enflame.com/gcu", "1"}})}));
  ASSERT_TRUE(g2.ok());
  EXPECT_FALSE(g2->fit());

  // Moore Threads: 16 cores and 96 x 512 MiB per GPU; a container's amounts cover all its GPUs.
  ASSERT_TRUE(w.AddNode("mt-node", {}, {},
                        {{"mthreads.com/sgpu-core", 32}, {"mthreads.com/sgpu-memory", 192}})
                  .ok());
  const device::Vendor& mt = *reg.Find("Mthreads");
  device::ContainerResources mc = Limits({{"mthreads.com/vgpu", "1"},
                                          {"mthreads.com/sgpu-memory", "32"},
                                          {"mthreads.com/sgpu-core", "8"}});
  ASSERT_TRUE(mt.MutateContainer(mc, Annotations{}).ok());
  EXPECT_FALSE(
      mt.MutateContainer(Limits({{"mthreads.com/vgpu", "1"}, {"mthreads.com/sgpu-memory", "5"}}),
                         Annotations{})
          .ok());
  Result<Decision> t = w.Schedule(w.Pod("mt", {mc}));
  ASSERT_TRUE(t.ok() && t->fit()) << (t.ok() ? t->FailedMessage() : "");
  const Annotations& ta = w.pod_objects().at("uid-mt").annotations;
  EXPECT_NE(ta.at("hami.io/mthreads-vgpu-devices-allocated").find(",Mthreads,16384,8:;"),
            std::string::npos);
  EXPECT_EQ(ta.at("mthreads.com/predicate-node"), "mt-node");
  Result<std::optional<ContainerRequest>> tr =
      mt.ParseRequest(Limits({{"mthreads.com/vgpu", "2"},
                              {"mthreads.com/sgpu-memory", "192"},
                              {"mthreads.com/sgpu-core", "32"}}));
  ASSERT_TRUE(tr.ok() && tr->has_value());
  EXPECT_EQ((*tr)->mem_mib, 49152);
  EXPECT_EQ((*tr)->cores, 16);

  EXPECT_EQ(w.Rebuild()->CanonicalDump(), w.ledger().CanonicalDump());
}

TEST(Metax, WholeCardsFromCapacityAndSharedGpusFromTheirAnnotation) {
  // Upstream's chart names: both modules.
  SchedulerWorld w({}, Config("metax: {}\n"));
  ASSERT_NE(w.vendors().Find("Metax-GPU"), nullptr);
  const device::Vendor& sg = *w.vendors().Find("Metax-SGPU");
  EXPECT_EQ(sg.resource_names().count, "metax-tech.com/sgpu");
  ASSERT_TRUE(w.AddNode("metax-node", {}, {}, {{"metax-tech.com/gpu", 2}}).ok());
  Result<Decision> g = w.Schedule(w.Pod("whole", {Limits({{"metax-tech.com/gpu", "1"}})}));
  ASSERT_TRUE(g.ok() && g->fit()) << (g.ok() ? g->FailedMessage() : "");
  EXPECT_NE(w.pod_objects()
                .at("uid-whole")
                .annotations.at("hami.io/metax-gpu-devices-allocated")
                .find("metax-node-metax-"),
            std::string::npos);

  ASSERT_TRUE(w.AddNode("sgpu-node", {},
                        {{"metax-tech.com/node-gpu-devices",
                          R"([{"uuid":"GPU-m1","model":"MXC500","totalDevCount":16,)"
                          R"("totalCompute":100,"totalVRam":65536,"numa":0,"healthy":true}])"}})
                  .ok());
  // default_use: 1 sGPU, 60 % compute, vmemory 4 (GiB); 2048Mi is bytes.
  device::ContainerResources c = Limits({{"metax-tech.com/sgpu", "1"},
                                         {"metax-tech.com/vcore", "60"},
                                         {"metax-tech.com/vmemory", "4"}},
                                        "app");
  Result<std::optional<ContainerRequest>> r = sg.ParseRequest(c);
  ASSERT_TRUE(r.ok() && r->has_value()) << r.status().ToString();
  EXPECT_EQ((*r)->mem_mib, 4096);
  EXPECT_EQ((*r)->cores, 60);
  r = sg.ParseRequest(Limits({{"metax-tech.com/sgpu", "1"}, {"metax-tech.com/vmemory", "2048Mi"}}));
  ASSERT_TRUE(r.ok() && r->has_value());
  EXPECT_EQ((*r)->mem_mib, 2048);
  EXPECT_EQ((*r)->cores, 100);
  // The webhook: best-effort by default; bad classes and policies refused.
  Result<device::ContainerMutation> m = sg.MutateContainer(c, Annotations{});
  ASSERT_TRUE(m.ok());
  EXPECT_EQ(m->set_pod_annotations.at("metax-tech.com/sgpu-qos-policy"), "best-effort");
  EXPECT_TRUE(sg.MutateContainer(c, Annotations{{"metax-tech.com/sgpu-app-class", "online"}})
                  ->set_pod_annotations.empty());
  EXPECT_FALSE(sg.MutateContainer(c, Annotations{{"metax-tech.com/sgpu-app-class", "batch"}}).ok());
  EXPECT_FALSE(sg.MutateContainer(c, Annotations{{"metax-tech.com/sgpu-qos-policy", "fast"}}).ok());

  Result<Decision> d = w.Schedule(w.Pod("sgpu", {c}));
  ASSERT_TRUE(d.ok() && d->fit()) << (d.ok() ? d->FailedMessage() : "");
  EXPECT_EQ(d->node, "sgpu-node");
  const Annotations& a = w.pod_objects().at("uid-sgpu").annotations;
  EXPECT_EQ(a.at("hami.io/metax-sgpu-devices-allocated"), "GPU-m1,Metax-SGPU,4096,60:;");
  EXPECT_EQ(a.at("metax-tech.com/gpu-devices-allocated"),
            R"([[{"uuid":"GPU-m1","compute":60,"vRam":4096}]])");
  EXPECT_EQ(w.Rebuild()->CanonicalDump(), w.ledger().CanonicalDump());

  // The user's documents' form: the sGPU names in the flat keys, no whole-card module.
  VendorRegistry users =
      VendorRegistry::FromConfig(Config("metax:\n  resourceCountName: metax-tech.com/sgpu\n"
                                        "  resourceMemoryName: metax-tech.com/vmemory\n"
                                        "  resourceCoreName: metax-tech.com/vcore\n"))
          .value();
  EXPECT_EQ(users.Find("Metax-GPU"), nullptr);
  ASSERT_NE(users.Find("Metax-SGPU"), nullptr);
  EXPECT_EQ(users.Find("Metax-SGPU")->resource_names().memory, "metax-tech.com/vmemory");
}

TEST(Amd, CoresArePercentOfTheCardsComputeUnits) {
  SchedulerWorld w({}, Config("nvidia: {}\namd: {}\n"));
  const device::Vendor& amd = *w.vendors().Find("AMD");
  EXPECT_TRUE(amd.cores_in_device_units());
  EXPECT_EQ(amd.annotation_keys().node_handshake, "");
  // Two MI300X virtual functions (192 GiB, 304 CUs, 4 tasks each) as AMD's HAMi plugin registers.
  ASSERT_TRUE(w.AddNode("amd-node", {},
                        {{"hami.io/node-amd-register",
                          R"([{"id":"AMD-0","index":0,"count":4,"devmem":196608,"devcore":304,)"
                          R"("type":"AMD Instinct MI300X VF","numa":0,"health":true},)"
                          R"({"id":"AMD-1","index":1,"count":4,"devmem":196608,"devcore":304,)"
                          R"("type":"AMD Instinct MI300X VF","numa":0,"health":true}])"}})
                  .ok());
  // The documented example: 16 GiB and 25 % of the CUs = 76 CUs, listed with the product name.
  device::ContainerResources quarter =
      Limits({{"amd.com/gpu", "1"}, {"amd.com/gpumem", "16384"}, {"amd.com/gpucores", "25"}});
  Result<Decision> d = w.Schedule(w.Pod("q0", {quarter}));
  ASSERT_TRUE(d.ok() && d->fit()) << (d.ok() ? d->FailedMessage() : d.status().ToString());
  std::string first = d->devices.at("AMD")[0][0].uuid;
  EXPECT_EQ(w.pod_objects().at("uid-q0").annotations.at("hami.io/amd-devices-allocated"),
            first + ",AMD Instinct MI300X VF,16384,76:;");
  // Binpack fills that card: 4 x 76 = 304 CUs; the fifth quarter goes to the other card.
  w.SetEngine(EngineOptions{.gpu_policy = "binpack"});
  for (const char* n : {"q1", "q2", "q3"}) {
    Result<Decision> q = w.Schedule(w.Pod(n, {quarter}));
    ASSERT_TRUE(q.ok() && q->fit()) << n;
    EXPECT_EQ(q->devices.at("AMD")[0][0].uuid, first) << n;
  }
  Result<Decision> q4 = w.Schedule(w.Pod("q4", {quarter}));
  ASSERT_TRUE(q4.ok() && q4->fit());
  EXPECT_NE(q4->devices.at("AMD")[0][0].uuid, first);
  // A count alone: the whole card's CUs and memory; no card is free any more.
  Result<Decision> whole = w.Place(w.Pod("whole", {Limits({{"amd.com/gpu", "1"}})}));
  ASSERT_TRUE(whole.ok());
  EXPECT_FALSE(whole->fit());
  std::map<std::string, std::string> reasons;
  for (const auto& [node, reason] : whole->FailedNodes()) reasons[std::string(node)] = reason;
  EXPECT_EQ(reasons["amd-node"], "1/2 CardInsufficientMemory, 1/2 CardTimeSlicingExhausted");
  // gpucores 0 is refused (1..100), the type selector matches the product name.
  EXPECT_FALSE(amd.ParseRequest(Limits({{"amd.com/gpu", "1"}, {"amd.com/gpucores", "0"}})).ok());
  Result<Decision> typed =
      w.Place(w.Pod("typed", {quarter}, {{"amd.com/nouse-gputype", "MI300X"}}));
  ASSERT_TRUE(typed.ok());
  EXPECT_FALSE(typed->fit());
  EXPECT_EQ(w.Rebuild()->CanonicalDump(), w.ledger().CanonicalDump());
}

std::string ReasonOn(const Decision& d, const std::string& node) {
  for (const auto& [n, reason] : d.FailedNodes()) {
    if (n == node) return reason;
  }
  return "";
}

TEST(Kunlunxin, MultiCardRequestsFollowTheBoardsTwoGroupsOfFour) {
  SchedulerWorld w({}, Config("kunlun: {}\n"));
  ASSERT_TRUE(w.AddNode("xpu-node", {}, {}, {{"kunlunxin.com/xpu", 8}}).ok());
  auto place = [&](const std::string& name, int cards) {
    Result<Decision> d =
        w.Schedule(w.Pod(name, {Limits({{"kunlunxin.com/xpu", std::to_string(cards)}})}));
    EXPECT_TRUE(d.ok());
    if (!d.ok() || !d->fit()) return std::string("no fit: ") + (d.ok() ? d->FailedMessage() : "");
    return w.pod_objects().at("uid-" + name).annotations.at("BAIDU_COM_DEVICE_IDX");
  };
  EXPECT_EQ(place("two", 2), "0,1");       // both groups whole: the first
  EXPECT_EQ(place("four", 4), "4,5,6,7");  // only the right group holds four
  EXPECT_EQ(place("one", 1), "2");         // the fuller group, keeping nothing else whole
  // Card 3 alone is left: two cards would straddle without a link (3-7 is taken).
  Result<Decision> d = w.Place(w.Pod("pair", {Limits({{"kunlunxin.com/xpu", "2"}})}));
  ASSERT_TRUE(d.ok());
  EXPECT_FALSE(d->fit());
  EXPECT_NE(ReasonOn(*d, "xpu-node").find("NumaNotFit"), std::string::npos) << d->FailedMessage();
  // Three is not a count the board allows, on an empty node either.
  ASSERT_TRUE(w.AddNode("xpu-2", {}, {}, {{"kunlunxin.com/xpu", 8}}).ok());
  d = w.Place(w.Pod("three", {Limits({{"kunlunxin.com/xpu", "3"}})}));
  ASSERT_TRUE(d.ok());
  EXPECT_FALSE(d->fit());
  EXPECT_EQ(ReasonOn(*d, "xpu-2"), "8/8 NumaNotFit");
  // Across the groups through a link: with cards 0-2 and 4-6 excluded, a pair is 3 and 7.
  std::string excluded;
  for (int i : {0, 1, 2, 4, 5, 6}) excluded += "xpu-2-kunlun-" + std::to_string(i) + ",";
  Result<Decision> cross = w.Place(w.Pod("cross", {Limits({{"kunlunxin.com/xpu", "2"}})},
                                         {{"hami.io/no-use-xpu-uuid", excluded}}));
  ASSERT_TRUE(cross.ok());
  ASSERT_TRUE(cross->fit()) << cross->FailedMessage();
  EXPECT_EQ(cross->node, "xpu-2");
  EXPECT_EQ(cross->devices.at("kunlun")[0][0].uuid, "xpu-2-kunlun-3");
  EXPECT_EQ(cross->devices.at("kunlun")[0][1].uuid, "xpu-2-kunlun-7");
  EXPECT_EQ(w.Rebuild()->CanonicalDump(), w.ledger().CanonicalDump());
}

TEST(Ascend, HamiCorePodsFitOnlyHamiCoreNodes) {
  SchedulerWorld w({}, Config(kAscendSection));
  ASSERT_TRUE(
      w.AddNode("hard", {}, {{"hami.io/node-register-Ascend910B3", kAscendRegistration}}).ok());
  const device::Vendor& npu = *w.vendors().Find("Ascend910B3");
  Annotations core_mode = {{"huawei.com/vnpu-mode", "hami-core"}};
  PodSpec soft = w.Pod("soft",
                       {Mutated(npu,
                                Limits({{"huawei.com/Ascend910B3", "1"},
                                        {"huawei.com/Ascend910B3-memory", "10000"},
                                        {"huawei.com/Ascend910B3-core", "5"}}),
                                core_mode)},
                       core_mode);
  Result<Decision> d = w.Place(soft);
  ASSERT_TRUE(d.ok());
  EXPECT_FALSE(d->fit());
  EXPECT_EQ(ReasonOn(*d, "hard"), "2/2 CardTypeMismatch");
  // The node switches to soft split (its annotation): the devices are read again and fit.
  ASSERT_TRUE(w.AddNode("hard", {},
                        {{"hami.io/node-register-Ascend910B3", kAscendRegistration},
                         {"hami-vnpu-core", "true"}})
                  .ok());
  d = w.Schedule(soft);
  ASSERT_TRUE(d.ok() && d->fit()) << (d.ok() ? d->FailedMessage() : "");
  const std::string uuid = d->devices.at("Ascend910B3")[0][0].uuid;
  EXPECT_EQ(w.pod_objects().at("uid-soft").annotations.at("huawei.com/Ascend910B3"),
            R"([{"UUID":")" + uuid + R"(","memory":10000,"core":5}])");
  // Pods without the mode annotation fit either kind.
  EXPECT_TRUE(
      w.Place(w.Pod("plain", {Mutated(npu, Limits({{"huawei.com/Ascend910B3", "1"}}))}))->fit());
}

TEST(Ascend, SuperPodNpusAreTakenByModule) {
  SchedulerWorld w({}, Config("vnpus: {}\n"), {.enable_ascend = true});
  std::string reg = "[";
  for (int i = 0; i < 4; ++i) {
    if (i > 0) reg += ",";
    reg += R"({"id":"C-)" + std::to_string(i) + R"(","index":)" + std::to_string(i) +
           R"(,"count":4,"devmem":65536,"devcore":20,"type":"Ascend910C","health":true})";
  }
  reg += "]";
  ASSERT_TRUE(w.AddNode("c-node", {}, {{"hami.io/node-register-Ascend910C", reg}}).ok());
  const device::Vendor& npu = *w.vendors().Find("Ascend910C");
  auto pod = [&](const std::string& name, testing::Quantities q) {
    return w.Pod(name, {Mutated(npu, Limits(std::move(q)))});
  };
  auto uuids = [](const Decision& d) {
    std::string out;
    for (const device::ContainerDevice& cd : d.devices.at("Ascend910C")[0]) out += cd.uuid + " ";
    return out;
  };
  // One module (the webhook raised 1 to 2), sliced: both NPUs of one module.
  Result<Decision> a = w.Schedule(
      pod("a", {{"huawei.com/Ascend910C", "1"}, {"huawei.com/Ascend910C-memory", "16384"}}));
  ASSERT_TRUE(a.ok() && a->fit()) << (a.ok() ? a->FailedMessage() : "");
  std::string first = uuids(*a);
  EXPECT_TRUE(first == "C-0 C-1 " || first == "C-2 C-3 " || first == "C-1 C-0 " ||
              first == "C-3 C-2 ")
      << first;
  // A whole module: the other one.
  Result<Decision> b = w.Schedule(pod("b", {{"huawei.com/Ascend910C", "2"}}));
  ASSERT_TRUE(b.ok() && b->fit()) << (b.ok() ? b->FailedMessage() : "");
  EXPECT_NE(uuids(*b).substr(0, 3), first.substr(0, 3));
  // Two whole modules are no longer there.
  Result<Decision> c = w.Place(pod("c", {{"huawei.com/Ascend910C", "4"}}));
  ASSERT_TRUE(c.ok());
  EXPECT_FALSE(c->fit());
  EXPECT_EQ(w.Rebuild()->CanonicalDump(), w.ledger().CanonicalDump());
}

TEST(Kunlunxin, VxpuCardsAreSharedByPartitionsOfOneSize) {
  SchedulerWorld w({.gpu_policy = "binpack"}, Config("kunlun: {}\n"));
  ASSERT_TRUE(w.AddNode("vxpu-node", {},
                        {{"hami.io/node-register-xpu",
                          R"([{"id":"XPU-0","index":0,"count":4,"devmem":98304,"devcore":100,)"
                          R"("type":"P800","health":true},)"
                          R"({"id":"XPU-1","index":1,"count":4,"devmem":98304,"devcore":100,)"
                          R"("type":"P800","health":true}])"}})
                  .ok());
  auto card = [&](const std::string& name, const char* mem) {
    Result<Decision> d = w.Schedule(
        w.Pod(name, {Limits({{"kunlunxin.com/vxpu", "1"}, {"kunlunxin.com/vxpu-memory", mem}})}));
    if (!d.ok() || !d->fit()) return std::string("no fit: ") + (d.ok() ? d->FailedMessage() : "");
    return d->devices.at("XPU")[0][0].uuid;
  };
  std::string quarter = card("q1", "24576");
  EXPECT_EQ(card("q2", "24576"), quarter);  // binpack: the same card, same size
  std::string half = card("h1", "49152");
  EXPECT_NE(half, quarter);  // a half does not join the quarters
  EXPECT_EQ(card("h2", "49152"), half);
  // The quarters' card has room for a half, but only quarters share it; the halves' card is full.
  Result<Decision> d = w.Place(
      w.Pod("h3", {Limits({{"kunlunxin.com/vxpu", "1"}, {"kunlunxin.com/vxpu-memory", "49152"}})}));
  ASSERT_TRUE(d.ok());
  EXPECT_FALSE(d->fit());
  EXPECT_EQ(ReasonOn(*d, "vxpu-node"), "1/2 CardInsufficientMemory, 1/2 CardPartitionSizeMismatch");
  EXPECT_EQ(card("q3", "20000"), quarter);  // rounded up to a quarter
  EXPECT_EQ(w.Rebuild()->CanonicalDump(), w.ledger().CanonicalDump());
}

TEST(OtherVendors, MooreThreadsAndMetaxWholeCardsKeepAPodOnOneDevice) {
  SchedulerWorld w({}, Config("mthreads: {}\nmetax: {}\n"));
  ASSERT_TRUE(w.AddNode("mt-node", {}, {},
                        {{"mthreads.com/sgpu-core", 32}, {"mthreads.com/sgpu-memory", 192}})
                  .ok());
  device::ContainerResources small = Limits({{"mthreads.com/vgpu", "1"},
                                             {"mthreads.com/sgpu-memory", "8"},
                                             {"mthreads.com/sgpu-core", "4"}});
  Result<Decision> d = w.Schedule(w.Pod("two", {small, small}));
  ASSERT_TRUE(d.ok() && d->fit()) << (d.ok() ? d->FailedMessage() : "");
  EXPECT_EQ(d->devices.at("Mthreads")[0][0].uuid, d->devices.at("Mthreads")[1][0].uuid);
  // Two whole MetaX cards for two containers: one card per pod, so no node fits.
  ASSERT_TRUE(w.AddNode("metax-node", {}, {}, {{"metax-tech.com/gpu", 2}}).ok());
  device::ContainerResources card = Limits({{"metax-tech.com/gpu", "1"}});
  d = w.Place(w.Pod("cards", {card, card}));
  ASSERT_TRUE(d.ok());
  EXPECT_FALSE(d->fit());
  EXPECT_EQ(ReasonOn(*d, "metax-node"),
            "1/2 CardNotFoundCustomFilterRule, 1/2 CardTimeSlicingExhausted");
  EXPECT_TRUE(w.Place(w.Pod("one", {card}))->fit());
}

// ---------------------------------------------------------------------------------------------
// AWS Neuron: devices and cores from capacity, cores handed out by bitmask.

TEST(AwsNeuron, DevicesFromCapacityAndRequestRules) {
  VendorRegistry reg = VendorRegistry::FromConfig(Config("awsneuron: {}\n")).value();
  const device::Vendor* neuron = reg.Find("AWSNeuron");
  ASSERT_NE(neuron, nullptr);
  EXPECT_TRUE(device::UnscheduledVendorSections(Config("awsneuron: {}\n")).empty());
  // An inf2.24xlarge: six devices of two cores.
  Annotations none;
  Annotations labels = {{"node.kubernetes.io/instance-type", "inf2.24xlarge"}};
  device::NodeCapacity cap = {{"aws.amazon.com/neuron", 6}, {"aws.amazon.com/neuroncore", 12}};
  Result<std::vector<DeviceInfo>> devs =
      neuron->DecodeNodeDevices({"inf-node", none, cap, &labels});
  ASSERT_TRUE(devs.ok()) << devs.status().ToString();
  ASSERT_EQ(devs->size(), 6u);
  EXPECT_EQ((*devs)[5].id, "inf-node-AWSNeuron-5");
  EXPECT_EQ((*devs)[5].count, 2);    // one task per core
  EXPECT_EQ((*devs)[5].devcore, 3);  // the mask of its two cores
  EXPECT_EQ((*devs)[5].devmem, 0);
  EXPECT_EQ((*devs)[5].type, "AWSNeuron");
  EXPECT_EQ((*devs)[5].mode, "inf2.24xlarge");
  // Cores per device are the node's own: an inf1 has four.
  cap = {{"aws.amazon.com/neuron", 4}, {"aws.amazon.com/neuroncore", 16}};
  devs = neuron->DecodeNodeDevices({"inf1", none, cap});
  ASSERT_TRUE(devs.ok());
  EXPECT_EQ((*devs)[0].devcore, 15);
  cap = {{"aws.amazon.com/neuron", 4}};
  EXPECT_EQ(neuron->DecodeNodeDevices({"x", none, cap}).status().code(),
            StatusCode::kInvalidArgument);

  auto parse = [&](std::map<std::string, std::string, std::less<>> limits) {
    return neuron->ParseRequest(Limits(std::move(limits), "app"));
  };
  Result<std::optional<ContainerRequest>> r = parse({{"aws.amazon.com/neuron", "2"}});
  ASSERT_TRUE(r.ok() && r->has_value());
  EXPECT_EQ((*r)->count, 2);
  EXPECT_EQ((*r)->cores, 100);  // whole devices
  r = parse({{"aws.amazon.com/neuroncore", "1"}});
  ASSERT_TRUE(r.ok() && r->has_value());
  EXPECT_EQ((*r)->count, 1);
  EXPECT_EQ((*r)->cores, 1);
  r = parse({{"aws.amazon.com/neuroncore", "6"}});
  ASSERT_TRUE(r.ok() && r->has_value());
  EXPECT_EQ((*r)->count, 3);
  EXPECT_EQ((*r)->cores, 2);
  r = parse({{"aws.amazon.com/neuroncore", "3"}});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(
      r.status().message().find("aws.amazon.com/neuroncore must be 1 or a multiple of 2, got 3"),
      std::string::npos)
      << r.status().message();
  EXPECT_FALSE(parse({{"aws.amazon.com/neuron", "0"}}).ok());
  EXPECT_FALSE(parse({{"aws.amazon.com/neuroncore", "-2"}}).ok());
  r = parse({{"nvidia.com/gpu", "1"}});
  ASSERT_TRUE(r.ok());
  EXPECT_FALSE(r->has_value());
}

TEST(AwsNeuron, CoresAreHandedOutByMaskAndNamedForAwssPlugin) {
  SchedulerWorld w({}, Config("awsneuron: {}\n"));
  ASSERT_TRUE(w.AddNode("inf-node", {}, {},
                        {{"aws.amazon.com/neuron", 2}, {"aws.amazon.com/neuroncore", 4}},
                        {{"node.kubernetes.io/instance-type", "inf2.8xlarge"}})
                  .ok());
  auto core_pod = [&](const std::string& name, const std::string& cores) {
    return w.Pod(name, {Limits({{"aws.amazon.com/neuroncore", cores}})});
  };
  Result<Decision> a = w.Schedule(core_pod("a", "1"));
  ASSERT_TRUE(a.ok() && a->fit()) << (a.ok() ? a->FailedMessage() : a.status().ToString());
  const device::ContainerDevice& da = a->devices.at("AWSNeuron")[0][0];
  EXPECT_EQ(da.cores, 1);  // core 0 of its device
  const Annotations& wa = w.pod_objects().at("uid-a").annotations;
  EXPECT_EQ(wa.at("hami.io/aws-neuron-devices-allocated"), da.uuid + ",AWSNeuron,0,1:;");
  EXPECT_EQ(wa.at("AWS_NEURON_IDS"), std::to_string(2 * da.index));
  EXPECT_EQ(wa.at("NEURON_RESOURCE_TYPE"), "aws.amazon.com/neuroncore");
  EXPECT_EQ(wa.at("NEURON_ALLOCATED"), "false");
  EXPECT_EQ(wa.at("aws.amazon.com/predicate-node"), "inf-node");
  EXPECT_EQ(wa.count("hami.io/aws-neuron-devices-to-allocate"), 0u);
  // The next single core shares the device (binpack) and gets the other core.
  Result<Decision> b = w.Schedule(core_pod("b", "1"));
  ASSERT_TRUE(b.ok() && b->fit());
  const device::ContainerDevice& db = b->devices.at("AWSNeuron")[0][0];
  EXPECT_EQ(db.uuid, da.uuid);
  EXPECT_EQ(db.cores, 2);
  EXPECT_EQ(w.pod_objects().at("uid-b").annotations.at("AWS_NEURON_IDS"),
            std::to_string(2 * db.index + 1));
  // Two cores need a whole free device: the other one, both cores named.
  Result<Decision> c = w.Schedule(core_pod("c", "2"));
  ASSERT_TRUE(c.ok() && c->fit());
  const device::ContainerDevice& dc = c->devices.at("AWSNeuron")[0][0];
  EXPECT_NE(dc.uuid, da.uuid);
  EXPECT_EQ(dc.cores, 3);
  EXPECT_EQ(w.pod_objects().at("uid-c").annotations.at("AWS_NEURON_IDS"),
            std::to_string(2 * dc.index) + "," + std::to_string(2 * dc.index + 1));
  // Nothing is left.
  Result<Decision> d = w.Place(core_pod("d", "1"));
  ASSERT_TRUE(d.ok());
  EXPECT_FALSE(d->fit());
  // One device has both tasks, the other one task holding both cores.
  EXPECT_EQ(ReasonOn(*d, "inf-node"), "1/2 CardInsufficientCore, 1/2 CardTimeSlicingExhausted")
      << d->FailedMessage();
  // The usage rebuilt from the written annotations is the same.
  EXPECT_EQ(w.Rebuild()->CanonicalDump(), w.ledger().CanonicalDump());
  // Releasing core 0 of the shared device lets a single core in again, on core 0.
  w.DeletePod("uid-a");
  Result<Decision> e = w.Schedule(core_pod("e", "1"));
  ASSERT_TRUE(e.ok() && e->fit());
  EXPECT_EQ(e->devices.at("AWSNeuron")[0][0].cores, 1);
  EXPECT_EQ(e->devices.at("AWSNeuron")[0][0].uuid, da.uuid);
}

TEST(AwsNeuron, DeviceRequestsNameIndicesAndFollowTheRing) {
  SchedulerWorld w({}, Config("awsneuron: {}\n"));
  // A trn1.32xlarge: sixteen devices of two cores.
  ASSERT_TRUE(w.AddNode("trn-node", {}, {},
                        {{"aws.amazon.com/neuron", 16}, {"aws.amazon.com/neuroncore", 32}},
                        {{"node.kubernetes.io/instance-type", "trn1.32xlarge"}})
                  .ok());
  auto devices_pod = [&](const std::string& name, int n) {
    return w.Pod(name, {Limits({{"aws.amazon.com/neuron", std::to_string(n)}})});
  };
  Result<Decision> one = w.Schedule(devices_pod("one", 1));
  ASSERT_TRUE(one.ok() && one->fit());
  const device::ContainerDevice& d1 = one->devices.at("AWSNeuron")[0][0];
  EXPECT_EQ(d1.cores, 3);
  EXPECT_EQ(w.pod_objects().at("uid-one").annotations.at("AWS_NEURON_IDS"),
            std::to_string(d1.index));
  EXPECT_EQ(w.pod_objects().at("uid-one").annotations.count("NEURON_RESOURCE_TYPE"), 0u);
  // Four devices: an aligned window of idle ones, not the one in use.
  Result<Decision> four = w.Schedule(devices_pod("four", 4));
  ASSERT_TRUE(four.ok() && four->fit()) << four->FailedMessage();
  const auto& got = four->devices.at("AWSNeuron")[0];
  ASSERT_EQ(got.size(), 4u);
  EXPECT_EQ(got[0].index % 4, 0);
  for (size_t i = 1; i < 4; ++i) EXPECT_EQ(got[i].index, got[0].index + static_cast<int>(i));
  EXPECT_NE(d1.index / 4, got[0].index / 4);
  // Trainium rings take 1, 4, 8 or 16 devices: 2 does not fit.
  Result<Decision> two = w.Place(devices_pod("two", 2));
  ASSERT_TRUE(two.ok());
  EXPECT_FALSE(two->fit());
  EXPECT_NE(ReasonOn(*two, "trn-node").find("NumaNotFit"), std::string::npos)
      << two->FailedMessage();
  // On Inferentia any run of consecutive devices will do.
  ASSERT_TRUE(w.AddNode("inf-node", {}, {},
                        {{"aws.amazon.com/neuron", 6}, {"aws.amazon.com/neuroncore", 12}},
                        {{"node.kubernetes.io/instance-type", "inf2.48xlarge"}})
                  .ok());
  Result<Decision> three = w.Schedule(devices_pod("three", 3));
  ASSERT_TRUE(three.ok() && three->fit()) << three->FailedMessage();
  EXPECT_EQ(three->node, "inf-node");
  const auto& run = three->devices.at("AWSNeuron")[0];
  ASSERT_EQ(run.size(), 3u);
  EXPECT_EQ(run[1].index, run[0].index + 1);
  EXPECT_EQ(run[2].index, run[0].index + 2);
  EXPECT_EQ(w.Rebuild()->CanonicalDump(), w.ledger().CanonicalDump());
}

TEST(AwsNeuron, WindowRule) {
  using device::ChooseNeuronWindow;
  using device::DeviceCandidate;
  std::vector<DeviceCandidate> c;
  for (uint32_t i = 0; i < 8; ++i) c.push_back(DeviceCandidate{i, i != 1, {}});
  // Trainium: aligned windows of 4; 0-3 holds a busy device, so 4-7.
  device::TopologyChoice t = ChooseNeuronWindow(c, 4, false);
  ASSERT_EQ(t.picked.size(), 4u);
  EXPECT_EQ(c[t.picked[0]].index, 4u);
  EXPECT_TRUE(ChooseNeuronWindow(c, 3, false).picked.empty());
  EXPECT_TRUE(ChooseNeuronWindow(c, 8, false).picked.empty());
  // Inferentia: the first run of three idle devices starts at 2.
  t = ChooseNeuronWindow(c, 3, true);
  ASSERT_EQ(t.picked.size(), 3u);
  EXPECT_EQ(c[t.picked[0]].index, 2u);
}

// ---------------------------------------------------------------------------------------------
// Enflame vGCU: slices of a card, as the user's documents configure them.

class FixedFactors : public device::NodeCapacityFacts {
 public:
  explicit FixedFactors(std::map<int64_t, int32_t> f) : f_(std::move(f)) {}
  std::map<int64_t, int32_t> CapacityRatios(std::string_view num,
                                            std::string_view den) const override {
    EXPECT_EQ(num, "enflame.com/shared-gcu");
    EXPECT_EQ(den, "enflame.com/gcu-count");
    return f_;
  }

 private:
  std::map<int64_t, int32_t> f_;
};

constexpr char kEnflameSection[] =
    "enflame:\n"
    "  resourceCountName: \"enflame.com/vgcu\"\n"
    "  resourceMemoryPercentageName: \"enflame.com/vgcu-percentage\"\n";

TEST(EnflameVgcu, TheUsersSectionWebhookRounding) {
  VendorRegistry reg = VendorRegistry::FromConfig(Config(kEnflameSection)).value();
  const device::Vendor* vgcu = reg.Find("Enflame");
  ASSERT_NE(vgcu, nullptr);
  ASSERT_NE(reg.Find("GCU"), nullptr);  // whole cards stay on enflame.com/gcu
  EXPECT_EQ(reg.Find("GCU")->resource_names().count, "enflame.com/gcu");
  // The chart's section (no common keys) names the same resources.
  VendorRegistry chart = VendorRegistry::FromConfig(Config("enflame: {}\n")).value();
  ASSERT_NE(chart.Find("Enflame"), nullptr);
  EXPECT_EQ(chart.Find("Enflame")->resource_names().count, "enflame.com/vgcu");
  EXPECT_EQ(chart.Find("Enflame")->resource_names().memory_percentage,
            "enflame.com/vgcu-percentage");

  Annotations none;
  device::ContainerResources c =
      Limits({{"enflame.com/vgcu", "1"}, {"enflame.com/vgcu-percentage", "15"}}, "app");
  // Four slices per card (most nodes): 15 % is one slice, 25 %.
  FixedFactors four(std::map<int64_t, int32_t>{{4, 3}, {8, 1}});
  Result<device::ContainerMutation> m = vgcu->MutateContainer(c, {none, &four});
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_TRUE(m->found);
  EXPECT_EQ(m->set_limits.at("enflame.com/vgcu-percentage"), "25");
  EXPECT_EQ(m->set_limits.at("enflame.com/shared-gcu"), "1");
  EXPECT_EQ(m->set_requests.at("enflame.com/vgcu-percentage"), "25");
  EXPECT_EQ(m->set_requests.at("enflame.com/shared-gcu"), "1");
  // The factor used goes on the pod: the scheduler then keeps it to nodes cut that way.
  EXPECT_EQ(m->set_pod_annotations.at("hami.io/enflame-slices-per-card"), "4");
  // A pod may name another factor some node has: 15 % of eight slices is two, 25 %.
  Annotations eight = {{"hami.io/enflame-slices-per-card", "8"}};
  m = vgcu->MutateContainer(c, {eight, &four});
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_EQ(m->set_limits.at("enflame.com/shared-gcu"), "2");
  EXPECT_EQ(m->set_limits.at("enflame.com/vgcu-percentage"), "25");
  EXPECT_EQ(m->set_pod_annotations.at("hami.io/enflame-slices-per-card"), "8");
  // ... but not one no node has, nor garbage.
  for (const char* bad : {"5", "0", "four", "-4", "101"}) {
    m = vgcu->MutateContainer(c, {{{"hami.io/enflame-slices-per-card", bad}}, &four});
    ASSERT_FALSE(m.ok()) << bad;
    EXPECT_EQ(m.status().message(),
              "hami.io/enflame-slices-per-card: \"" + std::string(bad) +
                  "\" is not the slices per card of any Enflame node (they have 4, 8)");
  }
  // Three slices: 40 % takes two, 66 %.
  FixedFactors three(std::map<int64_t, int32_t>{{3, 1}});
  m = vgcu->MutateContainer(
      Limits({{"enflame.com/vgcu", "1"}, {"enflame.com/vgcu-percentage", "40"}}), {none, &three});
  ASSERT_TRUE(m.ok());
  EXPECT_EQ(m->set_limits.at("enflame.com/vgcu-percentage"), "66");
  EXPECT_EQ(m->set_limits.at("enflame.com/shared-gcu"), "2");
  // No percentage: a whole card, every slice; two cards: both whole.
  m = vgcu->MutateContainer(Limits({{"enflame.com/vgcu", "1"}}), {none, &four});
  ASSERT_TRUE(m.ok());
  EXPECT_EQ(m->set_limits.at("enflame.com/vgcu-percentage"), "100");
  EXPECT_EQ(m->set_limits.at("enflame.com/shared-gcu"), "4");
  m = vgcu->MutateContainer(
      Limits({{"enflame.com/vgcu", "2"}, {"enflame.com/vgcu-percentage", "10"}}), {none, &four});
  ASSERT_TRUE(m.ok());
  EXPECT_EQ(m->set_limits.at("enflame.com/vgcu-percentage"), "100");
  EXPECT_EQ(m->set_limits.at("enflame.com/shared-gcu"), "8");
  // No node reports slices yet: refused, saying why.
  m = vgcu->MutateContainer(c, none);
  ASSERT_FALSE(m.ok());
  EXPECT_NE(m.status().message().find("no node reports enflame.com/shared-gcu"), std::string::npos)
      << m.status().message();
  // Out-of-range percentages are refused with the resource named.
  m = vgcu->MutateContainer(
      Limits({{"enflame.com/vgcu", "1"}, {"enflame.com/vgcu-percentage", "150"}}), {none, &four});
  ASSERT_FALSE(m.ok());
  EXPECT_NE(m.status().message().find("enflame.com/vgcu-percentage"), std::string::npos);
  // No vGCU: nothing to do, found false.
  m = vgcu->MutateContainer(Limits({{"nvidia.com/gpu", "1"}}), none);
  ASSERT_TRUE(m.ok());
  EXPECT_FALSE(m->found);
}

TEST(EnflameVgcu, CardsFromCapacityAndTheAnnotationsEnflamesPluginReads) {
  SchedulerWorld w({}, Config(kEnflameSection));
  ASSERT_TRUE(
      w.AddNode("gcu-node", {}, {}, {{"enflame.com/gcu-count", 2}, {"enflame.com/shared-gcu", 8}})
          .ok());
  // As the webhook leaves it: 25 % (one of four slices).
  auto pod = [&](const std::string& name, const std::string& pct) {
    return w.Pod(name, {Limits({{"enflame.com/vgcu", "1"},
                                {"enflame.com/vgcu-percentage", pct},
                                {"enflame.com/shared-gcu", "1"}})});
  };
  Result<Decision> a = w.Schedule(pod("a", "25"));
  ASSERT_TRUE(a.ok() && a->fit()) << (a.ok() ? a->FailedMessage() : a.status().ToString());
  const device::ContainerDevice& got = a->devices.at("Enflame")[0][0];
  EXPECT_EQ(got.uuid.rfind("gcu-node-enflame-", 0), 0u) << got.uuid;
  const Annotations& wa = w.pod_objects().at("uid-a").annotations;
  EXPECT_EQ(wa.at("hami.io/enflame-vgpu-devices-allocated"), got.uuid + ",Enflame,25,0:;");
  EXPECT_EQ(wa.count("hami.io/enflame-vgpu-devices-to-allocate"), 0u);
  EXPECT_EQ(wa.at("enflame.com/gcu-assigned"), "false");
  EXPECT_EQ(wa.at("enflame.com/gcu-assigned-id"), std::to_string(got.index));
  EXPECT_FALSE(wa.at("enflame.com/gcu-assigned-time").empty());
  // Percent is the memory unit: 75 % more fills that card, the next 50 % goes to the other.
  Result<Decision> b = w.Schedule(pod("b", "75"));
  ASSERT_TRUE(b.ok() && b->fit());
  Result<Decision> c = w.Schedule(pod("c", "50"));
  ASSERT_TRUE(c.ok() && c->fit());
  Result<Decision> d = w.Place(pod("d", "75"));
  ASSERT_TRUE(d.ok());
  EXPECT_FALSE(d->fit());
  EXPECT_EQ(ReasonOn(*d, "gcu-node"), "2/2 CardInsufficientMemory") << d->FailedMessage();
  EXPECT_EQ(w.Rebuild()->CanonicalDump(), w.ledger().CanonicalDump());
}

// Nodes cutting their cards differently: a pod whose shared-gcu count was worked out for four
// slices per card fits only nodes cut in four (elsewhere Enflame's plugin would hand it another
// share of a card than it asked for).
TEST(EnflameVgcu, APodFitsOnlyNodesCutAsItsSlicesWereCounted) {
  SchedulerWorld w({}, Config(kEnflameSection));
  ASSERT_TRUE(
      w.AddNode("four", {}, {}, {{"enflame.com/gcu-count", 2}, {"enflame.com/shared-gcu", 8}})
          .ok());
  ASSERT_TRUE(
      w.AddNode("eight", {}, {}, {{"enflame.com/gcu-count", 1}, {"enflame.com/shared-gcu", 8}})
          .ok());
  ASSERT_TRUE(w.AddNode("uncut", {}, {}, {{"enflame.com/gcu-count", 1}}).ok());
  auto pod = [&](const std::string& name, const char* factor) {
    Annotations a;
    if (factor != nullptr) a["hami.io/enflame-slices-per-card"] = factor;
    return w.Pod(name,
                 {Limits({{"enflame.com/vgcu", "1"},
                          {"enflame.com/vgcu-percentage", "25"},
                          {"enflame.com/shared-gcu", "1"}})},
                 a);
  };
  Result<Decision> d = w.Place(pod("four-slices", "4"));
  ASSERT_TRUE(d.ok() && d->fit()) << (d.ok() ? d->FailedMessage() : d.status().ToString());
  EXPECT_EQ(d->node, "four");
  EXPECT_EQ(ReasonOn(*d, "eight"), "1/1 CardTypeMismatch") << d->FailedMessage();
  EXPECT_EQ(ReasonOn(*d, "uncut"), "1/1 CardTypeMismatch") << d->FailedMessage();
  d = w.Place(pod("eight-slices", "8"));
  ASSERT_TRUE(d.ok() && d->fit());
  EXPECT_EQ(d->node, "eight");
  EXPECT_EQ(ReasonOn(*d, "four"), "2/2 CardTypeMismatch") << d->FailedMessage();
  // Pods from before the annotation (or written by hand) are not narrowed.
  d = w.Place(pod("old", nullptr));
  ASSERT_TRUE(d.ok() && d->fit());
  EXPECT_EQ(d->verdicts.size(), 3u);
  for (const NodeVerdict& v : d->verdicts) EXPECT_TRUE(v.fit) << v.node;
}

// ---------------------------------------------------------------------------------------------
// Topology groups from the plugins' custominfo: Ascend's NetworkID, Vastai's dies per card.

std::string Uuids(const Decision& d, const std::string& vendor) {
  std::string out;
  for (const device::ContainerDevice& cd : d.devices.at(vendor)[0]) {
    if (!out.empty()) out += " ";
    out += cd.uuid;
  }
  return out;
}

TEST(Ascend, NpusOfOneNetworkGoTogether) {
  SchedulerWorld w({}, Config("vnpus: {}\n"), {.enable_ascend = true});
  // Eight 910B3 NPUs in two networks: 0-3 and 4-7.
  std::string reg = "[";
  for (int i = 0; i < 8; ++i) {
    if (i > 0) reg += ",";
    reg += R"({"id":"N-)" + std::to_string(i) + R"(","index":)" + std::to_string(i) +
           R"(,"count":4,"devmem":65536,"devcore":20,"type":"Ascend910B3","health":true,)"
           R"("custominfo":{"NetworkID":)" +
           std::to_string(i / 4) + "}}";
  }
  reg += "]";
  ASSERT_TRUE(w.AddNode("npu-node", {}, {{"hami.io/node-register-Ascend910B3", reg}}).ok());
  EXPECT_NE(w.ledger().CanonicalDump().find("dev N-5 vendor=Ascend910B3 idx=5"), std::string::npos);
  EXPECT_NE(w.ledger().CanonicalDump().find("group=1"), std::string::npos);
  const device::Vendor& npu = *w.vendors().Find("Ascend910B3");
  // N-0 and N-1 are kept out: network 0 has two NPUs left, network 1 four.
  const Annotations skip = {{"hami.io/no-use-Ascend910B3-uuid", "N-0,N-1"}};
  auto place = [&](const std::string& name, int npus) {
    return w.Place(w.Pod(
        name, {Mutated(npu, Limits({{"huawei.com/Ascend910B3", std::to_string(npus)}}))}, skip));
  };
  Result<Decision> two = place("two", 2);
  ASSERT_TRUE(two.ok() && two->fit()) << (two.ok() ? two->FailedMessage() : "");
  EXPECT_EQ(Uuids(*two, "Ascend910B3"), "N-2 N-3");  // the network that holds exactly two
  Result<Decision> three = place("three", 3);
  ASSERT_TRUE(three.ok() && three->fit());
  for (const device::ContainerDevice& cd : three->devices.at("Ascend910B3")[0]) {
    EXPECT_GE(cd.uuid, "N-4") << Uuids(*three, "Ascend910B3");  // all from network 1
  }
  Result<Decision> five = place("five", 5);
  ASSERT_TRUE(five.ok() && five->fit());
  std::string got = Uuids(*five, "Ascend910B3");
  EXPECT_NE(got.find("N-4"), std::string::npos) << got;  // network 1 whole, then one more
  EXPECT_NE(got.find("N-7"), std::string::npos) << got;
  // Without NetworkIDs the engine's order is kept (the seed's registration has none).
  ASSERT_TRUE(
      w.AddNode("plain", {}, {{"hami.io/node-register-Ascend910B3", kAscendRegistration}}).ok());
  const std::string dump = w.ledger().CanonicalDump();
  const size_t at = dump.find("dev NPU-0 ");
  ASSERT_NE(at, std::string::npos) << dump;
  EXPECT_EQ(dump.substr(at, dump.find('\n', at) - at).find("group="), std::string::npos);
}

TEST(Vastai, DiesOfOneCardGoTogether) {
  SchedulerWorld w({}, Config("vastai: {}\n"));
  // Two cards of four dies in die mode; the first card's die 0 is busy (a pod below).
  std::string reg = "[";
  for (int i = 0; i < 8; ++i) {
    if (i > 0) reg += ",";
    reg += R"({"id":"VA-)" + std::to_string(i) + R"(","index":)" + std::to_string(i) +
           R"(,"count":1,"devmem":16384,"devcore":100,"type":"vastai-va1","health":true,)"
           R"("custominfo":{"DeviceStrategy":"die","AIC":"card-)" +
           std::to_string(i / 4) + R"("}})";
  }
  reg += "]";
  ASSERT_TRUE(w.AddNode("va-node", {}, {{"hami.io/node-va-register", reg}}).ok());
  auto pod = [&](const std::string& name, int dies, const Annotations& a = {}) {
    return w.Pod(name, {Limits({{"vastaitech.com/va", std::to_string(dies)}})}, a);
  };
  Result<Decision> one = w.Schedule(pod("one", 1, {{"vastaitech.com/use-gpuuuid", "VA-0"}}));
  ASSERT_TRUE(one.ok() && one->fit()) << (one.ok() ? one->FailedMessage() : "");
  // One die: the fuller card (three free) for a plain pod; a mutex pod takes dies of an idle
  // card only.
  EXPECT_EQ(Uuids(*w.Place(pod("plain", 1)), "Vastai"), "VA-1");
  Result<Decision> mutex = w.Place(pod("mutex", 1, {{"hami.io/gpu-scheduler-policy", "mutex"}}));
  ASSERT_TRUE(mutex.ok() && mutex->fit());
  EXPECT_EQ(Uuids(*mutex, "Vastai"), "VA-4");
  // Three dies: the first card has exactly three free.
  Result<Decision> three = w.Schedule(pod("three", 3));
  ASSERT_TRUE(three.ok() && three->fit());
  EXPECT_EQ(Uuids(*three, "Vastai"), "VA-1 VA-2 VA-3");
  // Four: the second card whole.
  Result<Decision> four = w.Place(pod("four", 4));
  ASSERT_TRUE(four.ok() && four->fit());
  EXPECT_EQ(Uuids(*four, "Vastai"), "VA-4 VA-5 VA-6 VA-7");

  EXPECT_EQ(w.Rebuild()->CanonicalDump(), w.ledger().CanonicalDump());
}

// MetaX sGPU sharing: app classes and QoS policies (the pods as the webhook leaves them).
TEST(Metax, SgpuSharingFollowsAppClassesAndQosPolicies) {
  SchedulerWorld w({}, Config("metax: {}\n"));
  ASSERT_TRUE(w.AddNode("sgpu-node", {},
                        {{"metax-tech.com/node-gpu-devices",
                          R"([{"uuid":"GPU-a","model":"MXC500","totalDevCount":16,)"
                          R"("totalCompute":100,"totalVRam":65536,"healthy":true},)"
                          R"({"uuid":"GPU-b","model":"MXC500","totalDevCount":16,)"
                          R"("totalCompute":100,"totalVRam":65536,"healthy":true},)"
                          R"({"uuid":"GPU-c","model":"MXC500","totalDevCount":16,)"
                          R"("totalCompute":100,"totalVRam":65536,"healthy":true,)"
                          R"("qosPolicy":"fixed-share"}])"}})
                  .ok());
  auto pod = [&](const std::string& name, const std::string& gpu, Annotations a,
                 const std::string& cores = "30") {
    a["metax-tech.com/use-gpuuuid"] = gpu;
    return w.Pod(name,
                 {Limits({{"metax-tech.com/sgpu", "1"},
                          {"metax-tech.com/vcore", cores},
                          {"metax-tech.com/vmemory", "4"}})},
                 std::move(a));
  };
  const Annotations best = {{"metax-tech.com/sgpu-qos-policy", "best-effort"}};
  const Annotations fixed = {{"metax-tech.com/sgpu-qos-policy", "fixed-share"}};
  const Annotations online = {{"metax-tech.com/sgpu-app-class", "online"}};
  const Annotations offline = {{"metax-tech.com/sgpu-app-class", "offline"},
                               {"metax-tech.com/sgpu-qos-policy", "best-effort"}};
  auto reason = [&](const PodSpec& p) {
    Result<Decision> d = w.Place(p);
    EXPECT_TRUE(d.ok());
    return d.ok() && !d->fit() ? ReasonOn(*d, "sgpu-node") : std::string("fits");
  };

  ASSERT_TRUE(w.Schedule(pod("plain", "GPU-a", best))->fit());
  // Online pods do not join plain ones; they are given no compute.
  EXPECT_EQ(reason(pod("online-a", "GPU-a", online)),
            "1/3 CardAppClassMismatch, 2/3 CardUuidMismatch");
  Result<Decision> on = w.Schedule(pod("online-b", "GPU-b", online));
  ASSERT_TRUE(on.ok() && on->fit());
  EXPECT_EQ(
      w.pod_objects().at("uid-online-b").annotations.at("hami.io/metax-sgpu-devices-allocated"),
      "GPU-b,Metax-SGPU,4096,0:;");
  // Offline pods never join online ones, plain pods never join either.
  EXPECT_EQ(reason(pod("offline-b", "GPU-b", offline)),
            "1/3 CardUuidMismatch, 2/3 CardAppClassMismatch");  // GPU-a is plain's
  EXPECT_EQ(reason(pod("plain-b", "GPU-b", best)),
            "1/3 CardAppClassMismatch, 2/3 CardUuidMismatch");
  // Another policy does not join a used sGPU; the same one does. (Upstream's order: the class
  // checks come before the UUID check.)
  EXPECT_EQ(reason(pod("fixed-a", "GPU-a", fixed)),
            "1/3 CardAppClassMismatch, 1/3 CardQosPolicyMismatch, 1/3 CardUuidMismatch");
  EXPECT_EQ(reason(pod("best-a", "GPU-a", best)), "fits");
  // An sGPU registered with a policy: an unused one takes any, a used one only its own.
  ASSERT_TRUE(w.Schedule(pod("best-c", "GPU-c", best))->fit());
  EXPECT_EQ(reason(pod("fixed-c", "GPU-c", fixed)),
            "1/3 CardAppClassMismatch, 2/3 CardQosPolicyMismatch");
  w.DeletePod("uid-best-c");
  ASSERT_TRUE(w.Schedule(pod("plain-c", "GPU-c", Annotations{}))->fit());  // no policy given
  // The registered policy holds for GPU-c.
  EXPECT_EQ(reason(pod("best-c2", "GPU-c", best)),
            "1/3 CardAppClassMismatch, 1/3 CardQosPolicyMismatch, 1/3 CardUuidMismatch");
  EXPECT_EQ(reason(pod("fixed-c2", "GPU-c", fixed)), "fits");
  // The ledger rebuilt from the pods' annotations holds the same classes.
  const std::string dump = w.ledger().CanonicalDump();
  EXPECT_NE(dump.find("dev GPU-b "), std::string::npos);
  EXPECT_NE(dump.find(" class1=1"), std::string::npos) << dump;  // the online pod on GPU-b
  EXPECT_EQ(w.Rebuild()->CanonicalDump(), dump);

  // The rule itself, with exclusive tasks: a task taking the whole sGPU is not held to the
  // policy, and leaves none behind.
  const device::Vendor& sg = *w.vendors().Find("Metax-SGPU");
  device::TaskClassCounts on_device{};
  const uint8_t best_cls = sg.TaskClass(best), fixed_cls = sg.TaskClass(fixed);
  on_device[sg.ChargeClass(best_cls, false)] = 1;
  EXPECT_EQ(sg.CanShare(fixed_cls, on_device, "", false), device::ShareVerdict::kQosPolicyMismatch);
  EXPECT_EQ(sg.CanShare(fixed_cls, on_device, "", true), device::ShareVerdict::kOk);
  device::TaskClassCounts whole{};
  whole[sg.ChargeClass(best_cls, true)] = 1;
  EXPECT_EQ(sg.CanShare(fixed_cls, whole, "", false), device::ShareVerdict::kOk);
  EXPECT_TRUE(sg.TaskTakesNoCores(sg.TaskClass(online)));
  EXPECT_FALSE(sg.TaskTakesNoCores(sg.TaskClass(offline)));
}

// Between nodes, a multi-NPU pod prefers the one where its NPUs share a network, whatever the
// node policy (upstream's Ascend ScoreNode, kept policy-neutral).
TEST(Ascend, APodPrefersTheNodeWhereItsNpusShareANetwork) {
  for (const char* policy : {"binpack", "spread"}) {
    SchedulerWorld w({}, Config("vnpus: {}\n"), {.enable_ascend = true});
    auto registration = [](const std::string& prefix, int per_network) {
      std::string reg = "[";
      for (int i = 0; i < 4; ++i) {
        if (i > 0) reg += ",";
        reg += R"({"id":")" + prefix + std::to_string(i) + R"(","index":)" + std::to_string(i) +
               R"(,"count":4,"devmem":65536,"devcore":20,"type":"Ascend910B3","health":true,)"
               R"("custominfo":{"NetworkID":)" +
               std::to_string(i / per_network) + "}}";
      }
      return reg + "]";
    };
    // split: networks {0,1} and {2,3}; whole: one network of four.
    ASSERT_TRUE(
        w.AddNode("split", {}, {{"hami.io/node-register-Ascend910B3", registration("S-", 2)}})
            .ok());
    ASSERT_TRUE(
        w.AddNode("whole", {}, {{"hami.io/node-register-Ascend910B3", registration("W-", 4)}})
            .ok());
    const device::Vendor& npu = *w.vendors().Find("Ascend910B3");
    Result<Decision> d =
        w.Place(w.Pod("three", {Mutated(npu, Limits({{"huawei.com/Ascend910B3", "3"}}))},
                      {{"hami.io/node-scheduler-policy", policy}}));
    ASSERT_TRUE(d.ok() && d->fit()) << policy;
    EXPECT_EQ(d->node, "whole") << policy;
    for (const NodeVerdict& v : d->verdicts) {
      EXPECT_DOUBLE_EQ(v.preference, v.node == "whole" ? 10.0 : 10.0 * 2 / 3) << v.node;
    }
  }
}

// MetaX online pods: sGPUs with fewer online tasks first, one running offline tasks only last.
TEST(Metax, OnlinePodsPreferQuietSgpus) {
  SchedulerWorld w({}, Config("metax: {}\n"));
  std::string reg = "[";
  for (const char* id : {"GPU-a", "GPU-b", "GPU-c"}) {
    if (reg.size() > 1) reg += ",";
    reg += std::string(R"({"uuid":")") + id +
           R"(","model":"MXC500","totalDevCount":16,"totalCompute":100,"totalVRam":65536,)"
           R"("healthy":true})";
  }
  reg += "]";
  ASSERT_TRUE(w.AddNode("sgpu-node", {}, {{"metax-tech.com/node-gpu-devices", reg}}).ok());
  auto pod = [&](const std::string& name, Annotations a) {
    return w.Pod(name,
                 {Limits({{"metax-tech.com/sgpu", "1"},
                          {"metax-tech.com/vcore", "30"},
                          {"metax-tech.com/vmemory", "4"}})},
                 std::move(a));
  };
  // binpack would put the pod on the busiest sGPU; the online preference comes first.
  const Annotations online = {{"metax-tech.com/sgpu-app-class", "online"},
                              {"hami.io/gpu-scheduler-policy", "binpack"}};
  ASSERT_TRUE(w.Schedule(pod("offline-a", {{"metax-tech.com/sgpu-app-class", "offline"},
                                           {"metax-tech.com/use-gpuuuid", "GPU-a"}}))
                  ->fit());
  Annotations on_b = online;
  on_b["metax-tech.com/use-gpuuuid"] = "GPU-b";
  ASSERT_TRUE(w.Schedule(pod("online-b", on_b))->fit());
  // The idle sGPU first, then the one with an online task, the offline-only one last.
  Result<Decision> d = w.Place(pod("next", online));
  ASSERT_TRUE(d.ok() && d->fit());
  EXPECT_EQ(Uuids(*d, "Metax-SGPU"), "GPU-c");
  Annotations skip_c = online;
  skip_c["metax-tech.com/nouse-gpuuuid"] = "GPU-c";
  d = w.Place(pod("next2", skip_c));
  ASSERT_TRUE(d.ok() && d->fit());
  EXPECT_EQ(Uuids(*d, "Metax-SGPU"), "GPU-b");
  EXPECT_DOUBLE_EQ(d->verdicts[0].preference, -20.0);
  skip_c["metax-tech.com/nouse-gpuuuid"] = "GPU-b,GPU-c";
  d = w.Place(pod("next3", skip_c));
  ASSERT_TRUE(d.ok() && d->fit());
  EXPECT_EQ(Uuids(*d, "Metax-SGPU"), "GPU-a");
  EXPECT_DOUBLE_EQ(d->verdicts[0].preference, -100.0);
  // Pods without an app class are indifferent.
  EXPECT_EQ(w.vendors().Find("Metax-SGPU")->DevicePreference(0, device::TaskClassCounts{1}), 0);
}

// MetaX sGPUs of one MetaLink zone go together.
TEST(Metax, APodsSgpusStayInOneMetaLinkZone) {
  SchedulerWorld w({}, Config("metax: {}\n"));
  std::string reg = "[";
  for (int i = 0; i < 4; ++i) {
    if (i > 0) reg += ",";
    reg += R"({"uuid":"GPU-)" + std::to_string(i) +
           R"(","model":"MXC500","totalDevCount":16,"totalCompute":100,"totalVRam":65536,)"
           R"("healthy":true,"linkZone":)" +
           std::to_string(1 + i / 2) + "}";
  }
  reg += "]";
  ASSERT_TRUE(w.AddNode("sgpu-node", {}, {{"metax-tech.com/node-gpu-devices", reg}}).ok());
  EXPECT_NE(w.ledger().CanonicalDump().find("dev GPU-3 "), std::string::npos);
  // GPU-0 kept out: zone 1 has one sGPU left, zone 2 both.
  Result<Decision> d = w.Place(w.Pod("pair",
                                     {Limits({{"metax-tech.com/sgpu", "2"},
                                              {"metax-tech.com/vcore", "100"},
                                              {"metax-tech.com/vmemory", "8"}})},
                                     {{"metax-tech.com/nouse-gpuuuid", "GPU-0"}}));
  ASSERT_TRUE(d.ok() && d->fit()) << (d.ok() ? d->FailedMessage() : "");
  EXPECT_EQ(Uuids(*d, "Metax-SGPU"), "GPU-2 GPU-3");
}

// MetaX sGPU topology-aware (the config's sgpuTopologyAware, or the pod's annotation): whole
// sGPUs are scored by the MetaLink links they keep (10 x 10 per pair taken together) less the
// links their taking breaks among the node's idle sGPUs.
TEST(Metax, TopologyAwareSgpusKeepTheNodesOtherLinks) {
  auto reg = [](const std::string& prefix, std::vector<int> zones) {
    std::string out = "[";
    for (size_t i = 0; i < zones.size(); ++i) {
      if (i > 0) out += ",";
      out += R"({"uuid":")" + prefix + std::to_string(i) +
             R"(","model":"MXC500","totalDevCount":16,"totalCompute":100,"totalVRam":65536,)"
             R"("healthy":true,"linkZone":)" +
             std::to_string(zones[i]) + "}";
    }
    return out + "]";
  };
  for (const char* mode : {"off", "config", "annotation", "annotation-off"}) {
    const std::string m = mode;
    SchedulerWorld w(
        {}, Config(m == "config" || m == "annotation-off" ? "metax:\n  sgpuTopologyAware: true\n"
                                                          : "metax: {}\n"));
    // a: four linked idle sGPUs and a busy unlinked one (binpack likes a better);
    // b: two zones of two.
    ASSERT_TRUE(
        w.AddNode("a", {}, {{"metax-tech.com/node-gpu-devices", reg("A-", {1, 1, 1, 1, 0})}}).ok());
    ASSERT_TRUE(
        w.AddNode("b", {}, {{"metax-tech.com/node-gpu-devices", reg("B-", {1, 1, 2, 2})}}).ok());
    ASSERT_TRUE(w.Schedule(w.Pod("busy",
                                 {Limits({{"metax-tech.com/sgpu", "1"},
                                          {"metax-tech.com/vcore", "100"},
                                          {"metax-tech.com/vmemory", "32"}})},
                                 {{"metax-tech.com/use-gpuuuid", "A-4"}}))
                    ->fit());
    Annotations a;
    if (m == "annotation") a["metax-tech.com/sgpu-topology-aware"] = "true";
    if (m == "annotation-off") a["metax-tech.com/sgpu-topology-aware"] = "false";
    Result<Decision> d = w.Place(w.Pod("pair",
                                       {Limits({{"metax-tech.com/sgpu", "2"},
                                                {"metax-tech.com/vcore", "100"},
                                                {"metax-tech.com/vmemory", "8"}})},
                                       a));
    ASSERT_TRUE(d.ok() && d->fit()) << mode;
    const bool on = m == "config" || m == "annotation";
    EXPECT_EQ(d->node, on ? "b" : "a") << mode;
    for (const NodeVerdict& v : d->verdicts) {
      // Off: the cohesion term (both sGPUs in one zone) on either node. On: a keeps one link
      // and breaks four (6 among its idle sGPUs, 1 left among the other two): 100 - 40.
      EXPECT_DOUBLE_EQ(v.preference, on ? (v.node == "a" ? 60.0 : 100.0) : 10.0)
          << mode << " " << v.node;
    }
  }
}

// MetaX whole cards: the node's published topology losses (binpack: least loss) and scores
// (spread: highest score) for the number of cards a pod takes.
TEST(Metax, WholeCardsFollowTheNodesTopologyLossesAndScores) {
  for (const char* policy : {"binpack", "spread"}) {
    SchedulerWorld w({}, Config("metax: {}\n"));
    ASSERT_TRUE(w.AddNode("a", {},
                          {{"metax-tech.com/gpu.topology.losses", R"({"1":0,"2":10})"},
                           {"metax-tech.com/gpu.topology.scores", R"({"2":9})"}},
                          {{"metax-tech.com/gpu", 4}})
                    .ok());
    ASSERT_TRUE(w.AddNode("b", {},
                          {{"metax-tech.com/gpu.topology.losses", R"({"2":2})"},
                           {"metax-tech.com/gpu.topology.scores", "not json"}},
                          {{"metax-tech.com/gpu", 4}})
                    .ok());
    Result<Decision> d = w.Place(w.Pod("two", {Limits({{"metax-tech.com/gpu", "2"}})},
                                       {{"hami.io/node-scheduler-policy", policy}}));
    ASSERT_TRUE(d.ok() && d->fit()) << policy;
    EXPECT_EQ(d->node, std::string(policy) == "binpack" ? "b" : "a") << policy;
    for (const NodeVerdict& v : d->verdicts) {
      double want =
          std::string(policy) == "binpack" ? (v.node == "a" ? -10 : -2) : (v.node == "a" ? 9 : 0);
      EXPECT_DOUBLE_EQ(v.preference, want) << policy << " " << v.node;
    }
    EXPECT_NE(w.ledger().CanonicalDump().find("prefer Metax-GPU binpack1=0.000000 binpack2=-10"),
              std::string::npos)
        << w.ledger().CanonicalDump();
    EXPECT_EQ(w.Rebuild()->CanonicalDump(), w.ledger().CanonicalDump());
  }
}

}  // namespace
}  // namespace hami::scheduler
