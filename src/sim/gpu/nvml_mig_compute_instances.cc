// Simulated libnvidia-ml.so.1: Multi-Instance GPU, compute instances (CIs) inside GPU instances,
// and the MIG device handles that name CIs. Handles and the rules they follow:
// nvml_mig_internal.h.
//
// Thread safety: every entry point is thread-safe; state changes happen under the state lock
// (SharedState::UpdateMig).

#include <string.h>

#include <algorithm>
#include <utility>
#include <vector>

#include "sim/gpu/log.h"
#include "sim/gpu/nvml_mig_internal.h"
#include "sim/gpu/proc_liveness.h"

namespace hami::sim {
namespace {

template <typename Info>
void FillCiProfile(const MigGiProfile& gi, const MigCiProfile& p, Info* info) {
  info->id = p.id;
  info->sliceCount = p.slices;
  info->instanceCount = p.instance_count;
  info->multiprocessorCount = p.sm_count;
  info->sharedCopyEngineCount = gi.copy_engines;
  info->sharedDecoderCount = gi.decoders;
  info->sharedEncoderCount = gi.encoders;
  info->sharedJpegCount = gi.jpegs;
  info->sharedOfaCount = gi.ofas;
}

// The CI profile `profile` of a live GI (engine profile must be SHARED).
nvmlReturn_t CiProfileOf(nvmlGpuInstance_t gi, unsigned int profile, const MigGiProfile** gi_out,
                         MigCiProfile* out, int* phys = nullptr,
                         MigGpuInstanceRecord* rec_out = nullptr) {
  int p;
  const MigModel* model;
  MigGpuInstanceRecord rec;
  nvmlReturn_t rc = CheckGi(gi, &p, &model, &rec);
  if (rc != NVML_SUCCESS) return rc;
  if (profile >= kMigCiProfileEnumCount) return NVML_ERROR_INVALID_ARGUMENT;
  const MigGiProfile* gp = MigGiProfileById(*model, rec.profile_id);
  if (gp == nullptr || !MigCiProfileFor(*model, *gp, profile, out)) {
    return NVML_ERROR_NOT_SUPPORTED;
  }
  *gi_out = gp;
  if (phys != nullptr) *phys = p;
  if (rec_out != nullptr) *rec_out = rec;
  return NVML_SUCCESS;
}

nvmlReturn_t CreateCi(nvmlGpuInstance_t gpuInstance, unsigned int profileId, bool with_placement,
                      const nvmlComputeInstancePlacement_t* placement,
                      nvmlComputeInstance_t* computeInstance) {
  int phys;
  const MigModel* model;
  MigGpuInstanceRecord rec;
  nvmlReturn_t rc = CheckGi(gpuInstance, &phys, &model, &rec);
  if (rc != NVML_SUCCESS) return rc;
  if (computeInstance == nullptr || (with_placement && placement == nullptr)) {
    return NVML_ERROR_INVALID_ARGUMENT;
  }
  const uint64_t seed = g_rt->state().MigUuidSeed(phys);
  uint32_t id = 0;
  rc = g_rt->state().UpdateMig(phys, [&](MigDeviceState& mig, bool) {
    return MigCreateComputeInstance(&mig, *model, rec.id, profileId, placement, seed, &id);
  });
  if (rc != NVML_SUCCESS) return rc;
  SimLogDebug("GPU %d: created compute instance %u in GPU instance %u", phys, id, rec.id);
  *computeInstance = CiHandle(phys, rec.id, id);
  return NVML_SUCCESS;
}

}  // namespace
}  // namespace hami::sim

using namespace hami::sim;  // NOLINT: the C ABI entry points below implement this namespace's API

// ---------------------------------------------------------------- compute instances

HAMI_SIM_EXPORT nvmlReturn_t nvmlGpuInstanceGetComputeInstanceProfileInfo(
    nvmlGpuInstance_t gpuInstance, unsigned int profile, unsigned int engProfile,
    nvmlComputeInstanceProfileInfo_t* info) {
  const MigGiProfile* gp;
  MigCiProfile cp;
  nvmlReturn_t rc = CiProfileOf(gpuInstance, profile, &gp, &cp);
  if (rc != NVML_SUCCESS) return rc;
  if (info == nullptr || engProfile >= NVML_COMPUTE_INSTANCE_ENGINE_PROFILE_COUNT) {
    return NVML_ERROR_INVALID_ARGUMENT;
  }
  memset(info, 0, sizeof(*info));
  FillCiProfile(*gp, cp, info);
  return NVML_SUCCESS;
}

