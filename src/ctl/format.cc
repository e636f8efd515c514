#include "ctl/format.h"

#include <stdio.h>
#include <time.h>

#include <algorithm>

namespace hami::ctl {

std::string FormatBytes(uint64_t bytes) {
  static const char* const kUnits[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  int unit = 0;
  while (unit < 6 && (bytes >> (10 * (unit + 1))) != 0) ++unit;
  char buf[64];
  if (unit == 0) {
    snprintf(buf, sizeof(buf), "%llu B", static_cast<unsigned long long>(bytes));
    return buf;
  }
  const uint64_t scale = 1ULL << (10 * unit);
  if (bytes % scale == 0) {
    snprintf(buf, sizeof(buf), "%llu %s", static_cast<unsigned long long>(bytes / scale),
             kUnits[unit]);
  } else {
    snprintf(buf, sizeof(buf), "%.2f %s", static_cast<double>(bytes) / static_cast<double>(scale),
             kUnits[unit]);
  }
  return buf;
}

uint64_t ToMiB(uint64_t bytes) { return bytes >> 20; }

std::string FormatEpochSeconds(uint64_t seconds) {
  if (seconds == 0) return "never";
  time_t t = static_cast<time_t>(seconds);
  struct tm tm;
  if (gmtime_r(&t, &tm) == nullptr) return std::to_string(seconds);
  char buf[64];
  strftime(buf, sizeof(buf), "%Y-%m-%d %H:%M:%S UTC", &tm);
  return buf;
}

std::string FormatDurationNs(uint64_t ns) {
  char buf[64];
  if (ns == 0) return "0 s";
  if (ns >= 1'000'000'000ULL) {
    snprintf(buf, sizeof(buf), "%.3f s", static_cast<double>(ns) / 1e9);
  } else if (ns >= 1'000'000ULL) {
    snprintf(buf, sizeof(buf), "%.1f ms", static_cast<double>(ns) / 1e6);
  } else {
    snprintf(buf, sizeof(buf), "%.1f us", static_cast<double>(ns) / 1e3);
  }
  return buf;
}

std::string RenderTable(const std::vector<std::vector<std::string>>& rows) {
  std::vector<size_t> width;
  for (const auto& row : rows) {
    if (row.size() > width.size()) width.resize(row.size(), 0);
    for (size_t c = 0; c < row.size(); ++c) width[c] = std::max(width[c], row[c].size());
  }
  std::string out;
  for (const auto& row : rows) {
    std::string line;
    for (size_t c = 0; c < row.size(); ++c) {
      line += row[c];
      if (c + 1 < row.size()) line.append(width[c] - row[c].size() + 2, ' ');
    }
    while (!line.empty() && line.back() == ' ') line.pop_back();
    out += line + "\n";
  }
  return out;
}

}  // namespace hami::ctl
