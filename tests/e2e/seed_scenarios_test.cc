// End to end: the eight seed scenarios (examples/seed000/*.yaml) through the whole simulated
// control plane: API server -> webhook (hami-scheduler) -> kube-scheduler stand-in -> extender
// filter and bind -> fake device plugin. Each test builds the cluster the scenario describes and
// checks the annotations and placement every pod ends with.
#include <gtest/gtest.h>

#include <set>

#include "scheduler/test_util.h"
#include "sim/cluster/sim_cluster.h"

namespace hami::e2e {
using sim::SimCluster;
using sim::SimClusterOptions;
using sim::SplitYamlDocuments;
using sim::YamlToJson;
namespace {

using scheduler::testing::Gpu;

constexpr const char* kV100 = "NVIDIA-Tesla V100-PCIE-32GB";
constexpr const char* kT4 = "NVIDIA-Tesla T4";
constexpr const char* kA100Sxm = "NVIDIA A100-SXM4-80GB";
constexpr const char* kA100Pcie = "NVIDIA A100-PCIE-40GB";
constexpr const char* kP100 = "NVIDIA-Tesla P100-PCIE-16GB";
constexpr const char* kAllocated = "hami.io/vgpu-devices-allocated";

std::string Example(const std::string& file) {
  return std::string(HAMI_SOURCE_DIR) + "/examples/seed000/" + file;
}

bool Bound(SimCluster& c, const std::string& name) {
  return SimCluster::WaitFor([&] { return !c.BoundNode("default", name).empty(); });
}

bool HasEvent(SimCluster& c, const std::string& pod, const std::string& reason) {
  return SimCluster::WaitFor([&] {
    for (const k8s::Object& e : c.Events("default", pod)) {
      if (k8s::GetString(e, "/reason") == reason) return true;
    }
    return false;
  });
}

TEST(SeedE2E, Example1TwoPodsShareOneGpu) {
  SimCluster c;
  c.AddNode("gpu-node", {Gpu("GPU-v100", 0, 32768, kV100)});
  c.ApplyYamlFile(Example("01-two-pods-share-one-gpu.yaml"), "default");
  for (const char* pod : {"inference-service-a", "inference-service-b"}) {
    ASSERT_TRUE(Bound(c, pod)) << pod;
    EXPECT_EQ(c.BoundNode("default", pod), "gpu-node");
    EXPECT_EQ(c.Annotation("default", pod, kAllocated), "GPU-v100,NVIDIA,8192,50:;");
    EXPECT_EQ(c.Annotation("default", pod, "hami.io/vgpu-node"), "gpu-node");
    EXPECT_TRUE(SimCluster::WaitFor(
        [&] { return c.Annotation("default", pod, "hami.io/bind-phase") == "success"; }));
  }
  EXPECT_TRUE(HasEvent(c, "inference-service-a", "FilteringSucceed"));
  EXPECT_TRUE(HasEvent(c, "inference-service-a", "BindingSucceed"));
  // The webhook sent the pods to hami-scheduler.
  Result<k8s::Object> pod = c.client().Get(k8s::kPods, "default", "inference-service-a");
  ASSERT_TRUE(pod.ok());
  EXPECT_EQ(k8s::GetString(*pod, "/spec/schedulerName"), "hami-scheduler");
}

TEST(SeedE2E, Example1ThirdPodStaysPendingWithReason) {
  SimCluster c;
  c.AddNode("gpu-node", {Gpu("GPU-v100", 0, 32768, kV100)});
  c.ApplyYamlFile(Example("01-two-pods-share-one-gpu.yaml"), "default");
  ASSERT_TRUE(Bound(c, "inference-service-a"));
  ASSERT_TRUE(Bound(c, "inference-service-b"));
  k8s::Object third = YamlToJson(R"(
apiVersion: v1
kind: Pod
metadata: {name: inference-service-c}
spec:
  containers:
  - name: model-server
    image: x
    resources: {limits: {nvidia.com/gpu: 1, nvidia.com/gpumem: 8192, nvidia.com/gpucores: 50}}
)")
                          .value();
  ASSERT_TRUE(c.CreatePod("default", third).ok());
  EXPECT_TRUE(HasEvent(c, "inference-service-c", "FilteringFailed"));
  EXPECT_TRUE(HasEvent(c, "inference-service-c", "FailedScheduling"));
  EXPECT_EQ(c.BoundNode("default", "inference-service-c"), "");
  bool reason_named = false;
  for (const k8s::Object& e : c.Events("default", "inference-service-c")) {
    if (k8s::GetString(e, "/message").find("CardInsufficientCore") != std::string::npos) {
      reason_named = true;
    }
  }
  EXPECT_TRUE(reason_named);
}

// The chart's deployment: kube-scheduler holds the Lease, hami-scheduler (same host) follows it and
// only then serves filters.
TEST(SeedE2E, Example1WithLeaderElection) {
  SimClusterOptions o;
  o.driver_identity = "sched-host_6f1c";
  o.scheduler.leader_elect = true;
  o.scheduler.identity = "sched-host";
  o.scheduler.lease_namespace = "default";
  o.scheduler.lease_poll = std::chrono::milliseconds(50);
  SimCluster c(o);
  ASSERT_TRUE(c.WaitForScheduler([&] { return c.scheduler().IsLeader(); }));
  c.AddNode("gpu-node", {Gpu("GPU-v100", 0, 32768, kV100)});
  c.ApplyYamlFile(Example("01-two-pods-share-one-gpu.yaml"), "default");
  for (const char* pod : {"inference-service-a", "inference-service-b"}) {
    ASSERT_TRUE(Bound(c, pod)) << pod;
    EXPECT_EQ(c.Annotation("default", pod, kAllocated), "GPU-v100,NVIDIA,8192,50:;");
  }
}

TEST(SeedE2E, Example2MemoryOnly) {
  SimCluster c;
  c.AddNode("gpu-node", {Gpu("GPU-t4", 0, 15360, kT4)});
  c.ApplyYamlFile(Example("02-memory-only.yaml"), "default");
  ASSERT_TRUE(Bound(c, "memory-only-isolation"));
  EXPECT_EQ(c.Annotation("default", "memory-only-isolation", kAllocated), "GPU-t4,NVIDIA,4096,0:;");
}

TEST(SeedE2E, Example3Exclusive) {
  SimCluster c;
  c.AddNode("gpu-node", {Gpu("GPU-0", 0, 32768, kV100), Gpu("GPU-1", 1, 32768, kV100)});
  c.ApplyYamlFile(Example("03-exclusive.yaml"), "default");
  ASSERT_TRUE(Bound(c, "training-job"));
  std::string a = c.Annotation("default", "training-job", kAllocated);
  EXPECT_TRUE(a == "GPU-0,NVIDIA,32768,100:;" || a == "GPU-1,NVIDIA,32768,100:;") << a;
}

TEST(SeedE2E, Example3WebhookDefaultsExclusiveCores) {
  SimCluster c;
  c.AddNode("gpu-node", {Gpu("GPU-0", 0, 32768, kV100)});
  // Only a GPU count: the webhook makes it exclusive (gpucores 100), the card is all its.
  k8s::Object pod = YamlToJson(R"(
apiVersion: v1
kind: Pod
metadata: {name: whole-card}
spec:
  containers:
  - {name: main, image: x, resources: {limits: {nvidia.com/gpu: 1}}}
)")
                        .value();
  ASSERT_TRUE(c.CreatePod("default", pod).ok());
  ASSERT_TRUE(Bound(c, "whole-card"));
  EXPECT_EQ(c.Annotation("default", "whole-card", kAllocated), "GPU-0,NVIDIA,32768,100:;");
}

TEST(SeedE2E, Example4MemoryPercentage) {
  SimCluster c;
  c.AddNode("t4-node", {Gpu("GPU-t4", 0, 16384, kT4)});
  c.ApplyYamlFile(Example("04-memory-percentage.yaml"), "default");
  ASSERT_TRUE(Bound(c, "percentage-alloc"));
  EXPECT_EQ(c.Annotation("default", "percentage-alloc", kAllocated), "GPU-t4,NVIDIA,4915,40:;");
}

TEST(SeedE2E, Example5PolicyOverride) {
  SimCluster c;
  for (const char* n : {"node-1", "node-2"}) {
    std::string p(n);
    c.AddNode(p, {Gpu(p + "-gpu0", 0, 32768, kV100), Gpu(p + "-gpu1", 1, 32768, kV100)});
  }
  c.ApplyYamlFile(Example("05-policy-override.yaml"), "default");
  ASSERT_TRUE(Bound(c, "binpack-inference"));
  std::string first = c.BoundNode("default", "binpack-inference");
  // A second pod with the same annotations spreads to the other (emptier) node.
  k8s::Object twin = YamlToJson(R"(
apiVersion: v1
kind: Pod
metadata:
  name: binpack-inference-2
  annotations: {hami.io/node-scheduler-policy: "spread", hami.io/gpu-scheduler-policy: "binpack"}
spec:
  containers:
  - name: inference
    image: x
    resources: {limits: {nvidia.com/gpu: 1, nvidia.com/gpumem: 2048, nvidia.com/gpucores: 25}}
)")
                         .value();
  ASSERT_TRUE(c.CreatePod("default", twin).ok());
  ASSERT_TRUE(Bound(c, "binpack-inference-2"));
  EXPECT_NE(c.BoundNode("default", "binpack-inference-2"), first);
}

TEST(SeedE2E, Example6GpuTypeSelection) {
  SimCluster c;
  c.AddNode("t4-node", {Gpu("GPU-t4", 0, 16384, kT4)});
  c.AddNode("p100-node", {Gpu("GPU-p100", 0, 16384, kP100)});
  c.AddNode("v100-node", {Gpu("GPU-v100", 0, 32768, kV100)});
  c.AddNode("a100-sxm-node", {Gpu("GPU-a100-sxm", 0, 81920, kA100Sxm)});
  c.AddNode("a100-pcie-node", {Gpu("GPU-a100-pcie", 0, 40960, kA100Pcie)});
  c.ApplyYamlFile(Example("06-gpu-type-selection.yaml"), "default");
  for (const char* p : {"a100-only-task", "exclude-old-gpu", "selective-gpu"}) {
    ASSERT_TRUE(Bound(c, p)) << p;
  }
  std::string a = c.BoundNode("default", "a100-only-task");
  EXPECT_TRUE(a == "a100-sxm-node" || a == "a100-pcie-node") << a;
  std::string b = c.BoundNode("default", "exclude-old-gpu");
  EXPECT_TRUE(b != "t4-node" && b != "p100-node") << b;
  std::string s = c.BoundNode("default", "selective-gpu");
  EXPECT_TRUE(s == "v100-node" || s == "a100-pcie-node") << s;
}

TEST(SeedE2E, Example7GpuUuid) {
  SimCluster c;
  const std::string pinned = "GPU-e3b5f6a0-1234-5678-abcd-ef1234567890";
  const std::string other = "GPU-a1b2c3d4-5678-9012-efgh-ij3456789012";
  c.AddNode("node-1", {Gpu("GPU-aaaa", 0, 32768, kV100), Gpu(pinned, 1, 32768, kV100)});
  c.AddNode("node-2", {Gpu(other, 0, 32768, kV100), Gpu("GPU-bbbb", 1, 32768, kV100)});
  c.ApplyYamlFile(Example("07-gpu-uuid.yaml"), "default");
  ASSERT_TRUE(Bound(c, "uuid-pinned-task"));
  EXPECT_EQ(c.Annotation("default", "uuid-pinned-task", kAllocated), pinned + ",NVIDIA,8192,100:;");
  ASSERT_TRUE(Bound(c, "uuid-exclude-task"));
  std::string x = c.Annotation("default", "uuid-exclude-task", kAllocated);
  EXPECT_TRUE(x == "GPU-aaaa,NVIDIA,4096,0:;" || x == "GPU-bbbb,NVIDIA,4096,0:;") << x;
}

TEST(SeedE2E, Example8NumaAware) {
  SimCluster c;
  c.AddNode("hpc", {Gpu("GPU0", 0, 32768, kV100, 0), Gpu("GPU1", 1, 32768, kV100, 0),
                    Gpu("GPU2", 2, 32768, kV100, 1), Gpu("GPU3", 3, 32768, kV100, 1)});
  c.ApplyYamlFile(Example("08-numa-aware.yaml"), "default");
  ASSERT_TRUE(Bound(c, "numa-aware-training"));
  std::string a = c.Annotation("default", "numa-aware-training", kAllocated);
  std::set<std::string> same_numa = {"GPU0,NVIDIA,32768,100:GPU1,NVIDIA,32768,100:;",
                                     "GPU1,NVIDIA,32768,100:GPU0,NVIDIA,32768,100:;",
                                     "GPU2,NVIDIA,32768,100:GPU3,NVIDIA,32768,100:;",
                                     "GPU3,NVIDIA,32768,100:GPU2,NVIDIA,32768,100:;"};
  EXPECT_TRUE(same_numa.count(a)) << a;
}

TEST(SeedE2E, PrivilegedGpuPodDeniedByWebhook) {
  SimCluster c;
  k8s::Object pod = YamlToJson(R"(
apiVersion: v1
kind: Pod
metadata: {name: priv}
spec:
  containers:
  - name: main
    image: x
    securityContext: {privileged: true}
    resources: {limits: {nvidia.com/gpu: 1}}
)")
                        .value();
  Result<k8s::Object> r = c.CreatePod("default", pod);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("privileged"), std::string::npos) << r.status().ToString();
}

}  // namespace
}  // namespace hami::e2e
