// Symbol lookup plumbing: the application-visible `dlsym` override, the table of hooked entry
// points, and the mapping from a real driver function pointer to our hook (used by
// cuGetProcAddress, so that the driver's own resolution of versions and per-thread-stream
// variants is kept exactly).
//
// Thread safety: the hook table is immutable; the real-pointer arrays are written once during
// initialisation (phase A / NVML load) before any lookup can need them, and read with relaxed
// atomics.
#pragma once

namespace hami::vgpu {

// glibc's dlsym, bypassing our override.
void* RealDlsym(void* handle, const char* name);

// Our hook for `name`, or nullptr if we do not hook it.
void* HookFor(const char* name);

struct RealCuda;
// Records the real libcuda / libnvidia-ml address behind every hooked name.
void ResolveHookTargets(const RealCuda& real);
void ResolveNvmlHookTargets(void* libnvml_handle);

// If `real` is the address of a function we hook, returns our hook; otherwise `real`.
void* MapRealToHook(void* real);

// Name-based fallback for cuGetProcAddress: the versioned export a base `symbol` resolves to for
// `cuda_version` and `flags`, or nullptr if we hook no variant of it.
const char* VersionedHookName(const char* symbol, int cuda_version, unsigned long long flags);

}  // namespace hami::vgpu
