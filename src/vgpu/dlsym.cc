// The dlsym override and the table of hooked entry points.
//
// Why dlsym: the CUDA runtime and nvidia-smi do not link libcuda/libnvidia-ml; they dlopen them
// and fetch entry points with dlsym(handle, name), which does not see preloaded definitions.
// Returning our hook for the names we intercept closes that path. Everything else, and every
// RTLD_NEXT lookup, goes to glibc unchanged.
#include <dlfcn.h>
#include <string.h>

#include <atomic>

#include "vgpu/cuda_abi.h"
#include "vgpu/dlsym_hook.h"
#include "vgpu/export.h"
#include "vgpu/nvml_abi.h"

// Every exported CUDA hook; defined in hooks_cuda.cc.
#define VGPU_CUDA_HOOKS(X)                                                                    \
  X(cuInit) X(cuGetProcAddress) X(cuGetProcAddress_v2) X(cuMemAlloc_v2) X(cuMemFree_v2)        \
  X(cuMemAllocPitch_v2) X(cuMemAllocManaged) X(cuMemAllocAsync) X(cuMemAllocAsync_ptsz)        \
  X(cuMemFreeAsync) X(cuMemFreeAsync_ptsz) X(cuMemAllocFromPoolAsync)                          \
  X(cuMemAllocFromPoolAsync_ptsz) X(cuMemCreate) X(cuMemRelease) X(cuArrayCreate_v2)           \
  X(cuArray3DCreate_v2) X(cuArrayDestroy) X(cuMipmappedArrayCreate) X(cuMipmappedArrayDestroy) \
  X(cuMemGetInfo_v2) X(cuDeviceTotalMem_v2) X(cuLaunchKernel) X(cuLaunchKernel_ptsz)           \
  X(cuLaunchKernelEx) X(cuLaunchKernelEx_ptsz) X(cuLaunchCooperativeKernel)                    \
  X(cuLaunchCooperativeKernel_ptsz) X(cuGraphInstantiateWithFlags) X(cuGraphInstantiate)       \
  X(cuGraphInstantiate_v2) X(cuGraphLaunch) X(cuGraphLaunch_ptsz) X(cuGraphExecDestroy)

// Every exported NVML hook; defined in hooks_nvml.cc.
#define VGPU_NVML_HOOKS(X) X(nvmlDeviceGetMemoryInfo) X(nvmlDeviceGetMemoryInfo_v2)

