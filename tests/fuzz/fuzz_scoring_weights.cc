// Fuzzes the `hami.io/device-scoring-weights` parser: accepted weights are valid and round-trip.
#include <stddef.h>
#include <stdint.h>

#include <string_view>

#include "device/scoring_weights.h"

using namespace hami::device;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  hami::Result<ScoringWeights> w = DecodeScoringWeights(text);
  if (!w.ok()) return 0;
  if (w->slot < 0 || w->core < 0 || w->memory < 0) __builtin_trap();
  if (w->slot == 0 && w->core == 0 && w->memory == 0) __builtin_trap();
  hami::Result<ScoringWeights> again = DecodeScoringWeights(EncodeScoringWeights(*w));
  if (!again.ok() || *again != *w) __builtin_trap();
  return 0;
}
