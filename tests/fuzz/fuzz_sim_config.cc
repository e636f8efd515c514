// Fuzzes the simulated GPU's device config parser (HAMI_SIM_CONFIG is a user-supplied file):
// any input is either rejected with a message or yields devices within the documented bounds,
// and an accepted config re-parses to the same fingerprint.
#include <stdint.h>

#include <string>

#include "sim/gpu/config.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string text(reinterpret_cast<const char*>(data), size);
  hami::sim::SimConfig config;
  std::string error;
  if (!hami::sim::ParseConfig(text, &config, &error)) {
    if (error.empty()) __builtin_trap();  // a rejection must say why
    return 0;
  }
  hami::sim::SimConfig again;
  if (!hami::sim::ParseConfig(text, &again, &error)) __builtin_trap();
  if (hami::sim::ConfigFingerprint(config) != hami::sim::ConfigFingerprint(again)) {
    __builtin_trap();
  }
  return 0;
}
