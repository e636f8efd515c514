#include "scheduler/policy.h"

#include <algorithm>

#include "device/text_util.h"

namespace hami::scheduler {

std::string_view NodePolicyName(NodePolicy p) {
  return p == NodePolicy::kSpread ? "spread" : "binpack";
}

bool ParseNodePolicy(std::string_view text, NodePolicy* out) {
  std::string v = device::text::AsciiLower(device::text::TrimSpace(text));
  if (v.empty()) return false;
  *out = v == "spread" ? NodePolicy::kSpread : NodePolicy::kBinpack;
  return true;
}

std::string_view DeviceSortKeyName(DeviceSortKey k) {
  switch (k) {
    case DeviceSortKey::kBinpack:
      return "binpack";
    case DeviceSortKey::kSpread:
      return "spread";
    case DeviceSortKey::kNuma:
      return "numa";
    case DeviceSortKey::kBestFit:
      return "best-fit";
    case DeviceSortKey::kIdleFirst:
      return "idle-first";
  }
  return "?";
}

GpuPolicy GpuPolicy::Default() {
  GpuPolicy p;
  p.keys[0] = DeviceSortKey::kSpread;
  p.key_count = 1;
  return p;
}

std::string GpuPolicy::ToString() const {
  std::string out;
  auto add = [&](std::string_view s) {
    if (!out.empty()) out += ',';
    out += s;
  };
  for (uint8_t i = 0; i < key_count; ++i) add(DeviceSortKeyName(keys[i]));
  if (mutex) add("mutex");
  if (topology) add("topology-aware");
  if (numa_first) add("numa-first");
  return out;
}

bool ParseGpuPolicy(std::string_view text, GpuPolicy* out) {
  GpuPolicy p;
  bool known = false;
  auto add_key = [&](DeviceSortKey k) {
    known = true;
    for (uint8_t i = 0; i < p.key_count; ++i) {
      if (p.keys[i] == k) return;  // duplicates keep their first position
    }
    // binpack and spread are opposite orders of the same score: the first one written wins.
    for (uint8_t i = 0; i < p.key_count; ++i) {
      if ((k == DeviceSortKey::kBinpack && p.keys[i] == DeviceSortKey::kSpread) ||
          (k == DeviceSortKey::kSpread && p.keys[i] == DeviceSortKey::kBinpack)) {
        return;
      }
    }
    if (p.key_count < GpuPolicy::kMaxKeys) p.keys[p.key_count++] = k;
  };
  for (std::string_view raw : device::text::Split(text, ',')) {
    std::string tok = device::text::AsciiLower(device::text::TrimSpace(raw));
    if (tok.empty()) continue;
    if (tok == "binpack") {
      add_key(DeviceSortKey::kBinpack);
    } else if (tok == "spread") {
      add_key(DeviceSortKey::kSpread);
    } else if (tok == "numa") {
      add_key(DeviceSortKey::kNuma);
    } else if (tok == "best-fit" || tok == "bestfit") {
      add_key(DeviceSortKey::kBestFit);
    } else if (tok == "idle-first") {
      add_key(DeviceSortKey::kIdleFirst);
    } else if (tok == "mutex") {
      known = true;
      p.mutex = true;
    } else if (tok == "topology-aware" || tok == "topology") {
      known = true;
      p.topology = true;
    } else if (tok == "numa-first") {
      known = true;
      p.numa_first = true;
    } else {
      p.ignored.push_back(std::move(tok));
    }
  }
  if (!known) {
    out->ignored = std::move(p.ignored);
    return false;
  }
  if (p.key_count == 0) {
    // A lone modifier: mutex prefers idle devices (upstream orders by usage), the others spread.
    if (p.mutex) add_key(DeviceSortKey::kIdleFirst);
    add_key(DeviceSortKey::kSpread);
  }
  *out = std::move(p);
  return true;
}

std::string_view PolicySourceName(PolicySource s) {
  switch (s) {
    case PolicySource::kGlobal:
      return "global default";
    case PolicySource::kNode:
      return "node annotation";
    case PolicySource::kPod:
      return "pod annotation";
  }
  return "?";
}

}  // namespace hami::scheduler
