// A heterogeneous cluster through the real HTTP path (webhook, kube-scheduler stand-in, extender
// filter and bind): an NVIDIA node and a Hygon DCU node registered as their device plugins register
// them, the user's example pods (the multi-vendor examples of the user's documents), each landing
// on its vendor's node and cards with its vendor's annotations.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "device/config.h"
#include "device/node_registration.h"
#include "k8s/api_error.h"
#include "k8s/typed.h"
#include "scheduler/test_util.h"
#include "sim/cluster/sim_cluster.h"

namespace hami::e2e {
namespace {

using Json = nlohmann::json;
using sim::SimCluster;
using sim::SimClusterOptions;

Json Pod(const std::string& name, Json limits) {
  Json pod;
  pod["apiVersion"] = "v1";
  pod["kind"] = "Pod";
  pod["metadata"]["name"] = name;
  pod["spec"]["containers"] =
      Json::array({Json{{"name", "app"}, {"image", "x"}, {"resources", {{"limits", limits}}}}});
  return pod;
}

TEST(HeteroE2E, EachVendorsPodLandsOnItsVendorsNode) {
  SimClusterOptions o;
  o.device_config = device::ParseDeviceConfigYaml("nvidia: {}\nhygon: {}\n").value();
  SimCluster c(o);
  c.AddNode("gpu-node", {scheduler::testing::Gpu("GPU-1", 0, 32768)});
  c.AddVendorNode("dcu-node",
                  {{"hami.io/node-dcu-register",
                    "DCU-a,10,16368,100,DCU-Z100,0,true,0,hami-core:"
                    "DCU-b,10,16368,100,DCU-Z100,0,true,1,hami-core:"}},
                  {{"hygon.com/dcunum", "20"}}, "DCU-a");

  // The user's dcu-test (no schedulerName: the webhook sends it to hami-scheduler).
  ASSERT_TRUE(c.CreatePod("default", Pod("dcu-test", {{"hygon.com/dcunum", "1"},
                                                      {"hygon.com/dcumem", "16000"},
                                                      {"hygon.com/dcucores", "80"}}))
                  .ok());
  ASSERT_TRUE(c.CreatePod("default",
                          Pod("gpu-test", {{"nvidia.com/gpu", "1"}, {"nvidia.com/gpumem", "1000"}}))
                  .ok());
  ASSERT_TRUE(SimCluster::WaitFor([&] {
    return !c.BoundNode("default", "dcu-test").empty() &&
           !c.BoundNode("default", "gpu-test").empty();
  })) << "dcu-test on '"
      << c.BoundNode("default", "dcu-test") << "', gpu-test on '"
      << c.BoundNode("default", "gpu-test") << "'";
  EXPECT_EQ(c.BoundNode("default", "dcu-test"), "dcu-node");
  EXPECT_EQ(c.BoundNode("default", "gpu-test"), "gpu-node");
  std::string dcu = c.Annotation("default", "dcu-test", "hami.io/dcu-devices-allocated");
  EXPECT_TRUE(dcu == "DCU-a,DCU,16000,80:;" || dcu == "DCU-b,DCU,16000,80:;") << dcu;
  EXPECT_EQ(c.Annotation("default", "dcu-test", "hami.io/vgpu-devices-allocated"), "");
  EXPECT_NE(c.Annotation("default", "gpu-test", "hami.io/vgpu-devices-allocated"), "");
  EXPECT_EQ(c.Annotation("default", "gpu-test", "hami.io/dcu-devices-allocated"), "");

  // Two more cards of 16000 MiB do not exist: pending, with the reason per node.
  ASSERT_TRUE(c.CreatePod("default", Pod("too-big", {{"hygon.com/dcunum", "2"},
                                                     {"hygon.com/dcumem", "16000"}}))
                  .ok());
  ASSERT_TRUE(SimCluster::WaitFor([&] {
    for (const k8s::Object& e : c.Events("default", "too-big")) {
      if (k8s::GetString(e, "/reason") == "FailedScheduling") return true;
    }
    return false;
  }));
  std::string why;
  for (const k8s::Object& e : c.Events("default", "too-big")) {
    if (k8s::GetString(e, "/reason") == "FailedScheduling") why = k8s::GetString(e, "/message");
  }
  EXPECT_NE(why.find("CardInsufficientMemory"), std::string::npos) << why;
  EXPECT_EQ(c.BoundNode("default", "too-big"), "");
  EXPECT_TRUE(c.scheduler().CheckLedger().ok());
}

// One node with both vendors' devices: a container asking for an NVIDIA GPU and a DCU gets one
// of each, with one annotation per vendor; when the DCU plugin goes away (its allocatable drops
// to 0), only the DCU devices leave scheduling.
TEST(HeteroE2E, APodAskingForTwoVendorsGetsBothAndEachVendorLeavesAlone) {
  SimClusterOptions o;
  o.device_config = device::ParseDeviceConfigYaml("nvidia: {}\nhygon: {}\n").value();
  SimCluster c(o);
  c.AddVendorNode(
      "mixed",
      {{"hami.io/node-nvidia-register",
        device::EncodeNodeDevicesJson({scheduler::testing::Gpu("GPU-m0", 0, 32768)})},
       {"hami.io/node-dcu-register", "DCU-m0,10,16368,100,DCU-Z100,0,true,0,hami-core:"}},
      {{"nvidia.com/gpu", "10"}, {"hygon.com/dcunum", "10"}}, "DCU-m0");
  ASSERT_NE(c.scheduler().LedgerDump().find("GPU-m0"), std::string::npos);

  ASSERT_TRUE(c.CreatePod("default", Pod("both", {{"nvidia.com/gpu", "1"},
                                                  {"nvidia.com/gpumem", "2000"},
                                                  {"hygon.com/dcunum", "1"},
                                                  {"hygon.com/dcumem", "3000"},
                                                  {"hygon.com/dcucores", "30"}}))
                  .ok());
  ASSERT_TRUE(SimCluster::WaitFor([&] { return c.BoundNode("default", "both") == "mixed"; }));
  EXPECT_EQ(c.Annotation("default", "both", "hami.io/dcu-devices-allocated"),
            "DCU-m0,DCU,3000,30:;");
  EXPECT_EQ(c.Annotation("default", "both", "hami.io/vgpu-devices-allocated"),
            "GPU-m0,NVIDIA,2000,0:;");

  // The DCU plugin goes away: allocatable hygon.com/dcunum drops to 0. The bind may still be
  // finishing on the node (its lock released by the plugin): on a conflict, read it again, as
  // any client updating a whole object does.
  Status updated;
  for (int attempt = 0; attempt < 5; ++attempt) {
    Result<k8s::Object> node = k8s::GetNode(c.client(), "mixed");
    ASSERT_TRUE(node.ok());
    (*node)["status"]["allocatable"]["hygon.com/dcunum"] = "0";
    updated = c.client().Update(k8s::kNodes, "", *node, "status").status();
    if (!k8s::IsConflict(updated)) break;
  }
  ASSERT_TRUE(updated.ok()) << updated.ToString();
  ASSERT_TRUE(c.WaitForScheduler([&] {
    std::string dump = c.scheduler().LedgerDump();
    return dump.find("dev DCU-m0") == std::string::npos;
  })) << c.scheduler().LedgerDump();
  EXPECT_NE(c.scheduler().LedgerDump().find("dev GPU-m0"), std::string::npos)
      << "the node's NVIDIA devices left with the DCU plugin";
}

// The user's mixed device-config.yaml with a Hygon section added, and the
// Cambricon unit set to MiB (memoryFactor: 1): the seed's mlu-test comments its 8000 as "8GB",
// which holds for a Cambricon plugin counting MiB; at the default 256 MiB unit (Cambricon's
// default, upstream's factor) it asks for 2,000 GiB and stays pending (vendor_golden_test.cc).
constexpr char kMixedConfig[] = R"(# NVIDIA GPU
nvidia:
  resourceCountName: "nvidia.com/gpu"
  resourceMemoryName: "nvidia.com/gpumem"
  resourceCoreName: "nvidia.com/gpucores"
  deviceSplitCount: 10
  defaultMem: 0
  defaultCores: 0
# Huawei Ascend
ascend:
  resourceCountName: "huawei.com/Ascend910B3"
  resourceMemoryName: "huawei.com/Ascend910B3-memory"
  deviceSplitCount: 8
  defaultMem: 0
  defaultCores: 0
# Cambricon MLU
cambricon:
  resourceCountName: "cambricon.com/vmlu"
  resourceMemoryName: "cambricon.com/mlu.smlu.vmemory"
  resourceCoreName: "cambricon.com/mlu.smlu.vcore"
  deviceSplitCount: 10
  defaultMem: 0
  defaultCores: 0
  memoryFactor: 1
hygon:
  resourceCountName: "hygon.com/dcunum"
  resourceMemoryName: "hygon.com/dcumem"
  resourceCoreName: "hygon.com/dcucores"
)";

std::string AscendRegistration(const std::string& prefix, int n) {
  std::string out = "[";
  for (int i = 0; i < n; ++i) {
    if (i > 0) out += ",";
    out += R"({"id":")" + prefix + std::to_string(i) + R"(","index":)" + std::to_string(i) +
           R"(,"count":4,"devmem":65536,"devcore":20,"type":"Ascend910B3","numa":0,)"
           R"("mode":"hami-core","health":true})";
  }
  return out + "]";
}

TEST(HeteroE2E, TheSeedsExamplePodsOnNvidiaAscendCambriconAndHygonNodes) {
  SimClusterOptions o;
  Result<device::DeviceConfig> cfg = device::ParseDeviceConfigYaml(kMixedConfig);
  ASSERT_TRUE(cfg.ok()) << cfg.status().ToString();
  EXPECT_TRUE(cfg->warnings.empty()) << cfg->warnings.front();
  o.device_config = *cfg;
  SimCluster c(o);
  c.AddNode("gpu-node", {scheduler::testing::Gpu("GPU-1", 0, 32768)});
  c.AddVendorNode("npu-node",
                  {{"hami.io/node-register-Ascend910B3", AscendRegistration("NPU-", 2)}},
                  {{"huawei.com/Ascend910B3", "2"}}, "NPU-0");
  // Four MLU370-X8 cards as Cambricon's plugin shows them: 100 vcore and 48 GiB each.
  c.AddVendorNode("mlu-node", {},
                  {{"cambricon.com/vmlu", "400"},
                   {"cambricon.com/mlu.smlu.vcore", "400"},
                   {"cambricon.com/mlu.smlu.vmemory", "196608"}},
                  "mlu-node-cambricon-mlu-3");
  c.AddVendorNode(
      "dcu-node",
      {{"hami.io/node-dcu-register", "DCU-a,10,16368,100,DCU-Z100,0,true,0,hami-core:"}},
      {{"hygon.com/dcunum", "10"}}, "DCU-a");
  // One node with an NVIDIA GPU and an Ascend NPU, for the pod that asks for both.
  c.AddVendorNode("gpu-npu-node",
                  {{"hami.io/node-nvidia-register",
                    device::EncodeNodeDevicesJson({scheduler::testing::Gpu("GPU-x", 0, 81920)})},
                   {"hami.io/node-register-Ascend910B3", AscendRegistration("NPU-x", 1)}},
                  {{"nvidia.com/gpu", "10"}, {"huawei.com/Ascend910B3", "1"}}, "NPU-x0");

  // The seed's example pods as written (no schedulerName: the webhook sets it).
  ASSERT_TRUE(
      c.CreatePod("default", Pod("ascend-test", {{"huawei.com/Ascend910B3", "1"},
                                                 {"huawei.com/Ascend910B3-memory", "16000"}}))
          .ok());
  ASSERT_TRUE(c.CreatePod("default", Pod("mlu-test", {{"cambricon.com/vmlu", "1"},
                                                      {"cambricon.com/mlu.smlu.vmemory", "8000"},
                                                      {"cambricon.com/mlu.smlu.vcore", "50"}}))
                  .ok());
  ASSERT_TRUE(c.CreatePod("default", Pod("dcu-test", {{"hygon.com/dcunum", "1"},
                                                      {"hygon.com/dcumem", "16000"},
                                                      {"hygon.com/dcucores", "80"}}))
                  .ok());
  // A GPU pod, and a pod asking for NVIDIA and Ascend together (40000 MiB: only the 80 GiB GPU).
  ASSERT_TRUE(c.CreatePod("default",
                          Pod("gpu-test", {{"nvidia.com/gpu", "1"}, {"nvidia.com/gpumem", "1000"}}))
                  .ok());
  ASSERT_TRUE(
      c.CreatePod("default", Pod("gpu-and-npu", {{"nvidia.com/gpu", "1"},
                                                 {"nvidia.com/gpumem", "40000"},
                                                 {"huawei.com/Ascend910B3", "1"},
                                                 {"huawei.com/Ascend910B3-memory", "30000"}}))
          .ok());
  const std::vector<std::string> pods = {"ascend-test", "mlu-test", "dcu-test", "gpu-test",
                                         "gpu-and-npu"};
  ASSERT_TRUE(SimCluster::WaitFor([&] {
    for (const std::string& p : pods) {
      if (c.BoundNode("default", p).empty()) return false;
    }
    return true;
  })) << c.scheduler().LedgerDump();
  // Either node with 910B3s may take it (both have room; the policy picks).
  EXPECT_TRUE(c.BoundNode("default", "ascend-test") == "npu-node" ||
              c.BoundNode("default", "ascend-test") == "gpu-npu-node")
      << c.BoundNode("default", "ascend-test");
  EXPECT_EQ(c.BoundNode("default", "mlu-test"), "mlu-node");
  EXPECT_EQ(c.BoundNode("default", "dcu-test"), "dcu-node");
  EXPECT_EQ(c.BoundNode("default", "gpu-and-npu"), "gpu-npu-node");

  // Ascend: the webhook rounded 16000 MiB up to the vir05_1c_16g template; Huawei's plugin reads
  // the template list.
  std::string npu = c.Annotation("default", "ascend-test", "hami.io/Ascend910B3-devices-allocated");
  ASSERT_FALSE(npu.empty());
  std::string npu_uuid = npu.substr(0, npu.find(','));
  EXPECT_EQ(npu, npu_uuid + ",Ascend910B3,16384,0:;");
  EXPECT_EQ(c.Annotation("default", "ascend-test", "huawei.com/Ascend910B3"),
            R"([{"UUID":")" + npu_uuid + R"(","temp":"vir05_1c_16g","memory":16384}])");
  Result<k8s::Object> ascend_pod = k8s::GetPod(c.client(), "default", "ascend-test");
  ASSERT_TRUE(ascend_pod.ok());
  // (Quantities come back as strings or, from this simulated API server, numbers.)
  const Json& q = (*ascend_pod)["spec"]["containers"][0]["resources"]["limits"]
                               ["huawei.com/Ascend910B3-memory"];
  EXPECT_EQ(q.is_string() ? q.get<std::string>() : q.dump(), "16384");

  // Cambricon: the card, its share and the profile for Cambricon's plugin.
  std::string mlu = c.Annotation("default", "mlu-test", "hami.io/cambricon-mlu-devices-allocated");
  EXPECT_NE(mlu.find("mlu-node-cambricon-mlu-"), std::string::npos) << mlu;
  EXPECT_NE(mlu.find(",MLU,8000,50:;"), std::string::npos) << mlu;
  EXPECT_EQ(c.Annotation("default", "mlu-test", "CAMBRICON_DSMLU_ASSIGNED"), "false");
  EXPECT_NE(c.Annotation("default", "mlu-test", "CAMBRICON_DSMLU_PROFILE").find("_50_8000"),
            std::string::npos);

  EXPECT_EQ(c.Annotation("default", "dcu-test", "hami.io/dcu-devices-allocated"),
            "DCU-a,DCU,16000,80:;");
  EXPECT_NE(c.Annotation("default", "gpu-test", "hami.io/vgpu-devices-allocated"), "");

  // Both vendors on one pod: one annotation each, on the one node that has both.
  EXPECT_EQ(c.Annotation("default", "gpu-and-npu", "hami.io/vgpu-devices-allocated"),
            "GPU-x,NVIDIA,40000,0:;");
  EXPECT_EQ(c.Annotation("default", "gpu-and-npu", "hami.io/Ascend910B3-devices-allocated"),
            "NPU-x0,Ascend910B3,32768,0:;");
  EXPECT_EQ(c.Annotation("default", "gpu-and-npu", "huawei.com/Ascend910B3"),
            R"([{"UUID":"NPU-x0","temp":"vir10_3c_32g","memory":32768}])");
  EXPECT_TRUE(c.scheduler().CheckLedger().ok());
}

std::string NodeAnnotation(SimCluster& c, const std::string& node, const std::string& key) {
  Result<k8s::Object> n = k8s::GetNode(c.client(), node);
  if (!n.ok()) return "<no node>";
  const Json& annos = (*n)["metadata"]["annotations"];
  return annos.is_object() && annos.contains(key) ? annos[key].get<std::string>() : "";
}

// Node locks follow each vendor's plugin: Cambricon's plugin removes its own
// cambricon.com/dsmlu.lock after an allocation, so a second MLU pod waits for that; Moore
// Threads' plugin knows no lock, so its pods bind one after another without one (and never
// leave HAMi's lock behind for five minutes).
TEST(HeteroE2E, EachVendorsNodeLockIsTheOneItsPluginReleases) {
  SimClusterOptions o;
  o.device_config =
      device::ParseDeviceConfigYaml("nvidia: {}\ncambricon: {}\nmthreads: {}\n").value();
  SimCluster c(o);
  c.AddVendorNode("mlu-node", {},
                  {{"cambricon.com/vmlu", "200"},
                   {"cambricon.com/mlu.smlu.vcore", "200"},
                   {"cambricon.com/mlu.smlu.vmemory", "384"}},
                  "mlu-node-cambricon-mlu-1");
  c.AddVendorNode("mt-node", {},
                  {{"mthreads.com/vgpu", "200"},
                   {"mthreads.com/sgpu-core", "32"},
                   {"mthreads.com/sgpu-memory", "192"}},
                  "mt-node-mthreads-1");

  Json mlu = {{"cambricon.com/vmlu", "1"},
              {"cambricon.com/mlu.smlu.vmemory", "20"},
              {"cambricon.com/mlu.smlu.vcore", "10"}};
  ASSERT_TRUE(c.CreatePod("default", Pod("mlu-a", mlu)).ok());
  ASSERT_TRUE(SimCluster::WaitFor([&] { return c.BoundNode("default", "mlu-a") == "mlu-node"; }));
  std::string lock = NodeAnnotation(c, "mlu-node", "cambricon.com/dsmlu.lock");
  EXPECT_FALSE(lock.empty());
  EXPECT_EQ(NodeAnnotation(c, "mlu-node", "hami.io/mutex.lock"), "");

  // The second MLU pod waits while the first allocation's lock is there.
  ASSERT_TRUE(c.CreatePod("default", Pod("mlu-b", mlu)).ok());
  ASSERT_TRUE(SimCluster::WaitFor([&] {
    for (const k8s::Object& e : c.Events("default", "mlu-b")) {
      if (k8s::GetString(e, "/message").find("cambricon.com/dsmlu.lock") != std::string::npos) {
        return true;
      }
    }
    return false;
  }));
  EXPECT_EQ(c.BoundNode("default", "mlu-b"), "");
  // Cambricon's plugin finishes the first allocation and removes its lock: the second binds.
  Json clear;
  clear["metadata"]["annotations"]["cambricon.com/dsmlu.lock"] = nullptr;
  ASSERT_TRUE(
      c.client().Patch(k8s::kNodes, "", "mlu-node", k8s::PatchType::kMerge, clear.dump()).ok());
  ASSERT_TRUE(SimCluster::WaitFor([&] { return c.BoundNode("default", "mlu-b") == "mlu-node"; }));
  EXPECT_FALSE(NodeAnnotation(c, "mlu-node", "cambricon.com/dsmlu.lock").empty());

  // Moore Threads: no lock, so three pods bind at once.
  Json mt = {{"mthreads.com/vgpu", "1"},
             {"mthreads.com/sgpu-memory", "16"},
             {"mthreads.com/sgpu-core", "4"}};
  for (const char* n : {"mt-a", "mt-b", "mt-c"})
    ASSERT_TRUE(c.CreatePod("default", Pod(n, mt)).ok());
  ASSERT_TRUE(SimCluster::WaitFor([&] {
    return c.BoundNode("default", "mt-a") == "mt-node" &&
           c.BoundNode("default", "mt-b") == "mt-node" &&
           c.BoundNode("default", "mt-c") == "mt-node";
  }));
  EXPECT_EQ(NodeAnnotation(c, "mt-node", "hami.io/mutex.lock"), "");
  EXPECT_NE(c.Annotation("default", "mt-c", "hami.io/mthreads-vgpu-devices-allocated"), "");
  EXPECT_TRUE(c.scheduler().CheckLedger().ok());
}

// Vendors whose plugins count in the node's capacity: Enflame vGCUs (the user's section: the
// webhook rounds a percentage up to the slices the node's plugin cuts a card into, and says why
// it refuses while no Enflame node has registered) and AWS Neuron (cores handed out by number,
// devices along the instance's ring).
TEST(HeteroE2E, EnflameSlicesAndNeuronCoresFromNodeCapacity) {
  SimClusterOptions o;
  Result<device::DeviceConfig> cfg = device::ParseDeviceConfigYaml(
      "nvidia: {}\n"
      "enflame:\n"
      "  resourceCountName: \"enflame.com/vgcu\"\n"
      "  resourceMemoryPercentageName: \"enflame.com/vgcu-percentage\"\n"
      "awsneuron: {}\n");
  ASSERT_TRUE(cfg.ok()) << cfg.status().ToString();
  o.device_config = *cfg;
  SimCluster c(o);
  Json gcu = {{"enflame.com/vgcu", "1"}, {"enflame.com/vgcu-percentage", "15"}};
  Result<k8s::Object> early = c.CreatePod("default", Pod("gcu-early", gcu));
  ASSERT_FALSE(early.ok());
  EXPECT_NE(early.status().message().find("no node reports enflame.com/shared-gcu"),
            std::string::npos)
      << early.status().ToString();

  // Two S60 cards cut into four slices each.
  c.AddVendorNode("gcu-node", {}, {{"enflame.com/gcu-count", "2"}, {"enflame.com/shared-gcu", "8"}},
                  "gcu-node-enflame-1");
  ASSERT_TRUE(c.CreatePod("default", Pod("gcu-test", gcu)).ok());
  ASSERT_TRUE(
      SimCluster::WaitFor([&] { return c.BoundNode("default", "gcu-test") == "gcu-node"; }));
  Result<k8s::Object> pod = k8s::GetPod(c.client(), "default", "gcu-test");
  ASSERT_TRUE(pod.ok());
  auto text = [](const Json& q) { return q.is_string() ? q.get<std::string>() : q.dump(); };
  const Json& limits = (*pod)["spec"]["containers"][0]["resources"]["limits"];
  EXPECT_EQ(text(limits["enflame.com/vgcu-percentage"]), "25");
  EXPECT_EQ(text(limits["enflame.com/shared-gcu"]), "1");
  std::string list = c.Annotation("default", "gcu-test", "hami.io/enflame-vgpu-devices-allocated");
  EXPECT_NE(list.find(",Enflame,25,0:;"), std::string::npos) << list;
  std::string idx = c.Annotation("default", "gcu-test", "enflame.com/gcu-assigned-id");
  EXPECT_TRUE(idx == "0" || idx == "1") << idx;
  EXPECT_EQ(list.substr(0, list.find(',')), "gcu-node-enflame-" + idx);
  EXPECT_EQ(c.Annotation("default", "gcu-test", "enflame.com/gcu-assigned"), "false");
  EXPECT_EQ(c.Annotation("default", "gcu-test", "hami.io/enflame-slices-per-card"), "4");

  // A trn1.32xlarge: sixteen devices of two cores.
  c.AddVendorNode("trn-node", {},
                  {{"aws.amazon.com/neuron", "16"}, {"aws.amazon.com/neuroncore", "32"}},
                  "trn-node-AWSNeuron-15", {{"node.kubernetes.io/instance-type", "trn1.32xlarge"}});
  ASSERT_TRUE(c.CreatePod("default", Pod("core", {{"aws.amazon.com/neuroncore", "1"}})).ok());
  ASSERT_TRUE(c.CreatePod("default", Pod("ring", {{"aws.amazon.com/neuron", "4"}})).ok());
  ASSERT_TRUE(SimCluster::WaitFor([&] {
    return c.BoundNode("default", "core") == "trn-node" &&
           c.BoundNode("default", "ring") == "trn-node";
  }));
  EXPECT_EQ(c.Annotation("default", "core", "NEURON_RESOURCE_TYPE"), "aws.amazon.com/neuroncore");
  std::string core_list = c.Annotation("default", "core", "hami.io/aws-neuron-devices-allocated");
  EXPECT_NE(core_list.find(",AWSNeuron,0,1:;"), std::string::npos) << core_list;
  int device = std::stoi(core_list.substr(core_list.rfind('-') + 1));
  EXPECT_EQ(c.Annotation("default", "core", "AWS_NEURON_IDS"), std::to_string(2 * device));
  std::string ring = c.Annotation("default", "ring", "AWS_NEURON_IDS");
  int first = std::stoi(ring);
  EXPECT_EQ(first % 4, 0) << ring;
  EXPECT_EQ(ring, std::to_string(first) + "," + std::to_string(first + 1) + "," +
                      std::to_string(first + 2) + "," + std::to_string(first + 3));
  EXPECT_TRUE(c.scheduler().CheckLedger().ok());
}

// The kustomize overlay (and the chart with every devices.<vendor>.enabled) turns every vendor
// module on: its device-config.yaml loads without a warning and the registry holds each vendor.
TEST(HeteroE2E, TheHeterogeneousOverlaysDeviceConfigSchedulesEveryVendor) {
  std::ifstream in(std::string(HAMI_SOURCE_DIR) +
                   "/deploy/kustomize/overlays/heterogeneous/device-config.yaml");
  ASSERT_TRUE(in.good());
  std::stringstream text;
  text << in.rdbuf();
  const std::string yaml = text.str();
  ASSERT_NE(yaml.find("nvidia:"), std::string::npos) << yaml;
  Result<device::DeviceConfig> cfg = device::ParseDeviceConfigYaml(yaml);
  ASSERT_TRUE(cfg.ok()) << cfg.status().ToString();
  EXPECT_TRUE(cfg->warnings.empty()) << cfg->warnings.front();
  const device::VendorRegistry::Options flags{.enable_ascend = true, .enable_iluvatar = true};
  Result<device::VendorRegistry> reg = device::VendorRegistry::FromConfig(*cfg, flags);
  ASSERT_TRUE(reg.ok()) << reg.status().ToString();
  for (const char* key : {"NVIDIA", "AMD", "AWSNeuron", "Ascend910B3", "Ascend310P", "BI-V150",
                          "Biren", "DCU", "Enflame", "GCU", "MLU", "Metax-GPU", "Metax-SGPU",
                          "Mthreads", "Vastai", "XPU", "kunlun"}) {
    EXPECT_NE(reg->Find(key), nullptr) << key;
  }
  std::vector<std::string> left = device::UnscheduledVendorSections(*cfg, flags);
  ASSERT_EQ(left.size(), 1u);
  EXPECT_NE(left[0].find("enflame: DRS-shared GCUs"), std::string::npos) << left[0];
}

}  // namespace
}  // namespace hami::e2e

