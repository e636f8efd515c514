// Fuzzes the GPU pair score codec (`hami.io/node-nvidia-score`).
#include <stddef.h>
#include <stdint.h>

#include <string_view>

#include "device/topology_score.h"

using namespace hami::device;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  hami::Result<DevicePairScores> scores = DecodePairScores(text);
  if (!scores.ok()) return 0;
  std::string encoded = EncodePairScores(*scores);
  hami::Result<DevicePairScores> again = DecodePairScores(encoded);
  if (!again.ok() || EncodePairScores(*again) != encoded) __builtin_trap();
  for (const DevicePairScore& s : *scores) {
    for (const auto& [peer, score] : s.scores) (void)PairScore(*scores, s.uuid, peer);
  }
  return 0;
}
