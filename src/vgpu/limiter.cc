#include "vgpu/limiter.h"

namespace hami::vgpu {
namespace {

uint64_t SatMul(uint64_t a, uint64_t b) {
  if (a != 0 && b > UINT64_MAX / a) return UINT64_MAX;
  return a * b;
}

// Bounds for the cost: 1/65536 ns per unit up to 10 ms per unit.
constexpr uint64_t kMinCost = 1;
constexpr uint64_t kMaxCost = 10'000'000ULL * kCostOne;

uint64_t Clamp(double v) {
  if (!(v >= static_cast<double>(kMinCost))) return kMinCost;  // also catches NaN
  if (v > static_cast<double>(kMaxCost)) return kMaxCost;
  return static_cast<uint64_t>(v);
}

}  // namespace

uint64_t LaunchUnits(uint64_t grid_x, uint64_t grid_y, uint64_t grid_z, uint64_t block_x,
                     uint64_t block_y, uint64_t block_z) {
  uint64_t blocks = SatMul(SatMul(grid_x, grid_y), grid_z);
  uint64_t threads = SatMul(SatMul(block_x, block_y), block_z);
  uint64_t warps = threads / 32 + (threads % 32 != 0 ? 1 : 0);
  if (warps == 0) warps = 1;
  uint64_t units = SatMul(blocks, warps);
  return units == 0 ? 1 : units;
}

int64_t GcraAdmit(std::atomic<int64_t>& tat, int64_t now_ns, int64_t cost_ns, int64_t burst_ns) {
  int64_t old = tat.load(std::memory_order_relaxed);
  int64_t next;
  do {
    int64_t base = old > now_ns ? old : now_ns;
    next = base + cost_ns;
  } while (!tat.compare_exchange_weak(old, next, std::memory_order_relaxed));
  return next - burst_ns;
}

uint64_t NextCost(uint64_t cost_q16, const ControlSample& s) {
  if (s.util_percent < 0 || s.limit_percent <= 0 || s.window_ns <= 0) return cost_q16;
  if (cost_q16 == 0) {
    // Calibration: the window ran unthrottled at units/window and produced util; the rate that
    // gives `limit` is proportionally lower.
    if (s.units == 0 || s.util_percent < 1.0) return 0;
    double cost_ns = static_cast<double>(s.window_ns) * s.util_percent /
                     (static_cast<double>(s.units) * s.limit_percent);
    return Clamp(cost_ns * kCostOne);
  }
  double ratio = s.util_percent / s.limit_percent;
  bool over = ratio > 1.0;
  bool held_back = s.throttled_ns > 0;
  // Under the limit without ever waiting at the gate: the application, not the limiter, is the
  // bottleneck. Keep the cost so that a later burst is still held to the limit.
  if (!over && !held_back) return cost_q16;
  // Dead band against measurement noise (NVML reports whole percents).
  double error = s.util_percent - s.limit_percent;
  if (error > -0.5 && error < 0.5) return cost_q16;
  // Damped multiplicative correction (utilisation is proportional to 1/cost); linear damping
  // keeps libm out of the preload library. A saturated reading says only "at least 100%", so
  // it takes the largest step instead of trusting the ratio.
  double factor = s.util_percent >= 99.5 ? 2.0 : 1.0 + 0.7 * (ratio - 1.0);
  if (factor < 0.5) factor = 0.5;
  if (factor > 2.0) factor = 2.0;
  return Clamp(static_cast<double>(cost_q16) * factor);
}

bool BacklogModel::ExplainsSaturation(const ControlSample& s, uint64_t cost_q16) {
  if (s.util_percent < 0 || s.window_ns <= 0) return false;
  const double window = static_cast<double>(s.window_ns);
  const double units = static_cast<double>(s.units);
  held_near_limit = cost_q16 != 0 && full_rate > 0 && s.throttled_ns > 0 &&
                    units <= 1.2 * full_rate * window * s.limit_percent / 100.0;
  if (s.util_percent < kSaturatedPercent) {
    // The GPU idled at times, so the queue ran empty by the window's end. What it ran is what
    // was admitted plus what was still queued; its speed is that over the busy time. A window
    // in which the last of a backlog ran reads high for the same reason as a saturated one.
    const bool drained_backlog = backlog > 0 && held_near_limit;
    if (s.util_percent >= 5 && s.units > 0) {
      double ran = units + (drained_backlog ? backlog : 0);
      double rate = ran / (window * s.util_percent / 100.0);
      full_rate = full_rate == 0 ? rate : 0.5 * (full_rate + rate);
    }
    backlog = 0;
    return drained_backlog;
  }
  if (cost_q16 == 0 || full_rate == 0) {
    // Saturated before (or without) any measured speed: take the window's rate as the full
    // speed and assume the queue is full of launches like this window's.
    if (s.units > 0) {
      full_rate = units / window;
      double per_launch = s.launches > 0 ? units / static_cast<double>(s.launches) : 1.0;
      backlog = kQueueLaunches * per_launch;
    }
    return false;
  }
  if (!held_near_limit) {
    backlog = 0;  // the gate itself lets too much through: a real error, not queued work
    return false;
  }
  if (backlog <= 0) return false;
  backlog -= full_rate * window - units;  // what ran beyond what was admitted
  if (backlog < 0) backlog = 0;
  return true;
}

uint64_t ControlStep(BacklogModel* model, uint64_t cost_q16, const ControlSample& s, bool* held) {
  *held = model->ExplainsSaturation(s, cost_q16);
  if (*held) return cost_q16;
  uint64_t next = NextCost(cost_q16, s);
  if (model->held_near_limit && s.util_percent >= BacklogModel::kSaturatedPercent &&
      next > cost_q16) {
    const double cap = static_cast<double>(cost_q16) * BacklogModel::kHeldStep;
    if (static_cast<double>(next) > cap) next = static_cast<uint64_t>(cap);
  }
  return next;
}

}  // namespace hami::vgpu
