// Document 004's multi-GPU training Jobs under Volcano's own scheduler: the real control plane
// (tools/kube) with vc-controller-manager and vc-scheduler (tools/volcano), and two simulated
// nodes of four A100s each whose hami-device-plugin runs with --volcano=whole: the GPUs offered
// whole as nvidia.com/gpu, which Volcano's predicates count like any extended resource, and
// which kubelet picks. The single-node 4-GPU Job and the 4 x 2-GPU distributed Job (gang of 4,
// Volcano's ssh, svc and env plugins) run as written but for their images' command, which prints
// what each container's CUDA sees, and `restartPolicy: Never` (a pod template's default, Always,
// would restart the finished trainer forever); the tests run in order (the second needs the
// first's GPUs).
#include <gtest/gtest.h>

#include <chrono>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "k8s/object.h"
#include "k8s/typed.h"
#include "sim/world/manifests.h"
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

constexpr int kGpusPerNode = 4;
constexpr int kA100MiB = 81920;

// Document 004's binpack tier ("DeviceShare + Binpack": nvidia.com/gpu weighted highest); no
// deviceshare mode is needed for nvidia.com/gpu. Integers unquoted, as Volcano v1.10 reads them.
constexpr const char* kSchedulerConf = R"(actions: "enqueue, allocate, backfill"
tiers:
- plugins:
  - name: priority
  - name: gang
  - name: conformance
- plugins:
  - name: predicates
  - name: proportion
  - name: nodeorder
  - name: binpack
    arguments:
      binpack.weight: 5
      binpack.resources: nvidia.com/gpu
      binpack.resources.nvidia.com/gpu: 10
)";

#define HAMI_SMI_COMMAND "[\"" HAMI_BUILD_DIR "/bin/hamictl\", \"smi\", \"--json\"]"
// The same, then staying up: a worker that finished early would give its GPUs back to kubelet
// before the others are admitted.
#define HAMI_SMI_HOLD_COMMAND \
  "[\"/bin/sh\", \"-c\", \"" HAMI_BUILD_DIR "/bin/hamictl smi --json; sleep 600\"]"

// Document 004's single-node multi-GPU Job, its command replaced.
constexpr const char* kFourGpuJob = R"(apiVersion: batch.volcano.sh/v1alpha1
kind: Job
metadata:
  name: multi-gpu-training
spec:
  schedulerName: volcano
  minAvailable: 1
  queue: training
  tasks:
    - replicas: 1
      name: trainer
      template:
        spec:
          restartPolicy: Never
          containers:
            - name: trainer
              image: training:latest
              command: )" HAMI_SMI_COMMAND R"(
              resources:
                requests:
                  cpu: "16"
                  memory: "64Gi"
                  nvidia.com/gpu: "4"
                limits:
                  nvidia.com/gpu: "4"
)";

// Document 004's multi-node multi-GPU Job, its command replaced.
constexpr const char* kDistributedJob = R"(apiVersion: batch.volcano.sh/v1alpha1
kind: Job
metadata:
  name: distributed-gpu-training
spec:
  schedulerName: volcano
  minAvailable: 4
  queue: training
  plugins:
    ssh: []
    svc: []
    env: []
  tasks:
    - replicas: 4
      name: worker
      template:
        spec:
          restartPolicy: Never
          containers:
            - name: worker
              image: training:latest
              command: )" HAMI_SMI_HOLD_COMMAND R"(
              resources:
                requests:
                  cpu: "8"
                  memory: "32Gi"
                  nvidia.com/gpu: "2"
                limits:
                  nvidia.com/gpu: "2"
)";

bool Terminal(const k8s::Object& p) {
  return PodPhase(p) == "Succeeded" || PodPhase(p) == "Failed";
}

// The node each simulated GPU UUID belongs to.
std::string NodeOf(const std::string& uuid) {
  for (int i = 0; i < kGpusPerNode; ++i) {
    if (uuid == Uuid('e', i)) return "vc-train-a";
    if (uuid == Uuid('f', i)) return "vc-train-b";
  }
  return "";
}

class VolcanoWholeE2E : public volcano::VolcanoSuite {
 protected:
  static void SetUpTestSuite() {
    std::vector<sim::WorldNode> nodes(2);
    nodes[0].name = "vc-train-a";
    nodes[0].gpu_config = GpuConfig("NVIDIA A100-SXM4-80GB", "80Gi", kGpusPerNode, 'e');
    nodes[0].volcano = "whole";
    nodes[1].name = "vc-train-b";
    nodes[1].gpu_config = GpuConfig("NVIDIA A100-SXM4-80GB", "80Gi", kGpusPerNode, 'f');
    nodes[1].volcano = "whole";
    StartWorld(std::move(nodes), kSchedulerConf);
  }
  void TearDown() override {
    DumpLogsOnFailure({"vc-train-a-plugin", "vc-train-b-plugin", "vc-train-a-kubelet"});
  }

