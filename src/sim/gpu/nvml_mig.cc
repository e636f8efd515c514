// Simulated libnvidia-ml.so.1: Multi-Instance GPU, the part its entry points share
// (nvml_mig_internal.h): the GI and CI handle objects and their resolution, and the MIG views
// nvml_internal.h declares for the identity and usage queries. The entry points are in
// nvml_mig_gpu_instances.cc (MIG mode, GPU instances) and nvml_mig_compute_instances.cc (compute
// instances, MIG device handles).
//
// Thread safety: as in nvml_mig_internal.h.

#include <stdint.h>
#include <string.h>

#include <algorithm>
#include <string>

#include "sim/gpu/nvml_mig_internal.h"

struct nvmlGpuInstance_st {
  uint32_t magic;
  int phys;
  uint32_t id;
};

struct nvmlComputeInstance_st {
  uint32_t magic;
  int phys;
  uint32_t gi_id;
  uint32_t id;
};

namespace hami::sim {
namespace {

constexpr uint32_t kGiMagic = 0x4e564731;  // NVG1
constexpr uint32_t kCiMagic = 0x4e564331;  // NVC1

nvmlGpuInstance_st g_gis[kMaxDevices][kMigGiIdSpace];
nvmlComputeInstance_st g_cis[kMaxDevices][kMigGiIdSpace][kMigCiIdSpace];

template <typename T>
bool IsIn(const T* p, const T* first, size_t count) {
  auto a = reinterpret_cast<uintptr_t>(first);
  auto q = reinterpret_cast<uintptr_t>(p);
  return q >= a && q < a + count * sizeof(T) && (q - a) % sizeof(T) == 0;
}

}  // namespace

bool GiIdInRange(uint32_t id) { return id < static_cast<uint32_t>(kMigGiIdSpace); }
bool CiIdInRange(uint32_t id) { return id < static_cast<uint32_t>(kMigCiIdSpace); }

nvmlGpuInstance_t GiHandle(int phys, uint32_t id) { return &g_gis[phys][id]; }
nvmlComputeInstance_t CiHandle(int phys, uint32_t gi_id, uint32_t id) {
  return &g_cis[phys][gi_id][id];
}

nvmlReturn_t CheckMigGpu(nvmlDevice_t device, int* phys, const MigModel** model) {
  nvmlReturn_t rc = CheckDevice(device, phys);
  if (rc != NVML_SUCCESS) return rc;
  *model = MigModelOf(*phys);
  return *model != nullptr ? NVML_SUCCESS : NVML_ERROR_NOT_SUPPORTED;
}

nvmlReturn_t CheckGi(nvmlGpuInstance_t gi, int* phys, const MigModel** model,
                     MigGpuInstanceRecord* rec) {
  if (!Initialized()) return NVML_ERROR_UNINITIALIZED;
  if (gi == nullptr || !IsIn(gi, &g_gis[0][0], sizeof(g_gis) / sizeof(g_gis[0][0])) ||
      gi->magic != kGiMagic) {
    return NVML_ERROR_INVALID_ARGUMENT;
  }
  nvmlReturn_t rc = CheckMigGpu(GpuHandle(gi->phys), phys, model);
  if (rc != NVML_SUCCESS) return rc == NVML_ERROR_NOT_SUPPORTED ? NVML_ERROR_INVALID_ARGUMENT : rc;
  MigDeviceState snap = g_rt->state().MigSnapshot(*phys);
  const MigGpuInstanceRecord* r = MigFindGi(snap, gi->id);
  if (r == nullptr) return NVML_ERROR_NOT_FOUND;
  *rec = *r;
  return NVML_SUCCESS;
}

nvmlReturn_t CheckCi(nvmlComputeInstance_t ci, int* phys, const MigModel** model,
                     MigGpuInstanceRecord* gi_rec, MigComputeInstanceRecord* ci_rec) {
  if (!Initialized()) return NVML_ERROR_UNINITIALIZED;
  if (ci == nullptr || !IsIn(ci, &g_cis[0][0][0], sizeof(g_cis) / sizeof(g_cis[0][0][0])) ||
      ci->magic != kCiMagic) {
    return NVML_ERROR_INVALID_ARGUMENT;
  }
  nvmlReturn_t rc = CheckGi(GiHandle(ci->phys, ci->gi_id), phys, model, gi_rec);
  if (rc != NVML_SUCCESS) return rc;
  const MigComputeInstanceRecord* r = MigFindCi(*gi_rec, ci->id);
  if (r == nullptr) return NVML_ERROR_NOT_FOUND;
  *ci_rec = *r;
  return NVML_SUCCESS;
}

void CopyName(char* dst, const std::string& profile_name) {
  std::string full = "MIG " + profile_name;
  size_t n = std::min(full.size(), static_cast<size_t>(NVML_DEVICE_NAME_V2_BUFFER_SIZE - 1));
  memcpy(dst, full.data(), n);
  dst[n] = '\0';
}

// ---------------------------------------------------------------- declared in nvml_internal.h

void InitMigHandles() {
  for (int phys = 0; phys < kMaxDevices; ++phys) {
    for (int gi = 0; gi < kMigGiIdSpace; ++gi) {
      const auto g = static_cast<uint32_t>(gi);
      g_gis[phys][gi] = nvmlGpuInstance_st{kGiMagic, phys, g};
      for (int ci = 0; ci < kMigCiIdSpace; ++ci) {
        g_cis[phys][gi][ci] = nvmlComputeInstance_st{kCiMagic, phys, g, static_cast<uint32_t>(ci)};
      }
    }
  }
}

const MigModel* MigModelOf(int phys) {
  const SharedDeviceInfo& d = g_rt->device(phys);
  return MigModelFor(d.name, d.memory_bytes);
}

bool ViewMigDevice(int phys, uint32_t gi_id, uint32_t ci_id, MigDeviceView* view) {
  const MigModel* model = MigModelOf(phys);
  if (model == nullptr) return false;
  MigDeviceState snap = g_rt->state().MigSnapshot(phys);
  const MigGpuInstanceRecord* gi = MigFindGi(snap, gi_id);
  if (gi == nullptr) return false;
  const MigComputeInstanceRecord* ci = MigFindCi(*gi, ci_id);
  if (ci == nullptr) return false;
  view->gi_profile = MigGiProfileById(*model, gi->profile_id);
  if (view->gi_profile == nullptr ||
      !MigCiProfileFor(*model, *view->gi_profile, ci->profile_id, &view->ci_profile)) {
    return false;
  }
  view->gi = *gi;
  view->ci = *ci;
  return true;
}

bool FindMigDeviceByUuid(const char* uuid, DeviceRef* ref) {
  for (int phys : g_rt->nvml_visible()) {
    if (MigModelOf(phys) == nullptr) continue;
    MigDeviceState snap = g_rt->state().MigSnapshot(phys);
    for (const MigGpuInstanceRecord& gi : snap.gis) {
      if (!gi.live || !GiIdInRange(gi.id)) continue;
      for (const MigComputeInstanceRecord& ci : gi.cis) {
        if (ci.live && CiIdInRange(ci.id) && strcmp(ci.uuid, uuid) == 0 &&
            g_rt->NvmlSeesMig(phys, gi.id, ci.id)) {
          *ref = DeviceRef{phys, true, gi.id, ci.id};
          return true;
        }
      }
    }
  }
  return false;
}

}  // namespace hami::sim
