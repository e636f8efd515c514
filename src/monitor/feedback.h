// The priority / utilisation-switch feedback loop HAMi's monitor runs every 5 s over the
// containers of its node, as a pure function (the Monitor applies the result to the regions).
//
// A container is active while its `recent_kernel` (set to 2 by libvgpu on every launch) stays
// positive after the loop's decrement. Then, per container of priority p (0 is the highest):
//   * blocked when a container of a smaller priority number is active on one of its GPUs: its
//     launches wait (recent_kernel = -1) until that one goes idle (-1 is reset to 0);
//   * utilisation switch on (the SM limit is enforced under the "default" core policy) when it is
//     blocked or at least two containers of its own priority are active on one of its GPUs;
//     off when it has its GPUs to itself. GPU_CORE_UTILIZATION_POLICY=force ignores the switch.
//
// Thread safety: pure.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace hami::monitor {

struct FeedbackIn {
  int32_t priority = 1;
  int32_t recent_kernel = 0;
  std::vector<std::string> uuids;  // the container's GPUs
};

struct FeedbackOut {
  int32_t recent_kernel = 0;
  int32_t utilization_switch = 0;
  bool blocked = false;
};

std::vector<FeedbackOut> ComputeFeedback(const std::vector<FeedbackIn>& containers);

}  // namespace hami::monitor
