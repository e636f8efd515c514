// Codec for the per-pod device scoring weights annotation `hami.io/device-scoring-weights`:
// "slot=<n>,core=<n>,memory=<n>", e.g. "slot=1,core=1,memory=3".
//
// Rules (upstream): all three keys exactly once, any order; values non-negative integers; not
// all zero. We also allow blanks around items and treat an empty or blank value like an absent
// annotation (the defaults 1,1,1). The device score is
//   10 * (slot * slots_used/count + core * cores_used/total + memory * mem_used/total).
//
// Thread safety: pure functions.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "common/status.h"

namespace hami::device {

inline constexpr std::string_view kDeviceScoringWeightsAnnotation =
    "hami.io/device-scoring-weights";

struct ScoringWeights {
  int32_t slot = 1;
  int32_t core = 1;
  int32_t memory = 1;
  friend bool operator==(const ScoringWeights&, const ScoringWeights&) = default;
};

// "slot=<n>,core=<n>,memory=<n>".
std::string EncodeScoringWeights(const ScoringWeights& w);
Result<ScoringWeights> DecodeScoringWeights(std::string_view text);

}  // namespace hami::device
