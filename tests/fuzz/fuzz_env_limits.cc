// Fuzzes the limit parsers with arbitrary strings: they must never crash, and a size they accept
// must round-trip through its decimal byte spelling.
#include <stdint.h>
#include <stdio.h>

#include <string>

#include "common/env_limits.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string s(reinterpret_cast<const char*>(data), size);  // NUL-terminated copy
  uint64_t bytes = 0;
  if (hami::ParseByteSize(s.c_str(), &bytes) == nullptr) {
    char buf[32];
    snprintf(buf, sizeof(buf), "%llu", static_cast<unsigned long long>(bytes));
    uint64_t again = 0;
    if (hami::ParseByteSize(buf, &again) != nullptr || again != bytes) __builtin_trap();
  }
  int pct = -1;
  if (hami::ParsePercent(s.c_str(), &pct) == nullptr && (pct < 0 || pct > 100)) __builtin_trap();
  bool b;
  hami::ParseBool(s.c_str(), &b);
  return 0;
}