HAMI_SIM_EXPORT nvmlReturn_t nvmlGpuInstanceGetComputeInstanceProfileInfoV(
    nvmlGpuInstance_t gpuInstance, unsigned int profile, unsigned int engProfile,
    nvmlComputeInstanceProfileInfo_v2_t* info) {
  const MigGiProfile* gp;
  MigCiProfile cp;
  nvmlReturn_t rc = CiProfileOf(gpuInstance, profile, &gp, &cp);
  if (rc != NVML_SUCCESS) return rc;
  if (info == nullptr || engProfile >= NVML_COMPUTE_INSTANCE_ENGINE_PROFILE_COUNT) {
    return NVML_ERROR_INVALID_ARGUMENT;
  }
  if (info->version == nvmlComputeInstanceProfileInfo_v2) {
    memset(info, 0, sizeof(*info));
    info->version = nvmlComputeInstanceProfileInfo_v2;
    FillCiProfile(*gp, cp, info);
    CopyName(info->name, cp.name);
    return NVML_SUCCESS;
  }
  if (info->version == nvmlComputeInstanceProfileInfo_v3) {
    auto* v3 = reinterpret_cast<nvmlComputeInstanceProfileInfo_v3_t*>(info);
    memset(v3, 0, sizeof(*v3));
    v3->version = nvmlComputeInstanceProfileInfo_v3;
    FillCiProfile(*gp, cp, v3);
    CopyName(v3->name, cp.name);
    return NVML_SUCCESS;
  }
  return NVML_ERROR_ARGUMENT_VERSION_MISMATCH;
}

