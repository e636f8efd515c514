// Dynamic MIG under Volcano, end to end on the simulated world: a node in operating mode mig
// whose hami-device-plugin serves Volcano's vGPU protocol (--volcano=vgpu), with Volcano's
// shipped knownMigGeometries for the A100-80GB. Volcano's scheduler assigns MIG slots only from
// v1.12 on, and the release the tests can build (tools/volcano/versions.env) is v1.10, so the
// pods here are created as a v1.12+ scheduler leaves them at bind (golden annotations from
// ../shared/reference/volcano-deviceshare.md 4.8 and 4.11): bound to the node, their device
// record naming slots `GPU-<uuid>[<group>-<position>]`. What runs is the real kubelet-facing
// path: the simulated kubelet asks the plugin, the plugin makes the MIG devices on the simulated
// driver, the container's CUDA sees them.
#include <gtest/gtest.h>

#include <string>

#include "device/volcano_vgpu.h"
#include "tests/e2e/mig_e2e_util.h"

namespace hami::e2e {
namespace {

constexpr const char* kGpu = "GPU-0000000e-0000-4000-8000-000000000000";

// gpuMemoryFactor 16: an A100-80GB's memory in units of 16 MiB fits kubelet's device list.
constexpr const char* kDeviceConfig = R"(nvidia:
  gpuMemoryFactor: 16
  knownMigGeometries:
  - models: ["A100-SXM4-80GB", "A100-80GB-PCIe", "A100-PCIE-80GB"]
    allowedGeometries:
    - group: group1
      geometries:
      - {name: 1g.10gb, memory: 9728, count: 7}
    - group: group2
      geometries:
      - {name: 2g.20gb, memory: 19968, count: 3}
      - {name: 1g.10gb, memory: 9728, count: 1}
    - group: group3
      geometries:
      - {name: 3g.40gb, memory: 40192, count: 2}
)";

// A pod as Volcano's scheduler (v1.12+) leaves it at bind: one container with the slot `slot`
// ("group2-3") of kGpu for `mem` units of 16 MiB, running `command`.
std::string VolcanoMigPod(const std::string& name, const std::string& slot, int mem,
                          const std::string& command) {
  const std::string device =
      std::string(kGpu) + "[" + slot + "],NVIDIA," + std::to_string(mem) + ",0:";
  return "apiVersion: v1\nkind: Pod\nmetadata:\n  name: " + name +
         "\n  annotations:\n    volcano.sh/vgpu-mode: mig\n    volcano.sh/vgpu-node: " + kNode +
         "\n    volcano.sh/vgpu-time: \"1700000000\"\n    volcano.sh/vgpu-ids-new: \"" + device +
         "\"\n    volcano.sh/devices-to-allocate: \"" + device +
         "\"\n    volcano.sh/bind-phase: allocating\nspec:\n  nodeName: " + kNode +
         "\n  schedulerName: volcano\n  restartPolicy: Never\n  containers:\n  - name: main\n"
         "    image: nvidia/cuda\n    command: " + command +
         "\n    resources:\n      limits:\n        volcano.sh/vgpu-number: 1\n"
         "        volcano.sh/vgpu-memory: " + std::to_string(mem) + "\n";
}

TEST(VolcanoMigE2E, SlotsBecomeMigDevicesAtTheGroupsLayout) {
  WorldOptions o = MigNode(1);
  o.nodes[0].volcano = "vgpu";
  o.node_config_json = std::string(R"({"nodeconfig":[{"name":")") + kNode +
                       R"(","operatingmode":"mig"}]})";
  o.device_config_yaml = kDeviceConfig;
  o.register_interval = "2s";
  Result<std::unique_ptr<World>> started = World::Start(o);
  ASSERT_TRUE(started.ok()) << started.status().ToString();
  World& w = **started;

  // The node tells Volcano it is a MIG node: mode "mig", as many slots as the A100 has 1g ones.
  Result<std::vector<device::DeviceInfo>> reg = device::DecodeVolcanoNodeDevices(
      Annotation(k8s::GetNode(w.client(), kNode).value(), "volcano.sh/node-vgpu-register"));
  ASSERT_TRUE(reg.ok() && reg->size() == 1) << reg.status().ToString();
  EXPECT_EQ((*reg)[0].id, kGpu);
  EXPECT_EQ((*reg)[0].mode, "mig");
  EXPECT_EQ((*reg)[0].count, 7);
  EXPECT_EQ(device::VolcanoNodeMode(*reg), "mig");

  // group2: position 0 is a 2g.20gb slot, position 3 its 1g.10gb slot. The first pod holds its
  // device while the second runs beside it.
  ASSERT_TRUE(w.Apply(VolcanoMigPod("held", "group2-0", 1200, kHold), "default").ok());
  Result<k8s::Object> held = w.WaitForPod("default", "held", Running);
  ASSERT_TRUE(held.ok()) << held.status().ToString();
  ASSERT_TRUE(w.Apply(VolcanoMigPod("small", "group2-3", 560, kInfo), "default").ok());
  Result<k8s::Object> small = w.WaitForPod("default", "small", Terminal);
  ASSERT_TRUE(small.ok()) << small.status().ToString();
  EXPECT_EQ(PodPhase(*small), "Succeeded");
  EXPECT_EQ(SeenTotal(w, "small"), uint64_t(9728) * kMiB);

  held = k8s::GetPod(w.client(), "default", "held");
  ASSERT_TRUE(held.ok());
  device::MigAllocation big = Realised(*held);
  device::MigAllocation one = Realised(*small);
  EXPECT_EQ(big.profile, "2g.20gb");
  EXPECT_EQ(big.placement, (device::MigPlacement{0, 2}));
  EXPECT_EQ(one.profile, "1g.10gb");
  EXPECT_EQ(one.placement, (device::MigPlacement{6, 1}));
  ASSERT_TRUE(big.runtime && one.runtime);
  EXPECT_NE(big.runtime->mig_uuid, one.runtime->mig_uuid);
  for (const k8s::Object* p : {&*held, &*small}) {
    EXPECT_EQ(Annotation(*p, "volcano.sh/bind-phase"), "success");
    EXPECT_EQ(Annotation(*p, "volcano.sh/devices-to-allocate"), "");
  }
  Result<std::string> listed = w.SimCtl(kNode, {"mig"});
  ASSERT_TRUE(listed.ok());
  EXPECT_NE(listed->find(big.runtime->mig_uuid), std::string::npos) << *listed;

  // The held pod goes: its MIG device is destroyed; the next pod of its slot gets the same
  // place.
  ASSERT_TRUE(w.client().Delete(k8s::kPods, "default", "held").ok());
  EXPECT_TRUE(Destroyed(w, big.runtime->mig_uuid));
  ASSERT_TRUE(w.Apply(VolcanoMigPod("again", "group2-0", 1200, kInfo), "default").ok());
  Result<k8s::Object> again = w.WaitForPod("default", "again", Terminal);
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_EQ(PodPhase(*again), "Succeeded");
  EXPECT_EQ(Realised(*again).placement, big.placement);
  EXPECT_EQ(SeenTotal(w, "again"), uint64_t(19968) * kMiB);

  // A slot the node's geometries do not have: the pod fails with the plugin's reason.
  ASSERT_TRUE(w.Apply(VolcanoMigPod("stray", "group7-0", 10, kInfo), "default").ok());
  EXPECT_NE(EventSaying(w, "stray", "group \"group7\" is not one of"), "");
}

}  // namespace
}  // namespace hami::e2e
