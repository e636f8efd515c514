// Golden cases for the vendors beyond NVIDIA: what their device plugins register, the user's
// example pods (seed 001, section 6.1) parsed with each vendor's resource names, the pod
// annotations a placement writes, and the reasons a pod that does not fit is given.
#include <gtest/gtest.h>

#include "device/config.h"
#include "device/vendor.h"
#include "device/vendors/annotated_vendor.h"
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
      dcu->DecodeNodeDevices({{"hami.io/node-dcu-register", kDcuRegistration}});
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
  EXPECT_EQ(dcu->DecodeNodeDevices({}).status().code(), StatusCode::kNotFound);
  Result<std::vector<DeviceInfo>> bad =
      dcu->DecodeNodeDevices({{"hami.io/node-dcu-register", "DCU-a,ten,1,1,DCU,0,true:"}});
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

}  // namespace
}  // namespace hami::scheduler
