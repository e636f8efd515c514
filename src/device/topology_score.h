// Codec for GPU pair link scores (`hami.io/node-nvidia-score`), written by the device plugin when
// ENABLE_TOPOLOGY_SCORE=true and read by the topology-aware policy:
//
//   [{"uuid":"GPU-a","score":{"GPU-b":200,"GPU-c":20}},{"uuid":"GPU-b","score":{...}}]
//
// Byte-compatible with Go's encoding: keys uuid then score, each omitted when empty; the score
// map's keys in byte order.
//
// Thread safety: pure functions.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace hami::device {

inline constexpr std::string_view kNvidiaPairScoreAnnotation = "hami.io/node-nvidia-score";

struct DevicePairScore {
  std::string uuid;
  std::map<std::string, int64_t> scores;  // peer UUID -> link score (NVLink k links = 100k, ...)

  friend bool operator==(const DevicePairScore&, const DevicePairScore&) = default;
};
using DevicePairScores = std::vector<DevicePairScore>;

std::string EncodePairScores(const DevicePairScores& scores);
// "null" decodes as an empty list. Scores must be integers.
Result<DevicePairScores> DecodePairScores(std::string_view text);

// Score between two devices from either side's entry (0 when unknown).
int64_t PairScore(const DevicePairScores& scores, std::string_view a, std::string_view b);

}  // namespace hami::device