namespace hami::e2e {
namespace {

// The user's document 001 spells GPU types "NVIDIA-GeForce-RTX-4090" and "NVIDIA-H20,NVIDIA-H200"
// while cards register "NVIDIA GeForce RTX 4090": the pod lands on the card it names, and a list
// no card matches says so in the pod's event.
TEST(HeteroE2E, TypeNamesAsTheUserWritesThemAndAnEventWhenNoCardMatches) {
  SimCluster c;
  c.AddNode("rtx-node", {scheduler::testing::Gpu("GPU-4090", 0, 24564,
                                                 "NVIDIA-NVIDIA GeForce RTX 4090")});
  c.AddNode("h200-node", {scheduler::testing::Gpu("GPU-H200", 0, 143771, "NVIDIA-NVIDIA H200")});
  auto typed = [](const std::string& name, const std::string& key, const std::string& types) {
    Json pod = Pod(name, {{"nvidia.com/gpu", "1"}, {"nvidia.com/gpumem", "4096"}});
    pod["metadata"]["annotations"][key] = types;
    return pod;
  };
  ASSERT_TRUE(
      c.CreatePod("default", typed("rtx", "nvidia.com/use-gputype", "NVIDIA-GeForce-RTX-4090"))
          .ok());
  ASSERT_TRUE(
      c.CreatePod("default", typed("hopper", "nvidia.com/use-gputype", "NVIDIA-H20,NVIDIA-H200"))
          .ok());
  ASSERT_TRUE(
      c.CreatePod("default", typed("not-rtx", "nvidia.com/nouse-gputype", "nvidia_geforce_rtx"))
          .ok());
  ASSERT_TRUE(c.CreatePod("default", typed("a100", "nvidia.com/use-gputype", "NVIDIA-A100")).ok());
  ASSERT_TRUE(SimCluster::WaitFor([&] {
    return !c.BoundNode("default", "rtx").empty() && !c.BoundNode("default", "hopper").empty() &&
           !c.BoundNode("default", "not-rtx").empty();
  }));
  EXPECT_EQ(c.BoundNode("default", "rtx"), "rtx-node");
  EXPECT_EQ(c.BoundNode("default", "hopper"), "h200-node");
  EXPECT_EQ(c.BoundNode("default", "not-rtx"), "h200-node");
  std::string said;
  EXPECT_TRUE(SimCluster::WaitFor([&] {
    for (const k8s::Object& e : c.Events("default", "a100")) {
      if (k8s::GetString(e, "/reason") == "FilteringFailed") said = k8s::GetString(e, "/message");
    }
    return !said.empty();
  }));
  EXPECT_NE(said.find("2 nodes 1/1 CardTypeMismatch (h200-node, rtx-node)"), std::string::npos)
      << said;
  EXPECT_NE(said.find("no GPU on these nodes has a type matching "
                      "nvidia.com/use-gputype=\"NVIDIA-A100\""),
            std::string::npos)
      << said;
  EXPECT_EQ(c.BoundNode("default", "a100"), "");
}

}  // namespace
}  // namespace hami::e2e
