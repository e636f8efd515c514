// MIG plumbing of the simulated libnvidia-ml.so.1, shared by nvml_mig_gpu_instances.cc (MIG mode,
// GPU instances) and nvml_mig_compute_instances.cc (compute instances, MIG device handles), and
// defined in nvml_mig.cc: the GI and CI handle objects, resolving handles to live instances, and
// filling callers' buffers. Nothing here is exported from the library.
//
// All MIG state lives in the shared state file (mig_state.h has the rules and return codes), so
// instances outlive the process that created them and every process sees the same ones; only
// the handle objects are per process. A GI handle names (GPU, GI id) and a CI handle (GPU, GI id,
// CI id): once the instance is destroyed, calls through the handle return NVML_ERROR_NOT_FOUND
// until an instance with the same ids is created again (the driver reuses handles too).
//
// Thread safety: every function here is thread-safe; state changes happen under the state lock
// (SharedState::UpdateMig), handle objects are written once by the first init.
#pragma once

#include <stdint.h>

#include <algorithm>
#include <string>
#include <vector>

#include "nvml/abi.h"
#include "sim/gpu/mig_profiles.h"
#include "sim/gpu/mig_state.h"
#include "sim/gpu/nvml_internal.h"

namespace hami::sim {

// Whether an id has a handle object (GI ids below kMigGiIdSpace, CI ids below kMigCiIdSpace).
bool GiIdInRange(uint32_t id);
bool CiIdInRange(uint32_t id);

// The handle of GI `id` of `phys`, and of CI `id` in GI `gi_id`; the ids must be in range.
nvmlGpuInstance_t GiHandle(int phys, uint32_t id);
nvmlComputeInstance_t CiHandle(int phys, uint32_t gi_id, uint32_t id);

// A GPU handle of a model the sim partitions; NVML_ERROR_NOT_SUPPORTED for any other GPU.
nvmlReturn_t CheckMigGpu(nvmlDevice_t device, int* phys, const MigModel** model);
// A GI handle whose GI still exists; fills its GPU, tables and a copy of its record.
nvmlReturn_t CheckGi(nvmlGpuInstance_t gi, int* phys, const MigModel** model,
                     MigGpuInstanceRecord* rec);
// A CI handle whose CI still exists; fills as CheckGi, plus a copy of the CI's record.
nvmlReturn_t CheckCi(nvmlComputeInstance_t ci, int* phys, const MigModel** model,
                     MigGpuInstanceRecord* gi_rec, MigComputeInstanceRecord* ci_rec);

// Writes "MIG <profile_name>" into a profile info's name buffer
// (NVML_DEVICE_NAME_V2_BUFFER_SIZE bytes), truncated and NUL-terminated.
void CopyName(char* dst, const std::string& profile_name);

// Fills a placements buffer: NULL = count only, too small = INSUFFICIENT_SIZE with the count.
template <typename Placement>
nvmlReturn_t CopyPlacements(const std::vector<uint32_t>& starts, uint32_t size,
                            Placement* placements, unsigned int* count) {
  const auto n = static_cast<unsigned>(starts.size());
  if (placements != nullptr) {
    if (*count < n) {
      *count = n;
      return NVML_ERROR_INSUFFICIENT_SIZE;
    }
    for (unsigned i = 0; i < n; ++i) placements[i] = Placement{starts[i], size};
  }
  *count = n;
  return NVML_SUCCESS;
}

// Fills a handle buffer whose capacity is *count on entry; *count = how many on return.
template <typename Handle>
nvmlReturn_t CopyHandles(const std::vector<Handle>& found, Handle* out, unsigned int* count) {
  const auto n = static_cast<unsigned>(found.size());
  if (*count < n) {
    *count = n;
    return NVML_ERROR_INSUFFICIENT_SIZE;
  }
  std::copy(found.begin(), found.end(), out);
  *count = n;
  return NVML_SUCCESS;
}

}  // namespace hami::sim
