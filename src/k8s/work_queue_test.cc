#include "k8s/work_queue.h"

#include <gtest/gtest.h>

#include <thread>
#include <vector>

namespace hami::k8s {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

TEST(WorkQueueTest, AKeyWaitsOnceAndComesBackIfAddedWhileHeld) {
  FakeClock clock;
  WorkQueue q(clock);
  q.Add("a");
  q.Add("b");
  q.Add("a");  // already waiting: no second entry
  EXPECT_EQ(q.Len(), 2u);
  std::string k;
  ASSERT_TRUE(q.TryGet(&k));
  EXPECT_EQ(k, "a");
  q.Add("a");  // while held: not handed out again until Done
  ASSERT_TRUE(q.TryGet(&k));
  EXPECT_EQ(k, "b");
  EXPECT_FALSE(q.TryGet(&k));
  q.Done("a");
  ASSERT_TRUE(q.TryGet(&k));
  EXPECT_EQ(k, "a");
  q.Done("a");
  q.Done("b");
  EXPECT_FALSE(q.TryGet(&k));
}

TEST(WorkQueueTest, DelayedKeysBecomeReadyOnTheClockAndTheEarliestDelayWins) {
  FakeClock clock;
  WorkQueue q(clock);
  EXPECT_TRUE(q.AddAfter("late", seconds(10)));
  EXPECT_TRUE(q.AddAfter("x", seconds(5)));
  EXPECT_FALSE(q.AddAfter("x", seconds(8)));  // later than the standing delay: ignored
  EXPECT_TRUE(q.AddAfter("y", seconds(9)));
  EXPECT_FALSE(q.AddAfter("y", seconds(2)));  // earlier: replaces it (not a new entry)
  EXPECT_EQ(q.Delayed(), 3u);
  std::string k;
  EXPECT_FALSE(q.TryGet(&k));
  clock.Advance(seconds(2));
  ASSERT_TRUE(q.TryGet(&k));
  EXPECT_EQ(k, "y");
  q.Done(k);
  clock.Advance(milliseconds(2999));
  EXPECT_FALSE(q.TryGet(&k));
  clock.Advance(milliseconds(1));
  ASSERT_TRUE(q.TryGet(&k));
  EXPECT_EQ(k, "x");
  q.Done(k);
  EXPECT_FALSE(q.TryGet(&k));
  EXPECT_EQ(q.Delayed(), 1u);
  q.AddAfter("now", Duration::zero());  // no delay: ready at once
  ASSERT_TRUE(q.TryGet(&k));
  EXPECT_EQ(k, "now");
}

TEST(WorkQueueTest, RateLimitedRetriesBackOffExponentiallyUntilForgotten) {
  FakeClock clock;
  WorkQueue q(clock, WorkQueueOptions{milliseconds(100), milliseconds(350)});
  std::string k;
  const std::vector<int> expected_ms = {100, 200, 350, 350};  // capped at max_delay
  for (size_t i = 0; i < expected_ms.size(); ++i) {
    q.AddRateLimited("k");
    EXPECT_EQ(q.NumRequeues("k"), static_cast<int>(i + 1));
    clock.Advance(milliseconds(expected_ms[i] - 1));
    EXPECT_FALSE(q.TryGet(&k)) << "retry " << i;
    clock.Advance(milliseconds(1));
    ASSERT_TRUE(q.TryGet(&k)) << "retry " << i;
    q.Done(k);
  }
  q.Forget("k");
  EXPECT_EQ(q.NumRequeues("k"), 0);
  q.AddRateLimited("k");
  clock.Advance(milliseconds(100));
  EXPECT_TRUE(q.TryGet(&k));
}

TEST(WorkQueueTest, ShutDownWakesABlockedGetAndDropsDelayedKeys) {
  RealClock clock;
  WorkQueue q(clock);
  q.AddAfter("later", seconds(60));
  bool got = true;
  std::thread worker([&] {
    std::string k;
    got = q.Get(&k);
  });
  q.ShutDown();
  worker.join();
  EXPECT_FALSE(got);
  EXPECT_EQ(q.Delayed(), 0u);
  q.Add("after");
  EXPECT_EQ(q.Len(), 0u);
}

TEST(WorkQueueTest, ServeHandsOutEachKeyMarksItDoneAndReturnsAtShutDown) {
  RealClock clock;
  WorkQueue q(clock);
  q.Add("a");
  q.Add("b");
  std::vector<std::string> seen;
  std::thread worker([&] {
    q.Serve([&](const std::string& key) {
      seen.push_back(key);
      if (key == "a") q.Add("a");  // added while held: handed out again after Done
      if (seen.size() == 3) q.ShutDown();
    });
  });
  worker.join();
  EXPECT_EQ(seen, (std::vector<std::string>{"a", "b", "a"}));
}

TEST(WorkQueueTest, ABlockedGetWakesForAnAddedKey) {
  RealClock clock;
  WorkQueue q(clock);
  std::string got;
  std::thread worker([&] { ASSERT_TRUE(q.Get(&got)); });
  q.Add("k");
  worker.join();
  EXPECT_EQ(got, "k");
}

TEST(WorkQueueTest, ABlockedGetOnAFakeClockWakesWhenTheTestAdvancesIt) {
  FakeClock clock;
  WorkQueue q(clock);
  q.AddAfter("k", seconds(30));
  std::string got;
  std::thread worker([&] { ASSERT_TRUE(q.Get(&got)); });
  clock.Advance(seconds(30));  // no real 30 s: the waiting Get notices the advance
  worker.join();
  EXPECT_EQ(got, "k");
}

TEST(WorkQueueTest, ABlockedGetWakesWhenAShorterDelayArrives) {
  RealClock clock;
  WorkQueue q(clock);
  q.AddAfter("far", seconds(3600));
  std::string got;
  std::thread worker([&] { ASSERT_TRUE(q.Get(&got)); });
  q.AddAfter("near", milliseconds(5));  // must not wait for the hour-long one
  worker.join();
  EXPECT_EQ(got, "near");
}

}  // namespace
}  // namespace hami::k8s
