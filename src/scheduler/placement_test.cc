#include "scheduler/placement.h"

#include <gtest/gtest.h>

#include "scheduler/explain.h"
#include "scheduler/test_util.h"

namespace hami::scheduler {
namespace {

using testing::Gpu;
using testing::Limits;
using testing::SchedulerWorld;
using testing::Uuids;

device::ContainerResources Req(int gpus, int mem = 0, int cores = -1, int pct = -1) {
  testing::Quantities q{{"nvidia.com/gpu", std::to_string(gpus)}};
  if (mem > 0) q["nvidia.com/gpumem"] = std::to_string(mem);
  if (cores >= 0) q["nvidia.com/gpucores"] = std::to_string(cores);
  if (pct >= 0) q["nvidia.com/gpumem-percentage"] = std::to_string(pct);
  return Limits(q);
}

Decision MustPlace(SchedulerWorld& w, const PodSpec& pod, TraceLevel t = TraceLevel::kNodes) {
  Result<Decision> d = w.Place(pod, t);
  EXPECT_TRUE(d.ok()) << d.status().ToString();
  return d.ok() ? std::move(d).value() : Decision{};
}

Decision MustSchedule(SchedulerWorld& w, const PodSpec& pod) {
  Result<Decision> d = w.Schedule(pod);
  EXPECT_TRUE(d.ok()) << d.status().ToString();
  return d.ok() ? std::move(d).value() : Decision{};
}

std::string Reason(const Decision& d, std::string_view node) {
  auto failed = d.FailedNodes();
  auto it = failed.find(std::string(node));
  return it == failed.end() ? "<fit>" : it->second;
}

TEST(Placement, ReasonsAggregatedPerNode) {
  SchedulerWorld w;
  device::DeviceInfo sick = Gpu("g1", 1, 16384);
  sick.health = false;
  device::DeviceInfo sick2 = Gpu("g2", 2, 16384);
  sick2.health = false;
  device::DeviceInfo sick3 = Gpu("g3", 3, 16384);
  sick3.health = false;
  ASSERT_TRUE(w.AddNode("n", {Gpu("g0", 0, 4096), sick, sick2, sick3}).ok());
  Decision d = MustPlace(w, w.Pod("p", {Req(1, 8192)}));
  EXPECT_FALSE(d.fit());
  EXPECT_EQ(Reason(d, "n"), "1/4 CardInsufficientMemory, 3/4 CardNotHealth");
  EXPECT_EQ(d.FailedMessage(), "no available node, 1 nodes do not meet");
}

TEST(Placement, UnknownNodeAndTooFewDevices) {
  SchedulerWorld w;
  ASSERT_TRUE(w.AddNode("n", {Gpu("g0", 0, 16384)}).ok());
  PodSpec pod = w.Pod("p", {Req(2)});
  std::vector<std::string_view> names{"n", "ghost"};
  Result<Decision> d = w.engine().Place(w.ledger(), pod, names);
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(Reason(*d, "n"), "NodeInsufficientDevice");
  EXPECT_EQ(Reason(*d, "ghost"), "node unregistered");
}

TEST(Placement, CordonTypeUuidAndMode) {
  SchedulerWorld w;
  device::Annotations cordon{{"hami.io/device-cordon", "g0"}};
  ASSERT_TRUE(
      w.AddNode("n",
                {Gpu("g0", 0, 16384, "NVIDIA-Tesla T4"), Gpu("g1", 1, 16384, "NVIDIA-Tesla T4"),
                 Gpu("g2", 2, 16384, "NVIDIA A100-PCIE-40GB")},
                cordon)
          .ok());
  Decision d = MustPlace(w, w.Pod("p", {Req(1)}, {{"nvidia.com/use-gputype", "a100"}}));
  ASSERT_TRUE(d.fit());
  EXPECT_EQ(Uuids(d), std::vector<std::string>{"g2"});

  d = MustPlace(w, w.Pod("p", {Req(1)}, {{"nvidia.com/nouse-gputype", "A100"}}));
  EXPECT_EQ(Uuids(d), std::vector<std::string>{"g1"});  // g0 cordoned

  d = MustPlace(w, w.Pod("p", {Req(1)}, {{"nvidia.com/use-gpuuuid", "g0"}}));
  EXPECT_FALSE(d.fit());
  EXPECT_EQ(Reason(d, "n"), "1/3 CardCordoned, 2/3 CardUuidMismatch");

  d = MustPlace(w, w.Pod("p", {Req(1)},
                         {{"nvidia.com/nouse-gpuuuid", "g1, g2"}, {"nvidia.com/use-gputype", ""}}));
  EXPECT_FALSE(d.fit());
  EXPECT_EQ(Reason(d, "n"), "1/3 CardCordoned, 2/3 CardUuidMismatch");

  d = MustPlace(w, w.Pod("p", {Req(1)}, {{"nvidia.com/vgpu-mode", "mig"}}));
  EXPECT_EQ(Reason(d, "n"), "1/3 CardCordoned, 2/3 CardTypeMismatch");
  d = MustPlace(w, w.Pod("p", {Req(1)}, {{"nvidia.com/vgpu-mode", "hami-core"}}));
  EXPECT_TRUE(d.fit());
}

// The user's documents spell types as "NVIDIA-GeForce-RTX-4090" and "NVIDIA-H20,NVIDIA-H200";
// cards register as "NVIDIA GeForce RTX 4090" (upstream's type "NVIDIA-" + the model). Case,
// '-', '_' and spaces do not count, on either side; every substring match still matches.
TEST(Placement, TypeNamesMatchWhateverTheSeparatorsAndCase) {
  SchedulerWorld w;
  ASSERT_TRUE(w.AddNode("n", {Gpu("g0", 0, 24564, "NVIDIA-NVIDIA GeForce RTX 4090"),
                              Gpu("g1", 1, 97871, "NVIDIA-NVIDIA H20"),
                              Gpu("g2", 2, 143771, "NVIDIA-NVIDIA H200")})
                  .ok());
  auto place = [&](const char* key, const char* value) {
    return Uuids(MustPlace(w, w.Pod("p", {Req(1)}, {{key, value}})));
  };
  using V = std::vector<std::string>;
  EXPECT_EQ(place("nvidia.com/use-gputype", "NVIDIA-GeForce-RTX-4090"), V{"g0"});
  EXPECT_EQ(place("nvidia.com/use-gputype", "geforce_rtx_4090"), V{"g0"});
  EXPECT_EQ(place("nvidia.com/use-gputype", "RTX 4090"), V{"g0"});
  EXPECT_EQ(place("nvidia.com/use-gputype", "NVIDIA-H200"), V{"g2"});
  EXPECT_EQ(place("nvidia.com/nouse-gputype", "NVIDIA-GeForce-RTX-4090,NVIDIA-H200"), V{"g1"});
  // A list no card matches: every card fails on its type.
  Decision d = MustPlace(w, w.Pod("p", {Req(1)}, {{"nvidia.com/use-gputype", "NVIDIA-A100"}}));
  EXPECT_FALSE(d.fit());
  EXPECT_EQ(Reason(d, "n"), "3/3 CardTypeMismatch");
  // Separators alone name no type: no constraint.
  EXPECT_EQ(place("nvidia.com/use-gputype", " - ").size(), 1u);
}

TEST(Placement, SlotsMemoryCoresAndExclusive) {
  SchedulerWorld w;
  ASSERT_TRUE(w.AddNode("n", {Gpu("g0", 0, 16384, "T4", 0, /*count=*/2)}).ok());
  // Exclusive card taken: no more sharing.
  Decision d = MustSchedule(w, w.Pod("a", {Req(1, 1000, 100)}));
  ASSERT_TRUE(d.fit());
  d = MustPlace(w, w.Pod("b", {Req(1, 1000, 0)}));
  EXPECT_EQ(Reason(d, "n"), "1/1 CardComputeUnitsExhausted");
  d = MustPlace(w, w.Pod("b", {Req(1, 1000, 10)}));
  EXPECT_EQ(Reason(d, "n"), "1/1 CardInsufficientCore");
  w.DeletePod("uid-a");
  // Exclusive request on a used card.
  ASSERT_TRUE(MustSchedule(w, w.Pod("c", {Req(1, 1000, 10)})).fit());
  d = MustPlace(w, w.Pod("x", {Req(1, 1000, 100)}));
  EXPECT_EQ(Reason(d, "n"), "1/1 CardInsufficientCore");
  ASSERT_TRUE(MustSchedule(w, w.Pod("d", {Req(1, 1000, 10)})).fit());
  d = MustPlace(w, w.Pod("e", {Req(1, 1000, 10)}));
  EXPECT_EQ(Reason(d, "n"), "1/1 CardTimeSlicingExhausted");
  w.DeletePod("uid-d");
  d = MustPlace(w, w.Pod("f", {Req(1, 16000)}));
  EXPECT_EQ(Reason(d, "n"), "1/1 CardInsufficientMemory");
}

TEST(Placement, ExclusiveConflictOnSharedCard) {
  SchedulerWorld w;
  ASSERT_TRUE(w.AddNode("n", {Gpu("g0", 0, 16384)}).ok());
  ASSERT_TRUE(MustSchedule(w, w.Pod("a", {Req(1, 1000, 0)})).fit());
  Decision d = MustPlace(w, w.Pod("x", {Req(1, 1000, 100)}));
  EXPECT_EQ(Reason(d, "n"), "1/1 ExclusiveDeviceAllocateConflict");
}

TEST(Placement, MutexPolicyOnlyIdleDevices) {
  SchedulerWorld w;
  ASSERT_TRUE(w.AddNode("n", {Gpu("g0", 0, 16384), Gpu("g1", 1, 16384)}).ok());
  device::Annotations mutex{{"hami.io/gpu-scheduler-policy", "mutex"}};
  ASSERT_TRUE(MustSchedule(w, w.Pod("a", {Req(1, 1000)}, mutex)).fit());
  ASSERT_TRUE(MustSchedule(w, w.Pod("b", {Req(1, 1000)}, mutex)).fit());
  Decision d = MustPlace(w, w.Pod("c", {Req(1, 1000)}, mutex));
  EXPECT_EQ(Reason(d, "n"), "2/2 ExclusiveDeviceAllocateConflict");
}

TEST(Placement, PercentageMemory) {
  SchedulerWorld w;
  ASSERT_TRUE(w.AddNode("n", {Gpu("g0", 0, 15360, "T4")}).ok());
  Decision d = MustPlace(w, w.Pod("p", {Req(1, 0, 40, 30)}));
  ASSERT_TRUE(d.fit());
  EXPECT_EQ(d.devices.at("NVIDIA")[0][0].mem_mib, 4608);
  EXPECT_EQ(d.devices.at("NVIDIA")[0][0].cores, 40);
}

TEST(Placement, BinpackSpreadBestFitIdleFirst) {
  SchedulerWorld w;
  ASSERT_TRUE(w.AddNode("n", {Gpu("g0", 0, 16384), Gpu("g1", 1, 16384), Gpu("g2", 2, 8192)}).ok());
  ASSERT_TRUE(
      MustSchedule(w, w.Pod("seed", {Req(1, 4000, 10)}, {{"nvidia.com/use-gpuuuid", "g1"}})).fit());
  auto pick = [&](const char* policy) {
    return Uuids(MustPlace(
        w, w.Pod("p", {Req(1, 2000, 10)}, {{"hami.io/gpu-scheduler-policy", policy}})))[0];
  };
  EXPECT_EQ(pick("binpack"), "g1");     // most used after placing
  EXPECT_EQ(pick("spread"), "g0");      // least used (the 8 GiB card scores higher)
  EXPECT_EQ(pick("best-fit"), "g2");    // least memory left
  EXPECT_EQ(pick("idle-first"), "g0");  // idle first, then index
  EXPECT_EQ(pick("idle-first,best-fit"), "g2");
  EXPECT_EQ(pick("numa,binpack"), "g1");
}

TEST(Placement, DeviceScoreIncludesTheRequest) {
  // g0: 8 GiB idle, g1: 32 GiB with a small task. Upstream (usage only) binpack picks g1; with
  // the request counted, 6 GiB on g0 is the fuller device.
  SchedulerWorld w;
  ASSERT_TRUE(w.AddNode("n", {Gpu("g0", 0, 8192), Gpu("g1", 1, 32768)}).ok());
  ASSERT_TRUE(
      MustSchedule(w, w.Pod("seed", {Req(1, 1000, 0)}, {{"nvidia.com/use-gpuuuid", "g1"}})).fit());
  Decision d =
      MustPlace(w, w.Pod("p", {Req(1, 6000, 0)}, {{"hami.io/gpu-scheduler-policy", "binpack"}}),
                TraceLevel::kDevices);
  EXPECT_EQ(Uuids(d), std::vector<std::string>{"g0"});
}

TEST(Placement, ScoringWeights) {
  SchedulerWorld w;
  ASSERT_TRUE(w.AddNode("n", {Gpu("g0", 0, 16384), Gpu("g1", 1, 16384)}).ok());
  // g0 has a core-heavy task, g1 a memory-heavy one.
  ASSERT_TRUE(
      MustSchedule(w, w.Pod("a", {Req(1, 1000, 60)}, {{"nvidia.com/use-gpuuuid", "g0"}})).fit());
  ASSERT_TRUE(
      MustSchedule(w, w.Pod("b", {Req(1, 12000, 5)}, {{"nvidia.com/use-gpuuuid", "g1"}})).fit());
  auto pick = [&](const char* weights) {
    return Uuids(MustPlace(w, w.Pod("p", {Req(1, 1000, 5)},
                                    {{"hami.io/gpu-scheduler-policy", "binpack"},
                                     {"hami.io/device-scoring-weights", weights}})))[0];
  };
  EXPECT_EQ(pick("slot=0,core=1,memory=0"), "g0");
  EXPECT_EQ(pick("slot=0,core=0,memory=1"), "g1");
  Result<Decision> bad =
      w.Place(w.Pod("p", {Req(1)}, {{"hami.io/device-scoring-weights", "slot=1"}}));
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
}

TEST(Placement, NumaBindGroupsDevices) {
  SchedulerWorld w;
  ASSERT_TRUE(w.AddNode("n", {Gpu("g0", 0, 16384, "A100", 0), Gpu("g1", 1, 16384, "A100", 1),
                              Gpu("g2", 2, 16384, "A100", 1), Gpu("g3", 3, 16384, "A100", 0)})
                  .ok());
  // Make g3 full so NUMA 0 has a single free device.
  ASSERT_TRUE(
      MustSchedule(w, w.Pod("busy", {Req(1, 16384, 100)}, {{"nvidia.com/use-gpuuuid", "g3"}}))
          .fit());
  Decision d = MustPlace(w, w.Pod("p", {Req(2, 8000, 50)}, {{"nvidia.com/numa-bind", "true"}}));
  ASSERT_TRUE(d.fit());
  EXPECT_EQ(Uuids(d), (std::vector<std::string>{"g1", "g2"}));
  d = MustPlace(w, w.Pod("p", {Req(3, 8000, 50)}, {{"nvidia.com/numa-bind", "true"}}));
  EXPECT_FALSE(d.fit());
  EXPECT_EQ(Reason(d, "n"), "1/4 CardInsufficientMemory, 3/4 NumaNotFit");
  // Without binding three devices are found across NUMA nodes.
  EXPECT_TRUE(MustPlace(w, w.Pod("p", {Req(3, 8000, 50)})).fit());
}

TEST(Placement, NumaFirstIsSoft) {
  SchedulerWorld w;
  ASSERT_TRUE(w.AddNode("n", {Gpu("g0", 0, 16384, "A100", 0), Gpu("g1", 1, 16384, "A100", 1),
                              Gpu("g2", 2, 16384, "A100", 1)})
                  .ok());
  device::Annotations nf{{"hami.io/gpu-scheduler-policy", "numa-first"}};
  EXPECT_EQ(Uuids(MustPlace(w, w.Pod("p", {Req(2, 1000)}, nf))),
            (std::vector<std::string>{"g1", "g2"}));
  EXPECT_TRUE(MustPlace(w, w.Pod("p", {Req(3, 1000)}, nf)).fit());
}

TEST(Placement, TopologyAware) {
  SchedulerWorld w;
  device::Annotations scores{
      {"hami.io/node-nvidia-score",
       R"([{"uuid":"g0","score":{"g1":20,"g2":20,"g3":20}},)"
       R"({"uuid":"g1","score":{"g2":20,"g3":600}},{"uuid":"g2","score":{"g3":20}}])"}};
  ASSERT_TRUE(w.AddNode("n",
                        {Gpu("g0", 0, 16384), Gpu("g1", 1, 16384), Gpu("g2", 2, 16384),
                         Gpu("g3", 3, 16384)},
                        scores)
                  .ok());
  device::Annotations topo{{"hami.io/gpu-scheduler-policy", "topology-aware"}};
  EXPECT_EQ(Uuids(MustPlace(w, w.Pod("p", {Req(2, 1000)}, topo))),
            (std::vector<std::string>{"g1", "g3"}));
  // One device: keep the NVLink pair free.
  std::vector<std::string> one = Uuids(MustPlace(w, w.Pod("p", {Req(1, 1000)}, topo)));
  ASSERT_EQ(one.size(), 1u);
  EXPECT_TRUE(one[0] == "g0" || one[0] == "g2") << one[0];
  // The seed's spelling `topology` works too.
  EXPECT_EQ(Uuids(MustPlace(
                w, w.Pod("p", {Req(2, 1000)}, {{"hami.io/gpu-scheduler-policy", "topology"}}))),
            (std::vector<std::string>{"g1", "g3"}));
}

TEST(Placement, NodePolicyPrecedence) {
  SchedulerWorld w;
  ASSERT_TRUE(w.AddNode("busy", {Gpu("b0", 0, 16384)}).ok());
  ASSERT_TRUE(w.AddNode("idle", {Gpu("i0", 0, 16384)}).ok());
  ASSERT_TRUE(
      MustSchedule(w, w.Pod("seed", {Req(1, 4000, 20)}, {{"nvidia.com/use-gpuuuid", "b0"}})).fit());
  EXPECT_EQ(MustPlace(w, w.Pod("p", {Req(1, 1000)})).node, "busy");  // global binpack
  Decision d =
      MustPlace(w, w.Pod("p", {Req(1, 1000)}, {{"hami.io/node-scheduler-policy", "spread"}}));
  EXPECT_EQ(d.node, "idle");
  EXPECT_EQ(d.policies.node_source, PolicySource::kPod);
  w.SetEngine(EngineOptions{NodePolicy::kSpread, "spread"});
  EXPECT_EQ(MustPlace(w, w.Pod("p", {Req(1, 1000)})).node, "idle");
}

TEST(Placement, NodeAnnotationGpuPolicyAndPodOverride) {
  SchedulerWorld w;
  device::Annotations node_policy{{"hami.io/gpu-scheduler-policy", "binpack"}};
  ASSERT_TRUE(w.AddNode("n", {Gpu("g0", 0, 16384), Gpu("g1", 1, 16384)}, node_policy).ok());
  ASSERT_TRUE(
      MustSchedule(w, w.Pod("seed", {Req(1, 4000)}, {{"nvidia.com/use-gpuuuid", "g1"}})).fit());
  EXPECT_EQ(Uuids(MustPlace(w, w.Pod("p", {Req(1, 1000)}))), std::vector<std::string>{"g1"});
  Decision d =
      MustPlace(w, w.Pod("p", {Req(1, 1000)}, {{"hami.io/gpu-scheduler-policy", "spread"}}));
  EXPECT_EQ(Uuids(d), std::vector<std::string>{"g0"});
}

TEST(Placement, MultiContainerCumulativeAndIndexAligned) {
  SchedulerWorld w;
  ASSERT_TRUE(w.AddNode("n", {Gpu("g0", 0, 16384)}).ok());
  // Two app containers of 10 GiB cannot share a 16 GiB card.
  Decision d = MustPlace(w, w.Pod("p", {Req(1, 10000), Req(1, 10000)}));
  EXPECT_EQ(Reason(d, "n"), "1/1 CardInsufficientMemory");
  d = MustPlace(w, w.Pod("p", {Req(1, 6000), Limits({}, "sidecar"), Req(1, 6000)}));
  ASSERT_TRUE(d.fit());
  ASSERT_EQ(d.devices.at("NVIDIA").size(), 3u);
  EXPECT_TRUE(d.devices.at("NVIDIA")[1].empty());
}

TEST(Placement, InitContainersRunSequentially) {
  SchedulerWorld w;
  ASSERT_TRUE(w.AddNode("n", {Gpu("g0", 0, 16384)}).ok());
  // Two init containers of 10 GiB each fit (one after another), then a 12 GiB app container.
  PodSpec pod = w.Pod("p", {Req(1, 12000)}, {}, {Req(1, 10000), Req(1, 10000)});
  Decision d = MustSchedule(w, pod);
  ASSERT_TRUE(d.fit());
  ASSERT_EQ(d.devices.at("NVIDIA").size(), 3u);
  const LedgerDevice& g0 = w.ledger().nodes()[0].devices[0];
  EXPECT_EQ(g0.used_mem, 12000);  // max(init peak 10000, app 12000)
  EXPECT_EQ(g0.used_slots, 1);
  // Init 14 GiB + app 4 GiB: the app part alone would fit, the init peak decides.
  EXPECT_FALSE(MustPlace(w, w.Pod("q", {Req(1, 1000)}, {}, {Req(1, 5000)})).fit());
}

TEST(Placement, ExplainTrace) {
  SchedulerWorld w;
  device::DeviceInfo sick = Gpu("g1", 1, 16384);
  sick.health = false;
  ASSERT_TRUE(w.AddNode("a", {Gpu("g0", 0, 16384), sick}).ok());
  ASSERT_TRUE(w.AddNode("b", {Gpu("h0", 0, 4096)}).ok());
  PodSpec pod = w.Pod("p", {Req(1, 8000, 50)}, {{"hami.io/gpu-scheduler-policy", "binpack,bogus"}});
  Decision d = MustPlace(w, pod, TraceLevel::kDevices);
  std::string text = RenderExplain(w.ledger(), pod, d);
  EXPECT_EQ(text,
            "pod default/p (uid-p): placed on a (score 5.44)\n"
            "policy: node=binpack (global default), gpu=binpack (pod annotation), weights "
            "slot=1,core=1,memory=1\n"
            "ignored policy tokens: bogus\n"
            "a: fit, score 5.44\n"
            "  container 0 g0 [0] score 10.88 chosen\n"
            "  container 0 g1 [1] CardNotHealth\n"
            "b: 1/1 CardInsufficientMemory (container 0)\n"
            "  container 0 h0 [0] CardInsufficientMemory\n");
  EXPECT_EQ(d.SucceedMessage(), "find fit node(a), 1 nodes not fit, 1 nodes fit(a:5.44)");
}

TEST(Placement, NoRequestsPassThrough) {
  SchedulerWorld w;
  ASSERT_TRUE(w.AddNode("n", {Gpu("g0", 0, 16384)}).ok());
  Decision d = MustPlace(w, w.Pod("p", {Limits({{"cpu", "1"}})}));
  EXPECT_FALSE(d.requests_devices);
  EXPECT_TRUE(d.verdicts.empty());
}

TEST(Placement, RefilterDropsOwnReservation) {
  SchedulerWorld w;
  ASSERT_TRUE(w.AddNode("n", {Gpu("g0", 0, 16384)}).ok());
  PodSpec pod = w.Pod("p", {Req(1, 10000)});
  std::vector<std::string_view> names{"n"};
  ASSERT_TRUE(PlaceAndReserve(w.ledger(), w.engine(), pod, names)->fit());
  // Filtered again (bind failed): its own reservation does not block it.
  Result<Decision> again = PlaceAndReserve(w.ledger(), w.engine(), pod, names);
  ASSERT_TRUE(again.ok());
  EXPECT_TRUE(again->fit());
  EXPECT_EQ(w.ledger().nodes()[0].devices[0].used_mem, 10000);
}

}  // namespace
}  // namespace hami::scheduler
