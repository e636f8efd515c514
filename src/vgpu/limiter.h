// SM utilisation limiter: the pure parts (no clocks, no driver calls) so they can be tested
// with injected time.
//
// Model. Every kernel launch is charged `work units` (blocks x warps per block). A container-wide
// gate per device admits work at a rate of 1 unit per `cost` nanoseconds using the generic cell
// rate algorithm (GCRA): one atomic "theoretical arrival time" (TAT) shared by every process of
// the container through the region. A launch advances TAT by units*cost and waits until
// TAT - burst if that lies in the future. Idle time earns at most `burst` of credit.
//
// The cost is steered by a feedback controller from the measured SM utilisation of the
// container (NVML per-process utilisation summed over its processes). Because the controller
// compares utilisation with the limit directly, the result does not depend on the GPU's SM
// count or on what a "unit" costs on a given kernel: the first measurement calibrates the cost
// (cost = window * util / (units * limit)); later ones correct it multiplicatively.
//
// Thread safety: GcraAdmit is lock-free and may be called concurrently from any process
// mapping the same TAT. NextCost is a pure function.
#pragma once

#include <stdint.h>

#include <atomic>

namespace hami::vgpu {

// Work units of a launch: blocks times warps per block (at least 1), saturating.
uint64_t LaunchUnits(uint64_t grid_x, uint64_t grid_y, uint64_t grid_z, uint64_t block_x,
                     uint64_t block_y, uint64_t block_z);

// Charges `cost_ns` against the gate at time `now_ns`. Returns the absolute time until which the
// caller must wait before launching (<= now_ns means: go now).
int64_t GcraAdmit(std::atomic<int64_t>& tat, int64_t now_ns, int64_t cost_ns, int64_t burst_ns);

// Cost per unit is stored as nanoseconds in 16.16 fixed point.
inline constexpr uint64_t kCostOne = 65536;
inline int64_t CostNs(uint64_t cost_q16, uint64_t units) {
  unsigned __int128 v = static_cast<unsigned __int128>(cost_q16) * units;
  v >>= 16;
  return v > static_cast<unsigned __int128>(INT64_MAX / 4) ? INT64_MAX / 4
                                                           : static_cast<int64_t>(v);
}

struct ControlSample {
  double limit_percent;   // the SM limit, (0, 100)
  double util_percent;    // measured container utilisation over the window; < 0 = unknown
  uint64_t units;         // work units launched during the window
  uint64_t throttled_ns;  // time launches waited at the gate during the window
  int64_t window_ns;      // length of the window
  uint64_t launches;      // launches during the window
};

// Returns the next cost (16.16 ns per unit) given the current one. A current cost of 0 means
// "not calibrated": launches pass freely until the first measurement with work in it.
uint64_t NextCost(uint64_t cost_q16, const ControlSample& s);

// Work the GPU may still have queued from before the gate tightened. Launches are asynchronous:
// a stream queues up to about kQueueLaunches of them, so for a while after the gate starts
// holding launches back (or is tightened) the GPU keeps running at full speed on what was
// queued before, and NVML reads 100 %. Read as "the cost is too low", that burst makes the
// controller raise the cost many times over and then starve the application once the queue is
// empty (seen on an H100: 100 % for 1.5 s, then 1-5 % for another second, at a 60 % limit).
//
// The model learns the device's full speed (units per ns at 100 %) from every unsaturated
// window, assumes a full queue (kQueueLaunches launches of the calibration window's average
// size) when calibration itself saw a saturated GPU, and drains that backlog by what the GPU
// runs beyond what the gate admits. A saturated reading is attributed to the backlog only while
// the gate holds admission near the limit and some of the assumed backlog is left: so a genuinely
// too-low cost is still corrected, at most one queue-drain later.
struct BacklogModel {
  static constexpr double kQueueLaunches = 1024;
  // NVML reads a busy GPU as 99 or 100 %, sometimes less: at or above this, the GPU may have had
  // work queued all through the window.
  static constexpr double kSaturatedPercent = 97;
  // Largest cost increase per step for a saturated reading while admission is already held near
  // the limit: the excess is then leftover queued work or a slightly wrong speed, never a
  // reason to double the cost.
  static constexpr double kHeldStep = 1.25;
  double full_rate = 0;          // units per ns at 100 % utilisation; 0 = not known yet
  double backlog = 0;            // units possibly still queued
  bool held_near_limit = false;  // the last window's admission was near the limit's share

  // Feeds one measurement; returns true if its reading should not move the cost because queued
  // work explains it. `cost_q16` is the cost in force during the window (0 = uncalibrated).
  bool ExplainsSaturation(const ControlSample& s, uint64_t cost_q16);
};

// One controller step: the backlog model judges the reading first, then NextCost moves the cost
// (by at most kHeldStep for a saturated reading while admission is held near the limit).
// Sets *held when the reading was attributed to queued work and the cost kept.
uint64_t ControlStep(BacklogModel* model, uint64_t cost_q16, const ControlSample& s, bool* held);

}  // namespace hami::vgpu
