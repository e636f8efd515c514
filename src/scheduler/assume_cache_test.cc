#include "scheduler/assume_cache.h"

#include <gtest/gtest.h>

#include "scheduler/test_util.h"

namespace hami::scheduler {
namespace {

using testing::Gpu;
using testing::Limits;
using testing::SchedulerWorld;

// The cache over a world with one node of two 16 GiB GPUs; pods ask for one 10 GiB slice, so
// the node holds two such pods, not three.
class AssumeCacheTest : public ::testing::Test {
 protected:
  AssumeCacheTest() : cache_(w_.vendors(), w_.clock(), LedgerOptions{300}) {
    bool registered = false;
    EXPECT_TRUE(cache_
                    .UpsertNode(testing::MakeNode("node-a",
                                                  {Gpu("GPU-0", 0, 16384), Gpu("GPU-1", 1, 16384)}),
                                &registered)
                    .ok());
    EXPECT_TRUE(registered);
  }

  PodSpec Pod(const std::string& name) {
    return w_.Pod(name, {Limits({{"nvidia.com/gpu", "1"}, {"nvidia.com/gpumem", "10240"}})});
  }

  // Places and reserves `spec`; the decision.
  Decision Assume(PodSpec& spec) {
    std::vector<std::string_view> nodes = {"node-a"};
    Result<AssumeCache::Placed> p = cache_.PlaceAndAssume(w_.engine(), spec, nodes, nullptr);
    EXPECT_TRUE(p.ok()) << p.status().ToString();
    return p.ok() ? p->decision : Decision{};
  }

  size_t PodsInLedger() const {
    return cache_.Read([](const Ledger& l) { return l.pod_count(); });
  }

  // The pod as its informer shows it: without the placement, or with `d`'s.
  PodObject Plain(const PodSpec& spec) const {
    PodObject p;
    p.uid = spec.uid;
    p.name_space = spec.name_space;
    p.name = spec.name;
    return p;
  }

