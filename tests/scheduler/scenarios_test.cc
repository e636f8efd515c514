// Golden tests: the eight acceptance scenarios of seed 000 (HAMi GPU sharing examples) on small
// described clusters, plus the deliberate differences from upstream (docs/compatibility.md). Each
// test states the scenario's expected behaviour and checks the decision and the annotation the
// scheduler would write.
#include <gtest/gtest.h>

#include <set>

#include "device/pod_devices.h"
#include "scheduler/explain.h"
#include "scheduler/placement.h"
#include "scheduler/test_util.h"

namespace hami::scheduler {
namespace {

using testing::AnnotatedPod;
using testing::Gpu;
using testing::Limits;
using testing::SchedulerWorld;
using testing::Uuids;

constexpr const char* kV100 = "NVIDIA-Tesla V100-PCIE-32GB";
constexpr const char* kT4 = "NVIDIA-Tesla T4";
constexpr const char* kA100Sxm = "NVIDIA A100-SXM4-80GB";
constexpr const char* kA100Pcie = "NVIDIA A100-PCIE-40GB";
constexpr const char* kP100 = "NVIDIA-Tesla P100-PCIE-16GB";

device::ContainerResources Gpus(testing::Quantities q) { return Limits(std::move(q)); }

Decision Sched(SchedulerWorld& w, const PodSpec& pod) {
  Result<Decision> d = w.Schedule(pod);
  EXPECT_TRUE(d.ok()) << d.status().ToString();
  return d.ok() ? std::move(d).value() : Decision{};
}

Decision Try(SchedulerWorld& w, const PodSpec& pod) {
  Result<Decision> d = w.Place(pod);
  EXPECT_TRUE(d.ok()) << d.status().ToString();
  return d.ok() ? std::move(d).value() : Decision{};
}

std::string Allocated(SchedulerWorld& w, const PodSpec& pod) {
  return w.pod_objects().at(pod.uid).annotations.at("hami.io/vgpu-devices-allocated");
}

// Example 1: two pods, each 8192 MiB and 50% cores, share one physical GPU.
TEST(Seed000, Example1TwoPodsShareOneGpu) {
  SchedulerWorld w;
  ASSERT_TRUE(w.AddNode("gpu-node", {Gpu("GPU-v100", 0, 32768, kV100)}).ok());
  testing::Quantities half{
      {"nvidia.com/gpu", "1"}, {"nvidia.com/gpumem", "8192"}, {"nvidia.com/gpucores", "50"}};
  PodSpec a = w.Pod("inference-service-a", {Gpus(half)});
  PodSpec b = w.Pod("inference-service-b", {Gpus(half)});
  ASSERT_TRUE(Sched(w, a).fit());
  ASSERT_TRUE(Sched(w, b).fit());
  EXPECT_EQ(Allocated(w, a), "GPU-v100,NVIDIA,8192,50:;");
  EXPECT_EQ(Allocated(w, b), "GPU-v100,NVIDIA,8192,50:;");
  const LedgerDevice& gpu = w.ledger().nodes()[0].devices[0];
  EXPECT_EQ(gpu.used_slots, 2);
  EXPECT_EQ(gpu.used_mem, 16384);
  EXPECT_EQ(gpu.used_cores, 100);
  // The cores are now fully allocated: a third such pod stays Pending.
  Decision c = Try(w, w.Pod("inference-service-c", {Gpus(half)}));
  EXPECT_FALSE(c.fit());
  EXPECT_EQ(c.FailedNodes().at("gpu-node"), "1/1 CardInsufficientCore");
}

// Example 1 on a multi-GPU node: with the GPU policy binpack the two pods land on the same card.
TEST(Seed000, Example1BinpackOnMultiGpuNode) {
  SchedulerWorld w(EngineOptions{NodePolicy::kBinpack, "binpack"});
  ASSERT_TRUE(
      w.AddNode("gpu-node", {Gpu("GPU-0", 0, 32768, kV100), Gpu("GPU-1", 1, 32768, kV100)}).ok());
  testing::Quantities half{
      {"nvidia.com/gpu", "1"}, {"nvidia.com/gpumem", "8192"}, {"nvidia.com/gpucores", "50"}};
  Decision a = Sched(w, w.Pod("a", {Gpus(half)}));
  Decision b = Sched(w, w.Pod("b", {Gpus(half)}));
  EXPECT_EQ(Uuids(a), Uuids(b));
}

// Example 2: memory only; cores stay 0, so no SM limit and several pods share by memory.
TEST(Seed000, Example2MemoryOnly) {
  SchedulerWorld w;
  ASSERT_TRUE(w.AddNode("gpu-node", {Gpu("GPU-t4", 0, 15360, kT4)}).ok());
  testing::Quantities mem{{"nvidia.com/gpu", "1"}, {"nvidia.com/gpumem", "4096"}};
  PodSpec first = w.Pod("memory-only-isolation", {Gpus(mem)});
  ASSERT_TRUE(Sched(w, first).fit());
  EXPECT_EQ(Allocated(w, first), "GPU-t4,NVIDIA,4096,0:;");
  ASSERT_TRUE(Sched(w, w.Pod("m2", {Gpus(mem)})).fit());
  ASSERT_TRUE(Sched(w, w.Pod("m3", {Gpus(mem)})).fit());
  // 3 x 4096 of 15360 used: a fourth does not fit.
  Decision d = Try(w, w.Pod("m4", {Gpus(mem)}));
  EXPECT_FALSE(d.fit());
  EXPECT_EQ(d.FailedNodes().at("gpu-node"), "1/1 CardInsufficientMemory");
}

// Example 3: gpucores 100 takes a whole idle card with all its memory; used cards are refused.
TEST(Seed000, Example3Exclusive) {
  SchedulerWorld w;
  ASSERT_TRUE(
      w.AddNode("gpu-node", {Gpu("GPU-0", 0, 32768, kV100), Gpu("GPU-1", 1, 32768, kV100)}).ok());
  // GPU-0 already runs a shared task.
  ASSERT_TRUE(
      Sched(w, w.Pod("shared", {Gpus({{"nvidia.com/gpu", "1"}, {"nvidia.com/gpumem", "1024"}})},
                     {{"nvidia.com/use-gpuuuid", "GPU-0"}}))
          .fit());
  testing::Quantities exclusive{{"nvidia.com/gpu", "1"}, {"nvidia.com/gpucores", "100"}};
  PodSpec job = w.Pod("training-job", {Gpus(exclusive)});
  ASSERT_TRUE(Sched(w, job).fit());
  EXPECT_EQ(Allocated(w, job), "GPU-1,NVIDIA,32768,100:;");
  // Nothing else fits on GPU-1 now; a second exclusive pod has no idle card.
  Decision other =
      Try(w, w.Pod("other", {Gpus({{"nvidia.com/gpu", "1"}, {"nvidia.com/gpumem", "1024"}})},
                   {{"nvidia.com/use-gpuuuid", "GPU-1"}}));
  EXPECT_EQ(other.FailedNodes().at("gpu-node"), "1/2 CardInsufficientMemory, 1/2 CardUuidMismatch");
  // A second exclusive pod finds no idle card (it asks for all the memory of each, which is
  // checked before the exclusivity rule, as upstream does).
  Decision second = Try(w, w.Pod("training-2", {Gpus(exclusive)}));
  EXPECT_EQ(second.FailedNodes().at("gpu-node"), "2/2 CardInsufficientMemory");
  // With an explicit small gpumem the exclusivity rule is what refuses the shared card.
  Decision third = Try(w, w.Pod("training-3", {Gpus({{"nvidia.com/gpu", "1"},
                                                     {"nvidia.com/gpumem", "1024"},
                                                     {"nvidia.com/gpucores", "100"}})}));
  EXPECT_EQ(third.FailedNodes().at("gpu-node"),
            "1/2 CardInsufficientMemory, 1/2 ExclusiveDeviceAllocateConflict");
}

// Example 4: 30% of memory and 40% cores on T4 (16 GB), V100 (32 GB) and A100 (80 GB).
TEST(Seed000, Example4PercentageMemory) {
  SchedulerWorld w;
  ASSERT_TRUE(w.AddNode("t4", {Gpu("GPU-t4", 0, 16384, kT4)}).ok());
  ASSERT_TRUE(w.AddNode("v100", {Gpu("GPU-v100", 0, 32768, kV100)}).ok());
  ASSERT_TRUE(w.AddNode("a100", {Gpu("GPU-a100", 0, 81920, kA100Sxm)}).ok());
  testing::Quantities pct{{"nvidia.com/gpu", "1"},
                          {"nvidia.com/gpumem-percentage", "30"},
                          {"nvidia.com/gpucores", "40"}};
  struct Case {
    const char* type;
    const char* expect;
  } cases[] = {{"T4", "GPU-t4,NVIDIA,4915,40:;"},
               {"V100", "GPU-v100,NVIDIA,9830,40:;"},
               {"A100", "GPU-a100,NVIDIA,24576,40:;"}};
  for (const Case& c : cases) {
    PodSpec pod = w.Pod(std::string("percentage-alloc-") + c.type, {Gpus(pct)},
                        {{"nvidia.com/use-gputype", c.type}});
    ASSERT_TRUE(Sched(w, pod).fit()) << c.type;
    EXPECT_EQ(Allocated(w, pod), c.expect);
  }
  // gpumem and gpumem-percentage both set: the absolute value wins.
  testing::Quantities both = pct;
  both["nvidia.com/gpumem"] = "1000";
  PodSpec pod = w.Pod("both", {Gpus(both)}, {{"nvidia.com/use-gputype", "T4"}});
  ASSERT_TRUE(Sched(w, pod).fit());
  EXPECT_EQ(Allocated(w, pod), "GPU-t4,NVIDIA,1000,40:;");
}

// Example 5: global spread; pod annotations choose spread across nodes and binpack within one.
TEST(Seed000, Example5PolicyOverrideByAnnotation) {
  SchedulerWorld w(EngineOptions{NodePolicy::kBinpack, "spread"});
  for (const char* n : {"node-1", "node-2"}) {
    std::string p(n);
    ASSERT_TRUE(
        w.AddNode(p, {Gpu(p + "-gpu0", 0, 32768, kV100), Gpu(p + "-gpu1", 1, 32768, kV100)}).ok());
  }
  testing::Quantities small{
      {"nvidia.com/gpu", "1"}, {"nvidia.com/gpumem", "2048"}, {"nvidia.com/gpucores", "20"}};
  // Without annotations the global spread policy puts the pods on different GPUs.
  Decision s1 = Sched(w, w.Pod("spread-1", {Gpus(small)}));
  Decision s2 = Sched(w, w.Pod("spread-2", {Gpus(small)}));
  EXPECT_EQ(s1.node, s2.node);  // node level: binpack (global)
  EXPECT_NE(Uuids(s1), Uuids(s2));
  // binpack-test-1..4: concentrated on one GPU.
  std::set<std::string> gpus;
  for (int i = 1; i <= 4; ++i) {
    Decision d = Sched(w, w.Pod("binpack-test-" + std::to_string(i), {Gpus(small)},
                                {{"hami.io/gpu-scheduler-policy", "binpack"}}));
    ASSERT_TRUE(d.fit());
    gpus.insert(Uuids(d)[0]);
    EXPECT_EQ(d.policies.gpu_source, PolicySource::kPod);
  }
  EXPECT_EQ(gpus.size(), 1u);
  // The YAML of the example: node spread (to the emptier node), GPU binpack within it.
  PodSpec pod = w.Pod(
      "binpack-inference",
      {Gpus(
          {{"nvidia.com/gpu", "1"}, {"nvidia.com/gpumem", "2048"}, {"nvidia.com/gpucores", "25"}})},
      {{"hami.io/node-scheduler-policy", "spread"}, {"hami.io/gpu-scheduler-policy", "binpack"}});
  Decision d = Sched(w, pod);
  ASSERT_TRUE(d.fit());
  EXPECT_NE(d.node, s1.node);
  PodSpec next = pod;
  next.uid = "uid-binpack-inference-2";
  next.name = "binpack-inference-2";
  Decision d2 = Sched(w, next);
  EXPECT_EQ(d2.node, d.node);
  EXPECT_EQ(Uuids(d2), Uuids(d));  // binpack within the node
}

// Example 6: type selection A/B/C in a mixed cluster (case-insensitive substring match).
TEST(Seed000, Example6TypeSelection) {
  SchedulerWorld w;
  ASSERT_TRUE(w.AddNode("t4-node", {Gpu("GPU-t4", 0, 16384, kT4)}).ok());
  ASSERT_TRUE(w.AddNode("p100-node", {Gpu("GPU-p100", 0, 16384, kP100)}).ok());
  ASSERT_TRUE(w.AddNode("v100-node", {Gpu("GPU-v100", 0, 32768, kV100)}).ok());
  ASSERT_TRUE(w.AddNode("a100-sxm-node", {Gpu("GPU-a100-sxm", 0, 81920, kA100Sxm)}).ok());
  ASSERT_TRUE(w.AddNode("a100-pcie-node", {Gpu("GPU-a100-pcie", 0, 40960, kA100Pcie)}).ok());

  // A: only A100s.
  Decision a = Try(w, w.Pod("a100-only-task",
                            {Gpus({{"nvidia.com/gpu", "1"},
                                   {"nvidia.com/gpumem", "40960"},
                                   {"nvidia.com/gpucores", "50"}})},
                            {{"nvidia.com/use-gputype", "A100"}}));
  ASSERT_TRUE(a.fit());
  EXPECT_TRUE(a.node == "a100-sxm-node" || a.node == "a100-pcie-node") << a.node;
  EXPECT_EQ(a.FailedNodes().at("t4-node"), "1/1 CardTypeMismatch");
  EXPECT_EQ(a.FailedNodes().at("v100-node"), "1/1 CardTypeMismatch");
  EXPECT_EQ(a.FailedNodes().size(), 3u);

  // B: anything but T4 and P100.
  Decision b = Try(w, w.Pod("exclude-old-gpu",
                            {Gpus({{"nvidia.com/gpu", "1"},
                                   {"nvidia.com/gpumem", "8192"},
                                   {"nvidia.com/gpucores", "30"}})},
                            {{"nvidia.com/nouse-gputype", "T4,P100"}}));
  auto failed_b = b.FailedNodes();
  EXPECT_EQ(failed_b.size(), 2u);
  EXPECT_TRUE(failed_b.count("t4-node") && failed_b.count("p100-node"));

  // C: A100 or V100, but not A100-SXM.
  Decision c = Try(
      w,
      w.Pod("selective-gpu", {Gpus({{"nvidia.com/gpu", "1"}, {"nvidia.com/gpumem", "8192"}})},
            {{"nvidia.com/use-gputype", "A100,V100"}, {"nvidia.com/nouse-gputype", "A100-SXM"}}));
  auto failed_c = c.FailedNodes();
  EXPECT_EQ(failed_c.size(), 3u);
  EXPECT_FALSE(failed_c.count("v100-node"));
  EXPECT_FALSE(failed_c.count("a100-pcie-node"));

  // No such model: Pending.
  Decision none = Try(
      w, w.Pod("h100", {Gpus({{"nvidia.com/gpu", "1"}})}, {{"nvidia.com/use-gputype", "H100"}}));
  EXPECT_FALSE(none.fit());
}

// Example 7: UUID binding (exact match) and exclusion.
TEST(Seed000, Example7UuidBinding) {
  SchedulerWorld w;
  const std::string pinned = "GPU-e3b5f6a0-1234-5678-abcd-ef1234567890";
  const std::string other = "GPU-a1b2c3d4-5678-9012-efgh-ij3456789012";
  ASSERT_TRUE(
      w.AddNode("node-1", {Gpu("GPU-aaaa", 0, 32768, kV100), Gpu(pinned, 1, 32768, kV100)}).ok());
  ASSERT_TRUE(
      w.AddNode("node-2", {Gpu(other, 0, 32768, kV100), Gpu("GPU-bbbb", 1, 32768, kV100)}).ok());
  PodSpec a = w.Pod("uuid-pinned-task",
                    {Gpus({{"nvidia.com/gpu", "1"},
                           {"nvidia.com/gpumem", "8192"},
                           {"nvidia.com/gpucores", "100"}})},
                    {{"nvidia.com/use-gpuuuid", pinned}});
  Decision d = Sched(w, a);
  ASSERT_TRUE(d.fit());
  EXPECT_EQ(Allocated(w, a), pinned + ",NVIDIA,8192,100:;");
  EXPECT_EQ(d.FailedNodes().at("node-2"), "2/2 CardUuidMismatch");
  // A prefix is not a match; an unknown UUID keeps the pod Pending.
  EXPECT_FALSE(Try(w, w.Pod("prefix", {Gpus({{"nvidia.com/gpu", "1"}})},
                            {{"nvidia.com/use-gpuuuid", "GPU-e3b5f6a0"}}))
                   .fit());
  // B: excluding two UUIDs leaves GPU-aaaa and GPU-bbbb.
  for (int i = 0; i < 4; ++i) {
    Decision x = Sched(w, w.Pod("uuid-exclude-task-" + std::to_string(i),
                                {Gpus({{"nvidia.com/gpu", "1"}, {"nvidia.com/gpumem", "4096"}})},
                                {{"nvidia.com/nouse-gpuuuid", pinned + "," + other}}));
    ASSERT_TRUE(x.fit());
    std::string u = Uuids(x)[0];
    EXPECT_TRUE(u == "GPU-aaaa" || u == "GPU-bbbb") << u;
  }
}

// Example 8: numa-bind, two GPUs of 32 GiB and 100% cores each, on a 2 x 2 NUMA machine.
TEST(Seed000, Example8NumaAwareTwoGpus) {
  SchedulerWorld w;
  ASSERT_TRUE(w.AddNode("hpc", {Gpu("GPU0", 0, 32768, kV100, 0), Gpu("GPU1", 1, 32768, kV100, 0),
                                Gpu("GPU2", 2, 32768, kV100, 1), Gpu("GPU3", 3, 32768, kV100, 1)})
                  .ok());
  testing::Quantities two{
      {"nvidia.com/gpu", "2"}, {"nvidia.com/gpumem", "32768"}, {"nvidia.com/gpucores", "100"}};
  device::Annotations bind{{"nvidia.com/numa-bind", "true"}};
  PodSpec pod = w.Pod("numa-aware-training", {Gpus(two)}, bind);
  Decision d = Try(w, pod);
  ASSERT_TRUE(d.fit());
  EXPECT_EQ(Uuids(d), (std::vector<std::string>{"GPU0", "GPU1"}));

  // NUMA 0 has only one idle GPU left: both GPUs come from NUMA 1, never GPU0 + GPU2.
  ASSERT_TRUE(
      Sched(w, w.Pod("busy", {Gpus({{"nvidia.com/gpu", "1"}, {"nvidia.com/gpucores", "100"}})},
                     {{"nvidia.com/use-gpuuuid", "GPU1"}}))
          .fit());
  d = Sched(w, pod);
  ASSERT_TRUE(d.fit());
  EXPECT_EQ(Uuids(d), (std::vector<std::string>{"GPU2", "GPU3"}));
  // Four GPUs on one NUMA node do not exist: Pending.
  testing::Quantities four = two;
  four["nvidia.com/gpu"] = "4";
  SchedulerWorld fresh;
  ASSERT_TRUE(
      fresh
          .AddNode("hpc", {Gpu("GPU0", 0, 32768, kV100, 0), Gpu("GPU1", 1, 32768, kV100, 0),
                           Gpu("GPU2", 2, 32768, kV100, 1), Gpu("GPU3", 3, 32768, kV100, 1)})
          .ok());
  Decision f = Try(fresh, fresh.Pod("four", {Gpus(four)}, bind));
  EXPECT_FALSE(f.fit());
  EXPECT_EQ(f.FailedNodes().at("hpc"), "4/4 NumaNotFit");
  // One GPU: binding makes no difference.
  testing::Quantities one = two;
  one["nvidia.com/gpu"] = "1";
  EXPECT_EQ(Uuids(Try(fresh, fresh.Pod("one", {Gpus(one)}, bind))),
            Uuids(Try(fresh, fresh.Pod("one", {Gpus(one)}))));
}

// Deliberate difference: every vendor list has one entry per container, init containers first.
TEST(DeliberateDifferences, IndexAlignedContainerLists) {
  SchedulerWorld w;
  ASSERT_TRUE(w.AddNode("n", {Gpu("GPU-a", 0, 32768, kV100)}).ok());
  PodSpec pod = w.Pod("aligned",
                      {Gpus({{"nvidia.com/gpu", "1"}, {"nvidia.com/gpumem", "3000"}}),
                       Limits({{"cpu", "1"}}, "sidecar"),
                       Gpus({{"nvidia.com/gpu", "1"}, {"nvidia.com/gpumem", "5000"}})},
                      {}, {Limits({{"cpu", "1"}}, "init-no-gpu")});
  ASSERT_TRUE(Sched(w, pod).fit());
  EXPECT_EQ(Allocated(w, pod), ";GPU-a,NVIDIA,3000,0:;;GPU-a,NVIDIA,5000,0:;");
}

// Deliberate difference: the device score counts the request being placed. Upstream's binpack
// (usage only) would choose the big card that already has a task.
TEST(DeliberateDifferences, ScoreIncludesThePod) {
  SchedulerWorld w(EngineOptions{NodePolicy::kBinpack, "binpack"});
  ASSERT_TRUE(w.AddNode("n", {Gpu("small", 0, 8192, kT4), Gpu("big", 1, 81920, kA100Sxm)}).ok());
  ASSERT_TRUE(
      Sched(w, w.Pod("seed", {Gpus({{"nvidia.com/gpu", "1"}, {"nvidia.com/gpumem", "1000"}})},
                     {{"nvidia.com/use-gpuuuid", "big"}}))
          .fit());
  Decision d = Try(w, w.Pod("p", {Gpus({{"nvidia.com/gpu", "1"}, {"nvidia.com/gpumem", "7000"}})}));
  EXPECT_EQ(Uuids(d), std::vector<std::string>{"small"});
}

// Deliberate difference: a reservation whose pod never binds is released after the TTL
// (upstream keeps it until the pod is filtered again or deleted).
TEST(DeliberateDifferences, UnboundReservationExpires) {
  SchedulerWorld w;
  ASSERT_TRUE(w.AddNode("n", {Gpu("GPU-a", 0, 16384, kT4)}).ok());
  PodSpec pod = w.Pod("lost", {Gpus({{"nvidia.com/gpu", "1"}, {"nvidia.com/gpumem", "16000"}})});
  std::vector<std::string_view> names{"n"};
  ASSERT_TRUE(PlaceAndReserve(w.ledger(), w.engine(), pod, names)->fit());
  PodSpec next = w.Pod("next", {Gpus({{"nvidia.com/gpu", "1"}, {"nvidia.com/gpumem", "16000"}})});
  EXPECT_FALSE(Try(w, next).fit());
  w.clock().Advance(std::chrono::seconds(w.ledger().options().reservation_ttl_seconds));
  EXPECT_EQ(w.ledger().ExpireReservations(), 1u);
  EXPECT_TRUE(Try(w, next).fit());
}

// Usage survives a scheduler restart: the ledger rebuilt from the objects is identical.
TEST(DeliberateDifferences, RestartRebuildsTheSameLedger) {
  SchedulerWorld w;
  ASSERT_TRUE(w.AddNode("n1", {Gpu("GPU-a", 0, 16384, kT4), Gpu("GPU-b", 1, 16384, kT4)}).ok());
  ASSERT_TRUE(w.AddNode("n2", {Gpu("GPU-c", 0, 32768, kV100)}).ok());
  for (int i = 0; i < 6; ++i) {
    ASSERT_TRUE(Sched(w, w.Pod("p" + std::to_string(i), {Gpus({{"nvidia.com/gpu", "1"},
                                                               {"nvidia.com/gpumem", "3000"},
                                                               {"nvidia.com/gpucores", "10"}})}))
                    .fit());
  }
  w.DeletePod("uid-p2");
  std::unique_ptr<Ledger> rebuilt = w.Rebuild();
  EXPECT_EQ(rebuilt->CanonicalDump(), w.ledger().CanonicalDump());
  EXPECT_EQ(rebuilt->Fingerprint(), w.ledger().Fingerprint());
}

}  // namespace
}  // namespace hami::scheduler