HAMI_SIM_EXPORT nvmlReturn_t nvmlGpuInstanceGetComputeInstanceRemainingCapacity(
    nvmlGpuInstance_t gpuInstance, unsigned int profileId, unsigned int* count) {
  const MigGiProfile* gp;
  MigCiProfile cp;
  MigGpuInstanceRecord rec;
  nvmlReturn_t rc = CiProfileOf(gpuInstance, profileId, &gp, &cp, nullptr, &rec);
  if (rc != NVML_SUCCESS) return rc;
  if (count == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  *count = MigComputeInstanceRemaining(rec, cp);
  return NVML_SUCCESS;
}

HAMI_SIM_EXPORT nvmlReturn_t nvmlGpuInstanceGetComputeInstancePossiblePlacements(
    nvmlGpuInstance_t gpuInstance, unsigned int profileId,
    nvmlComputeInstancePlacement_t* placements, unsigned int* count) {
  const MigGiProfile* gp;
  MigCiProfile cp;
  nvmlReturn_t rc = CiProfileOf(gpuInstance, profileId, &gp, &cp);
  if (rc != NVML_SUCCESS) return rc;
  if (count == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  return CopyPlacements(cp.starts, cp.slices, placements, count);
}

HAMI_SIM_EXPORT nvmlReturn_t nvmlGpuInstanceCreateComputeInstance(
    nvmlGpuInstance_t gpuInstance, unsigned int profileId, nvmlComputeInstance_t* computeInstance) {
  return CreateCi(gpuInstance, profileId, false, nullptr, computeInstance);
}

HAMI_SIM_EXPORT nvmlReturn_t nvmlGpuInstanceCreateComputeInstanceWithPlacement(
    nvmlGpuInstance_t gpuInstance, unsigned int profileId,
    const nvmlComputeInstancePlacement_t* placement, nvmlComputeInstance_t* computeInstance) {
  return CreateCi(gpuInstance, profileId, true, placement, computeInstance);
}

HAMI_SIM_EXPORT nvmlReturn_t nvmlComputeInstanceDestroy(nvmlComputeInstance_t computeInstance) {
  int phys;
  const MigModel* model;
  MigGpuInstanceRecord gi;
  MigComputeInstanceRecord ci;
  nvmlReturn_t rc = CheckCi(computeInstance, &phys, &model, &gi, &ci);
  if (rc != NVML_SUCCESS) return rc;
  rc = g_rt->state().UpdateMig(phys, [&](MigDeviceState& mig, bool) {
    return MigDestroyComputeInstance(&mig, gi.id, ci.id, &ProcessAlive);
  });
  if (rc == NVML_SUCCESS) {
    SimLogDebug("GPU %d: destroyed compute instance %u of GPU instance %u", phys, ci.id, gi.id);
  }
  return rc;
}

HAMI_SIM_EXPORT nvmlReturn_t nvmlGpuInstanceGetComputeInstances(
    nvmlGpuInstance_t gpuInstance, unsigned int profileId, nvmlComputeInstance_t* computeInstances,
    unsigned int* count) {
  const MigGiProfile* gp;
  MigCiProfile cp;
  int phys;
  MigGpuInstanceRecord rec;
  nvmlReturn_t rc = CiProfileOf(gpuInstance, profileId, &gp, &cp, &phys, &rec);
  if (rc != NVML_SUCCESS) return rc;
  if (computeInstances == nullptr || count == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  std::vector<uint32_t> ids;
  for (const MigComputeInstanceRecord& ci : rec.cis) {
    if (ci.live && ci.profile_id == profileId && CiIdInRange(ci.id)) ids.push_back(ci.id);
  }
  std::sort(ids.begin(), ids.end());
  std::vector<nvmlComputeInstance_t> found;
  for (uint32_t id : ids) found.push_back(CiHandle(phys, rec.id, id));
  return CopyHandles(found, computeInstances, count);
}

HAMI_SIM_EXPORT nvmlReturn_t nvmlGpuInstanceGetComputeInstanceById(
    nvmlGpuInstance_t gpuInstance, unsigned int id, nvmlComputeInstance_t* computeInstance) {
  int phys;
  const MigModel* model;
  MigGpuInstanceRecord rec;
  nvmlReturn_t rc = CheckGi(gpuInstance, &phys, &model, &rec);
  if (rc != NVML_SUCCESS) return rc;
  if (computeInstance == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  if (!CiIdInRange(id) || MigFindCi(rec, id) == nullptr) return NVML_ERROR_NOT_FOUND;
  *computeInstance = CiHandle(phys, rec.id, id);
  return NVML_SUCCESS;
}

HAMI_SIM_EXPORT nvmlReturn_t nvmlComputeInstanceGetInfo_v2(nvmlComputeInstance_t computeInstance,
                                                           nvmlComputeInstanceInfo_t* info) {
  int phys;
  const MigModel* model;
  MigGpuInstanceRecord gi;
  MigComputeInstanceRecord ci;
  nvmlReturn_t rc = CheckCi(computeInstance, &phys, &model, &gi, &ci);
  if (rc != NVML_SUCCESS) return rc;
  if (info == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  info->device = GpuHandle(phys);
  info->gpuInstance = GiHandle(phys, gi.id);
  info->id = ci.id;
  info->profileId = ci.profile_id;
  info->placement = nvmlComputeInstancePlacement_t{ci.start, ci.size};
  return NVML_SUCCESS;
}

// ---------------------------------------------------------------- MIG device handles

HAMI_SIM_EXPORT nvmlReturn_t nvmlDeviceIsMigDeviceHandle(nvmlDevice_t device,
                                                         unsigned int* isMigDevice) {
  DeviceRef ref;
  nvmlReturn_t rc = CheckAnyDevice(device, &ref);
  if (rc != NVML_SUCCESS) return rc;
  if (isMigDevice == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  *isMigDevice = ref.mig ? 1 : 0;
  return NVML_SUCCESS;
}

HAMI_SIM_EXPORT nvmlReturn_t nvmlDeviceGetGpuInstanceId(nvmlDevice_t device, unsigned int* id) {
  DeviceRef ref;
  nvmlReturn_t rc = CheckAnyDevice(device, &ref);
  if (rc != NVML_SUCCESS) return rc;
  if (id == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  if (!ref.mig) return NVML_ERROR_NOT_SUPPORTED;
  *id = ref.gi_id;
  return NVML_SUCCESS;
}

HAMI_SIM_EXPORT nvmlReturn_t nvmlDeviceGetComputeInstanceId(nvmlDevice_t device,
                                                            unsigned int* id) {
  DeviceRef ref;
  nvmlReturn_t rc = CheckAnyDevice(device, &ref);
  if (rc != NVML_SUCCESS) return rc;
  if (id == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  if (!ref.mig) return NVML_ERROR_NOT_SUPPORTED;
  *id = ref.ci_id;
  return NVML_SUCCESS;
}

// 7 on a MIG-enabled GPU whatever exists; 0 when MIG is disabled or not supported.
HAMI_SIM_EXPORT nvmlReturn_t nvmlDeviceGetMaxMigDeviceCount(nvmlDevice_t device,
                                                            unsigned int* count) {
  int phys;
  nvmlReturn_t rc = CheckDevice(device, &phys);
  if (rc != NVML_SUCCESS) return rc;
  if (count == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  *count = 0;
  if (MigModelOf(phys) != nullptr &&
      g_rt->state().MigSnapshot(phys).current_mode == NVML_DEVICE_MIG_ENABLE) {
    *count = kMigMaxDevices;
  }
  return NVML_SUCCESS;
}

// Index i is the i-th live compute instance this process may reach (all of them unless only some
// MIG devices of the GPU were made visible), ordered by (GI id, CI id); past the last one,
// NVML_ERROR_NOT_FOUND.
HAMI_SIM_EXPORT nvmlReturn_t nvmlDeviceGetMigDeviceHandleByIndex(nvmlDevice_t device,
                                                                 unsigned int index,
                                                                 nvmlDevice_t* migDevice) {
  int phys;
  const MigModel* model;
  nvmlReturn_t rc = CheckMigGpu(device, &phys, &model);
  if (rc != NVML_SUCCESS) return rc;
  if (migDevice == nullptr || index >= kMigMaxDevices) return NVML_ERROR_INVALID_ARGUMENT;
  auto devices = MigDevices(g_rt->state().MigSnapshot(phys));
  devices.erase(std::remove_if(devices.begin(), devices.end(),
                               [&](const std::pair<uint32_t, uint32_t>& d) {
                                 return !g_rt->NvmlSeesMig(phys, d.first, d.second);
                               }),
                devices.end());
  if (index >= devices.size()) return NVML_ERROR_NOT_FOUND;
  const auto [gi, ci] = devices[index];
  if (!GiIdInRange(gi) || !CiIdInRange(ci)) return NVML_ERROR_NOT_FOUND;
  *migDevice = MigDeviceHandle(phys, gi, ci);
  return NVML_SUCCESS;
}

HAMI_SIM_EXPORT nvmlReturn_t nvmlDeviceGetDeviceHandleFromMigDeviceHandle(nvmlDevice_t migDevice,
                                                                          nvmlDevice_t* device) {
  DeviceRef ref;
  nvmlReturn_t rc = CheckAnyDevice(migDevice, &ref);
  if (rc != NVML_SUCCESS) return rc;
  if (device == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  if (!ref.mig) return NVML_ERROR_NOT_SUPPORTED;
  *device = GpuHandle(ref.phys);
  return NVML_SUCCESS;
}

// MIG devices only (as the driver): the CI's SMs, its GI's engines, slices and memory.
HAMI_SIM_EXPORT nvmlReturn_t nvmlDeviceGetAttributes_v2(nvmlDevice_t device,
                                                        nvmlDeviceAttributes_t* attributes) {
  DeviceRef ref;
  nvmlReturn_t rc = CheckAnyDevice(device, &ref);
  if (rc != NVML_SUCCESS) return rc;
  if (attributes == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  if (!ref.mig) return NVML_ERROR_NOT_SUPPORTED;
  MigDeviceView v;
  if (!ViewMigDevice(ref.phys, ref.gi_id, ref.ci_id, &v)) return NVML_ERROR_NOT_FOUND;
  attributes->multiprocessorCount = v.ci_profile.sm_count;
  attributes->sharedCopyEngineCount = v.gi_profile->copy_engines;
  attributes->sharedDecoderCount = v.gi_profile->decoders;
  attributes->sharedEncoderCount = v.gi_profile->encoders;
  attributes->sharedJpegCount = v.gi_profile->jpegs;
  attributes->sharedOfaCount = v.gi_profile->ofas;
  attributes->gpuInstanceSliceCount = v.gi_profile->compute_slices;
  attributes->computeInstanceSliceCount = v.ci_profile.slices;
  attributes->memorySizeMB = v.gi_profile->memory_mib;
  return NVML_SUCCESS;
}
