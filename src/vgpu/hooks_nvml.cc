// Exported NVML hooks: memory information shows the container's quota and usage, so that
// nvidia-smi and frameworks that ask NVML see the virtual device. Devices that are not the
// container's, and devices without a memory limit, are reported as the driver reports them.
#include "vgpu/export.h"
#include "vgpu/log.h"
#include "vgpu/runtime.h"

using namespace hami::vgpu;  // NOLINT: the exported hooks live in the global namespace

namespace {

// Replaces total/free/used with the quota view. Returns false if `device` is not limited.
bool QuotaView(nvmlDevice_t device, unsigned long long* total, unsigned long long* free,
               unsigned long long* used) {
  if (!EnterProcess()) return false;
  int idx = RegionIndexForNvml(device);
  if (idx < 0) return false;
  uint64_t limit = Rt().region->Limit(idx);
  if (limit == 0) return false;
  uint64_t u = Rt().region->Used(idx);
  uint64_t t = limit < *total ? limit : *total;
  *total = t;
  *used = u;
  *free = u >= t ? 0 : t - u;  // never underflows, whatever the usage
  return true;
}

}  // namespace

VGPU_EXPORT nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t device, nvmlMemory_t* memory) {
  if (!EnsureNvml() || Rt().nvml.nvmlDeviceGetMemoryInfo == nullptr) {
    return NVML_ERROR_UNINITIALIZED;
  }
  nvmlReturn_t rc = Rt().nvml.nvmlDeviceGetMemoryInfo(device, memory);
  if (rc == NVML_SUCCESS && memory != nullptr) {
    QuotaView(device, &memory->total, &memory->free, &memory->used);
  }
  return rc;
}

VGPU_EXPORT nvmlReturn_t nvmlDeviceGetMemoryInfo_v2(nvmlDevice_t device, nvmlMemory_v2_t* memory) {
  if (!EnsureNvml() || Rt().nvml.nvmlDeviceGetMemoryInfo_v2 == nullptr) {
    return NVML_ERROR_UNINITIALIZED;
  }
  nvmlReturn_t rc = Rt().nvml.nvmlDeviceGetMemoryInfo_v2(device, memory);
  if (rc == NVML_SUCCESS && memory != nullptr &&
      QuotaView(device, &memory->total, &memory->free, &memory->used)) {
    // Driver-reserved memory is outside the quota: the container's total is all usable.
    memory->reserved = 0;
  }
  return rc;
}
