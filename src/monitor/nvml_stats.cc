#include "monitor/nvml_stats.h"

#include <dlfcn.h>

#include "common/dl_symbol.h"
#include "common/log.h"
#include "vgpu/nvml_abi.h"

namespace hami::monitor {

struct NvmlStats::Api {
  decltype(&nvmlInit_v2) init = nullptr;
  decltype(&nvmlErrorString) error_string = nullptr;
  decltype(&nvmlDeviceGetCount_v2) count = nullptr;
  decltype(&nvmlDeviceGetHandleByIndex_v2) by_index = nullptr;
  decltype(&nvmlDeviceGetHandleByUUID) by_uuid = nullptr;
  decltype(&nvmlDeviceGetUUID) uuid = nullptr;
  decltype(&nvmlDeviceGetName) name = nullptr;
  decltype(&nvmlDeviceGetMemoryInfo) memory = nullptr;
  decltype(&nvmlDeviceGetUtilizationRates) utilization = nullptr;            // optional
  decltype(&nvmlDeviceGetComputeRunningProcesses_v3) processes = nullptr;    // optional
  decltype(&nvmlDeviceGetComputeRunningProcesses) processes_v1 = nullptr;    // optional
  decltype(&nvmlDeviceGetProcessUtilization) process_utilization = nullptr;  // optional

