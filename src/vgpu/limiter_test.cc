#include "vgpu/limiter.h"

#include <gtest/gtest.h>

namespace hami::vgpu {
namespace {

TEST(LaunchUnits, BlocksTimesWarps) {
  EXPECT_EQ(LaunchUnits(1, 1, 1, 1, 1, 1), 1u);
  EXPECT_EQ(LaunchUnits(108, 1, 1, 256, 1, 1), 108u * 8);
  EXPECT_EQ(LaunchUnits(2, 3, 4, 33, 1, 1), 24u * 2);
  EXPECT_EQ(LaunchUnits(0, 1, 1, 0, 1, 1), 1u);
  EXPECT_EQ(LaunchUnits(UINT32_MAX, UINT32_MAX, UINT32_MAX, 1024, 1, 1), UINT64_MAX);
}

TEST(Gcra, AdmitsAtTheConfiguredRateAfterTheBurst) {
  std::atomic<int64_t> tat{0};
  const int64_t cost = 1'000'000, burst = 5'000'000;
  int64_t now = 1'000'000'000;
  // A burst worth `burst` passes immediately.
  for (int i = 0; i < 5; ++i) EXPECT_LE(GcraAdmit(tat, now, cost, burst), now);
  // The next must wait one cost.
  EXPECT_EQ(GcraAdmit(tat, now, cost, burst), now + cost);
  // Over a long run, admitted work equals elapsed time / cost.
  int64_t t = now;
  int admitted = 0;
  for (int i = 0; i < 1000; ++i) {
    int64_t until = GcraAdmit(tat, t, cost, burst);
    if (until > t) t = until;  // the caller sleeps
    ++admitted;
  }
  EXPECT_NEAR(static_cast<double>(t - now) / cost, admitted, 7);
}

TEST(Gcra, IdleTimeEarnsAtMostTheBurst) {
  std::atomic<int64_t> tat{0};
  const int64_t cost = 1'000'000, burst = 3'000'000;
  int64_t now = 5'000'000'000;  // long idle
  int free_launches = 0;
  while (GcraAdmit(tat, now, cost, burst) <= now) ++free_launches;
  EXPECT_EQ(free_launches, 3);
}

TEST(NextCost, CalibratesFromTheFirstWindow) {
  // 1000 units in 100 ms produced 80% utilisation; the 40% limit needs twice the cost per unit.
  ControlSample s{40, 80, 1000, 0, 100'000'000};
  uint64_t cost = NextCost(0, s);
  EXPECT_NEAR(cost / 65536.0, 100'000'000.0 * 80 / (1000 * 40), 1);
  // No work or no utilisation: stay uncalibrated.
  EXPECT_EQ(NextCost(0, ControlSample{40, 0, 1000, 0, 100'000'000}), 0u);
  EXPECT_EQ(NextCost(0, ControlSample{40, 50, 0, 0, 100'000'000}), 0u);
  EXPECT_EQ(NextCost(0, ControlSample{40, -1, 10, 0, 100'000'000}), 0u);
}

TEST(NextCost, CorrectsTowardsTheLimit) {
  const uint64_t c = 1000 * kCostOne;
  EXPECT_GT(NextCost(c, ControlSample{30, 45, 100, 0, 100'000'000}), c) << "over: slower";
  EXPECT_LT(NextCost(c, ControlSample{30, 20, 100, 5'000'000, 100'000'000}), c)
      << "under while held back: faster";
  EXPECT_EQ(NextCost(c, ControlSample{30, 20, 100, 0, 100'000'000}), c)
      << "under without waiting: the application is the bottleneck";
  EXPECT_EQ(NextCost(c, ControlSample{30, 30.2, 100, 1, 100'000'000}), c) << "dead band";
  EXPECT_LE(NextCost(c, ControlSample{30, 100, 100, 0, 100'000'000}), 2 * c) << "bounded step";
}

// Closed loop against a linear plant (utilisation proportional to admitted rate): converges to
// the limit within a few ticks for every limit, whatever the plant's gain.
TEST(NextCost, ClosedLoopConvergesForEveryLimit) {
  // util% per (unit per microsecond); every plant saturates the GPU when unthrottled, the
  // larger gains far beyond what the first (saturated, hence underestimating) sample shows.
  for (double gain : {10.0, 50.0, 1000.0}) {
    for (double limit : {10.0, 30.0, 50.0, 70.0, 90.0}) {
      uint64_t cost = 0;
      double util = 0;
      for (int tick = 0; tick < 40; ++tick) {
        const double window_ns = 1e8;
        // Demand is unbounded: the gate admits window/cost units (or 1e6 when uncalibrated).
        double units = cost == 0 ? 1e6 : window_ns / (cost / 65536.0);
        util = units / (window_ns / 1000.0) * gain;
        if (util > 100) util = 100;
        ControlSample s{limit, util, static_cast<uint64_t>(units), cost == 0 ? 0u : 1000u,
                        static_cast<int64_t>(window_ns)};
        cost = NextCost(cost, s);
      }
      EXPECT_NEAR(util, limit, 1.0) << "gain " << gain << " limit " << limit;
    }
  }
}

}  // namespace
}  // namespace hami::vgpu
