// Simulated libnvidia-ml.so.1: Multi-Instance GPU, MIG mode and GPU instances (GIs): profiles,
// placements, creation, listing and destruction. Handles and the rules they follow:
// nvml_mig_internal.h.
//
// Thread safety: every entry point is thread-safe; state changes happen under the state lock
// (SharedState::UpdateMig).

#include <stdlib.h>
#include <string.h>

#include <algorithm>
#include <atomic>
#include <vector>

#include "sim/gpu/log.h"
#include "sim/gpu/nvml_mig_internal.h"
#include "sim/gpu/proc_liveness.h"

namespace hami::sim {
namespace {

// Test hook: HAMI_SIM_MIG_ACTIVATION=in_use|reset_required makes every MIG mode change of this
// process stay pending with that activation status (a busy GPU, a passthrough VM).
nvmlReturn_t ForcedActivation() {
  const char* v = getenv("HAMI_SIM_MIG_ACTIVATION");
  if (v == nullptr || v[0] == '\0') return NVML_SUCCESS;
  if (strcmp(v, "in_use") == 0) return NVML_ERROR_IN_USE;
  if (strcmp(v, "reset_required") == 0) return NVML_ERROR_RESET_REQUIRED;
  static std::atomic<bool> warned{false};
  if (!warned.exchange(true)) {
    SimLogWarn("HAMI_SIM_MIG_ACTIVATION=%s ignored (expected in_use or reset_required)", v);
  }
  return NVML_SUCCESS;
}

template <typename Info>
void FillGiProfile(const MigGiProfile& p, Info* info) {
  info->id = p.id;
  info->sliceCount = p.compute_slices;
  info->instanceCount = p.instance_count;
  info->multiprocessorCount = p.sm_count;
  info->copyEngineCount = p.copy_engines;
  info->decoderCount = p.decoders;
  info->encoderCount = p.encoders;
  info->jpegCount = p.jpegs;
  info->ofaCount = p.ofas;
  info->memorySizeMB = p.memory_mib;
}

nvmlReturn_t GiProfileByEnum(nvmlDevice_t device, unsigned int profile,
                             const MigGiProfile** out) {
  int phys;
  const MigModel* model;
  nvmlReturn_t rc = CheckMigGpu(device, &phys, &model);
  if (rc != NVML_SUCCESS) return rc;
  if (profile >= NVML_GPU_INSTANCE_PROFILE_COUNT) return NVML_ERROR_INVALID_ARGUMENT;
  *out = MigGiProfileByEnum(*model, profile);
  return *out != nullptr ? NVML_SUCCESS : NVML_ERROR_NOT_SUPPORTED;
}

// `placement` nullptr: the driver picks (only when !with_placement).
nvmlReturn_t CreateGi(nvmlDevice_t device, unsigned int profileId, bool with_placement,
                      const nvmlGpuInstancePlacement_t* placement, nvmlGpuInstance_t* gpuInstance) {
  int phys;
  const MigModel* model;
  nvmlReturn_t rc = CheckMigGpu(device, &phys, &model);
  if (rc != NVML_SUCCESS) return rc;
  if (gpuInstance == nullptr || (with_placement && placement == nullptr)) {
    return NVML_ERROR_INVALID_ARGUMENT;
  }
  uint32_t id = 0;
  rc = g_rt->state().UpdateMig(phys, [&](MigDeviceState& mig, bool) {
    return MigCreateGpuInstance(&mig, *model, profileId, placement, &id);
  });
  if (rc != NVML_SUCCESS) return rc;
  SimLogDebug("GPU %d: created GPU instance %u (profile %u)", phys, id, profileId);
  *gpuInstance = GiHandle(phys, id);
  return NVML_SUCCESS;
}

}  // namespace
}  // namespace hami::sim

using namespace hami::sim;  // NOLINT: the C ABI entry points below implement this namespace's API

// ---------------------------------------------------------------- MIG mode

