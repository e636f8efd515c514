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
};

// Returns the next cost (16.16 ns per unit) given the current one. A current cost of 0 means
// "not calibrated": launches pass freely until the first measurement with work in it.
uint64_t NextCost(uint64_t cost_q16, const ControlSample& s);

}  // namespace hami::vgpu