namespace hami::vgpu {
namespace {

struct HookEntry {
  const char* name;
  void* hook;
};

#define VGPU_ENTRY(name) {#name, reinterpret_cast<void*>(&::name)},
const HookEntry kCudaHooks[] = {VGPU_CUDA_HOOKS(VGPU_ENTRY)};
const HookEntry kNvmlHooks[] = {VGPU_NVML_HOOKS(VGPU_ENTRY)};
#undef VGPU_ENTRY

constexpr int kNumCuda = sizeof(kCudaHooks) / sizeof(kCudaHooks[0]);
constexpr int kNumNvml = sizeof(kNvmlHooks) / sizeof(kNvmlHooks[0]);

constinit std::atomic<void*> g_cuda_real[kNumCuda] = {};
constinit std::atomic<void*> g_nvml_real[kNumNvml] = {};

using DlsymFn = void* (*)(void*, const char*);
constinit std::atomic<DlsymFn> g_real_dlsym{nullptr};

// Base names whose export carries a version suffix, with the CUDA version that introduced it
// (the same mapping the driver's headers apply). Higher versions first.
struct VersionedName {
  const char* base;
  const char* versioned;
  int min_version;
};
const VersionedName kVersioned[] = {
    {"cuMemAlloc", "cuMemAlloc_v2", 3020},
    {"cuMemFree", "cuMemFree_v2", 3020},
    {"cuMemAllocPitch", "cuMemAllocPitch_v2", 3020},
    {"cuMemGetInfo", "cuMemGetInfo_v2", 3020},
    {"cuDeviceTotalMem", "cuDeviceTotalMem_v2", 3020},
    {"cuArrayCreate", "cuArrayCreate_v2", 3020},
    {"cuArray3DCreate", "cuArray3DCreate_v2", 3020},
    {"cuGetProcAddress", "cuGetProcAddress_v2", 12000},
    {"cuGraphInstantiate", "cuGraphInstantiateWithFlags", 12000},
};

}  // namespace

void* RealDlsym(void* handle, const char* name) {
  DlsymFn f = g_real_dlsym.load(std::memory_order_acquire);
  if (f == nullptr) {
    // Newest glibc first; the base versions cover older ones (x86-64, then aarch64).
    static const char* const kVersions[] = {"GLIBC_2.34", "GLIBC_2.2.5", "GLIBC_2.17"};
    for (const char* v : kVersions) {
      f = reinterpret_cast<DlsymFn>(dlvsym(RTLD_NEXT, "dlsym", v));
      if (f != nullptr) break;
    }
    if (f == nullptr) return nullptr;
    g_real_dlsym.store(f, std::memory_order_release);
  }
  return f(handle, name);
}

void* HookFor(const char* name) {
  if (name[0] == 'c') {
    for (const auto& e : kCudaHooks) {
      if (strcmp(e.name, name) == 0) return e.hook;
    }
  } else if (name[0] == 'n') {
    for (const auto& e : kNvmlHooks) {
      if (strcmp(e.name, name) == 0) return e.hook;
    }
  }
  return nullptr;
}

void ResolveHookTargets(void* handle) {
  for (int i = 0; i < kNumCuda; ++i) {
    g_cuda_real[i].store(RealDlsym(handle, kCudaHooks[i].name), std::memory_order_relaxed);
  }
}

void ResolveNvmlHookTargets(void* handle) {
  for (int i = 0; i < kNumNvml; ++i) {
    g_nvml_real[i].store(RealDlsym(handle, kNvmlHooks[i].name), std::memory_order_relaxed);
  }
}

void* MapRealToHook(void* real) {
  if (real == nullptr) return nullptr;
  for (int i = 0; i < kNumCuda; ++i) {
    if (g_cuda_real[i].load(std::memory_order_relaxed) == real) return kCudaHooks[i].hook;
  }
  return real;
}

const char* VersionedHookName(const char* symbol, int cuda_version, unsigned long long flags) {
  for (const auto& v : kVersioned) {
    if (strcmp(v.base, symbol) == 0 && cuda_version >= v.min_version) return v.versioned;
  }
  for (const auto& e : kCudaHooks) {
    if (strcmp(e.name, symbol) != 0) continue;
    if ((flags & CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM) != 0) {
      char ptsz[96];
      size_t n = strlen(symbol);
      if (n + 6 < sizeof(ptsz)) {
        memcpy(ptsz, symbol, n);
        memcpy(ptsz + n, "_ptsz", 6);
        for (const auto& p : kCudaHooks) {
          if (strcmp(p.name, ptsz) == 0) return p.name;
        }
      }
    }
    return e.name;
  }
  return nullptr;
}

}  // namespace hami::vgpu

// glibc declares dlsym's name nonnull; the check is kept for callers that break that contract.
#pragma GCC diagnostic ignored "-Wnonnull-compare"
VGPU_EXPORT void* dlsym(void* handle, const char* name) {
  using hami::vgpu::HookFor;
  using hami::vgpu::RealDlsym;
  if (name != nullptr && handle != RTLD_NEXT &&
      ((name[0] == 'c' && name[1] == 'u') || strncmp(name, "nvml", 4) == 0)) {
    void* hook = HookFor(name);
    if (hook != nullptr) {
      // Hand out a hook only for functions the library behind `handle` really has.
      return RealDlsym(handle, name) != nullptr ? hook : nullptr;
    }
  }
  return RealDlsym(handle, name);
}
