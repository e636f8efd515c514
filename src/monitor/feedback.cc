#include "monitor/feedback.h"

#include <map>
#include <utility>

namespace hami::monitor {

std::vector<FeedbackOut> ComputeFeedback(const std::vector<FeedbackIn>& containers) {
  std::vector<FeedbackOut> out(containers.size());
  // Active containers per (GPU, priority).
  std::map<std::pair<std::string, int32_t>, int> active;
  for (size_t i = 0; i < containers.size(); ++i) {
    const FeedbackIn& c = containers[i];
    int32_t rk = c.recent_kernel;
    if (rk > 0) {
      --rk;
      if (rk > 0 && c.priority >= 0) {
        for (const std::string& uuid : c.uuids) ++active[{uuid, c.priority}];
      }
    }
    out[i].recent_kernel = rk;
  }
  for (size_t i = 0; i < containers.size(); ++i) {
    const FeedbackIn& c = containers[i];
    bool blocked = false, crowded = false;
    for (const std::string& uuid : c.uuids) {
      for (auto it = active.lower_bound({uuid, INT32_MIN});
           it != active.end() && it->first.first == uuid; ++it) {
        if (it->first.second < c.priority && it->second > 0) blocked = true;
        if (it->first.second == c.priority && it->second >= 2) crowded = true;
      }
    }
    FeedbackOut& o = out[i];
    o.blocked = blocked;
    if (blocked) {
      if (o.recent_kernel >= 0) o.recent_kernel = -1;
    } else if (o.recent_kernel < 0) {
      o.recent_kernel = 0;
    }
    o.utilization_switch = blocked || crowded ? 1 : 0;
  }
  return out;
}

}  // namespace hami::monitor
