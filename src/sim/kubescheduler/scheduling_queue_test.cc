// SchedulingQueue on a fake clock: FIFO without duplicates, exponential backoff, the
// unschedulable pool and cluster events, updates and deletions while in flight, assumed pods,
// pausing, and blocking Pop().
#include "sim/kubescheduler/scheduling_queue.h"

#include <gtest/gtest.h>

#include <thread>

namespace hami::sim {
namespace {

using std::chrono::milliseconds;

class SchedulingQueueTest : public ::testing::Test {
 protected:
  SchedulingQueueTest() : queue_(clock_, Options()) {}
  static SchedulingQueueOptions Options() {
    SchedulingQueueOptions o;
    o.initial_backoff = milliseconds(100);
    o.max_backoff = milliseconds(1000);
    o.unschedulable_timeout = milliseconds(60000);
    o.assumed_ttl = milliseconds(5000);
    o.max_wait_slice = milliseconds(5);
    return o;
  }
  std::string PopKey() {
    std::optional<QueuedPod> p = queue_.TryPop();
    return p ? p->key : "";
  }
  hami::FakeClock clock_;
  SchedulingQueue queue_;
};

TEST_F(SchedulingQueueTest, FifoWithoutDuplicates) {
  queue_.AddOrUpdate("ns/a", true);
  queue_.AddOrUpdate("ns/b", true);
  queue_.AddOrUpdate("ns/a", true);
  EXPECT_EQ(queue_.Sizes().active, 2u);
  std::optional<QueuedPod> a = queue_.TryPop();
  ASSERT_TRUE(a);
  EXPECT_EQ(a->key, "ns/a");
  EXPECT_EQ(a->attempt, 1);
  // While in flight, adds and updates do not queue it a second time.
  queue_.AddOrUpdate("ns/a", true);
  EXPECT_EQ(PopKey(), "ns/b");
  EXPECT_EQ(PopKey(), "");
  EXPECT_EQ(queue_.Sizes().in_flight, 2u);
}

TEST_F(SchedulingQueueTest, ErrorsBackOffExponentially) {
  EXPECT_EQ(queue_.BackoffFor(1), milliseconds(100));
  EXPECT_EQ(queue_.BackoffFor(2), milliseconds(200));
  EXPECT_EQ(queue_.BackoffFor(4), milliseconds(800));
  EXPECT_EQ(queue_.BackoffFor(5), milliseconds(1000));
  EXPECT_EQ(queue_.BackoffFor(50), milliseconds(1000));

  queue_.AddOrUpdate("ns/a", true);
  ASSERT_EQ(PopKey(), "ns/a");
  queue_.Done("ns/a", CycleOutcome::kError);
  EXPECT_EQ(queue_.Sizes().backoff, 1u);
  clock_.Advance(milliseconds(99));
  EXPECT_EQ(PopKey(), "");
  clock_.Advance(milliseconds(1));
  std::optional<QueuedPod> p = queue_.TryPop();
  ASSERT_TRUE(p);
  EXPECT_EQ(p->attempt, 2);
  queue_.Done("ns/a", CycleOutcome::kError);
  clock_.Advance(milliseconds(199));
  EXPECT_EQ(PopKey(), "");
  clock_.Advance(milliseconds(1));
  EXPECT_EQ(PopKey(), "ns/a");
  EXPECT_EQ(queue_.Attempts("ns/a"), 3);
}

TEST_F(SchedulingQueueTest, UnschedulableWaitsForAClusterEvent) {
  queue_.AddOrUpdate("ns/a", true);
  ASSERT_EQ(PopKey(), "ns/a");
  queue_.Done("ns/a", CycleOutcome::kUnschedulable);
  EXPECT_EQ(queue_.Sizes().unschedulable, 1u);
  clock_.Advance(milliseconds(5000));  // backoff long over, still no event
  EXPECT_EQ(PopKey(), "");
  // An update that only touches status does not help it.
  queue_.AddOrUpdate("ns/a", false);
  EXPECT_EQ(PopKey(), "");
  queue_.MoveAllToActiveOrBackoff();
  EXPECT_EQ(PopKey(), "ns/a");
}

TEST_F(SchedulingQueueTest, ClusterEventRespectsRunningBackoff) {
  queue_.AddOrUpdate("ns/a", true);
  ASSERT_EQ(PopKey(), "ns/a");
  queue_.Done("ns/a", CycleOutcome::kUnschedulable);
  queue_.MoveAllToActiveOrBackoff();  // immediately: still inside the 100ms backoff
  EXPECT_EQ(queue_.Sizes().backoff, 1u);
  EXPECT_EQ(PopKey(), "");
  clock_.Advance(milliseconds(100));
  EXPECT_EQ(PopKey(), "ns/a");
}

TEST_F(SchedulingQueueTest, PodUpdateMovesUnschedulablePod) {
  queue_.AddOrUpdate("ns/a", true);
  ASSERT_EQ(PopKey(), "ns/a");
  queue_.Done("ns/a", CycleOutcome::kUnschedulable);
  clock_.Advance(milliseconds(150));
  queue_.AddOrUpdate("ns/a", true);
  EXPECT_EQ(PopKey(), "ns/a");
}

TEST_F(SchedulingQueueTest, UnschedulableTimeoutFlushes) {
  queue_.AddOrUpdate("ns/a", true);
  ASSERT_EQ(PopKey(), "ns/a");
  queue_.Done("ns/a", CycleOutcome::kUnschedulable);
  clock_.Advance(milliseconds(59999));
  EXPECT_EQ(PopKey(), "");
  clock_.Advance(milliseconds(1));
  EXPECT_EQ(PopKey(), "ns/a");
}

TEST_F(SchedulingQueueTest, EventsDuringTheCycleSendUnschedulableToBackoff) {
  queue_.AddOrUpdate("ns/a", true);
  queue_.AddOrUpdate("ns/b", true);
  ASSERT_EQ(PopKey(), "ns/a");
  ASSERT_EQ(PopKey(), "ns/b");
  queue_.MoveAllToActiveOrBackoff();  // e.g. a node was added while both were being filtered
  queue_.Done("ns/a", CycleOutcome::kUnschedulable);
  queue_.AddOrUpdate("ns/b", true);  // b itself changed
  EXPECT_EQ(queue_.Sizes().unschedulable, 0u);
  queue_.Done("ns/b", CycleOutcome::kUnschedulable);
  EXPECT_EQ(queue_.Sizes().unschedulable, 0u);
  EXPECT_EQ(queue_.Sizes().backoff, 2u);
  clock_.Advance(milliseconds(100));
  EXPECT_EQ(PopKey(), "ns/a");
  EXPECT_EQ(PopKey(), "ns/b");
}

TEST_F(SchedulingQueueTest, DeleteDropsPodsWherever) {
  queue_.AddOrUpdate("ns/a", true);
  queue_.AddOrUpdate("ns/b", true);
  queue_.AddOrUpdate("ns/c", true);
  queue_.Delete("ns/a");  // active
  ASSERT_EQ(PopKey(), "ns/b");
  queue_.Done("ns/b", CycleOutcome::kError);
  queue_.Delete("ns/b");  // backing off
  ASSERT_EQ(PopKey(), "ns/c");
  queue_.Delete("ns/c");  // in flight: dropped when the cycle ends, whatever its outcome
  queue_.Done("ns/c", CycleOutcome::kError);
  clock_.Advance(milliseconds(10000));
  EXPECT_EQ(PopKey(), "");
  QueueSizes s = queue_.Sizes();
  EXPECT_EQ(s.active + s.backoff + s.unschedulable + s.in_flight + s.assumed, 0u);
  EXPECT_EQ(queue_.Attempts("ns/b"), 0);
}

TEST_F(SchedulingQueueTest, RecreatedWhileInFlightIsScheduledAgain) {
  queue_.AddOrUpdate("ns/a", true);
  ASSERT_EQ(PopKey(), "ns/a");
  queue_.Delete("ns/a");
  queue_.AddOrUpdate("ns/a", true);  // a new pod with the same name
  queue_.Done("ns/a", CycleOutcome::kError);
  std::optional<QueuedPod> p = queue_.TryPop();
  ASSERT_TRUE(p);
  EXPECT_EQ(p->attempt, 1);
}

TEST_F(SchedulingQueueTest, AssumedPodsIgnoreUpdatesUntilTtl) {
  queue_.AddOrUpdate("ns/a", true);
  ASSERT_EQ(PopKey(), "ns/a");
  queue_.Done("ns/a", CycleOutcome::kScheduled);
  EXPECT_EQ(queue_.Sizes().assumed, 1u);
  queue_.AddOrUpdate("ns/a", true);  // the informer has not seen the binding yet
  queue_.MoveAllToActiveOrBackoff();
  EXPECT_EQ(PopKey(), "");
  clock_.Advance(milliseconds(5000));
  queue_.AddOrUpdate("ns/a", true);
  EXPECT_EQ(PopKey(), "ns/a");
  queue_.Done("ns/a", CycleOutcome::kScheduled);
  queue_.Delete("ns/a");  // the binding shows up
  EXPECT_EQ(queue_.Sizes().assumed, 0u);
}

TEST_F(SchedulingQueueTest, PausedQueueHandsNothingOut) {
  queue_.SetPaused(true);
  queue_.AddOrUpdate("ns/a", true);
  EXPECT_EQ(PopKey(), "");
  EXPECT_EQ(queue_.Sizes().active, 1u);
  queue_.SetPaused(false);
  EXPECT_EQ(PopKey(), "ns/a");
}

TEST_F(SchedulingQueueTest, BlockingPopWakesOnAddAndClose) {
  std::optional<QueuedPod> got;
  std::thread t([&] { got = queue_.Pop(nullptr); });
  queue_.AddOrUpdate("ns/a", true);
  t.join();
  ASSERT_TRUE(got);
  EXPECT_EQ(got->key, "ns/a");

  std::thread t2([&] { got = queue_.Pop(nullptr); });
  queue_.Close();
  t2.join();
  EXPECT_FALSE(got);

  hami::Cancellation cancel;
  cancel.Cancel();
  EXPECT_FALSE(queue_.Pop(&cancel));
}

TEST_F(SchedulingQueueTest, BlockingPopNoticesBackoffExpiryOnAFakeClock) {
  queue_.AddOrUpdate("ns/a", true);
  ASSERT_EQ(PopKey(), "ns/a");
  queue_.Done("ns/a", CycleOutcome::kError);
  std::optional<QueuedPod> got;
  std::thread t([&] { got = queue_.Pop(nullptr); });
  clock_.Advance(milliseconds(100));
  t.join();
  ASSERT_TRUE(got);
  EXPECT_EQ(got->attempt, 2);
}

}  // namespace
}  // namespace hami::sim
