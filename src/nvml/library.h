// nvml::Library: the one place that loads NVML (libnvidia-ml.so.1) at run time and resolves its
// entry points, for the device plugin, the monitor and `hamictl smi`. Nothing here needs the
// driver at build time: the same code runs on a real driver and on the simulated one (build/sim).
//
//   Result<const nvml::Library*> lib = nvml::Library::Load("libnvidia-ml.so.1");
//   if (!lib.ok()) ...;  // "cannot load <path> (<dlerror>)": the caller adds its own hint
//   HAMI_RETURN_IF_ERROR((*lib)->Require({"nvmlInit_v2", "nvmlShutdown"}, "the plugin"));
//   const nvml::Api& a = (*lib)->api();
//   if (nvmlReturn_t r = a.init(); r != NVML_SUCCESS) {
//     return UnavailableError("nvmlInit: " + a.ErrorText(r));
//   }
//
// Every entry point any user calls is resolved up front; one the library lacks stays null, and
// each user says which ones it cannot work without through Require(). Calling nvmlInit and
// nvmlShutdown stays the user's business (NVML counts them), so users' lifetimes stay independent.
//
// Lifetime: a path is opened once per process (RTLD_NOW | RTLD_LOCAL) and never closed; the
// Library returned lives until exit. A driver keeps per-process state (threads, event sets) for
// the life of the process, the monitor hands NVML pointers out without a lock on that basis, and
// nothing is gained by unmapping it early. A path that fails to open is not remembered, so a
// driver mounted later is found by the next Load.
//
// Thread safety: Load may be called from any thread. A Library is immutable once returned; its
// members and NVML's own entry points (thread-safe per NVML's contract) may be called from any
// thread.
#pragma once

#include <functional>
#include <initializer_list>
#include <set>
#include <string>
#include <string_view>

#include "common/status.h"
#include "nvml/abi.h"