HAMI_SIM_EXPORT nvmlReturn_t nvmlDeviceGetMigMode(nvmlDevice_t device, unsigned int* currentMode,
                                                  unsigned int* pendingMode) {
  int phys;
  const MigModel* model;
  nvmlReturn_t rc = CheckMigGpu(device, &phys, &model);
  if (rc != NVML_SUCCESS) return rc;
  if (currentMode == nullptr || pendingMode == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  MigDeviceState snap = g_rt->state().MigSnapshot(phys);
  *currentMode = snap.current_mode;
  *pendingMode = snap.pending_mode;
  return NVML_SUCCESS;
}

// The change is activated at once unless processes use the GPU (memory or contexts through
// the simulated libcuda, or processes attached to its compute instances), GPU instances remain
// (when disabling), or HAMI_SIM_MIG_ACTIVATION forces a status: then the mode stays pending and
// *activationStatus says why; the caller idles the GPU and calls again.
HAMI_SIM_EXPORT nvmlReturn_t nvmlDeviceSetMigMode(nvmlDevice_t device, unsigned int mode,
                                                  nvmlReturn_t* activationStatus) {
  int phys;
  const MigModel* model;
  nvmlReturn_t rc = CheckMigGpu(device, &phys, &model);
  if (rc != NVML_SUCCESS) return rc;
  if (activationStatus == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  const nvmlReturn_t forced = ForcedActivation();
  nvmlReturn_t activation = NVML_SUCCESS;
  rc = g_rt->state().UpdateMig(phys, [&](MigDeviceState& mig, bool cuda_busy) {
    nvmlReturn_t blocker = forced;
    if (blocker == NVML_SUCCESS && (cuda_busy || MigHasLiveProcesses(mig, &ProcessAlive))) {
      blocker = NVML_ERROR_IN_USE;
    }
    return MigSetMode(&mig, mode, blocker, &activation);
  });
  if (rc != NVML_SUCCESS) return rc;
  SimLogDebug("GPU %d: MIG mode %u requested, activation status %d", phys, mode, activation);
  *activationStatus = activation;
  return NVML_SUCCESS;
}

// ---------------------------------------------------------------- GPU instances

HAMI_SIM_EXPORT nvmlReturn_t nvmlDeviceGetGpuInstanceProfileInfo(
    nvmlDevice_t device, unsigned int profile, nvmlGpuInstanceProfileInfo_t* info) {
  const MigGiProfile* p;
  nvmlReturn_t rc = GiProfileByEnum(device, profile, &p);
  if (rc != NVML_SUCCESS) return rc;
  if (info == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  memset(info, 0, sizeof(*info));
  FillGiProfile(*p, info);
  return NVML_SUCCESS;
}

HAMI_SIM_EXPORT nvmlReturn_t nvmlDeviceGetGpuInstanceProfileInfoV(
    nvmlDevice_t device, unsigned int profile, nvmlGpuInstanceProfileInfo_v2_t* info) {
  const MigGiProfile* p;
  nvmlReturn_t rc = GiProfileByEnum(device, profile, &p);
  if (rc != NVML_SUCCESS) return rc;
  if (info == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  if (info->version == nvmlGpuInstanceProfileInfo_v2) {
    memset(info, 0, sizeof(*info));
    info->version = nvmlGpuInstanceProfileInfo_v2;
    FillGiProfile(*p, info);
    CopyName(info->name, p->name);
    return NVML_SUCCESS;
  }
  if (info->version == nvmlGpuInstanceProfileInfo_v3) {
    auto* v3 = reinterpret_cast<nvmlGpuInstanceProfileInfo_v3_t*>(info);
    memset(v3, 0, sizeof(*v3));
    v3->version = nvmlGpuInstanceProfileInfo_v3;
    FillGiProfile(*p, v3);
    CopyName(v3->name, p->name);
    return NVML_SUCCESS;
  }
  return NVML_ERROR_ARGUMENT_VERSION_MISMATCH;
}

// Placements are listed whatever the MIG mode.
HAMI_SIM_EXPORT nvmlReturn_t nvmlDeviceGetGpuInstancePossiblePlacements_v2(
    nvmlDevice_t device, unsigned int profileId, nvmlGpuInstancePlacement_t* placements,
    unsigned int* count) {
  int phys;
  const MigModel* model;
  nvmlReturn_t rc = CheckMigGpu(device, &phys, &model);
  if (rc != NVML_SUCCESS) return rc;
  const MigGiProfile* p = MigGiProfileById(*model, profileId);
  if (count == nullptr || p == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  return CopyPlacements(MigGiPlacementStarts(*p), p->memory_slices, placements, count);
}

HAMI_SIM_EXPORT nvmlReturn_t nvmlDeviceGetGpuInstanceRemainingCapacity(nvmlDevice_t device,
                                                                       unsigned int profileId,
                                                                       unsigned int* count) {
  int phys;
  const MigModel* model;
  nvmlReturn_t rc = CheckMigGpu(device, &phys, &model);
  if (rc != NVML_SUCCESS) return rc;
  const MigGiProfile* p = MigGiProfileById(*model, profileId);
  if (count == nullptr || p == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  MigDeviceState snap = g_rt->state().MigSnapshot(phys);
  if (snap.current_mode != NVML_DEVICE_MIG_ENABLE) return NVML_ERROR_NOT_SUPPORTED;
  *count = MigGpuInstanceRemaining(snap, *p);
  return NVML_SUCCESS;
}

HAMI_SIM_EXPORT nvmlReturn_t nvmlDeviceCreateGpuInstance(nvmlDevice_t device,
                                                         unsigned int profileId,
                                                         nvmlGpuInstance_t* gpuInstance) {
  return CreateGi(device, profileId, false, nullptr, gpuInstance);
}

HAMI_SIM_EXPORT nvmlReturn_t nvmlDeviceCreateGpuInstanceWithPlacement(
    nvmlDevice_t device, unsigned int profileId, const nvmlGpuInstancePlacement_t* placement,
    nvmlGpuInstance_t* gpuInstance) {
  return CreateGi(device, profileId, true, placement, gpuInstance);
}

HAMI_SIM_EXPORT nvmlReturn_t nvmlGpuInstanceDestroy(nvmlGpuInstance_t gpuInstance) {
  int phys;
  const MigModel* model;
  MigGpuInstanceRecord rec;
  nvmlReturn_t rc = CheckGi(gpuInstance, &phys, &model, &rec);
  if (rc != NVML_SUCCESS) return rc;
  rc = g_rt->state().UpdateMig(
      phys, [&](MigDeviceState& mig, bool) { return MigDestroyGpuInstance(&mig, rec.id); });
  if (rc == NVML_SUCCESS) SimLogDebug("GPU %d: destroyed GPU instance %u", phys, rec.id);
  return rc;
}

HAMI_SIM_EXPORT nvmlReturn_t nvmlDeviceGetGpuInstances(nvmlDevice_t device,
                                                       unsigned int profileId,
                                                       nvmlGpuInstance_t* gpuInstances,
                                                       unsigned int* count) {
  int phys;
  const MigModel* model;
  nvmlReturn_t rc = CheckMigGpu(device, &phys, &model);
  if (rc != NVML_SUCCESS) return rc;
  if (gpuInstances == nullptr || count == nullptr ||
      MigGiProfileById(*model, profileId) == nullptr) {
    return NVML_ERROR_INVALID_ARGUMENT;
  }
  MigDeviceState snap = g_rt->state().MigSnapshot(phys);
  if (snap.current_mode != NVML_DEVICE_MIG_ENABLE) return NVML_ERROR_NOT_SUPPORTED;
  std::vector<uint32_t> ids;
  for (const MigGpuInstanceRecord& gi : snap.gis) {
    if (gi.live && gi.profile_id == profileId && GiIdInRange(gi.id)) ids.push_back(gi.id);
  }
  std::sort(ids.begin(), ids.end());
  std::vector<nvmlGpuInstance_t> found;
  for (uint32_t id : ids) found.push_back(GiHandle(phys, id));
  return CopyHandles(found, gpuInstances, count);
}

HAMI_SIM_EXPORT nvmlReturn_t nvmlDeviceGetGpuInstanceById(nvmlDevice_t device, unsigned int id,
                                                          nvmlGpuInstance_t* gpuInstance) {
  int phys;
  const MigModel* model;
  nvmlReturn_t rc = CheckMigGpu(device, &phys, &model);
  if (rc != NVML_SUCCESS) return rc;
  if (gpuInstance == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  MigDeviceState snap = g_rt->state().MigSnapshot(phys);
  if (snap.current_mode != NVML_DEVICE_MIG_ENABLE) return NVML_ERROR_NOT_SUPPORTED;
  if (!GiIdInRange(id) || MigFindGi(snap, id) == nullptr) return NVML_ERROR_NOT_FOUND;
  *gpuInstance = GiHandle(phys, id);
  return NVML_SUCCESS;
}

HAMI_SIM_EXPORT nvmlReturn_t nvmlGpuInstanceGetInfo(nvmlGpuInstance_t gpuInstance,
                                                    nvmlGpuInstanceInfo_t* info) {
  int phys;
  const MigModel* model;
  MigGpuInstanceRecord rec;
  nvmlReturn_t rc = CheckGi(gpuInstance, &phys, &model, &rec);
  if (rc != NVML_SUCCESS) return rc;
  if (info == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  info->device = GpuHandle(phys);
  info->id = rec.id;
  info->profileId = rec.profile_id;
  info->placement = nvmlGpuInstancePlacement_t{rec.start, rec.size};
  return NVML_SUCCESS;
}
