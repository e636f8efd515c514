// Volcano's GPU sharing and GPU number modes end to end: the real control plane (tools/kube) with
// vc-controller-manager and vc-scheduler beside it (tools/volcano), and two simulated nodes whose
// hami-device-plugin serves Volcano's older NVIDIA protocols: vc-share with --volcano=share and
// memory enforcement on, vc-number with --volcano=number. Volcano's scheduler takes one of the two
// modes at a time, so the tests run in order: the document 004 GPU-sharing Job under its
// configuration, then vc-scheduler is restarted with GPUNumberEnable for the GPU-number pod.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <set>
#include <string>

#include "device/volcano_gpushare.h"
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

// Document 004's GPU sharing configuration, but for its quoted "true" and "10": Volcano v1.10
// reads deviceshare's switches only as YAML booleans and integers (a string is ignored with a
// warning in its log, and the mode stays off).
constexpr const char* kSharingConf = R"(actions: "enqueue, allocate, backfill"
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
  - name: deviceshare
    arguments:
      deviceshare.GPUSharingEnable: true
      deviceshare.SchedulePolicy: "binpack"
      deviceshare.ScheduleWeight: 10
)";

// Document 004's GPU number configuration (its deviceshare entry in the same tiers).
constexpr const char* kNumberConf = R"(actions: "enqueue, allocate, backfill"
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
  - name: deviceshare
    arguments:
      deviceshare.GPUNumberEnable: true
)";

// A replica of document 004's GPU sharing Job: its task template (schedulerName volcano, 2 CPUs,
// 4Gi, volcano.sh/gpu-memory 4096) as a pod in queue training, its command replaced by one that
// prints what the container's CUDA sees and stays up so that the next replica shares the GPU.
// Volcano v1.10 adds its annotations with JSON Patch `add`, which needs an annotations map.
std::string SharingReplica(const std::string& name) {
  return R"(apiVersion: v1
kind: Pod
metadata:
  name: )" + name + R"(
  annotations:
    scheduling.volcano.sh/queue-name: training
spec:
  schedulerName: volcano
  restartPolicy: Never
  terminationGracePeriodSeconds: 0
  containers:
    - name: model
      image: inference:latest
      command: ["/bin/sh", "-c", ")" HAMI_BUILD_DIR R"(/bin/hamictl smi --json; sleep 600"]
      resources:
        requests:
          cpu: "2"
          memory: "4Gi"
          volcano.sh/gpu-memory: "4096"
        limits:
          cpu: "2"
          memory: "4Gi"
          volcano.sh/gpu-memory: "4096"
)";
}

// Document 004's GPU number pod (a command added, and the node it is meant for: Volcano's
// scheduler also counts vc-share's GPUs, whose plugin serves no volcano.sh/gpu-number).
constexpr const char* kNumberPod = R"(apiVersion: v1
kind: Pod
metadata:
  name: gpu-number-pod
  annotations:
    example: "document 004"
spec:
  schedulerName: volcano
  restartPolicy: Never
  nodeSelector:
    kubernetes.io/hostname: vc-number
  containers:
    - name: training
      image: training:latest
      command: [")" HAMI_BUILD_DIR R"(/bin/hamictl", "smi", "--json"]
      resources:
        requests:
          volcano.sh/gpu-number: "1"
        limits:
          volcano.sh/gpu-number: "1"
)";

bool Terminal(const k8s::Object& p) {
  return PodPhase(p) == "Succeeded" || PodPhase(p) == "Failed";
}

class VolcanoShareE2E : public volcano::VolcanoSuite {
 protected:
  static void SetUpTestSuite() {
    std::vector<sim::WorldNode> nodes(2);
    nodes[0].name = "vc-share";
    nodes[0].gpu_config = GpuConfig("Tesla V100-SXM2-16GB", "16Gi", 2, 'c');
    nodes[0].volcano = "share";
    nodes[0].plugin_env = {"VOLCANO_ENFORCE_MEMORY=true"};
    nodes[1].name = "vc-number";
    nodes[1].gpu_config = GpuConfig("Tesla T4", "16Gi", 2, 'd');
    nodes[1].volcano = "number";
    StartWorld(std::move(nodes), kSharingConf);
  }
  void TearDown() override {
    DumpLogsOnFailure({"vc-share-plugin", "vc-number-plugin", "vc-share-kubelet"});
  }

  static Json Smi(const std::string& pod, const std::string& container) {
    return volcano::Smi(*world_, pod, container);
  }
};

// What Volcano's scheduler reads of the nodes: the kubelet's resource, the quantity the plugin
// writes into the status, no unhealthy GPU.
TEST_F(VolcanoShareE2E, NodesOfferWhatVolcanosSchedulerReads) {
  Result<k8s::Object> share = world_->WaitForNode(
      "vc-share",
      [](const k8s::Object& n) {
        return k8s::GetString(n, "/status/allocatable/volcano.sh~1gpu-memory") == "32768" &&
               k8s::GetString(n, "/status/capacity/volcano.sh~1gpu-number") == "2";
      },
      std::chrono::seconds(60));
  ASSERT_TRUE(share.ok()) << share.status().ToString();
  EXPECT_FALSE(k8s::HasAnnotation(*share, device::kVolcanoGpuUnhealthyIdsAnnotation));
  Result<k8s::Object> number = world_->WaitForNode(
      "vc-number",
      [](const k8s::Object& n) {
        return k8s::GetString(n, "/status/allocatable/volcano.sh~1gpu-number") == "2" &&
               k8s::GetString(n, "/status/capacity/volcano.sh~1gpu-memory") == "0";
      },
      std::chrono::seconds(60));
  ASSERT_TRUE(number.ok()) << number.status().ToString();
}