namespace hami::nvml {

// The NVML entry points hami-cpp calls, each null when the loaded library does not export it.
// Versioned names are the ones drivers since R525 export; the older spellings some users fall
// back on are listed beside them.
struct Api {
  // Init, errors, system.
  decltype(&nvmlInit_v2) init = nullptr;
  decltype(&nvmlShutdown) shutdown = nullptr;
  decltype(&nvmlErrorString) error_string = nullptr;
  decltype(&nvmlSystemGetDriverVersion) driver_version = nullptr;
  decltype(&nvmlSystemGetCudaDriverVersion) cuda_driver_version = nullptr;
  // Devices.
  decltype(&nvmlDeviceGetCount_v2) count = nullptr;
  decltype(&nvmlDeviceGetHandleByIndex_v2) by_index = nullptr;
  decltype(&nvmlDeviceGetHandleByUUID) by_uuid = nullptr;
  decltype(&nvmlDeviceGetUUID) uuid = nullptr;
  decltype(&nvmlDeviceGetName) name = nullptr;
  decltype(&nvmlDeviceGetMemoryInfo) memory = nullptr;
  decltype(&nvmlDeviceGetMemoryInfo_v2) memory_v2 = nullptr;
  decltype(&nvmlDeviceGetPciInfo_v3) pci = nullptr;
  decltype(&nvmlDeviceGetNumaNodeId) numa = nullptr;
  decltype(&nvmlDeviceGetMinorNumber) minor = nullptr;
  decltype(&nvmlDeviceGetMigMode) mig_mode = nullptr;
  decltype(&nvmlDeviceGetUtilizationRates) utilization = nullptr;
  // MIG: the instances that exist.
  decltype(&nvmlDeviceGetMaxMigDeviceCount) mig_max_count = nullptr;
  decltype(&nvmlDeviceGetMigDeviceHandleByIndex) mig_by_index = nullptr;
  decltype(&nvmlDeviceGetAttributes_v2) mig_attributes = nullptr;
  decltype(&nvmlDeviceGetGpuInstanceId) mig_gi_id = nullptr;
  decltype(&nvmlDeviceGetComputeInstanceId) mig_ci_id = nullptr;
  decltype(&nvmlDeviceGetGpuInstanceById) gi_by_id = nullptr;
  decltype(&nvmlGpuInstanceGetInfo) gi_info = nullptr;
  decltype(&nvmlDeviceGetGpuInstances) gi_list = nullptr;
  decltype(&nvmlDeviceGetGpuInstanceProfileInfo) gi_profile_info = nullptr;
  // MIG: changing the mode, making and destroying instances (dynamic MIG).
  decltype(&nvmlDeviceSetMigMode) set_mig_mode = nullptr;
  decltype(&nvmlDeviceGetGpuInstanceProfileInfoV) gi_profile_info_v = nullptr;
  decltype(&nvmlDeviceGetGpuInstancePossiblePlacements_v2) gi_placements = nullptr;
  decltype(&nvmlDeviceCreateGpuInstanceWithPlacement) gi_create_at = nullptr;
  decltype(&nvmlGpuInstanceDestroy) gi_destroy = nullptr;
  decltype(&nvmlGpuInstanceGetComputeInstanceProfileInfo) ci_profile_info = nullptr;
  decltype(&nvmlGpuInstanceCreateComputeInstance) ci_create = nullptr;
  decltype(&nvmlComputeInstanceGetInfo_v2) ci_info = nullptr;
  decltype(&nvmlGpuInstanceGetComputeInstanceById) ci_by_id = nullptr;
  decltype(&nvmlComputeInstanceDestroy) ci_destroy = nullptr;
  // Topology.
  decltype(&nvmlDeviceGetTopologyCommonAncestor) common_ancestor = nullptr;
  decltype(&nvmlDeviceGetNvLinkState) nvlink_state = nullptr;
  decltype(&nvmlDeviceGetNvLinkRemotePciInfo_v2) nvlink_remote = nullptr;
  decltype(&nvmlDeviceGetNvLinkRemoteDeviceType) nvlink_type = nullptr;
  // Processes.
  decltype(&nvmlDeviceGetComputeRunningProcesses_v3) processes_v3 = nullptr;
  decltype(&nvmlDeviceGetComputeRunningProcesses_v2) processes_v2 = nullptr;
  decltype(&nvmlDeviceGetComputeRunningProcesses) processes_v1 = nullptr;
  decltype(&nvmlDeviceGetProcessUtilization) process_utilization = nullptr;
  // Events (XIDs).
  decltype(&nvmlEventSetCreate) event_set_create = nullptr;
  decltype(&nvmlDeviceGetSupportedEventTypes) supported_events = nullptr;
  decltype(&nvmlDeviceRegisterEvents) register_events = nullptr;
  decltype(&nvmlEventSetWait_v2) event_wait = nullptr;
  decltype(&nvmlEventSetFree) event_set_free = nullptr;

  // NVML's text for `r` and the code, "Not Found (6)"; "NVML error (6)" when the library has no
  // nvmlErrorString or it gives no text.
  std::string ErrorText(nvmlReturn_t r) const;
};

class Library {
 public:
  // The library at `path` (a file name searched as dlopen searches, or a path), loaded and
  // resolved on the first call for that path and shared afterwards. kUnavailable with
  // "cannot load <path> (<loader's reason>)" when it cannot be opened; callers append the hint
  // that fits their deployment.
  static Result<const Library*> Load(const std::string& path);

  Library(const Library&) = delete;
  Library& operator=(const Library&) = delete;

  // OK when every entry point in `names` (NVML's exported names) was resolved, so the matching
  // Api members are non-null. Otherwise kUnavailable naming each missing one:
  //   "<path> lacks an NVML entry point <user> needs (driver too old?): nvmlEventSetWait_v2"
  // `user` is who needs them, such as "the plugin". A name Api has no member for counts as
  // missing: the loader offers no pointer for it.
  Status Require(std::initializer_list<std::string_view> names, std::string_view user) const;

  const Api& api() const { return api_; }
  const std::string& path() const { return path_; }

 private:
  Library(std::string path, void* handle);

  const std::string path_;
  Api api_;
  std::set<std::string, std::less<>> resolved_;  // names of the non-null members of api_
};

}  // namespace hami::nvml
