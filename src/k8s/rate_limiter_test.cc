#include "k8s/rate_limiter.h"

#include <gtest/gtest.h>

namespace hami::k8s {
namespace {

using std::chrono::milliseconds;

TEST(RateLimiterTest, BurstThenSteadyRate) {
  FakeClock clock;
  RateLimiter rl(/*qps=*/4, /*burst=*/3, clock);
  EXPECT_EQ(rl.Reserve(), Duration(0));
  EXPECT_EQ(rl.Reserve(), Duration(0));
  EXPECT_EQ(rl.Reserve(), Duration(0));
  EXPECT_EQ(rl.Reserve(), milliseconds(250));
  EXPECT_EQ(rl.Reserve(), milliseconds(500));  // queued behind the previous debt
}

TEST(RateLimiterTest, RefillsOverTimeUpToBurst) {
  FakeClock clock;
  RateLimiter rl(10, 2, clock);
  rl.Reserve();
  rl.Reserve();
  clock.Advance(std::chrono::seconds(10));  // would be 100 tokens; capped at 2
  EXPECT_EQ(rl.Reserve(), Duration(0));
  EXPECT_EQ(rl.Reserve(), Duration(0));
  EXPECT_EQ(rl.Reserve(), milliseconds(100));
}

TEST(RateLimiterTest, AcceptSleepsOnTheInjectedClock) {
  FakeClock clock;
  RateLimiter rl(2, 1, clock);
  EXPECT_FALSE(rl.Accept());
  EXPECT_FALSE(rl.Accept());
  EXPECT_FALSE(rl.Accept());
  std::vector<Duration> expected = {milliseconds(500), milliseconds(500)};
  EXPECT_EQ(clock.sleeps(), expected);
}

TEST(RateLimiterTest, ZeroQpsIsUnlimited) {
  FakeClock clock;
  RateLimiter rl(0, 1, clock);
  for (int i = 0; i < 1000; ++i) EXPECT_EQ(rl.Reserve(), Duration(0));
}

TEST(RateLimiterTest, CancelledAcceptReturnsTrue) {
  FakeClock clock;
  RateLimiter rl(1, 1, clock);
  Cancellation c;
  EXPECT_FALSE(rl.Accept(&c));
  c.Cancel();
  EXPECT_TRUE(rl.Accept(&c));
}

}  // namespace
}  // namespace hami::k8s