  Status Error(const char* what, nvmlReturn_t r) const {
    std::string text = error_string != nullptr ? error_string(r) : "";
    return Status(StatusCode::kUnavailable, std::string(what) + ": " +
                                                (text.empty() ? "NVML error" : text) + " (" +
                                                std::to_string(r) + ")");
  }
  Result<nvmlDevice_t> Handle(const std::string& id) const {
    nvmlDevice_t d = nullptr;
    nvmlReturn_t r = by_uuid(id.c_str(), &d);
    if (r != NVML_SUCCESS) return Error(("device " + id).c_str(), r);
    return d;
  }
};

NvmlStats::NvmlStats(std::unique_ptr<Api> api) : api_(std::move(api)) {}
NvmlStats::~NvmlStats() = default;  // NVML stays loaded: its threads may outlive us

Result<std::unique_ptr<NvmlStats>> NvmlStats::Open(const std::string& library) {
  void* handle = dlopen(library.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    const char* why = dlerror();
    return Status(StatusCode::kUnavailable,
                  "cannot load " + library + " (" + (why ? why : "unknown") +
                      "): is the NVIDIA driver mounted into this container?");
  }
  auto api = std::make_unique<Api>();
  bool ok = ResolveSymbol(handle, "nvmlInit_v2", &api->init) &&
            ResolveSymbol(handle, "nvmlErrorString", &api->error_string) &&
            ResolveSymbol(handle, "nvmlDeviceGetCount_v2", &api->count) &&
            ResolveSymbol(handle, "nvmlDeviceGetHandleByIndex_v2", &api->by_index) &&
            ResolveSymbol(handle, "nvmlDeviceGetHandleByUUID", &api->by_uuid) &&
            ResolveSymbol(handle, "nvmlDeviceGetUUID", &api->uuid) &&
            ResolveSymbol(handle, "nvmlDeviceGetName", &api->name) &&
            ResolveSymbol(handle, "nvmlDeviceGetMemoryInfo", &api->memory);
  if (!ok) {
    dlclose(handle);
    return Status(StatusCode::kUnavailable,
                  library + " lacks an NVML entry point the monitor needs (driver too old?)");
  }
  ResolveSymbol(handle, "nvmlDeviceGetUtilizationRates", &api->utilization);
  ResolveSymbol(handle, "nvmlDeviceGetComputeRunningProcesses_v3", &api->processes);
  ResolveSymbol(handle, "nvmlDeviceGetComputeRunningProcesses", &api->processes_v1);
  ResolveSymbol(handle, "nvmlDeviceGetProcessUtilization", &api->process_utilization);
  if (nvmlReturn_t r = api->init(); r != NVML_SUCCESS) return api->Error("nvmlInit", r);
  return std::unique_ptr<NvmlStats>(new NvmlStats(std::move(api)));
}

Result<std::vector<HostGpu>> NvmlStats::Gpus() {
  const Api& a = *api_;
  unsigned count = 0;
  if (nvmlReturn_t r = a.count(&count); r != NVML_SUCCESS) return a.Error("device count", r);
  std::vector<HostGpu> gpus;
  for (unsigned i = 0; i < count; ++i) {
    nvmlDevice_t d = nullptr;
    if (nvmlReturn_t r = a.by_index(i, &d); r != NVML_SUCCESS) {
      return a.Error(("device " + std::to_string(i)).c_str(), r);
    }
    HostGpu g;
    g.index = i;
    char text[NVML_DEVICE_UUID_V2_BUFFER_SIZE] = {};
    if (nvmlReturn_t r = a.uuid(d, text, sizeof(text)); r != NVML_SUCCESS) {
      return a.Error("device UUID", r);
    }
    g.uuid = text;
    char name[NVML_DEVICE_NAME_V2_BUFFER_SIZE] = {};
    if (a.name(d, name, sizeof(name)) == NVML_SUCCESS) g.name = name;
    nvmlMemory_t mem{};
    if (a.memory(d, &mem) == NVML_SUCCESS) {
      g.memory_used = mem.used;
      g.memory_total = mem.total;
    }
    nvmlUtilization_t util{};
    if (a.utilization != nullptr && a.utilization(d, &util) == NVML_SUCCESS) {
      g.utilization = util.gpu;
      g.memory_utilization = util.memory;
    }
    gpus.push_back(std::move(g));
  }
  return gpus;
}

Result<std::vector<GpuProcess>> NvmlStats::Processes(const std::string& uuid) {
  const Api& a = *api_;
  Result<nvmlDevice_t> d = a.Handle(uuid);
  if (!d.ok()) return d.status();
  std::vector<GpuProcess> out;
  // The list may grow between the two calls: retry with a larger buffer a few times.
  for (unsigned capacity = 64; capacity <= 65536; capacity *= 4) {
    unsigned n = capacity;
    nvmlReturn_t r;
    if (a.processes != nullptr) {
      std::vector<nvmlProcessInfo_t> infos(capacity);
      r = a.processes(*d, &n, infos.data());
      if (r == NVML_SUCCESS) {
        for (unsigned i = 0; i < n; ++i) {
          out.push_back({static_cast<int>(infos[i].pid), infos[i].usedGpuMemory});
        }
      }
    } else if (a.processes_v1 != nullptr) {
      std::vector<nvmlProcessInfo_v1_t> infos(capacity);
      r = a.processes_v1(*d, &n, infos.data());
      if (r == NVML_SUCCESS) {
        for (unsigned i = 0; i < n; ++i) {
          out.push_back({static_cast<int>(infos[i].pid), infos[i].usedGpuMemory});
        }
      }
    } else {
      return out;  // this driver cannot list processes
    }
    if (r == NVML_SUCCESS) return out;
    if (r != NVML_ERROR_INSUFFICIENT_SIZE) return a.Error("running processes", r);
  }
  return Status(StatusCode::kResourceExhausted, "more than 65536 processes on " + uuid);
}

Result<std::vector<ProcessSample>> NvmlStats::Samples(const std::string& uuid, uint64_t since_us) {
  const Api& a = *api_;
  std::vector<ProcessSample> out;
  if (a.process_utilization == nullptr) return out;
  Result<nvmlDevice_t> d = a.Handle(uuid);
  if (!d.ok()) return d.status();
  std::vector<nvmlProcessUtilizationSample_t> samples(1024);
  unsigned n = static_cast<unsigned>(samples.size());
  nvmlReturn_t r = a.process_utilization(*d, samples.data(), &n, since_us);
  if (r == NVML_ERROR_NOT_FOUND) return out;  // no sample newer than since_us
  if (r != NVML_SUCCESS) return a.Error("process utilization", r);
  for (unsigned i = 0; i < n && i < samples.size(); ++i) {
    out.push_back({static_cast<int>(samples[i].pid), samples[i].smUtil, samples[i].timeStamp});
  }
  return out;
}

bool LateNvmlStats::TryOpen() {
  MutexLock l(mu_);
  if (nvml_ != nullptr) return true;
  Result<std::unique_ptr<NvmlStats>> n = NvmlStats::Open(library_);
  if (n.ok()) {
    nvml_ = std::move(*n);
    HAMI_LOG(Info) << "NVML loaded from " << library_;
    return true;
  }
  if (n.status().message() != last_error_) {
    last_error_ = n.status().message();
    HAMI_LOG(Warning) << last_error_ << "; host GPU metrics and host PIDs are unavailable";
  }
  return false;
}

NvmlStats* LateNvmlStats::Loaded() {
  MutexLock l(mu_);
  return nvml_.get();
}

Result<std::vector<HostGpu>> LateNvmlStats::Gpus() {
  NvmlStats* n = Loaded();
  if (n == nullptr) return std::vector<HostGpu>{};
  return n->Gpus();
}

Result<std::vector<GpuProcess>> LateNvmlStats::Processes(const std::string& uuid) {
  NvmlStats* n = Loaded();
  if (n == nullptr) return std::vector<GpuProcess>{};
  return n->Processes(uuid);
}

Result<std::vector<ProcessSample>> LateNvmlStats::Samples(const std::string& uuid,
                                                          uint64_t since_us) {
  NvmlStats* n = Loaded();
  if (n == nullptr) return std::vector<ProcessSample>{};
  return n->Samples(uuid, since_us);
}

}  // namespace hami::monitor
