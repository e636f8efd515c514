#include "deviceplugin/device_ids.h"

#include <algorithm>
#include <cctype>

namespace hami::deviceplugin {
namespace {

bool AllDigits(std::string_view s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

bool IsHex(std::string_view s) {
  return std::all_of(s.begin(), s.end(), [](char c) { return std::isxdigit(c) != 0; });
}

// "GPU-" followed by the 8-4-4-4-12 hex groups of a UUID.
bool LooksLikeGpuUuid(std::string_view s) {
  if (s.substr(0, 4) != "GPU-") return false;
  s.remove_prefix(4);
  static constexpr size_t kGroups[] = {8, 4, 4, 4, 12};
  for (size_t g = 0; g < 5; ++g) {
    if (s.size() < kGroups[g] || !IsHex(s.substr(0, kGroups[g]))) return false;
    s.remove_prefix(kGroups[g]);
    if (g < 4) {
      if (s.empty() || s[0] != '-') return false;
      s.remove_prefix(1);
    }
  }
  return s.empty();
}

}  // namespace

std::string ReplicaId(std::string_view uuid, uint32_t replica) {
  std::string id(uuid);
  id += '-';
  id += std::to_string(replica);
  return id;
}

std::string PhysicalId(std::string_view id) {
  if (size_t sep = id.find("::"); sep != std::string_view::npos) {
    return std::string(id.substr(0, sep));
  }
  size_t dash = id.rfind('-');
  if (dash == std::string_view::npos || !AllDigits(id.substr(dash + 1))) return std::string(id);
  std::string_view base = id.substr(0, dash);
  if (LooksLikeGpuUuid(base) || std::count(id.begin(), id.end(), '-') == 6) {
    return std::string(base);
  }
  return std::string(id);
}

}  // namespace hami::deviceplugin
