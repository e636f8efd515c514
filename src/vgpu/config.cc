#include "vgpu/config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "common/env_limits.h"
#include "vgpu/log.h"

namespace hami::vgpu {
namespace {

void ParseLimitVar(GetEnvFn env, const char* name, bool is_memory, uint64_t* out, bool* set) {
  const char* v = env(name);
  if (v == nullptr || *v == '\0') return;
  const char* err;
  if (is_memory) {
    uint64_t bytes = 0;
    err = ParseByteSize(v, &bytes);
    if (err == nullptr) {
      *out = bytes;
      *set = true;
      return;
    }
  } else {
    int pct = 0;
    err = ParsePercent(v, &pct);
    if (err == nullptr) {
      *out = static_cast<uint64_t>(pct);
      *set = true;
      return;
    }
  }
  VGPU_ERROR("ignoring %s=%s: %s; this limit is not applied", name, v, err);
}

}  // namespace

void LoadConfig(GetEnvFn env, Config* cfg) {
  *cfg = Config();
  if (const char* v = env("CUDA_DISABLE_CONTROL"); v != nullptr && *v != '\0') {
    bool b = false;
    if (const char* err = ParseBool(v, &b); err != nullptr) {
      VGPU_ERROR("ignoring CUDA_DISABLE_CONTROL=%s: %s", v, err);
    } else {
      cfg->control_disabled = b;
    }
  }
  uint64_t global_mem = 0, global_sm = 0;
  bool global_mem_set = false, global_sm_set = false;
  ParseLimitVar(env, "CUDA_DEVICE_MEMORY_LIMIT", true, &global_mem, &global_mem_set);
  ParseLimitVar(env, "CUDA_DEVICE_SM_LIMIT", false, &global_sm, &global_sm_set);
  for (int i = 0; i < kMaxDevices; ++i) {
    char name[64];
    uint64_t v = 0;
    bool set = false;
    snprintf(name, sizeof(name), "CUDA_DEVICE_MEMORY_LIMIT_%d", i);
    ParseLimitVar(env, name, true, &v, &set);
    if (set) {
      cfg->init.mem_limit[i] = v;
      cfg->mem_limit_set[i] = true;
    } else if (global_mem_set) {
      cfg->init.mem_limit[i] = global_mem;
      cfg->mem_limit_set[i] = true;
    }
    set = false;
    snprintf(name, sizeof(name), "CUDA_DEVICE_SM_LIMIT_%d", i);
    ParseLimitVar(env, name, false, &v, &set);
    if (set) {
      cfg->init.sm_limit[i] = static_cast<uint32_t>(v);
      cfg->sm_limit_set[i] = true;
    } else if (global_sm_set) {
      cfg->init.sm_limit[i] = static_cast<uint32_t>(global_sm);
      cfg->sm_limit_set[i] = true;
    }
  }
  if (const char* v = env("GPU_CORE_UTILIZATION_POLICY"); v != nullptr && *v != '\0') {
    if (strcasecmp(v, "force") == 0) {
      cfg->policy = CorePolicy::kForce;
    } else if (strcasecmp(v, "disable") == 0) {
      cfg->policy = CorePolicy::kDisable;
    } else if (strcasecmp(v, "default") != 0) {
      VGPU_WARN("GPU_CORE_UTILIZATION_POLICY=%s is not default, force or disable; using default",
                v);
    }
  }
  if (const char* v = env("CUDA_TASK_PRIORITY"); v != nullptr && *v != '\0') {
    char* end = nullptr;
    long p = strtol(v, &end, 10);
    if (end == v || *end != '\0' || p < 0 || p > 1000) {
      VGPU_ERROR("ignoring CUDA_TASK_PRIORITY=%s: expected a small non-negative integer", v);
    } else {
      cfg->init.priority = static_cast<int32_t>(p);
    }
  }
  const char* path = env("CUDA_DEVICE_MEMORY_SHARED_CACHE");
  if (path == nullptr || *path == '\0') path = kDefaultRegionPath;
  if (strlen(path) >= sizeof(cfg->region_path)) {
    VGPU_ERROR("CUDA_DEVICE_MEMORY_SHARED_CACHE is longer than %zu bytes; using %s",
               sizeof(cfg->region_path) - 1, kDefaultRegionPath);
    path = kDefaultRegionPath;
  }
  snprintf(cfg->region_path, sizeof(cfg->region_path), "%s", path);
}

}  // namespace hami::vgpu
