#include "sim/gpu/visibility.h"

#include <algorithm>

namespace hami::sim {
namespace {

std::vector<std::string> SplitComma(const std::string& s) {
  std::vector<std::string> out;
  size_t start = 0;
  for (;;) {
    size_t comma = s.find(',', start);
    std::string item =
        s.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    size_t b = item.find_first_not_of(" \t");
    size_t e = item.find_last_not_of(" \t");
    out.push_back(b == std::string::npos ? std::string() : item.substr(b, e - b + 1));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return out;
}

bool AllDigits(const std::string& s) {
  return !s.empty() && s.size() < 6 &&
         std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

}  // namespace

std::vector<int> ResolveNvidiaVisible(const char* env, const std::vector<std::string>& uuids,
                                      std::vector<std::string>* warnings) {
  std::vector<int> out;
  const int n = static_cast<int>(uuids.size());
  std::string v = env == nullptr ? std::string() : std::string(env);
  if (env == nullptr || v.empty() || v == "all" || v == "void") {
    for (int i = 0; i < n; ++i) out.push_back(i);
    return out;
  }
  if (v == "none") return out;
  for (const std::string& item : SplitComma(v)) {
    int found = -1;
    if (AllDigits(item)) {
      int idx = std::stoi(item);
      if (idx < n) found = idx;
    } else {
      for (int i = 0; i < n; ++i) {
        if (uuids[i] == item) found = i;
      }
    }
    if (found < 0) {
      warnings->push_back("NVIDIA_VISIBLE_DEVICES: no device '" + item + "'; ignored");
      continue;
    }
    if (std::find(out.begin(), out.end(), found) == out.end()) out.push_back(found);
  }
  return out;
}

std::vector<int> ResolveCudaVisible(const char* env, const std::vector<int>& base,
                                    const std::vector<std::string>& uuids,
                                    std::vector<std::string>* warnings) {
  if (env == nullptr) return base;
  std::vector<int> out;
  std::string v(env);
  if (v.empty()) return out;
  for (const std::string& item : SplitComma(v)) {
    int found = -1;
    if (AllDigits(item)) {
      size_t ordinal = static_cast<size_t>(std::stoi(item));
      if (ordinal < base.size()) found = base[ordinal];
    } else if (item.size() > 4 && item.compare(0, 4, "GPU-") == 0) {
      int matches = 0;
      for (int phys : base) {
        if (uuids[phys].compare(0, item.size(), item) == 0) {
          found = phys;
          ++matches;
        }
      }
      if (matches != 1) found = -1;
    }
    if (found < 0 || std::find(out.begin(), out.end(), found) != out.end()) {
      if (item != "-1") {
        warnings->push_back("CUDA_VISIBLE_DEVICES: entry '" + item +
                            "' is invalid, ambiguous or repeated; it and later entries ignored");
      }
      break;
    }
    out.push_back(found);
  }
  return out;
}

}  // namespace hami::sim
