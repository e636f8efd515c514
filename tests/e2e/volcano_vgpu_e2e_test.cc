// Volcano's own scheduler places vGPU pods on simulated nodes whose hami-device-plugin speaks
// Volcano's vGPU protocol (--volcano=vgpu, VOLCANO_MODE): the real control plane (tools/kube)
// with vc-controller-manager and vc-scheduler beside it (tools/volcano), the `deviceshare`
// configuration of the user's document 004 (VGPUEnable, binpack, `predicates` in the tiers), and
// per node a hami-sim-kubelet and a hami-device-plugin on simulated GPUs. The document's vGPU
// Job runs as written (its image's command replaced by one that prints what the container's CUDA
// sees); GPU type selection, an unhealthy GPU and Volcano's node lock are checked on the same
// cluster.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <string>

#include "device/pod_devices.h"
#include "device/volcano_vgpu.h"
#include "k8s/object.h"
#include "k8s/typed.h"
#include "sim/world/manifests.h"
#include "sim/world/volcano_examples.h"
#include "sim/world/waits.h"
#include "sim/world/world.h"
#include "tests/e2e/volcano_e2e.h"
#include "tests/kube_bin.h"

namespace hami::e2e {
namespace {

using Json = nlohmann::json;
using sim::PodPhase;
using sim::World;
using sim::WorldOptions;
using volcano::GpuConfig;
using volcano::Uuid;

const k8s::Resource kJobs{"batch.volcano.sh/v1alpha1", "jobs", true};

bool Terminal(const k8s::Object& p) {
  return PodPhase(p) == "Succeeded" || PodPhase(p) == "Failed";
}

// A pod of schedulerName volcano asking for one vGPU of `memory` MiB.
std::string PodYaml(const std::string& name, int memory, const std::string& annotations = "") {
  return "apiVersion: v1\nkind: Pod\nmetadata:\n  name: " + name + "\n" +
         (annotations.empty() ? "" : "  annotations:\n" + annotations) +
         "spec:\n  schedulerName: volcano\n  restartPolicy: Never\n  containers:\n"
         "  - name: main\n    image: nvidia/cuda\n    command: [\"" HAMI_BUILD_DIR
         "/bin/hamictl\", \"smi\", \"--json\"]\n    resources:\n      limits:\n"
         "        volcano.sh/vgpu-number: 1\n        volcano.sh/vgpu-memory: " +
         std::to_string(memory) + "\n";
}

class VolcanoVgpuE2E : public volcano::VolcanoSuite {
 protected:
  static void SetUpTestSuite() {
    std::vector<sim::WorldNode> nodes(2);
    nodes[0].name = "vc-t4";
    nodes[0].gpu_config = GpuConfig("Tesla T4", "16Gi", 2, 'b');
    nodes[0].volcano = "vgpu";
    nodes[1].name = "vc-a100";
    nodes[1].gpu_config = GpuConfig("NVIDIA A100-PCIE-40GB", "40Gi", 1, 'a');
    nodes[1].volcano = "vgpu";
    StartWorld(std::move(nodes), sim::volcano_examples::kVgpuSchedulerConf);
  }
  void TearDown() override {
    DumpLogsOnFailure({"vc-t4-plugin", "vc-a100-plugin", "vc-t4-kubelet"});
  }

