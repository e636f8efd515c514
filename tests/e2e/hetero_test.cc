// A heterogeneous cluster through the real HTTP path (webhook, kube-scheduler stand-in, extender
// filter and bind): an NVIDIA node and a Hygon DCU node registered as their device plugins
// register them, the user's example pods (seed 001, section 6.1), each landing on its vendor's
// node and cards with its vendor's annotations.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "device/config.h"
#include "device/node_registration.h"
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

  // The DCU plugin goes away: allocatable hygon.com/dcunum drops to 0.
  Result<k8s::Object> node = k8s::GetNode(c.client(), "mixed");
  ASSERT_TRUE(node.ok());
  (*node)["status"]["allocatable"]["hygon.com/dcunum"] = "0";
  ASSERT_TRUE(c.client().Update(k8s::kNodes, "", *node, "status").ok());
  ASSERT_TRUE(SimCluster::WaitFor([&] {
    std::string dump = c.scheduler().LedgerDump();
    return dump.find("dev DCU-m0") == std::string::npos;
  })) << c.scheduler().LedgerDump();
  EXPECT_NE(c.scheduler().LedgerDump().find("dev GPU-m0"), std::string::npos)
      << "the node's NVIDIA devices left with the DCU plugin";
}

}  // namespace
}  // namespace hami::e2e
