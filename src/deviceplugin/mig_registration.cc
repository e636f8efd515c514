#include "deviceplugin/mig_registration.h"

#include <algorithm>
#include <cstdlib>
#include <optional>

namespace hami::deviceplugin {

namespace {

// "<g>g.<N>gb<variant>", e.g. "1g.10gb+me" -> {1, 10, "+me"}; nullopt for anything else
// (compute-instance names "<c>c.<g>g..." included).
struct ProfileName {
  long slices = 0;
  long gb = 0;
  std::string variant;
};
std::optional<ProfileName> ParseProfileName(const std::string& name) {
  size_t g = name.find("g.");
  if (g == std::string::npos || g == 0) return std::nullopt;
  size_t gb = name.find("gb", g + 2);
  if (gb == std::string::npos || gb == g + 2) return std::nullopt;
  const std::string slices = name.substr(0, g), size = name.substr(g + 2, gb - g - 2);
  auto digits = [](const std::string& s) {
    return !s.empty() &&
           std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
  };
  if (!digits(slices) || !digits(size) || slices.size() > 2 || size.size() > 5) {
    return std::nullopt;
  }
  return ProfileName{std::strtol(slices.c_str(), nullptr, 10),
                     std::strtol(size.c_str(), nullptr, 10), name.substr(gb + 2)};
}

int32_t CorePercent(uint32_t sms, uint32_t full_sms) {
  if (full_sms == 0) return 0;
  return static_cast<int32_t>((uint64_t{sms} * 100 + full_sms - 1) / full_sms);
}

// The registered profile for one resolved spec: its placements less the blocked ones.
device::MigProfile Registered(const MigProfileSpec& p, uint32_t full_sms,
                              const std::vector<device::MigPlacement>& blocked) {
  device::MigProfile out;
  out.name = p.name;
  out.memory_mib = static_cast<int32_t>(std::min<uint64_t>(p.memory_mib, INT32_MAX));
  out.core = CorePercent(p.multiprocessors, full_sms);
  out.slice_count = p.slice_count;
  for (const device::MigPlacement& at : p.placements) {
    bool free = std::none_of(blocked.begin(), blocked.end(),
                             [&](const device::MigPlacement& b) { return b.Overlaps(at); });
    if (free) out.placements.push_back(at);
  }
  return out;
}

// The profiles of `g` its allowlist entry names, resolved; warnings for the rest.
std::vector<device::MigProfile> AllowedProfiles(const GpuInfo& g,
                                                const device::MigAllowlistEntry& entry,
                                                const MigGpuFacts& f, uint32_t* count,
                                                std::vector<std::string>* warnings) {
  uint32_t full_sms = 0;
  for (const MigProfileSpec& p : f.profiles) full_sms = std::max(full_sms, p.multiprocessors);
  std::vector<device::MigProfile> out;
  for (const std::string& name : entry.profiles) {
    const MigProfileSpec* p = ResolveMigProfile(name, f.profiles);
    if (p == nullptr) {
      std::string offered;
      for (const MigProfileSpec& s : f.profiles) offered += (offered.empty() ? "" : " ") + s.name;
      warnings->push_back(g.uuid + ": MIG profile " + name + " of the allowlist is not one its " +
                          "driver offers (" + offered + "); not registered");
      continue;
    }
    bool seen = std::any_of(out.begin(), out.end(),
                            [&](const device::MigProfile& r) { return r.name == p->name; });
    if (seen) continue;
    out.push_back(Registered(*p, full_sms, f.blocked));
    *count = std::max(*count, p->instance_count);
  }
  return out;
}

}  // namespace

const device::MigAllowlistEntry* MatchMigAllowlist(
    const std::vector<device::MigAllowlistEntry>& allowlist, const std::string& gpu_name) {
  const device::MigAllowlistEntry* best = nullptr;
  size_t best_len = 0;
  for (const device::MigAllowlistEntry& e : allowlist) {
    for (const std::string& model : e.models) {
      if (!model.empty() && gpu_name.find(model) != std::string::npos &&
          model.size() > best_len) {
        best = &e;
        best_len = model.size();
      }
    }
  }
  return best;
}

const MigProfileSpec* ResolveMigProfile(const std::string& allowed,
                                        const std::vector<MigProfileSpec>& profiles) {
  for (const MigProfileSpec& p : profiles) {
    if (p.name == allowed) return &p;
  }
  std::optional<ProfileName> want = ParseProfileName(allowed);
  if (!want) return nullptr;
  for (const MigProfileSpec& p : profiles) {
    std::optional<ProfileName> have = ParseProfileName(p.name);
    if (have && have->slices == want->slices && have->variant == want->variant &&
        std::labs(have->gb - want->gb) <= 1) {
      return &p;
    }
  }
  return nullptr;
}

Registration BuildMigRegistration(const Inventory& inventory, const device::NodeDeviceSettings& s,
                                  const std::vector<device::MigAllowlistEntry>& allowlist,
                                  const std::map<std::string, MigGpuFacts>& facts,
                                  const std::set<std::string>& unhealthy) {
  Registration out;
  for (const GpuInfo& g : inventory.gpus) {
    if (FilteredOut(g, s.filter_devices)) continue;
    const device::MigAllowlistEntry* entry = MatchMigAllowlist(allowlist, g.name);
    auto f = facts.find(g.uuid);
    if (entry == nullptr || f == facts.end() || !f->second.error.empty()) {
      out.warnings.push_back(
          g.uuid + " (" + g.name + "): " +
          (entry == nullptr ? "no entry of migProfileAllowlist names this model"
                            : "its MIG profiles cannot be read: " +
                                  (f == facts.end() ? std::string("not asked") : f->second.error)) +
          "; not registered for dynamic MIG");
      continue;
    }
    device::DeviceInfo d;
    uint32_t count = 0;
    d.mig_profiles = AllowedProfiles(g, *entry, f->second, &count, &out.warnings);
    if (d.mig_profiles.empty()) {
      out.warnings.push_back(g.uuid + ": no MIG profile of the allowlist resolves; not registered");
      continue;
    }
    d.id = g.uuid;
    d.index = g.index;
    d.count = static_cast<int32_t>(count);
    d.devmem = static_cast<int32_t>(
        std::min<uint64_t>(g.memory_bytes.value_or(0) >> 20, INT32_MAX));
    d.devcore = 100;
    d.type = RegisteredType(g);
    d.numa = std::max(0, g.numa_node);
    d.mode = device::OperatingModeName(device::OperatingMode::kMig);
    d.health = unhealthy.count(g.uuid) == 0 && f->second.not_ready.empty();
    if (!f->second.not_ready.empty()) {
      out.warnings.push_back(g.uuid + ": registered unhealthy: " + f->second.not_ready);
    }
    d.vendor = "NVIDIA";
    out.devices.push_back(std::move(d));
  }
  return out;
}

}  // namespace hami::deviceplugin