// Document 004's GPU sharing example: two replicas of 4096 MiB share one GPU, and each
// container's CUDA sees 4096 MiB (libvgpu.so enforces it; Volcano's own plugin cannot). The
// replicas are placed one after the other: Volcano v1.10 binds the pods of one scheduling cycle
// in no fixed order, so two same-sized pods bound to one node together can reach the kubelet in
// the opposite order of their predicate-time, and neither a node agent nor its node lock can tell
// them apart (see the README).
TEST_F(VolcanoShareE2E, TheDocumentsSharingReplicasShareOneGpuAndAreHeldToIt) {
  ASSERT_TRUE(Client().Create(volcano::kQueues, "", volcano::TrainingQueue()).ok());
  std::set<std::string> gpus;
  for (const char* pod : {"inference-0", "inference-1"}) {
    ASSERT_TRUE(world_->Apply(SharingReplica(pod), "default").ok()) << pod;
    Result<k8s::Object> started = world_->WaitForPod(
        "default", pod, [](const k8s::Object& o) { return PodPhase(o) != "Pending"; },
        std::chrono::seconds(120));
    ASSERT_TRUE(started.ok()) << started.status().ToString();
    ASSERT_EQ(PodPhase(*started), "Running") << pod;
    Result<std::string> log =
        world_->WaitForLog("default", pod, "model", "devices", std::chrono::seconds(120));
    ASSERT_TRUE(log.ok()) << pod << ": " << log.status().ToString();
    k8s::Object p = k8s::GetPod(Client(), "default", pod).value();
    EXPECT_EQ(k8s::GetString(p, "/spec/nodeName"), "vc-share") << pod;
    EXPECT_EQ(k8s::GetAnnotation(p, device::kVolcanoGpuAssignedAnnotation), "true") << pod;
    const std::string index = k8s::GetAnnotation(p, device::kVolcanoGpuIndexAnnotation);
    ASSERT_FALSE(index.empty()) << pod;
    Json smi = Json::parse(*log, nullptr, false);
    ASSERT_TRUE(smi.is_object() && smi["devices"].size() == 1u) << *log;
    EXPECT_EQ(smi["devices"][0].value("memory_total_mib", 0), 4096) << pod;
    EXPECT_EQ(smi["devices"][0].value("uuid", ""), Uuid('c', std::stoi(index))) << pod;
    gpus.insert(index);
  }
  EXPECT_EQ(gpus.size(), 1u) << "the two replicas should share one GPU";
  for (const char* pod : {"inference-0", "inference-1"}) {
    k8s::DeleteOptions now;
    now.grace_period_seconds = 0;
    EXPECT_TRUE(Client().Delete(k8s::kPods, "default", pod, now).ok()) << pod;
  }
}

// Document 004's GPU number pod, with vc-scheduler restarted under GPUNumberEnable: one whole GPU.
TEST_F(VolcanoShareE2E, TheDocumentsGpuNumberPodGetsAWholeGpu) {
  ASSERT_TRUE(world_->real_control_plane()->StartVolcano(volcano_bin_, kNumberConf).ok());
  ASSERT_TRUE(world_->Apply(kNumberPod, "default").ok());
  Result<k8s::Object> p =
      world_->WaitForPod("default", "gpu-number-pod", Terminal, std::chrono::seconds(120));
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_EQ(PodPhase(*p), "Succeeded");
  EXPECT_EQ(k8s::GetAnnotation(*p, device::kVolcanoGpuAssignedAnnotation), "true");
  const std::string index = k8s::GetAnnotation(*p, device::kVolcanoGpuIndexAnnotation);
  ASSERT_FALSE(index.empty());
  Json smi = Smi("gpu-number-pod", "training");
  ASSERT_EQ(smi["devices"].size(), 1u) << smi.dump();
  EXPECT_EQ(smi["devices"][0].value("uuid", ""), Uuid('d', std::stoi(index)));
  EXPECT_EQ(smi["devices"][0].value("memory_total_mib", 0), 16384);  // the whole GPU
}

// An XID on vc-share's GPU 1 is published as volcano.sh/gpu-unhealthy-ids.
TEST_F(VolcanoShareE2E, AnUnhealthyGpuIsPublished) {
  ASSERT_TRUE(world_->InjectXid("vc-share", 1, 79).ok());
  Result<k8s::Object> node = world_->WaitForNode(
      "vc-share",
      [](const k8s::Object& n) {
        return k8s::GetAnnotation(n, device::kVolcanoGpuUnhealthyIdsAnnotation) == "1";
      },
      std::chrono::seconds(60));
  ASSERT_TRUE(node.ok()) << node.status().ToString();
}

}  // namespace
}  // namespace hami::e2e
