// The enforcement library's process-wide state and the services the hooks share: lazy
// initialisation, the real driver entry points, the shared region and this process's slot, the
// CUDA-ordinal-to-container-device map, memory charging and the kernel launch gate.
//
// Initialisation is lazy and in two phases, so that a process that merely has the library
// preloaded (every process of a container when /etc/ld.so.preload is used) pays nothing:
//   phase A (first hooked call of any kind): environment, real libcuda entry points, region,
//     slot registration, fork handlers;
//   phase B (after the driver is initialised): container device UUIDs in the region, the
//     ordinal map, and the SM controller thread.
// Any failure degrades to pass-through or to a process-private region with one clear log line;
// the library never exits or crashes its host process.
//
// Thread safety: every function is safe from any thread. Fork is handled (the child gets a fresh
// slot and allocation table on its next call).
#pragma once

#include <stdint.h>

#include <atomic>

#include "nvml/abi.h"
#include "vgpu/alloc_table.h"
#include "vgpu/config.h"
#include "vgpu/cuda_abi.h"
#include "vgpu/region.h"

namespace hami::vgpu {

// Real driver entry points the library calls. Null when the driver lacks the symbol.
// One entry per line; clang-format reflows X-macro lists differently on each pass.
// clang-format off
#define VGPU_REAL_CUDA(X) \
  X(cuInit) \
  X(cuGetProcAddress) \
  X(cuGetProcAddress_v2) \
  X(cuDeviceGet) \
  X(cuDeviceGetCount) \
  X(cuDeviceGetUuid) \
  X(cuDeviceGetUuid_v2) \
  X(cuDeviceTotalMem_v2) \
  X(cuCtxGetDevice) \
  X(cuMemAlloc_v2) \
  X(cuMemFree_v2) \
  X(cuMemAllocPitch_v2) \
  X(cuMemAllocManaged) \
  X(cuMemAllocAsync) \
  X(cuMemAllocAsync_ptsz) \
  X(cuMemFreeAsync) \
  X(cuMemFreeAsync_ptsz) \
  X(cuMemAllocFromPoolAsync) \
  X(cuMemAllocFromPoolAsync_ptsz) \
  X(cuMemCreate) \
  X(cuMemRelease) \
  X(cuArrayCreate_v2) \
  X(cuArray3DCreate_v2) \
  X(cuArrayDestroy) \
  X(cuMipmappedArrayCreate) \
  X(cuMipmappedArrayDestroy) \
  X(cuMemGetInfo_v2) \
  X(cuLaunchKernel) \
  X(cuLaunchKernel_ptsz) \
  X(cuLaunchKernelEx) \
  X(cuLaunchKernelEx_ptsz) \
  X(cuLaunchCooperativeKernel) \
  X(cuLaunchCooperativeKernel_ptsz) \
  X(cuGraphInstantiateWithFlags) \
  X(cuGraphInstantiate) \
  X(cuGraphInstantiate_v2) \
  X(cuGraphLaunch) \
  X(cuGraphLaunch_ptsz) \
  X(cuGraphExecDestroy) \
  X(cuGraphGetNodes) \
  X(cuGraphNodeGetType) \
  X(cuGraphKernelNodeGetParams) \
  X(cuGraphKernelNodeGetParams_v2)
// clang-format on

// One entry per line; clang-format reflows X-macro lists differently on each pass.
// clang-format off
#define VGPU_REAL_NVML(X) \
  X(nvmlInit_v2) \
  X(nvmlDeviceGetCount_v2) \
  X(nvmlDeviceGetHandleByIndex_v2) \
  X(nvmlDeviceGetHandleByUUID) \
  X(nvmlDeviceGetUUID) \
  X(nvmlDeviceGetMemoryInfo) \
  X(nvmlDeviceGetMemoryInfo_v2) \
  X(nvmlDeviceGetProcessUtilization)
// clang-format on

struct RealCuda {
#define VGPU_FIELD(name) decltype(&::name) name;
  VGPU_REAL_CUDA(VGPU_FIELD)
};
struct RealNvml {
  VGPU_REAL_NVML(VGPU_FIELD)
#undef VGPU_FIELD
};

// Process-wide runtime. One instance, constant-initialised (no static constructor runs).
struct Runtime {
  std::atomic<int> phase_a{0};  // 0 not started, 1 running, 2 done
  std::atomic<int> phase_b{0};
  std::atomic<int> init_tid{0};  // thread running phase A (re-entrancy guard)
  bool pass_through = false;     // CUDA_DISABLE_CONTROL or nothing to enforce with
  Config cfg;
  RealCuda cuda{};
  RealNvml nvml{};
  std::atomic<int> nvml_state{0};  // 0 not loaded, 1 loading, 2 ready, 3 unavailable
  Region* region = nullptr;
  std::atomic<int> slot{-1};
  std::atomic<bool> launch_gate{false};      // some device may have an SM limit to enforce
  std::atomic<uint32_t> seen_config_gen{0};  // region config_gen launch_gate was computed from
  std::atomic<bool> watcher_started{false};
  // CUDA ordinal -> region device index; -2 unknown yet, -1 not a container device.
  std::atomic<int> ordinal_map[kMaxDevices] = {};
  AllocTable table;
};

Runtime& Rt();

// Ensures phase A ran. Returns false when the library must act as pure pass-through for this
// call (control disabled, or called re-entrantly from inside initialisation).
bool EnterProcess();
// Ensures phase B ran (needs an initialised driver; harmless if it is not).
void EnterDevices();
// Ensures this process (possibly a forked child) has a slot. Returns the slot or -1.
int MySlot();

// Maps a CUDA ordinal of this process to the container device index, -1 if unknown.
int RegionIndexForOrdinal(CUdevice ordinal);
// Container device of the current context, -1 if there is none.
int CurrentRegionDevice();
// Container device for an NVML handle, -1 if it is not one of the container's devices.
int RegionIndexForNvml(nvmlDevice_t handle);
// Loads the real NVML (for the controller and the NVML hooks). Returns false if unavailable.
bool EnsureNvml();

// Charges `bytes` on container device `dev`. Returns false (and logs the decision) if the quota
// would be exceeded. `api` names the call for the log line.
bool Charge(int dev, uint64_t bytes, MemKind kind, const char* api);
void Uncharge(int dev, uint64_t bytes, MemKind kind);

// Blocks while hamictl suspended the container or the monitor paused it for priority.
void WaitIfPaused();
// Every launch's prologue in one call (the launch hooks' hot path): EnterProcess; the pause
// point (WaitIfPaused); the container marked active for the monitor's feedback loop
// (recent_kernel = 2, last_kernel_time stamped, each stored only when it changes); and whether
// the launch must pass the SM gate, noticing live limit changes (region config_gen). False when
// the launch passes through.
bool LaunchPrologue();
// Admission of a launch of `units` work units on the current device: applies the SM limit.
void GateLaunch(uint64_t units);

// Starts the controller thread if it is not running in this process.
void StartWatcher();

}  // namespace hami::vgpu
