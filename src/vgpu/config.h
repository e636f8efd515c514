// Configuration of the enforcement library, read once from the process environment: the
// container's quotas (CUDA_DEVICE_MEMORY_LIMIT[_<i>], CUDA_DEVICE_SM_LIMIT[_<i>]), the policy
// switches (GPU_CORE_UTILIZATION_POLICY, CUDA_DISABLE_CONTROL, CUDA_TASK_PRIORITY) and the
// region path (CUDA_DEVICE_MEMORY_SHARED_CACHE).
//
// Invalid values are reported through the log (naming the variable, the value and the reason)
// and treated as unset; they never stop the process.
//
// Thread safety: LoadConfig is reentrant; it reads only through the given getter.
#pragma once

#include "vgpu/region.h"

namespace hami::vgpu {

inline constexpr char kDefaultRegionPath[] = "/tmp/hami-vgpu.cache";

enum class CorePolicy : int { kDefault = 0, kForce = 1, kDisable = 2 };

// Configuration read once from the environment.
struct Config {
  bool control_disabled = false;  // CUDA_DISABLE_CONTROL
  RegionInit init;  // CUDA_DEVICE_MEMORY_LIMIT[_i], CUDA_DEVICE_SM_LIMIT[_i], priority
  bool mem_limit_set[kMaxDevices] = {};
  bool sm_limit_set[kMaxDevices] = {};
  CorePolicy policy = CorePolicy::kDefault;  // GPU_CORE_UTILIZATION_POLICY
  char region_path[512] = {};                // CUDA_DEVICE_MEMORY_SHARED_CACHE
};

// Reads the configuration from `getenv_fn` (getenv in production, a fake in tests). Invalid
// values are reported through the log and treated as unset.
using GetEnvFn = const char* (*)(const char*);
void LoadConfig(GetEnvFn getenv_fn, Config* cfg);

}  // namespace hami::vgpu
