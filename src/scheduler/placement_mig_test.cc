// Dynamic MIG placement: the profile a request gets on a GPU in MIG mode (memory, percentage,
// whole GPU, gpucores), non-overlapping placements within a pod, and capacity by placements
// rather than by the core sum. Profile figures are NVML's for an A100-80GB and an A100-40GB
// (cores: SMs as a rounded-up percentage of the full GPU's, as the device plugin registers them).
#include <gtest/gtest.h>

#include "scheduler/placement.h"
#include "scheduler/test_util.h"

namespace hami::scheduler {
namespace {

using device::MigProfile;
using testing::Gpu;
using testing::Limits;
using testing::SchedulerWorld;

device::ContainerResources Req(int gpus, int mem = 0, int cores = -1, int pct = -1) {
  testing::Quantities q{{"nvidia.com/gpu", std::to_string(gpus)}};
  if (mem > 0) q["nvidia.com/gpumem"] = std::to_string(mem);
  if (cores >= 0) q["nvidia.com/gpucores"] = std::to_string(cores);
  if (pct >= 0) q["nvidia.com/gpumem-percentage"] = std::to_string(pct);
  return Limits(q);
}

// An A100-80GB in MIG mode, its profiles listed in allowlist order (largest first), as a
// registration may list them: the scheduler must not depend on that order.
device::DeviceInfo A100x80(std::string uuid = "mig0", uint32_t index = 0) {
  device::DeviceInfo g = Gpu(std::move(uuid), index, 81920, "NVIDIA A100-SXM4-80GB", 0, 7);
  g.mode = "mig";
  g.mig_profiles = {
      MigProfile{"7g.80gb", 80384, 100, 7, {{0, 8}}},
      MigProfile{"4g.40gb", 40192, 58, 4, {{0, 4}}},
      MigProfile{"3g.40gb", 40192, 43, 3, {{0, 4}, {4, 4}}},
      MigProfile{"2g.20gb", 19968, 29, 2, {{0, 2}, {2, 2}, {4, 2}}},
      MigProfile{"1g.20gb", 19968, 15, 1, {{0, 2}, {2, 2}, {4, 2}, {6, 2}}},
      MigProfile{"1g.10gb", 9856, 15, 1, {{0, 1}, {1, 1}, {2, 1}, {3, 1}, {4, 1}, {5, 1}, {6, 1}}},
  };
  return g;
}

// An A100-40GB in MIG mode, where half the memory slices hold less than half the 7g's MiB.
device::DeviceInfo A100x40() {
  device::DeviceInfo g = Gpu("mig40", 0, 40960, "NVIDIA A100-SXM4-40GB", 0, 7);
  g.mode = "mig";
  g.mig_profiles = {
      MigProfile{"1g.5gb", 4864, 15, 1, {{0, 1}, {1, 1}, {2, 1}, {3, 1}, {4, 1}, {5, 1}, {6, 1}}},
      MigProfile{"2g.10gb", 9856, 29, 2, {{0, 2}, {2, 2}, {4, 2}}},
      MigProfile{"3g.20gb", 19968, 43, 3, {{0, 4}, {4, 4}}},
      MigProfile{"7g.40gb", 40192, 100, 7, {{0, 8}}},
  };
  return g;
}

// The profile of a single-device pod placed on `w` (not reserved), or the node's failure reason.
std::string ProfileOf(SchedulerWorld& w, const device::ContainerResources& c) {
  Result<Decision> d = w.Place(w.Pod("p", {c}));
  if (!d.ok()) return d.status().ToString();
  if (!d->fit()) return d->FailedNodes().begin()->second;
  return d->mig.size() == 1 ? d->mig[0].profile : "<no mig>";
}

TEST(PlacementMig, ProfileAndPlacement) {
  SchedulerWorld w;
  device::DeviceInfo mig = Gpu("mig0", 0, 40960, "NVIDIA A100-SXM4-40GB");
  mig.mode = "mig";
  mig.mig_profiles = {
      MigProfile{"1g.5gb", 4864, 14, 1, {{0, 1}, {1, 1}, {2, 1}}},
      MigProfile{"2g.10gb", 9984, 28, 2, {{0, 2}, {2, 2}}},
  };
  ASSERT_TRUE(w.AddNode("n", {mig}).ok());
  Result<Decision> d = w.Schedule(w.Pod("a", {Req(1, 4000)}));
  ASSERT_TRUE(d.ok() && d->fit());
  ASSERT_EQ(d->mig.size(), 1u);
  EXPECT_EQ(d->mig[0].profile, "1g.5gb");
  EXPECT_EQ(d->mig[0].placement.start, 2u);  // 1g: highest start first
  EXPECT_EQ(d->devices.at("NVIDIA")[0][0].mem_mib, 4864);
  d = w.Schedule(w.Pod("b", {Req(1, 9000)}));
  ASSERT_TRUE(d.ok() && d->fit());
  EXPECT_EQ(d->mig[0].profile, "2g.10gb");
  EXPECT_EQ(d->mig[0].placement.start, 0u);
  // Slices 0-1 (2g) and 2 (1g) are taken: no room for another 2g.
  EXPECT_EQ(ProfileOf(w, Req(1, 9000)), "1/1 CardMigTopologyInfeasible");
  // Two 1g instances for one container on the same GPU once the 2g is gone.
  w.DeletePod("uid-b");
  d = w.Place(w.Pod("c", {Req(2, 4000)}));
  ASSERT_TRUE(d.ok() && d->fit());
  ASSERT_EQ(d->mig.size(), 2u);
  EXPECT_EQ(d->mig[0].placement.start, 1u);
  EXPECT_EQ(d->mig[1].placement.start, 0u);
  EXPECT_EQ(d->mig[1].device_index, 1);
}

// Look-ahead placement: each instance goes where it leaves the most placements of every profile
// free. On an empty A100-80GB a 2g takes slices 4-5 (not 0-1, upstream's fixed rule), so a 4g
// (placement 0-3 only) still fits beside it; and a 1g then fills slice 6 before breaking into
// 0-3.
TEST(PlacementMig, LookAheadKeepsRoomForTheLargerProfiles) {
  SchedulerWorld w;
  ASSERT_TRUE(w.AddNode("n", {A100x80()}).ok());
  Result<Decision> d = w.Schedule(w.Pod("two-g", {Req(1, 15000, 25)}));
  ASSERT_TRUE(d.ok() && d->fit());
  EXPECT_EQ(d->mig[0].profile, "2g.20gb");
  EXPECT_EQ(d->mig[0].placement.start, 4u);
  d = w.Schedule(w.Pod("one-g", {Req(1, 4000)}));
  ASSERT_TRUE(d.ok() && d->fit());
  EXPECT_EQ(d->mig[0].profile, "1g.10gb");
  EXPECT_EQ(d->mig[0].placement.start, 6u);
  d = w.Schedule(w.Pod("four-g", {Req(1, 40000, 50)}));
  ASSERT_TRUE(d.ok() && d->fit()) << "the 4g lost its only placement";
  EXPECT_EQ(d->mig[0].profile, "4g.40gb");
  EXPECT_EQ(d->mig[0].placement.start, 0u);
  EXPECT_EQ(ProfileOf(w, Req(1, 4000)), "1/1 CardMigTopologyInfeasible");
}

// Profiles are tried memory first, then slices, whatever the registration's order.
TEST(PlacementMig, SmallestProfileWhateverTheRegistrationOrder) {
  SchedulerWorld w;
  ASSERT_TRUE(w.AddNode("n", {A100x80()}).ok());
  EXPECT_EQ(ProfileOf(w, Req(1, 4000)), "1g.10gb");
  EXPECT_EQ(ProfileOf(w, Req(1, 15000)), "1g.20gb");  // 1g.20gb before 2g.20gb: fewer slices
  EXPECT_EQ(ProfileOf(w, Req(1, 30000)), "3g.40gb");
  EXPECT_EQ(ProfileOf(w, Req(1, 80384)), "7g.80gb");
}

// B6: no gpumem means the whole GPU, whose memory exceeds every profile's; it gets the largest.
// An explicit gpumem is never clamped.
TEST(PlacementMig, WholeGpuGetsTheLargestProfile) {
  SchedulerWorld w;
  ASSERT_TRUE(w.AddNode("n", {A100x80()}).ok());
  EXPECT_EQ(ProfileOf(w, Req(1)), "7g.80gb");
  EXPECT_EQ(ProfileOf(w, Req(1, 0, 100)), "7g.80gb");  // what the webhook makes of it
  EXPECT_EQ(ProfileOf(w, Req(1, 81920)), "1/1 CardMigTopologyInfeasible");

  Result<Decision> d = w.Schedule(w.Pod("whole", {Req(1)}));
  ASSERT_TRUE(d.ok() && d->fit());
  EXPECT_EQ(d->devices.at("NVIDIA")[0][0].mem_mib, 80384);
  EXPECT_EQ(d->devices.at("NVIDIA")[0][0].cores, 100);
  EXPECT_EQ(ProfileOf(w, Req(1, 1000)), "1/1 CardMigTopologyInfeasible");

  // Only the allowed profiles count: without 7g and 4g, the whole GPU is a 3g.
  SchedulerWorld small;
  device::DeviceInfo g = A100x80();
  g.mig_profiles.erase(g.mig_profiles.begin(), g.mig_profiles.begin() + 2);
  ASSERT_TRUE(small.AddNode("n", {g}).ok());
  EXPECT_EQ(ProfileOf(small, Req(1)), "3g.40gb");
  EXPECT_EQ(ProfileOf(small, Req(1, 0, 100)), "3g.40gb");
}

// A percentage asks for that share of the memory slices (of the widest allowed profile).
TEST(PlacementMig, PercentagesCountMemorySlices) {
  SchedulerWorld w;
  ASSERT_TRUE(w.AddNode("n", {A100x80()}).ok());
  EXPECT_EQ(ProfileOf(w, Req(1, 0, -1, 100)), "7g.80gb");
  EXPECT_EQ(ProfileOf(w, Req(1, 0, -1, 51)), "7g.80gb");
  EXPECT_EQ(ProfileOf(w, Req(1, 0, -1, 50)), "3g.40gb");
  EXPECT_EQ(ProfileOf(w, Req(1, 0, -1, 25)), "1g.20gb");
  EXPECT_EQ(ProfileOf(w, Req(1, 0, -1, 10)), "1g.10gb");

  // In MiB, 50 % of the 7g (20096) is more than the 3g.20gb holds (19968).
  SchedulerWorld w40;
  ASSERT_TRUE(w40.AddNode("n", {A100x40()}).ok());
  EXPECT_EQ(ProfileOf(w40, Req(1, 0, -1, 50)), "3g.20gb");
  EXPECT_EQ(ProfileOf(w40, Req(1, 0, -1, 100)), "7g.40gb");
  EXPECT_EQ(ProfileOf(w40, Req(1, 0, -1, 20)), "2g.10gb");
}

// gpucores is a second key: the profile's core figure must reach it.
TEST(PlacementMig, CoresPickTheProfile) {
  SchedulerWorld w;
  ASSERT_TRUE(w.AddNode("n", {A100x80()}).ok());
  EXPECT_EQ(ProfileOf(w, Req(1, 4000, 15)), "1g.10gb");
  EXPECT_EQ(ProfileOf(w, Req(1, 4000, 20)), "2g.20gb");
  EXPECT_EQ(ProfileOf(w, Req(1, 4000, 50)), "4g.40gb");
  EXPECT_EQ(ProfileOf(w, Req(1, 4000, 100)), "7g.80gb");
  EXPECT_EQ(ProfileOf(w, Req(1, 30000, 10)), "3g.40gb");
  Result<Decision> d = w.Place(w.Pod("p", {Req(1, 4000, 20)}));
  ASSERT_TRUE(d.ok() && d->fit());
  EXPECT_EQ(d->devices.at("NVIDIA")[0][0].cores, 29);
  EXPECT_EQ(d->devices.at("NVIDIA")[0][0].mem_mib, 19968);
}

// B12: seven 1g instances add up to 105 cores; the placements, not the core sum, are the limit.
TEST(PlacementMig, SevenSmallestInstancesFillTheGpu) {
  SchedulerWorld w;
  ASSERT_TRUE(w.AddNode("n", {A100x80()}).ok());
  std::vector<std::string_view> names{"n"};
  for (int i = 0; i < 7; ++i) {
    PodSpec pod = w.Pod("p" + std::to_string(i), {Req(1, 9000, i < 6 ? 10 : 15)});
    if (i < 6) {
      Result<Decision> d = w.Schedule(pod);
      ASSERT_TRUE(d.ok() && d->fit()) << i;
      EXPECT_EQ(d->mig[0].profile, "1g.10gb");
      continue;
    }
    // The last one as its annotations arrive before the bind: a reservation is counted too.
    Result<Decision> d = PlaceAndReserve(w.ledger(), w.engine(), pod, names);
    ASSERT_TRUE(d.ok() && d->fit());
    EXPECT_EQ(d->mig[0].placement.start, 0u);
    PodObject o = testing::AnnotatedPod(w.vendors(), pod, *d, w.clock().NowUnixSeconds(),
                                        /*bound=*/false);
    EXPECT_TRUE(w.ledger().UpsertPod(o).ok());
  }
  const LedgerDevice& g = w.ledger().nodes()[0].devices[0];
  EXPECT_EQ(g.used_slots, 7);
  EXPECT_EQ(g.used_cores, 105);
  EXPECT_TRUE(w.ledger().OverCommitted().empty());
  EXPECT_TRUE(w.ledger().CheckConsistency().ok());
  EXPECT_EQ(ProfileOf(w, Req(1, 1000)), "1/1 CardTimeSlicingExhausted");
}

// A registration whose core figures reach 100 before its placements run out: a request with no
// cores still fits (no compute-units-exhausted refusal on a MIG device).
TEST(PlacementMig, CoreSumIsNoLimit) {
  SchedulerWorld w;
  device::DeviceInfo g = A100x80();
  g.mig_profiles = {MigProfile{"2g.20gb", 19968, 50, 2, {{0, 2}, {2, 2}, {4, 2}}}};
  ASSERT_TRUE(w.AddNode("n", {g}).ok());
  for (const char* name : {"a", "b"}) {
    Result<Decision> d = w.Schedule(w.Pod(name, {Req(1, 10000, 50)}));
    ASSERT_TRUE(d.ok() && d->fit()) << name;
  }
  EXPECT_EQ(ProfileOf(w, Req(1, 10000)), "2g.20gb");
  EXPECT_EQ(ProfileOf(w, Req(1, 10000, 50)), "2g.20gb");
}

// Every device of a pod gets its own placement: several per container, several containers, init
// containers included (the pod's reservation holds all of its instances at once, as upstream's).
TEST(PlacementMig, PodInstancesNeverOverlap) {
  SchedulerWorld w;
  ASSERT_TRUE(w.AddNode("n", {A100x80()}).ok());
  Result<Decision> d = w.Place(w.Pod("two", {Req(2, 0, -1, 50)}));
  ASSERT_TRUE(d.ok() && d->fit());
  ASSERT_EQ(d->mig.size(), 2u);
  EXPECT_EQ(d->mig[0].profile, "3g.40gb");
  EXPECT_EQ(d->mig[1].profile, "3g.40gb");
  EXPECT_FALSE(d->mig[0].placement.Overlaps(d->mig[1].placement));
  EXPECT_FALSE(w.Place(w.Pod("three", {Req(3, 0, -1, 50)}))->fit());

  // Init 3g at slices 4-7; then 1g at 3, 1g.20gb at 0-1 (2-3 overlaps), 1g at 2 and none left.
  PodSpec pod = w.Pod("many", {Req(1, 9000), Req(1, 15000), Req(1, 4000)}, {}, {Req(1, 30000)});
  PodSpec more = w.Pod("more", {Req(1, 9000), Req(1, 15000), Req(2, 4000)}, {}, {Req(1, 30000)});
  EXPECT_FALSE(w.Place(more)->fit());
  d = w.Schedule(pod);
  ASSERT_TRUE(d.ok() && d->fit());
  ASSERT_EQ(d->mig.size(), 4u);
  for (size_t a = 0; a < d->mig.size(); ++a) {
    for (size_t b = a + 1; b < d->mig.size(); ++b) {
      EXPECT_FALSE(d->mig[a].placement.Overlaps(d->mig[b].placement)) << a << " " << b;
    }
  }
  EXPECT_EQ(d->mig[0].profile, "3g.40gb");  // the init container
  EXPECT_EQ(d->mig[2].profile, "1g.20gb");
  EXPECT_EQ(d->mig[3].placement.start, 2u);
  EXPECT_EQ(ProfileOf(w, Req(1, 1000)), "1/1 CardMigTopologyInfeasible");
}

// Upstream's B2, the scheduler's half: a terminating pod keeps its placement (its processes may
// still run in the instance, which the device plugin cannot destroy yet) until it has finished,
// so no other pod is sent to a place the plugin cannot free.
TEST(PlacementMig, ATerminatingPodKeepsItsPlacementUntilItFinishes) {
  SchedulerWorld w;
  ASSERT_TRUE(w.AddNode("n", {A100x80()}).ok());
  Result<Decision> d = w.Schedule(w.Pod("old", {Req(1)}));
  ASSERT_TRUE(d.ok() && d->fit());
  ASSERT_EQ(d->mig.size(), 1u);
  EXPECT_EQ(d->mig[0].profile, "7g.80gb");
  PodObject& old = w.pod_objects().at("uid-old");
  old.deleting = true;
  ASSERT_TRUE(w.ledger().UpsertPod(old).ok());
  Result<Decision> blocked = w.Place(w.Pod("new", {Req(1, 4000)}));
  ASSERT_TRUE(blocked.ok());
  EXPECT_FALSE(blocked->fit());
  old.phase = PodPhase::kSucceeded;
  ASSERT_TRUE(w.ledger().UpsertPod(old).ok());
  EXPECT_EQ(ProfileOf(w, Req(1, 4000)), "1g.10gb");
}

}  // namespace
}  // namespace hami::scheduler