  // Creates the Job of `yaml` and waits for each of its pods to have printed what it sees (and,
  // with `finishes`, to have succeeded); the UUIDs each pod's CUDA saw (an expectation fails for
  // a pod that did not get there).
  static std::map<std::string, std::vector<std::string>> RunJob(
      const char* yaml, const std::vector<std::string>& pods, const std::string& container,
      bool finishes) {
    std::map<std::string, std::vector<std::string>> seen;
    Result<k8s::Object> job = sim::YamlToJson(yaml);
    EXPECT_TRUE(job.ok()) << job.status().ToString();
    if (!job.ok()) return seen;
    Status made = Client().Create(kJobs, "default", *job).status();
    EXPECT_TRUE(made.ok()) << made.ToString();
    for (const std::string& pod : pods) {
      Result<k8s::Object> p = world_->WaitForPod(
          "default", pod,
          [finishes](const k8s::Object& o) {
            return finishes ? Terminal(o) : PodPhase(o) == "Running" || Terminal(o);
          },
          std::chrono::seconds(180));
      EXPECT_TRUE(p.ok()) << pod << ": " << p.status().ToString();
      if (!p.ok()) continue;
      EXPECT_EQ(PodPhase(*p), finishes ? "Succeeded" : "Running") << pod;
      if (!finishes) {
        Result<std::string> log =
            world_->WaitForLog("default", pod, container, "devices", std::chrono::seconds(60));
        EXPECT_TRUE(log.ok()) << pod << ": " << log.status().ToString();
      }
      Json smi = volcano::Smi(*world_, pod, container);
      for (const Json& d : smi.value("devices", Json::array())) {
        EXPECT_EQ(d.value("memory_total_mib", 0), kA100MiB) << pod << ": a whole GPU";
        seen[pod].push_back(d.value("uuid", ""));
      }
      EXPECT_EQ(NodeOf(seen[pod].empty() ? "" : seen[pod][0]),
                k8s::GetString(*p, "/spec/nodeName"))
          << pod;
    }
    return seen;
  }
};

// Each node offers its four GPUs as nvidia.com/gpu and carries no scheduler annotation.
TEST_F(VolcanoWholeE2E, NodesOfferWholeGpusAndNothingElse) {
  for (const char* name : {"vc-train-a", "vc-train-b"}) {
    Result<k8s::Object> node = world_->WaitForNode(
        name,
        [](const k8s::Object& n) {
          return k8s::GetString(n, "/status/allocatable/nvidia.com~1gpu") == "4";
        },
        std::chrono::seconds(60));
    ASSERT_TRUE(node.ok()) << node.status().ToString();
    for (const char* key : {"hami.io/node-nvidia-register", "volcano.sh/node-vgpu-register",
                            "volcano.sh/gpu-unhealthy-ids"}) {
      EXPECT_FALSE(k8s::HasAnnotation(*node, key)) << name << " " << key;
    }
    EXPECT_EQ(k8s::GetString(*node, "/status/capacity/volcano.sh~1gpu-number"), "") << name;
  }
}

// The 4-GPU Job: its trainer gets four different whole GPUs of one node.
TEST_F(VolcanoWholeE2E, TheDocumentsFourGpuJobGetsFourWholeGpusOfOneNode) {
  ASSERT_TRUE(Client().Create(volcano::kQueues, "", volcano::TrainingQueue()).ok());
  auto seen = RunJob(kFourGpuJob, {"multi-gpu-training-trainer-0"}, "trainer", true);
  const std::vector<std::string>& gpus = seen["multi-gpu-training-trainer-0"];
  EXPECT_EQ(gpus.size(), 4u);
  EXPECT_EQ(std::set<std::string>(gpus.begin(), gpus.end()).size(), 4u);
}

// The distributed Job: its four workers start together (gang of 4) with two whole GPUs each, which
// takes every GPU of both nodes, each GPU given once.
TEST_F(VolcanoWholeE2E, TheDocumentsDistributedJobGivesFourWorkersTwoGpusEach) {
  std::vector<std::string> pods;
  for (int i = 0; i < 4; ++i) {
    pods.push_back("distributed-gpu-training-worker-" + std::to_string(i));
  }
  auto seen = RunJob(kDistributedJob, pods, "worker", false);
  std::set<std::string> all;
  std::map<std::string, int> per_node;
  for (const std::string& pod : pods) {
    EXPECT_EQ(seen[pod].size(), 2u) << pod;
    for (const std::string& uuid : seen[pod]) {
      EXPECT_TRUE(all.insert(uuid).second) << uuid << " given twice";
      ++per_node[NodeOf(uuid)];
    }
  }
  EXPECT_EQ(all.size(), 8u);
  EXPECT_EQ(per_node["vc-train-a"], 4);
  EXPECT_EQ(per_node["vc-train-b"], 4);
}

}  // namespace
}  // namespace hami::e2e
