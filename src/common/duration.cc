#include "common/duration.h"

#include <string>

namespace hami {

Result<std::chrono::milliseconds> ParseGoDuration(std::string_view text) {
  std::string_view s = text;
  auto bad = [&](const std::string& why) {
    return InvalidArgumentError("invalid duration \"" + std::string(text) + "\": " + why);
  };
  if (s.empty()) return bad("empty");
  if (s.front() == '-') return bad("must not be negative");
  if (s.front() == '+') s.remove_prefix(1);
  if (s == "0") return std::chrono::milliseconds(0);
  if (s.empty()) return bad("empty");
  long double total_ns = 0;
  while (!s.empty()) {
    // A number with an optional fraction...
    size_t i = 0;
    long double value = 0;
    bool digits = false;
    while (i < s.size() && s[i] >= '0' && s[i] <= '9') {
      value = value * 10 + (s[i] - '0');
      digits = true;
      ++i;
    }
    if (i < s.size() && s[i] == '.') {
      ++i;
      long double scale = 0.1L;
      while (i < s.size() && s[i] >= '0' && s[i] <= '9') {
        value += (s[i] - '0') * scale;
        scale /= 10;
        digits = true;
        ++i;
      }
    }
    if (!digits) return bad("expected a number");
    // ...followed by a unit.
    size_t u = i;
    while (u < s.size() && !(s[u] >= '0' && s[u] <= '9') && s[u] != '.') ++u;
    std::string_view unit = s.substr(i, u - i);
    long double ns_per_unit;
    if (unit == "ns") {
      ns_per_unit = 1;
    } else if (unit == "us" || unit == "\xc2\xb5s" || unit == "\xce\xbcs") {
      ns_per_unit = 1e3L;
    } else if (unit == "ms") {
      ns_per_unit = 1e6L;
    } else if (unit == "s") {
      ns_per_unit = 1e9L;
    } else if (unit == "m") {
      ns_per_unit = 60e9L;
    } else if (unit == "h") {
      ns_per_unit = 3600e9L;
    } else if (unit.empty()) {
      return bad("missing unit");
    } else {
      return bad("unknown unit \"" + std::string(unit) + "\"");
    }
    total_ns += value * ns_per_unit;
    // Go's limit is ~292 years of nanoseconds; a config never needs more than that.
    if (total_ns > 9.2e18L) return bad("out of range");
    s.remove_prefix(u);
  }
  return std::chrono::milliseconds(static_cast<int64_t>(total_ns / 1e6L));
}

}  // namespace hami