  SchedulerWorld w_;
  AssumeCache cache_;
};

TEST_F(AssumeCacheTest, AnAssumedPodIgnoresEventsOlderThanItsPlacementWrite) {
  PodSpec a = Pod("a");
  Decision d = Assume(a);
  ASSERT_TRUE(d.fit());
  EXPECT_EQ(PodsInLedger(), 1u);
  Status problem;
  // Before the bind writes the placement, every event of the pod lacks it: all stale.
  EXPECT_EQ(cache_.ObservePod(Plain(a), 41, &problem), AssumeCache::Observed::kStale);
  EXPECT_EQ(PodsInLedger(), 1u);
  cache_.PlacementWritten(a.uid, 50);
  EXPECT_EQ(cache_.ObservePod(Plain(a), 49, &problem), AssumeCache::Observed::kStale);
  EXPECT_EQ(PodsInLedger(), 1u);
  // The write's own event (and later ones) apply: here the pod shows the placement.
  PodObject written = testing::AnnotatedPod(w_.vendors(), a, d, w_.clock().NowUnixSeconds(), true);
  EXPECT_EQ(cache_.ObservePod(written, 50, &problem), AssumeCache::Observed::kApplied);
  EXPECT_TRUE(problem.ok()) << problem.ToString();
  EXPECT_EQ(PodsInLedger(), 1u);
  // From then on a pod without a placement (its annotations removed) releases the devices.
  EXPECT_EQ(cache_.ObservePod(Plain(a), 51, &problem), AssumeCache::Observed::kApplied);
  EXPECT_EQ(PodsInLedger(), 0u);
}

TEST_F(AssumeCacheTest, PodsItDoesNotTrackAreIgnoredWithoutALedgerChange) {
  const uint64_t before = cache_.generation();
  Status problem;
  EXPECT_EQ(cache_.ObservePod(Plain(Pod("x")), 7, &problem), AssumeCache::Observed::kIgnored);
  cache_.ObservePodGone("uid-x");
  EXPECT_EQ(cache_.generation(), before);
  EXPECT_FALSE(cache_.Tracks("uid-x"));
}

TEST_F(AssumeCacheTest, ForgetGivesTheDevicesBackAndDropsTheUnwrittenPlacement) {
  PodSpec a = Pod("a"), b = Pod("b"), c = Pod("c");
  ASSERT_TRUE(Assume(a).fit());
  ASSERT_TRUE(Assume(b).fit());
  EXPECT_FALSE(Assume(c).fit());  // both GPUs hold 10 of their 16 GiB
  cache_.RecordPlacement(a.uid, "node-a", "{}");
  cache_.Forget(a.uid);
  EXPECT_EQ(PodsInLedger(), 1u);
  EXPECT_FALSE(cache_.BeginBind(a.uid, "node-a", true).placement.has_value());
  cache_.EndBind(a.uid);
  EXPECT_TRUE(Assume(c).fit());
}

TEST_F(AssumeCacheTest, OneBindPerPodAndFiltersWaitForIt) {
  PodSpec a = Pod("a");
  ASSERT_TRUE(Assume(a).fit());
  cache_.RecordPlacement(a.uid, "node-a", "{\"patch\":1}");
  // A bind to another node does not take this node's placement.
  AssumeCache::BindTicket other = cache_.BeginBind(a.uid, "node-b", true);
  EXPECT_TRUE(other.running_on.empty());
  EXPECT_FALSE(other.placement.has_value());
  cache_.EndBind(a.uid);
  AssumeCache::BindTicket first = cache_.BeginBind(a.uid, "node-a", true);
  ASSERT_TRUE(first.placement.has_value());
  EXPECT_EQ(first.placement->patch, "{\"patch\":1}");
  EXPECT_EQ(cache_.BeginBind(a.uid, "node-a", true).running_on, "node-a");
  std::optional<HeldLockRef> release;
  EXPECT_EQ(cache_.PrepareToPlace(a.uid, &release),
            "a bind of this pod to node-a is still running");
  EXPECT_FALSE(release.has_value());
  EXPECT_EQ(PodsInLedger(), 1u);  // the running bind keeps the devices
  // A bind that found the pod gone leaves the devices to the running one.
  cache_.ObservePodGone(a.uid, /*unless_binding=*/true);
  EXPECT_EQ(PodsInLedger(), 1u);
  EXPECT_TRUE(cache_.FinishBinding(a.uid));
  cache_.EndBind(a.uid);
  EXPECT_EQ(cache_.PrepareToPlace(a.uid, &release), "");
  EXPECT_EQ(PodsInLedger(), 1u);  // bound, not reserved: a new filter does not give it back
}

TEST_F(AssumeCacheTest, ALostBindingHoldsTheDevicesForItsGraceThenReleasesTheLock) {
  PodSpec a = Pod("a");
  ASSERT_TRUE(Assume(a).fit());
  cache_.MarkUnsettled(a.uid, HeldLockRef{"node-a", "default", "a"}, std::chrono::seconds(30));
  std::optional<HeldLockRef> release;
  std::string busy = cache_.PrepareToPlace(a.uid, &release);
  EXPECT_NE(busy.find("was lost"), std::string::npos) << busy;
  EXPECT_NE(busy.find("at most 30 s more"), std::string::npos) << busy;
  w_.clock().Advance(std::chrono::milliseconds(29500));
  busy = cache_.PrepareToPlace(a.uid, &release);
  EXPECT_NE(busy.find("at most 1 s more"), std::string::npos) << busy;
  EXPECT_FALSE(release.has_value());
  EXPECT_EQ(PodsInLedger(), 1u);
  w_.clock().Advance(std::chrono::milliseconds(500));
  EXPECT_EQ(cache_.PrepareToPlace(a.uid, &release), "");
  ASSERT_TRUE(release.has_value());
  EXPECT_EQ(release->node, "node-a");
  EXPECT_EQ(release->ns, "default");
  EXPECT_EQ(release->name, "a");
  EXPECT_EQ(PodsInLedger(), 0u);  // the unbound pod's reservation went back
}

TEST_F(AssumeCacheTest, APodShowingItsNodeSettlesALostBinding) {
  PodSpec a = Pod("a");
  Decision d = Assume(a);
  ASSERT_TRUE(d.fit());
  cache_.PlacementWritten(a.uid, 10);
  cache_.MarkUnsettled(a.uid, HeldLockRef{"node-a", "default", "a"}, std::chrono::seconds(30));
  Status problem;
  PodObject bound = testing::AnnotatedPod(w_.vendors(), a, d, w_.clock().NowUnixSeconds(), true);
  EXPECT_EQ(cache_.ObservePod(bound, 11, &problem), AssumeCache::Observed::kApplied);
  std::optional<HeldLockRef> release;
  EXPECT_EQ(cache_.PrepareToPlace(a.uid, &release), "");
  EXPECT_FALSE(release.has_value());  // bound: its device plugin owns the lock now
  EXPECT_EQ(PodsInLedger(), 1u);
}

TEST_F(AssumeCacheTest, ExpiredReservationsTakeTheirUnwrittenPlacementsAlong) {
  PodSpec a = Pod("a");
  ASSERT_TRUE(Assume(a).fit());
  cache_.RecordPlacement(a.uid, "node-a", "{}");
  EXPECT_EQ(cache_.ExpireReservations(), 0u);
  w_.clock().Advance(std::chrono::seconds(301));
  EXPECT_EQ(cache_.ExpireReservations(), 1u);
  EXPECT_EQ(PodsInLedger(), 0u);
  EXPECT_FALSE(cache_.Tracks(a.uid));  // its events apply again
  AssumeCache::BindTicket t = cache_.BeginBind(a.uid, "node-a", true);
  EXPECT_FALSE(t.placement.has_value());
}

TEST_F(AssumeCacheTest, ANodeLeavingTakesItsDevicesOutOfPlacement) {
  cache_.RemoveNode("node-a");
  PodSpec a = Pod("a");
  std::vector<std::string_view> nodes = {"node-a"};
  Result<AssumeCache::Placed> p = cache_.PlaceAndAssume(w_.engine(), a, nodes, nullptr);
  ASSERT_TRUE(p.ok());
  EXPECT_FALSE(p->decision.fit());
  EXPECT_EQ(PodsInLedger(), 0u);
  EXPECT_FALSE(cache_.Tracks(a.uid));  // a failed placement reserves nothing
}

TEST_F(AssumeCacheTest, QuotaRoomIsReadWithThePlacement) {
  PodSpec a = Pod("a");
  std::vector<std::string_view> nodes = {"node-a"};
  int calls = 0;
  Result<AssumeCache::Placed> p =
      cache_.PlaceAndAssume(w_.engine(), a, nodes, [&](const Ledger& l) {
        ++calls;
        EXPECT_EQ(l.pod_count(), 0u);
        return std::vector<QuotaRoom>{QuotaRoom{"NVIDIA", 4096, std::nullopt}};
      });
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(calls, 1);
  EXPECT_FALSE(p->decision.fit());  // 10 GiB asked, 4 GiB of room
  EXPECT_EQ(a.quota.size(), 1u);
}

}  // namespace
}  // namespace hami::scheduler
