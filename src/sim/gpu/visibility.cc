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

bool HasPrefix(const std::string& s, const char* prefix) { return s.rfind(prefix, 0) == 0; }

// The device one NVIDIA_VISIBLE_DEVICES entry names; false if none.
bool ResolveNvidiaEntry(const std::string& item, const std::vector<std::string>& uuids,
                        const std::vector<MigDeviceName>& migs, VisibleDevice* out) {
  const int n = static_cast<int>(uuids.size());
  if (AllDigits(item)) {
    int idx = std::stoi(item);
    *out = VisibleDevice{idx, -1};
    return idx < n;
  }
  if (size_t colon = item.find(':'); colon != std::string::npos) {
    // "GPU:MIG" index pair: the MIG-th MIG device of that GPU, in NVML's index order.
    std::string gpu = item.substr(0, colon), mig = item.substr(colon + 1);
    if (!AllDigits(gpu) || !AllDigits(mig)) return false;
    int phys = std::stoi(gpu), wanted = std::stoi(mig);
    for (size_t i = 0; i < migs.size(); ++i) {
      if (migs[i].phys == phys && wanted-- == 0) {
        *out = VisibleDevice{phys, static_cast<int>(i)};
        return true;
      }
    }
    return false;
  }
  if (HasPrefix(item, "MIG-")) {
    for (size_t i = 0; i < migs.size(); ++i) {
      if (migs[i].uuid == item) {
        *out = VisibleDevice{migs[i].phys, static_cast<int>(i)};
        return true;
      }
    }
    return false;
  }
  for (int i = 0; i < n; ++i) {
    if (uuids[i] == item) {
      *out = VisibleDevice{i, -1};
      return true;
    }
  }
  return false;
}

// The UUID CUDA_VISIBLE_DEVICES prefixes are matched against: a whole GPU's, or a MIG device's.
const std::string& UuidOf(const VisibleDevice& d, const std::vector<std::string>& uuids,
                          const std::vector<MigDeviceName>& migs) {
  return d.mig < 0 ? uuids[d.phys] : migs[d.mig].uuid;
}

}  // namespace

std::vector<VisibleDevice> ResolveNvidiaVisible(const char* env,
                                                const std::vector<std::string>& uuids,
                                                const std::vector<MigDeviceName>& migs,
                                                std::vector<std::string>* warnings) {
  std::vector<VisibleDevice> out;
  const int n = static_cast<int>(uuids.size());
  std::string v = env == nullptr ? std::string() : std::string(env);
  if (env == nullptr || v.empty() || v == "all" || v == "void") {
    for (int i = 0; i < n; ++i) out.push_back(VisibleDevice{i, -1});
    return out;
  }
  if (v == "none") return out;
  for (const std::string& item : SplitComma(v)) {
    VisibleDevice found{-1, -1};
    if (!ResolveNvidiaEntry(item, uuids, migs, &found)) {
      warnings->push_back(
          HasPrefix(item, "MIG-") || item.find(':') != std::string::npos
              ? "NVIDIA_VISIBLE_DEVICES: no MIG device '" + item +
                    "' (destroyed, or never created); ignored"
              : "NVIDIA_VISIBLE_DEVICES: no device '" + item + "'; ignored");
      continue;
    }
    if (std::find(out.begin(), out.end(), found) == out.end()) out.push_back(found);
  }
  return out;
}

std::vector<int> NvmlGpus(const std::vector<VisibleDevice>& visible) {
  std::vector<int> out;
  for (const VisibleDevice& d : visible) {
    if (std::find(out.begin(), out.end(), d.phys) == out.end()) out.push_back(d.phys);
  }
  return out;
}

std::vector<VisibleDevice> ResolveCudaVisible(const char* env,
                                              const std::vector<VisibleDevice>& base,
                                              const std::vector<std::string>& uuids,
                                              const std::vector<MigDeviceName>& migs,
                                              std::vector<std::string>* warnings) {
  if (env == nullptr) return base;
  std::vector<VisibleDevice> out;
  std::string v(env);
  if (v.empty()) return out;
  for (const std::string& item : SplitComma(v)) {
    int found = -1;  // position in base
    if (AllDigits(item)) {
      size_t ordinal = static_cast<size_t>(std::stoi(item));
      if (ordinal < base.size()) found = static_cast<int>(ordinal);
    } else if (item.size() > 4 && (HasPrefix(item, "GPU-") || HasPrefix(item, "MIG-"))) {
      int matches = 0;
      for (size_t i = 0; i < base.size(); ++i) {
        if (HasPrefix(UuidOf(base[i], uuids, migs), item.c_str())) {
          found = static_cast<int>(i);
          ++matches;
        }
      }
      if (matches != 1) found = -1;
    }
    if (found < 0 || std::find(out.begin(), out.end(), base[found]) != out.end()) {
      if (item != "-1") {
        warnings->push_back("CUDA_VISIBLE_DEVICES: entry '" + item +
                            "' is invalid, ambiguous or repeated; it and later entries ignored");
      }
      break;
    }
    out.push_back(base[found]);
  }
  return out;
}

}  // namespace hami::sim
