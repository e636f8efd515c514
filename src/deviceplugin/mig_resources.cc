#include "deviceplugin/mig_resources.h"

#include <algorithm>
#include <set>

namespace hami::deviceplugin {

namespace {

constexpr uint64_t kGiB = uint64_t{1} << 30;
constexpr uint64_t kMiB = uint64_t{1} << 20;

// The instance's memory in the GB of its profile name (see MigProfileName).
uint64_t ProfileGb(uint64_t memory_mib, uint64_t gpu_memory_bytes) {
  if (gpu_memory_bytes == 0) return (memory_mib + 512) / 1024;
  uint64_t eighths = (memory_mib * kMiB * 8 + gpu_memory_bytes - 1) / gpu_memory_bytes;
  uint64_t gpu_gib = (gpu_memory_bytes + kGiB - 1) / kGiB;
  return (eighths * gpu_gib + 4) / 8;  // round half up, as the tools' float rounding does here
}

// Single strategy: every GPU MIG-enabled with devices of one profile, all offered as
// nvidia.com/gpu.
Result<MigPlan> PlanSingle(const Inventory& inv) {
  MigPlan plan;
  size_t enabled = 0;
  for (const GpuInfo& g : inv.gpus) enabled += g.mig_enabled ? 1 : 0;
  if (enabled == 0) return plan;
  if (enabled != inv.gpus.size()) {
    return FailedPreconditionError(
        "mig strategy single: all GPUs of the node must have the same MIG mode, but " +
        std::to_string(enabled) + " of " + std::to_string(inv.gpus.size()) + " have MIG enabled");
  }
  MigResource r{"nvidia.com/gpu", "nvidia-gpu.sock", {}};
  std::string profile;
  for (const GpuInfo& g : inv.gpus) {
    if (!g.mig_error.empty()) {
      return FailedPreconditionError("mig strategy single: cannot list the MIG devices of GPU " +
                                     g.uuid + ": " + g.mig_error);
    }
    if (g.mig_devices.empty()) {
      return FailedPreconditionError("mig strategy single: GPU " + g.uuid +
                                     " has MIG enabled but no MIG device");
    }
    for (const MigDeviceInfo& m : g.mig_devices) {
      std::string p = MigProfileName(m, g.memory_bytes.value_or(0));
      if (profile.empty()) profile = p;
      if (p != profile) {
        return FailedPreconditionError(
            "mig strategy single: more than one MIG device type present on the node (" +
            profile + " and " + p + " on GPU " + g.uuid + "); use mixed");
      }
      r.device_ids.push_back(m.uuid);
    }
  }
  plan.resources.push_back(std::move(r));
  return plan;
}

// Mixed strategy: one resource per profile of whole-GI compute instances.
MigPlan PlanMixed(const Inventory& inv) {
  MigPlan plan;
  std::map<std::string, MigResource> by_name;
  for (const GpuInfo& g : inv.gpus) {
    if (!g.mig_enabled) continue;
    if (!g.mig_error.empty()) {
      plan.warnings.push_back("GPU " + g.uuid + ": cannot list its MIG devices, none offered: " +
                              g.mig_error);
    }
    for (const MigDeviceInfo& m : g.mig_devices) {
      std::string profile = MigProfileName(m, g.memory_bytes.value_or(0));
      if (m.ci_slices != m.gi_slices) {
        plan.warnings.push_back("MIG device " + m.uuid + " on GPU " + g.uuid + " (" + profile +
                                ") is a compute instance smaller than its GPU instance; "
                                "mixed strategy offers whole GPU instances only");
        continue;
      }
      std::string resource = MigResourceName(profile);
      MigResource& r = by_name[resource];
      r.resource = resource;
      r.socket = MigSocketName(resource);
      r.device_ids.push_back(m.uuid);
    }
  }
  for (auto& [name, r] : by_name) plan.resources.push_back(std::move(r));
  return plan;
}

}  // namespace

Result<MigStrategy> ParseMigStrategy(std::string_view text) {
  if (text == "none") return MigStrategy::kNone;
  if (text == "single") return MigStrategy::kSingle;
  if (text == "mixed") return MigStrategy::kMixed;
  return InvalidArgumentError("mig strategy \"" + std::string(text) +
                              "\": expected none, single or mixed");
}

std::string MigProfileName(const MigDeviceInfo& mig, uint64_t gpu_memory_bytes) {
  std::string gb = std::to_string(ProfileGb(mig.memory_mib, gpu_memory_bytes)) + "gb";
  std::string g = std::to_string(mig.gi_slices) + "g.";
  if (mig.ci_slices != mig.gi_slices) return std::to_string(mig.ci_slices) + "c." + g + gb;
  return g + gb + (mig.media_extensions ? "+me" : "");
}

std::string MigSocketName(std::string_view resource) {
  std::string_view name = resource.substr(resource.find('/') + 1);  // "mig-1g.10gb", "gpu"
  return "nvidia-" + std::string(name) + ".sock";
}

std::string MigResourceName(std::string_view profile) {
  std::string name = "nvidia.com/mig-" + std::string(profile);
  std::replace(name.begin(), name.end(), '+', '.');
  return name;
}

Result<MigPlan> PlanMigResources(const Inventory& inv, MigStrategy strategy) {
  switch (strategy) {
    case MigStrategy::kNone:
      return MigPlan{};
    case MigStrategy::kSingle:
      return PlanSingle(inv);
    case MigStrategy::kMixed:
      return PlanMixed(inv);
  }
  return MigPlan{};
}

Result<ContainerAllocation> MigAllocation(const MigResource& resource,
                                          const std::vector<std::string>& ids,
                                          const AllocationSettings& settings) {
  if (ids.empty()) return InvalidArgumentError(resource.resource + ": no device requested");
  std::set<std::string> offered(resource.device_ids.begin(), resource.device_ids.end());
  std::set<std::string> seen;
  for (const std::string& id : ids) {
    if (offered.count(id) == 0) {
      return InvalidArgumentError(resource.resource + ": unknown device " + id);
    }
    if (!seen.insert(id).second) {
      return InvalidArgumentError(resource.resource + ": device " + id + " requested twice");
    }
  }
  ContainerAllocation a;
  RuntimeDeviceList(ids, ids.front(), settings, &a);
  return a;
}

}  // namespace hami::deviceplugin
