// NvmlDriver's MigDriver half: MIG mode, the GPU instance profiles a GPU offers, and making and
// destroying MIG devices (a GPU instance at a placement and one compute instance spanning it).
// See nvml_driver.h for the profile ids used and the thread-safety contract.
#include <algorithm>
#include <initializer_list>
#include <utility>

#include "deviceplugin/nvml_driver.h"
#include "nvml/library.h"

namespace hami::deviceplugin {

namespace {

// Unimplemented naming the first entry point the driver lacks: each pair is (resolved, name).
Status Needs(std::initializer_list<std::pair<bool, const char*>> calls) {
  for (const auto& [resolved, name] : calls) {
    if (!resolved) {
      return UnimplementedError(std::string("the NVIDIA driver lacks ") + name +
                                ", which dynamic MIG needs (driver too old?)");
    }
  }
  return OkStatus();
}

// A GPU's handle, looked up by UUID; NotFound when no GPU has it.
Result<nvmlDevice_t> GpuByUuid(const nvml::Api& a, const std::string& uuid) {
  nvmlDevice_t dev = nullptr;
  nvmlReturn_t r = a.by_uuid(uuid.c_str(), &dev);
  if (r == NVML_SUCCESS) return dev;
  if (r == NVML_ERROR_NOT_FOUND || r == NVML_ERROR_INVALID_ARGUMENT) {
    return NotFoundError("no GPU " + uuid);
  }
  return UnavailableError("nvmlDeviceGetHandleByUUID(" + uuid + "): " + a.ErrorText(r));
}

// Why a MIG mode change stays pending, from its activation status.
std::string PendingReason(const nvml::Api& a, nvmlReturn_t activation) {
  switch (activation) {
    case NVML_ERROR_RESET_REQUIRED:
      return "a GPU reset is required";
    case NVML_ERROR_IN_USE:
      return "the GPU is in use (processes or contexts on it)";
    default:
      return "activation status " + a.ErrorText(activation);
  }
}

// The status for NVML's `r` from a create call; `what` says what was being made.
Status CreateError(const nvml::Api& a, nvmlReturn_t r, const std::string& what) {
  const std::string text = what + ": " + a.ErrorText(r);
  switch (r) {
    case NVML_ERROR_INSUFFICIENT_RESOURCES:  // overlaps an instance, or the profile is used up
      return ResourceExhaustedError(text);
    case NVML_ERROR_INVALID_ARGUMENT:
      return InvalidArgumentError(text);
    case NVML_ERROR_NOT_SUPPORTED:
      return FailedPreconditionError(text + " (is MIG enabled on the GPU?)");
    case NVML_ERROR_NO_PERMISSION:
      return PermissionDeniedError(text);
    default:
      return UnavailableError(text);
  }
}

// Destroys what a failed create made (the compute instance, then the GPU instance; either may be
// null) and returns `why`, naming whatever could not be undone.
Status Undo(const nvml::Api& a, nvmlGpuInstance_t gi, nvmlComputeInstance_t ci, Status why) {
  std::string left;
  if (nvmlReturn_t r = ci != nullptr ? a.ci_destroy(ci) : NVML_SUCCESS;
      r != NVML_SUCCESS && r != NVML_ERROR_NOT_FOUND) {
    left += " compute instance (" + a.ErrorText(r) + ")";
  }
  if (nvmlReturn_t r = gi != nullptr ? a.gi_destroy(gi) : NVML_SUCCESS;
      r != NVML_SUCCESS && r != NVML_ERROR_NOT_FOUND) {
    left += " GPU instance (" + a.ErrorText(r) + ")";
  }
  if (left.empty()) return why;
  return Status(why.code(), why.message() + "; rolling back left behind the" + left);
}

// Where a GI of the driver's profile `profile_id` may start on `dev`, as the driver lists them.
// InvalidArgument when the GPU has no such profile.
Result<std::vector<device::MigPlacement>> Placements(const nvml::Api& a, nvmlDevice_t dev,
                                                     unsigned profile_id,
                                                     const std::string& uuid) {
  const std::string call = "nvmlDeviceGetGpuInstancePossiblePlacements_v2(" + uuid +
                           ", profile " + std::to_string(profile_id) + "): ";
  unsigned count = 0;
  nvmlReturn_t r = a.gi_placements(dev, profile_id, nullptr, &count);
  std::vector<nvmlGpuInstancePlacement_t> buf;
  if (r == NVML_SUCCESS || r == NVML_ERROR_INSUFFICIENT_SIZE) {
    buf.resize(count);
    r = count == 0 ? NVML_SUCCESS : a.gi_placements(dev, profile_id, buf.data(), &count);
  }
  if (r == NVML_ERROR_INVALID_ARGUMENT) return InvalidArgumentError(call + a.ErrorText(r));
  if (r != NVML_SUCCESS) return UnavailableError(call + a.ErrorText(r));
  std::vector<device::MigPlacement> out;
  for (unsigned i = 0; i < count && i < buf.size(); ++i) {
    out.push_back({buf[i].start, buf[i].size});
  }
  return out;
}

// Compute slices of the driver's GPU instance profile `profile_id` on `dev`, found among the
// profiles NVML defines; InvalidArgument when the GPU offers no such profile.
Result<unsigned> GiSlices(const nvml::Api& a, nvmlDevice_t dev, unsigned profile_id,
                          const std::string& uuid) {
  for (unsigned e = 0; e < NVML_GPU_INSTANCE_PROFILE_COUNT; ++e) {
    nvmlGpuInstanceProfileInfo_t info{};
    if (a.gi_profile_info(dev, e, &info) == NVML_SUCCESS && info.id == profile_id) {
      return info.sliceCount;
    }
  }
  return InvalidArgumentError("GPU " + uuid + " has no MIG GPU instance profile " +
                              std::to_string(profile_id));
}

// The id of the compute instance profile that spans all `slices` compute slices of `gi`, with
// the engines shared (the first such NVML defines: never a variant such as REV1).
Result<unsigned> FullComputeProfile(const nvml::Api& a, nvmlGpuInstance_t gi, unsigned slices) {
  for (unsigned e = 0; e < NVML_COMPUTE_INSTANCE_PROFILE_COUNT; ++e) {
    nvmlComputeInstanceProfileInfo_t info{};
    if (a.ci_profile_info(gi, e, NVML_COMPUTE_INSTANCE_ENGINE_PROFILE_SHARED, &info) ==
            NVML_SUCCESS &&
        info.sliceCount == slices) {
      return info.id;
    }
  }
  return UnavailableError("the GPU instance offers no compute instance profile of " +
                          std::to_string(slices) + " slices");
}

std::string Describe(const std::vector<device::MigPlacement>& placements) {
  std::string s;
  for (const device::MigPlacement& p : placements) {
    s += (s.empty() ? "" : " ") + std::to_string(p.start) + ":" + std::to_string(p.size);
  }
  return s.empty() ? "none" : s;
}

}  // namespace

Result<MigModeState> NvmlDriver::GetMigMode(const std::string& gpu_uuid) {
  const nvml::Api& a = api_;
  HAMI_RETURN_IF_ERROR(Needs({{a.mig_mode != nullptr, "nvmlDeviceGetMigMode"}}));
  HAMI_ASSIGN_OR_RETURN(nvmlDevice_t dev, GpuByUuid(a, gpu_uuid));
  unsigned current = 0, pending = 0;
  nvmlReturn_t r = a.mig_mode(dev, &current, &pending);
  if (r == NVML_ERROR_NOT_SUPPORTED) {
    return UnimplementedError("GPU " + gpu_uuid + " cannot do MIG");
  }
  if (r != NVML_SUCCESS) {
    return UnavailableError("nvmlDeviceGetMigMode(" + gpu_uuid + "): " + a.ErrorText(r));
  }
  return MigModeState{current == NVML_DEVICE_MIG_ENABLE, pending == NVML_DEVICE_MIG_ENABLE};
}

Status NvmlDriver::EnableMig(const std::string& gpu_uuid) {
  const nvml::Api& a = api_;
  HAMI_RETURN_IF_ERROR(Needs({{a.set_mig_mode != nullptr, "nvmlDeviceSetMigMode"}}));
  HAMI_ASSIGN_OR_RETURN(MigModeState mode, GetMigMode(gpu_uuid));
  if (mode.current && mode.pending) return OkStatus();
  HAMI_ASSIGN_OR_RETURN(nvmlDevice_t dev, GpuByUuid(a, gpu_uuid));
  const std::string what = "enabling MIG on GPU " + gpu_uuid;
  nvmlReturn_t activation = NVML_SUCCESS;
  nvmlReturn_t r = a.set_mig_mode(dev, NVML_DEVICE_MIG_ENABLE, &activation);
  if (r == NVML_ERROR_NOT_SUPPORTED) {
    return UnimplementedError("GPU " + gpu_uuid + " cannot do MIG");
  }
  if (r == NVML_ERROR_NO_PERMISSION) return PermissionDeniedError(what + ": " + a.ErrorText(r));
  if (r != NVML_SUCCESS) return UnavailableError(what + ": " + a.ErrorText(r));
  if (activation != NVML_SUCCESS) {
    return FailedPreconditionError(what + " stays pending: " + PendingReason(a, activation));
  }
  // A mode change may invalidate the GPU's handles: GetMigMode reads it through a fresh one.
  HAMI_ASSIGN_OR_RETURN(mode, GetMigMode(gpu_uuid));
  if (!mode.current) {
    return FailedPreconditionError(what + " stays pending: a GPU reset is required");
  }
  return OkStatus();
}

Result<std::vector<MigProfileSpec>> NvmlDriver::MigProfiles(const std::string& gpu_uuid) {
  const nvml::Api& a = api_;
  HAMI_RETURN_IF_ERROR(
      Needs({{a.gi_profile_info_v != nullptr, "nvmlDeviceGetGpuInstanceProfileInfoV"},
             {a.gi_placements != nullptr, "nvmlDeviceGetGpuInstancePossiblePlacements_v2"}}));
  HAMI_RETURN_IF_ERROR(GetMigMode(gpu_uuid));  // Unimplemented for a GPU without MIG
  HAMI_ASSIGN_OR_RETURN(nvmlDevice_t dev, GpuByUuid(a, gpu_uuid));
  std::vector<MigProfileSpec> out;
  // Every profile NVML defines, variants included; a GPU answers NOT_SUPPORTED for those it
  // lacks, and a driver older than this header INVALID_ARGUMENT for those it does not know.
  for (unsigned e = 0; e < NVML_GPU_INSTANCE_PROFILE_COUNT; ++e) {
    nvmlGpuInstanceProfileInfo_v2_t info{};
    info.version = nvmlGpuInstanceProfileInfo_v2;
    nvmlReturn_t r = a.gi_profile_info_v(dev, e, &info);
    if (r == NVML_ERROR_NOT_SUPPORTED || r == NVML_ERROR_INVALID_ARGUMENT) continue;
    if (r != NVML_SUCCESS) {
      return UnavailableError("nvmlDeviceGetGpuInstanceProfileInfoV(" + gpu_uuid + ", " +
                              std::to_string(e) + "): " + a.ErrorText(r));
    }
    auto same = [&](const MigProfileSpec& p) { return p.profile_id == info.id; };
    if (std::any_of(out.begin(), out.end(), same)) continue;  // two enums, one profile
    MigProfileSpec p;
    p.profile_id = info.id;
    info.name[sizeof(info.name) - 1] = '\0';
    p.name = info.name;
    if (p.name.rfind("MIG ", 0) == 0) p.name.erase(0, 4);
    p.slice_count = info.sliceCount;
    p.instance_count = info.instanceCount;
    p.memory_mib = info.memorySizeMB;
    p.multiprocessors = info.multiprocessorCount;
    HAMI_ASSIGN_OR_RETURN(p.placements, Placements(a, dev, info.id, gpu_uuid));
    out.push_back(std::move(p));
  }
  std::sort(out.begin(), out.end(), [](const MigProfileSpec& x, const MigProfileSpec& y) {
    return x.profile_id < y.profile_id;
  });
  return out;
}

Result<CreatedMigDevice> NvmlDriver::CreateMigDevice(const std::string& gpu_uuid,
                                                     uint32_t profile_id,
                                                     device::MigPlacement placement) {
  const nvml::Api& a = api_;
  HAMI_RETURN_IF_ERROR(
      Needs({{a.gi_profile_info != nullptr, "nvmlDeviceGetGpuInstanceProfileInfo"},
             {a.gi_placements != nullptr, "nvmlDeviceGetGpuInstancePossiblePlacements_v2"},
             {a.gi_create_at != nullptr, "nvmlDeviceCreateGpuInstanceWithPlacement"},
             {a.gi_info != nullptr, "nvmlGpuInstanceGetInfo"},
             {a.gi_destroy != nullptr, "nvmlGpuInstanceDestroy"},
             {a.ci_profile_info != nullptr, "nvmlGpuInstanceGetComputeInstanceProfileInfo"},
             {a.ci_create != nullptr, "nvmlGpuInstanceCreateComputeInstance"},
             {a.ci_info != nullptr, "nvmlComputeInstanceGetInfo_v2"},
             {a.ci_destroy != nullptr, "nvmlComputeInstanceDestroy"}}));
  HAMI_ASSIGN_OR_RETURN(nvmlDevice_t dev, GpuByUuid(a, gpu_uuid));
  const std::string what = "MIG profile " + std::to_string(profile_id) + " at " +
                           std::to_string(placement.start) + ":" + std::to_string(placement.size) +
                           " on GPU " + gpu_uuid;
  HAMI_ASSIGN_OR_RETURN(unsigned slices, GiSlices(a, dev, profile_id, gpu_uuid));
  HAMI_ASSIGN_OR_RETURN(std::vector<device::MigPlacement> possible,
                        Placements(a, dev, profile_id, gpu_uuid));
  if (std::find(possible.begin(), possible.end(), placement) == possible.end()) {
    return InvalidArgumentError(what + ": the profile cannot start there (placements: " +
                                Describe(possible) + ")");
  }
  const nvmlGpuInstancePlacement_t at{placement.start, placement.size};
  nvmlGpuInstance_t gi = nullptr;
  if (nvmlReturn_t r = a.gi_create_at(dev, profile_id, &at, &gi); r != NVML_SUCCESS) {
    return CreateError(a, r, "creating the GPU instance of " + what);
  }
  nvmlGpuInstanceInfo_t gi_info{};
  if (nvmlReturn_t r = a.gi_info(gi, &gi_info); r != NVML_SUCCESS) {
    return Undo(a, gi, nullptr, UnavailableError("nvmlGpuInstanceGetInfo(" + what + "): " +
                                                 a.ErrorText(r)));
  }
  Result<unsigned> ci_profile = FullComputeProfile(a, gi, slices);
  if (!ci_profile.ok()) return Undo(a, gi, nullptr, ci_profile.status());
  nvmlComputeInstance_t ci = nullptr;
  if (nvmlReturn_t r = a.ci_create(gi, *ci_profile, &ci); r != NVML_SUCCESS) {
    return Undo(a, gi, nullptr, CreateError(a, r, "creating the compute instance of " + what));
  }
  nvmlComputeInstanceInfo_t ci_info{};
  if (nvmlReturn_t r = a.ci_info(ci, &ci_info); r != NVML_SUCCESS) {
    return Undo(a, gi, ci, UnavailableError("nvmlComputeInstanceGetInfo(" + what + "): " +
                                            a.ErrorText(r)));
  }
  CreatedMigDevice made{MigUuidOf(a, dev, gi_info.id, ci_info.id), gi_info.id, ci_info.id};
  if (made.uuid.empty()) {
    return Undo(a, gi, ci, UnavailableError("no MIG device lists the instances made for " + what));
  }
  return made;
}

Status NvmlDriver::DestroyMigDevice(const std::string& gpu_uuid, uint32_t gi_id,
                                    uint32_t ci_id) {
  const nvml::Api& a = api_;
  HAMI_RETURN_IF_ERROR(Needs({{a.gi_by_id != nullptr, "nvmlDeviceGetGpuInstanceById"},
                              {a.gi_destroy != nullptr, "nvmlGpuInstanceDestroy"},
                              {a.ci_by_id != nullptr, "nvmlGpuInstanceGetComputeInstanceById"},
                              {a.ci_destroy != nullptr, "nvmlComputeInstanceDestroy"}}));
  HAMI_ASSIGN_OR_RETURN(nvmlDevice_t dev, GpuByUuid(a, gpu_uuid));
  const std::string what = "GPU instance " + std::to_string(gi_id) + " of GPU " + gpu_uuid;
  nvmlGpuInstance_t gi = nullptr;
  nvmlReturn_t r = a.gi_by_id(dev, gi_id, &gi);
  // NOT_SUPPORTED: MIG is off (or impossible) on the GPU, so no GPU instance exists there.
  if (r == NVML_ERROR_NOT_FOUND || r == NVML_ERROR_NOT_SUPPORTED) {
    return NotFoundError("no " + what + ": " + a.ErrorText(r));
  }
  if (r != NVML_SUCCESS) return UnavailableError("nvmlDeviceGetGpuInstanceById(" + what + "): " +
                                                 a.ErrorText(r));
  const std::string ci_what = "compute instance " + std::to_string(ci_id) + " of " + what;
  nvmlComputeInstance_t ci = nullptr;
  r = a.ci_by_id(gi, ci_id, &ci);
  if (r == NVML_SUCCESS) r = a.ci_destroy(ci);
  if (r == NVML_ERROR_IN_USE) {
    return FailedPreconditionError(ci_what + " is in use: processes still run on it");
  }
  if (r != NVML_SUCCESS && r != NVML_ERROR_NOT_FOUND) {  // NOT_FOUND: the CI is gone already
    return UnavailableError("destroying " + ci_what + ": " + a.ErrorText(r));
  }
  r = a.gi_destroy(gi);
  if (r == NVML_ERROR_IN_USE) {
    return FailedPreconditionError(what + " is in use: other compute instances remain in it");
  }
  if (r == NVML_ERROR_NOT_FOUND) return NotFoundError("no " + what + ": " + a.ErrorText(r));
  if (r != NVML_SUCCESS) return UnavailableError("destroying " + what + ": " + a.ErrorText(r));
  return OkStatus();
}

}  // namespace hami::deviceplugin
