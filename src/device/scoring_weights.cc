#include "device/scoring_weights.h"

#include <limits>

#include "device/text_util.h"

namespace hami::device {

std::string EncodeScoringWeights(const ScoringWeights& w) {
  return "slot=" + std::to_string(w.slot) + ",core=" + std::to_string(w.core) +
         ",memory=" + std::to_string(w.memory);
}

Result<ScoringWeights> DecodeScoringWeights(std::string_view text) {
  ScoringWeights w;
  if (text::TrimSpace(text).empty()) return w;
  auto bad = [&](const std::string& why) {
    return InvalidArgumentError(std::string(kDeviceScoringWeightsAnnotation) + "=" +
                                text::Quote(text) + ": " + why +
                                " (want \"slot=<n>,core=<n>,memory=<n>\")");
  };
  bool have_slot = false, have_core = false, have_memory = false;
  std::vector<std::string_view> items = text::Split(text, ',');
  if (items.size() != 3) return bad("expected exactly three weights");
  for (std::string_view item : items) {
    size_t eq = item.find('=');
    if (eq == std::string_view::npos) return bad("item " + text::Quote(item) + " has no '='");
    std::string_view key = text::TrimSpace(item.substr(0, eq));
    std::string_view value = text::TrimSpace(item.substr(eq + 1));
    int64_t n = 0;
    if (const char* why = text::ParseInt(value, 0, std::numeric_limits<int32_t>::max(), &n)) {
      return bad("weight " + text::Quote(key) + "=" + text::Quote(value) + ": " + why +
                 " (must be a non-negative integer)");
    }
    bool* seen = nullptr;
    int32_t* slot = nullptr;
    if (key == "slot") {
      seen = &have_slot;
      slot = &w.slot;
    } else if (key == "core") {
      seen = &have_core;
      slot = &w.core;
    } else if (key == "memory") {
      seen = &have_memory;
      slot = &w.memory;
    } else {
      return bad("unknown weight " + text::Quote(key));
    }
    if (*seen) return bad("weight " + text::Quote(key) + " given twice");
    *seen = true;
    *slot = static_cast<int32_t>(n);
  }
  if (w.slot == 0 && w.core == 0 && w.memory == 0) return bad("all weights are zero");
  return w;
}

}  // namespace hami::device
