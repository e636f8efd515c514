// MIG end to end on the simulated world (src/sim/world): one node of two A100-80GB whose
// simulated driver speaks MIG, hami-device-plugin and hami-sim-kubelet over gRPC, the real
// scheduler binaries. Static MIG: instances an operator made, offered per profile (mixed). Dynamic
// MIG (operating mode mig): the scheduler reserves a profile and a placement, the plugin makes
// the instance at Allocate, the container sees exactly that instance, and a finished pod's
// instance is destroyed and its placement used again.
#include <gtest/gtest.h>

#include <string>
#include <tuple>
#include <vector>

#include "device/mig_allocation.h"
#include "device/node_registration.h"
#include "k8s/typed.h"
#include "sim/world/world.h"
#include "tests/e2e/mig_e2e_util.h"

namespace hami::e2e {
namespace {

TEST(NodeE2EMig, StaticMixedOffersTheInstancesAnOperatorMade) {
  WorldOptions o = MigNode();
  o.nodes[0].plugin_env = {"MIG_STRATEGY=mixed"};
  Result<std::unique_ptr<World>> started = World::Start(o);
  ASSERT_TRUE(started.ok()) << started.status().ToString();
  World& w = **started;
  // The operator cuts GPU 1 (nvidia-smi mig -cgi ... -C) and restarts the plugin, as NVIDIA's
  // MIG manager does.
  ASSERT_TRUE(w.StopPlugin(kNode).ok());
  for (auto args : {std::vector<std::string>{"mig-mode", "--device", "1", "--enable"},
                    {"mig-create", "--device", "1", "--profile", "1g.10gb"},
                    {"mig-create", "--device", "1", "--profile", "1g.10gb"},
                    {"mig-create", "--device", "1", "--profile", "3g.40gb"}}) {
    Result<std::string> r = w.SimCtl(kNode, args);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
  }
  ASSERT_TRUE(w.StartPlugin(kNode).ok());
  Result<k8s::Object> node = w.WaitForNode(kNode, [](const k8s::Object& n) {
    return k8s::GetString(n, "/status/allocatable/nvidia.com~1mig-1g.10gb") == "2" &&
           k8s::GetString(n, "/status/allocatable/nvidia.com~1mig-3g.40gb") == "1";
  });
  ASSERT_TRUE(node.ok()) << node.status().ToString();
  // GPU 0 is still shared as vGPUs; GPU 1 is not.
  Result<std::vector<device::DeviceInfo>> devs =
      device::DecodeNodeDevices(Annotation(*node, "hami.io/node-nvidia-register"));
  ASSERT_TRUE(devs.ok() && devs->size() == 1) << Annotation(*node, "hami.io/node-nvidia-register");

  for (auto [name, resource, mib] : {std::tuple{"small", "nvidia.com/mig-1g.10gb", 9728},
                                     std::tuple{"large", "nvidia.com/mig-3g.40gb", 40192}}) {
    ASSERT_TRUE(
        w.Apply(PodYaml(name, "        " + std::string(resource) + ": 1\n", kInfo), "default")
            .ok());
    Result<k8s::Object> p = w.WaitForPod("default", name, Terminal);
    ASSERT_TRUE(p.ok()) << p.status().ToString();
    EXPECT_EQ(PodPhase(*p), "Succeeded") << name;
    EXPECT_EQ(SeenTotal(w, name), uint64_t(mib) * kMiB) << name;
  }
}

TEST(NodeE2EMig, StaticSingleLetsHamiSchedulerPlacePodsOnInstances) {
  WorldOptions o = MigNode();
  o.nodes[0].plugin_env = {"MIG_STRATEGY=single"};
  Result<std::unique_ptr<World>> started = World::Start(o);
  ASSERT_TRUE(started.ok()) << started.status().ToString();
  World& w = **started;
  ASSERT_TRUE(w.StopPlugin(kNode).ok());
  for (const char* gpu : {"0", "1"}) {
    ASSERT_TRUE(w.SimCtl(kNode, {"mig-mode", "--device", gpu, "--enable"}).ok());
    for (int i = 0; i < 2; ++i) {
      Result<std::string> r =
          w.SimCtl(kNode, {"mig-create", "--device", gpu, "--profile", "3g.40gb"});
      ASSERT_TRUE(r.ok()) << r.status().ToString();
    }
  }
  ASSERT_TRUE(w.StartPlugin(kNode).ok());
  Result<k8s::Object> node = w.WaitForNode(kNode, [](const k8s::Object& n) {
    return k8s::GetString(n, "/status/allocatable/nvidia.com~1gpu") == "4";
  });
  ASSERT_TRUE(node.ok()) << node.status().ToString();
  Result<std::vector<device::DeviceInfo>> devs =
      device::DecodeNodeDevices(Annotation(*node, "hami.io/node-nvidia-register"));
  ASSERT_TRUE(devs.ok() && devs->size() == 4) << Annotation(*node, "hami.io/node-nvidia-register");
  EXPECT_EQ((*devs)[0].id.rfind("MIG-", 0), 0u);
  EXPECT_EQ((*devs)[0].devmem, 40192);
  ASSERT_TRUE(w.Apply(PodYaml("half", "        nvidia.com/gpu: 1\n        nvidia.com/gpumem: "
                                      "30000\n",
                              kInfo),
                      "default")
                  .ok());
  Result<k8s::Object> p = w.WaitForPod("default", "half", Terminal);
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_EQ(PodPhase(*p), "Succeeded");
  std::string allocated = Annotation(*p, "hami.io/vgpu-devices-allocated");
  EXPECT_EQ(allocated.rfind("MIG-", 0), 0u) << allocated;
  // The container's CUDA sees libvgpu's quota inside the instance.
  EXPECT_EQ(SeenTotal(w, "half"), uint64_t(30000) * kMiB);
}

TEST(NodeE2EMig, DynamicMigMakesReservedInstancesAndReclaimsThem) {
  WorldOptions o = MigNode();
  o.node_config_json = R"({"nodeconfig":[{"name":"node-m","operatingmode":"mig"}]})";
  o.nodes[0].gpu_config = o.nodes[0].gpu_config.substr(0, o.nodes[0].gpu_config.rfind("[device]"));
  Result<std::unique_ptr<World>> started = World::Start(o);
  ASSERT_TRUE(started.ok()) << started.status().ToString();
  World& w = **started;
  Result<std::vector<device::DeviceInfo>> devs = device::DecodeNodeDevices(Annotation(
      k8s::GetNode(w.client(), kNode).value(), "hami.io/node-nvidia-register"));
  ASSERT_TRUE(devs.ok() && devs->size() == 1);
  EXPECT_EQ((*devs)[0].mode, "mig");
  EXPECT_FALSE((*devs)[0].mig_profiles.empty());

  // Two small instances and a medium one fill the GPU's placements for 2-slice profiles.
  auto gpu = [](int mem) { return "        nvidia.com/gpu: 1\n        nvidia.com/gpumem: " +
                                  std::to_string(mem) + "\n"; };
  for (auto [name, mem] : {std::pair{"small-1", 9000}, std::pair{"small-2", 9000},
                           std::pair{"medium", 30000}}) {
    ASSERT_TRUE(w.Apply(PodYaml(name, gpu(mem), kHold), "default").ok()) << name;
    Result<k8s::Object> p = w.WaitForPod("default", name, Running);
    ASSERT_TRUE(p.ok()) << name << ": " << p.status().ToString();
  }
  ASSERT_TRUE(w.Apply(PodYaml("overflow", gpu(15000), kInfo), "default").ok());
  EXPECT_NE(EventSaying(w, "overflow", "CardMigTopologyInfeasible"), "");
  EXPECT_EQ(PodPhase(k8s::GetPod(w.client(), "default", "overflow").value()), "Pending");

  // Each container sees its own instance; the reservation carries the device made for it.
  k8s::Object small = k8s::GetPod(w.client(), "default", "small-1").value();
  device::MigAllocation s1 = Realised(small);
  ASSERT_TRUE(s1.runtime.has_value());
  EXPECT_EQ(s1.profile, "1g.10gb");
  EXPECT_EQ(s1.runtime->mig_uuid.rfind("MIG-", 0), 0u);
  Result<std::string> listed = w.SimCtl(kNode, {"mig"});
  ASSERT_TRUE(listed.ok());
  EXPECT_NE(listed->find(s1.runtime->mig_uuid), std::string::npos) << *listed;

  // The plugin restarts while the pods run: it finds every MIG device it made (its state file)
  // and destroys none of them.
  ASSERT_TRUE(w.StopPlugin(kNode).ok());
  ASSERT_TRUE(w.StartPlugin(kNode).ok());
  for (const char* name : {"small-1", "small-2", "medium"}) {
    device::MigAllocation m = Realised(k8s::GetPod(w.client(), "default", name).value());
    ASSERT_TRUE(m.runtime.has_value()) << name;
    Result<std::string> now = w.SimCtl(kNode, {"mig"});
    ASSERT_TRUE(now.ok());
    EXPECT_NE(now->find(m.runtime->mig_uuid), std::string::npos) << name << ": " << *now;
  }

  // small-1 is deleted: its instance is destroyed once its process exits, and the next pod of
  // that size takes its placement again.
  ASSERT_TRUE(w.client().Delete(k8s::kPods, "default", "small-1").ok());
  EXPECT_TRUE(Destroyed(w, s1.runtime->mig_uuid));
  ASSERT_TRUE(w.Apply(PodYaml("again", gpu(9000), kInfo), "default").ok());
  Result<k8s::Object> again = w.WaitForPod("default", "again", Terminal);
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_EQ(PodPhase(*again), "Succeeded");
  EXPECT_EQ(Realised(*again).placement, s1.placement);
  EXPECT_EQ(SeenTotal(w, "again"), uint64_t(9728) * kMiB);
}

}  // namespace
}  // namespace hami::e2e