  static std::string Annotation(const k8s::Object& o, std::string_view key) {
    return k8s::GetAnnotation(o, key);
  }
  // Runs `yaml` (one pod) to its end: the pod then.
  static k8s::Object Run(const std::string& yaml, const std::string& name) {
    EXPECT_TRUE(world_->Apply(yaml, "default").ok()) << name;
    Result<k8s::Object> p =
        world_->WaitForPod("default", name, Terminal, std::chrono::seconds(120));
    EXPECT_TRUE(p.ok()) << p.status().ToString();
    return p.ok() ? *p : k8s::Object();
  }
  static Json Smi(const std::string& pod, const std::string& container) {
    return volcano::Smi(*world_, pod, container);
  }
};

// Both nodes published Volcano's registration and the handshake an old scheduler needs, and the
// kubelet reports Volcano's three resources.
TEST_F(VolcanoVgpuE2E, NodesRegisterForVolcano) {
  Result<k8s::Object> node = world_->WaitForNode(
      "vc-t4",
      [](const k8s::Object& n) {
        return !k8s::GetString(n, "/status/allocatable/volcano.sh~1vgpu-memory").empty();
      },
      std::chrono::seconds(60));
  ASSERT_TRUE(node.ok()) << node.status().ToString();
  EXPECT_EQ(k8s::GetString(*node, "/status/allocatable/volcano.sh~1vgpu-number"), "20");
  EXPECT_EQ(k8s::GetString(*node, "/status/allocatable/volcano.sh~1vgpu-memory"), "32768");
  EXPECT_EQ(k8s::GetString(*node, "/status/allocatable/volcano.sh~1vgpu-cores"), "200");
  EXPECT_EQ(Annotation(*node, device::kVolcanoNodeRegisterAnnotation),
            Uuid('b', 0) + ",10,16384,NVIDIA-Tesla T4,true,hami-core:" + Uuid('b', 1) +
                ",10,16384,NVIDIA-Tesla T4,true,hami-core:");
  // vc-scheduler has seen the node: it stamped the handshake, or the plugin answered it again.
  std::string handshake = Annotation(*node, device::kVolcanoNodeHandshakeAnnotation);
  EXPECT_TRUE(handshake.rfind("Reported ", 0) == 0 || handshake.rfind("Requesting_", 0) == 0)
      << handshake;
}

// Document 004's vGPU Job: its trainer gets one vGPU of 4096 MiB, and its CUDA sees exactly that.
TEST_F(VolcanoVgpuE2E, TheDocumentsVgpuJobGetsItsMemoryAndIsHeldToIt) {
  ASSERT_TRUE(Client().Create(volcano::kQueues, "", volcano::TrainingQueue()).ok());
  // Its training image is not here: the trainer prints the devices its CUDA sees and exits.
  Result<k8s::Object> job = sim::YamlToJson(sim::volcano_examples::VgpuJob(
      "[\"" HAMI_BUILD_DIR "/bin/hamictl\", \"smi\", \"--json\"]"));
  ASSERT_TRUE(job.ok()) << job.status().ToString();
  ASSERT_TRUE(Client().Create(kJobs, "default", *job).ok());
  const std::string pod = "vgpu-training-trainer-0";
  Result<k8s::Object> p = world_->WaitForPod("default", pod, Terminal, std::chrono::seconds(120));
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_EQ(PodPhase(*p), "Succeeded");
  const std::string node = k8s::GetString(*p, "/spec/nodeName");
  EXPECT_EQ(Annotation(*p, device::kVolcanoVgpuNodeAnnotation), node);
  EXPECT_EQ(Annotation(*p, device::kVolcanoBindPhaseAnnotation), "success");
  EXPECT_EQ(Annotation(*p, device::kVolcanoDevicesToAllocateAnnotation), "");
  Result<device::PodSingleDevice> ids =
      device::DecodeVolcanoPodDevices(Annotation(*p, device::kVolcanoVgpuIdsAnnotation));
  ASSERT_TRUE(ids.ok() && ids->size() == 1 && (*ids)[0].size() == 1)
      << Annotation(*p, device::kVolcanoVgpuIdsAnnotation);
  EXPECT_EQ((*ids)[0][0].mem_mib, 4096);
  Json smi = Smi(pod, "trainer");
  ASSERT_EQ(smi["devices"].size(), 1u) << smi.dump();
  EXPECT_EQ(smi["devices"][0].value("uuid", ""), (*ids)[0][0].uuid);
  EXPECT_EQ(smi["devices"][0].value("memory_total_mib", 0), 4096);
  // The plugin released Volcano's node lock once the pod was served.
  k8s::Object n = k8s::GetNode(Client(), node).value();
  EXPECT_EQ(Annotation(n, device::kVolcanoNodeLockAnnotation), "");
}

// nvidia.com/use-gputype picks the model (a substring of the registered type).
TEST_F(VolcanoVgpuE2E, UseGputypeSelectsTheModel) {
  k8s::Object a100 = Run(PodYaml("want-a100", 2048, "    nvidia.com/use-gputype: A100\n"),
                         "want-a100");
  EXPECT_EQ(k8s::GetString(a100, "/spec/nodeName"), "vc-a100");
  EXPECT_EQ(Smi("want-a100", "main")["devices"][0].value("memory_total_mib", 0), 2048);
  k8s::Object t4 = Run(PodYaml("want-t4", 1024, "    nvidia.com/use-gputype: T4\n"), "want-t4");
  EXPECT_EQ(k8s::GetString(t4, "/spec/nodeName"), "vc-t4");
  // nouse-gputype with two entries (Volcano v1.10 ignores a single entry, see the README).
  k8s::Object not_a100 = Run(PodYaml("not-a100", 1024, "    nvidia.com/nouse-gputype: A100,V100\n"),
                             "not-a100");
  EXPECT_EQ(k8s::GetString(not_a100, "/spec/nodeName"), "vc-t4");
}

// A GPU that turns unhealthy leaves the registration, so Volcano's scheduler (which ignores the
// registration's health field) no longer places pods on it.
TEST_F(VolcanoVgpuE2E, AnUnhealthyGpuIsSkipped) {
  ASSERT_TRUE(world_->InjectXid("vc-t4", 0, 79).ok());
  Result<k8s::Object> node = world_->WaitForNode(
      "vc-t4",
      [](const k8s::Object& n) {
        return k8s::GetAnnotation(n, device::kVolcanoNodeRegisterAnnotation).find(
                   Uuid('b', 0)) == std::string::npos;
      },
      std::chrono::seconds(60));
  ASSERT_TRUE(node.ok()) << node.status().ToString();
  for (const char* name : {"healthy-1", "healthy-2"}) {
    k8s::Object p = Run(PodYaml(name, 1024, "    nvidia.com/use-gputype: T4\n"), name);
    EXPECT_EQ(PodPhase(p), "Succeeded") << name;
    EXPECT_EQ(Smi(name, "main")["devices"][0].value("uuid", ""), Uuid('b', 1)) << name;
  }
}

}  // namespace
}  // namespace hami::e2e
