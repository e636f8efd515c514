#include "nvml/library.h"

#include <dlfcn.h>

#include <map>
#include <memory>

#include "common/dl_symbol.h"
#include "common/thread_annotations.h"

namespace hami::nvml {
namespace {

// The libraries loaded so far, by the path callers asked for. Never destroyed: a Library is
// handed out as a plain pointer that must outlive every thread, including those still running
// while static destructors run at exit.
struct Registry {
  Mutex mu;
  std::map<std::string, std::unique_ptr<const Library>, std::less<>> by_path GUARDED_BY(mu);
};

Registry& TheRegistry() {
  static Registry* registry = new Registry();
  return *registry;
}

}  // namespace

std::string Api::ErrorText(nvmlReturn_t r) const {
  const char* text = error_string != nullptr ? error_string(r) : nullptr;
  std::string s = text != nullptr && *text != '\0' ? text : "NVML error";
  return s + " (" + std::to_string(r) + ")";
}

Library::Library(std::string path, void* handle) : path_(std::move(path)) {
  Api& a = api_;
  // Records each name found, so Require() can answer by name for exactly these members.
  auto resolve = [&](const char* name, auto* member) {
    if (ResolveSymbol(handle, name, member)) resolved_.insert(name);
  };
  resolve("nvmlInit_v2", &a.init);
  resolve("nvmlShutdown", &a.shutdown);
  resolve("nvmlErrorString", &a.error_string);
  resolve("nvmlSystemGetDriverVersion", &a.driver_version);
  resolve("nvmlSystemGetCudaDriverVersion", &a.cuda_driver_version);
  resolve("nvmlDeviceGetCount_v2", &a.count);
  resolve("nvmlDeviceGetHandleByIndex_v2", &a.by_index);
  resolve("nvmlDeviceGetHandleByUUID", &a.by_uuid);
  resolve("nvmlDeviceGetUUID", &a.uuid);
  resolve("nvmlDeviceGetName", &a.name);
  resolve("nvmlDeviceGetMemoryInfo", &a.memory);
  resolve("nvmlDeviceGetMemoryInfo_v2", &a.memory_v2);
  resolve("nvmlDeviceGetPciInfo_v3", &a.pci);
  resolve("nvmlDeviceGetNumaNodeId", &a.numa);
  resolve("nvmlDeviceGetMinorNumber", &a.minor);
  resolve("nvmlDeviceGetMigMode", &a.mig_mode);
  resolve("nvmlDeviceGetUtilizationRates", &a.utilization);
  resolve("nvmlDeviceGetMaxMigDeviceCount", &a.mig_max_count);
  resolve("nvmlDeviceGetMigDeviceHandleByIndex", &a.mig_by_index);
  resolve("nvmlDeviceGetAttributes_v2", &a.mig_attributes);
  resolve("nvmlDeviceGetGpuInstanceId", &a.mig_gi_id);
  resolve("nvmlDeviceGetComputeInstanceId", &a.mig_ci_id);
  resolve("nvmlDeviceGetGpuInstanceById", &a.gi_by_id);
  resolve("nvmlDeviceGetGpuInstances", &a.gi_list);
  resolve("nvmlGpuInstanceGetInfo", &a.gi_info);
  resolve("nvmlDeviceGetGpuInstanceProfileInfo", &a.gi_profile_info);
  resolve("nvmlDeviceSetMigMode", &a.set_mig_mode);
  resolve("nvmlDeviceGetGpuInstanceProfileInfoV", &a.gi_profile_info_v);
  resolve("nvmlDeviceGetGpuInstancePossiblePlacements_v2", &a.gi_placements);
  resolve("nvmlDeviceCreateGpuInstanceWithPlacement", &a.gi_create_at);
  resolve("nvmlGpuInstanceDestroy", &a.gi_destroy);
  resolve("nvmlGpuInstanceGetComputeInstanceProfileInfo", &a.ci_profile_info);
  resolve("nvmlGpuInstanceCreateComputeInstance", &a.ci_create);
  resolve("nvmlComputeInstanceGetInfo_v2", &a.ci_info);
  resolve("nvmlGpuInstanceGetComputeInstanceById", &a.ci_by_id);
  resolve("nvmlComputeInstanceDestroy", &a.ci_destroy);
  resolve("nvmlDeviceGetTopologyCommonAncestor", &a.common_ancestor);
  resolve("nvmlDeviceGetNvLinkState", &a.nvlink_state);
  resolve("nvmlDeviceGetNvLinkRemotePciInfo_v2", &a.nvlink_remote);
  resolve("nvmlDeviceGetNvLinkRemoteDeviceType", &a.nvlink_type);
  resolve("nvmlDeviceGetComputeRunningProcesses_v3", &a.processes_v3);
  resolve("nvmlDeviceGetComputeRunningProcesses_v2", &a.processes_v2);
  resolve("nvmlDeviceGetComputeRunningProcesses", &a.processes_v1);
  resolve("nvmlDeviceGetProcessUtilization", &a.process_utilization);
  resolve("nvmlEventSetCreate", &a.event_set_create);
  resolve("nvmlDeviceGetSupportedEventTypes", &a.supported_events);
  resolve("nvmlDeviceRegisterEvents", &a.register_events);
  resolve("nvmlEventSetWait_v2", &a.event_wait);
  resolve("nvmlEventSetFree", &a.event_set_free);
}

Result<const Library*> Library::Load(const std::string& path) {
  Registry& registry = TheRegistry();
  // Held across dlopen so two first callers for one path share one Library.
  MutexLock l(registry.mu);
  if (auto it = registry.by_path.find(path); it != registry.by_path.end()) {
    return it->second.get();
  }
  void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    const char* why = dlerror();
    return Status(StatusCode::kUnavailable,
                  "cannot load " + path + " (" + (why != nullptr ? why : "unknown reason") + ")");
  }
  auto library = std::unique_ptr<const Library>(new Library(path, handle));
  const Library* out = library.get();
  registry.by_path.emplace(path, std::move(library));
  return out;
}

Status Library::Require(std::initializer_list<std::string_view> names,
                        std::string_view user) const {
  std::string missing;
  size_t count = 0;
  for (std::string_view name : names) {
    if (resolved_.count(name) != 0) continue;
    if (count++ > 0) missing += ", ";
    missing += name;
  }
  if (count == 0) return OkStatus();
  std::string what = count == 1 ? "an NVML entry point " : "NVML entry points ";
  return Status(StatusCode::kUnavailable, path_ + " lacks " + what + std::string(user) +
                                              " needs (driver too old?): " + missing);
}

}  // namespace hami::nvml
