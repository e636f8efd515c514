#include "monitor/nvml_stats.h"

#include <cstring>
#include <map>

#include "common/log.h"
#include "nvml/library.h"

namespace hami::monitor {

namespace {

Status Error(const nvml::Api& a, const std::string& what, nvmlReturn_t r) {
  return Status(StatusCode::kUnavailable, what + ": " + a.ErrorText(r));
}

Result<nvmlDevice_t> Handle(const nvml::Api& a, const std::string& id) {
  nvmlDevice_t d = nullptr;
  nvmlReturn_t r = a.by_uuid(id.c_str(), &d);
  if (r != NVML_SUCCESS) return Error(a, "device " + id, r);
  return d;
}

// NVML's names for the GPU instance profiles `dev` offers, by profile ID, without the "MIG "
// prefix ("1g.10gb"); empty when the driver cannot name them (no ...ProfileInfoV).
std::map<unsigned, std::string> GiProfileNames(const nvml::Api& a, nvmlDevice_t dev) {
  std::map<unsigned, std::string> names;
  if (a.gi_profile_info_v == nullptr) return names;
  // Enums this driver does not know or the GPU does not offer answer an error: skipped.
  for (unsigned e = 0; e < NVML_GPU_INSTANCE_PROFILE_COUNT; ++e) {
    nvmlGpuInstanceProfileInfo_v2_t info{};
    info.version = nvmlGpuInstanceProfileInfo_v2;
    if (a.gi_profile_info_v(dev, e, &info) != NVML_SUCCESS) continue;
    std::string name(info.name, strnlen(info.name, sizeof(info.name)));
    if (name.rfind("MIG ", 0) == 0) name.erase(0, 4);
    if (!name.empty()) names[info.id] = std::move(name);
  }
  return names;
}

// The MIG devices of `dev` (NVML's index order) when MIG is enabled on it; none otherwise, nor
// when the driver lacks the MIG calls. One destroyed while being read is left out.
std::vector<MigDevice> ReadMigDevices(const nvml::Api& a, nvmlDevice_t dev) {
  std::vector<MigDevice> out;
  unsigned current = 0, pending = 0, max = 0;
  if (a.mig_mode == nullptr || a.mig_max_count == nullptr || a.mig_by_index == nullptr ||
      a.mig_gi_id == nullptr || a.mig_ci_id == nullptr ||
      a.mig_mode(dev, &current, &pending) != NVML_SUCCESS ||
      current != NVML_DEVICE_MIG_ENABLE || a.mig_max_count(dev, &max) != NVML_SUCCESS) {
    return out;
  }
  std::map<unsigned, std::string> profiles;  // read at the first MIG device found
  for (unsigned i = 0; i < max; ++i) {
    nvmlDevice_t mig = nullptr;
    if (a.mig_by_index(dev, i, &mig) != NVML_SUCCESS) continue;  // none at this index
    MigDevice m;
    char uuid[NVML_DEVICE_UUID_V2_BUFFER_SIZE] = {};
    if (a.uuid(mig, uuid, sizeof(uuid)) != NVML_SUCCESS ||
        a.mig_gi_id(mig, &m.gpu_instance_id) != NVML_SUCCESS ||
        a.mig_ci_id(mig, &m.compute_instance_id) != NVML_SUCCESS) {
      continue;
    }
    m.uuid = uuid;
    if (nvmlMemory_t mem{}; a.memory(mig, &mem) == NVML_SUCCESS) {
      m.memory_used = mem.used;
      m.memory_total = mem.total;
    }
    if (out.empty()) profiles = GiProfileNames(a, dev);
    nvmlGpuInstance_t gi = nullptr;
    nvmlGpuInstanceInfo_t info{};
    if (a.gi_by_id != nullptr && a.gi_info != nullptr &&
        a.gi_by_id(dev, m.gpu_instance_id, &gi) == NVML_SUCCESS &&
        a.gi_info(gi, &info) == NVML_SUCCESS && profiles.count(info.profileId) != 0) {
      m.profile = profiles[info.profileId];
    } else if (char name[NVML_DEVICE_NAME_V2_BUFFER_SIZE] = {};
               a.name(mig, name, sizeof(name)) == NVML_SUCCESS) {
      m.profile = ProfileFromMigName(name);
    }
    out.push_back(std::move(m));
  }
  return out;
}

}  // namespace

std::string ProfileFromMigName(const std::string& name) {
  size_t at = name.rfind("MIG ");
  if (at == std::string::npos) return "";
  std::string p = name.substr(at + 4);
  size_t dot = p.find('.');
  if (dot != std::string::npos && dot > 0 && p[dot - 1] == 'c' && p.find("g.", dot) != p.npos) {
    p.erase(0, dot + 1);
  }
  return p;
}

NvmlStats::NvmlStats(const nvml::Api& api) : api_(api) {}
NvmlStats::~NvmlStats() = default;  // NVML stays loaded: its threads may outlive us

Result<std::unique_ptr<NvmlStats>> NvmlStats::Open(const std::string& library) {
  Result<const nvml::Library*> lib = nvml::Library::Load(library);
  if (!lib.ok()) {
    return Status(StatusCode::kUnavailable,
                  lib.status().message() + ": is the NVIDIA driver mounted into this container?");
  }
  // Utilisation, process lists and samples are optional: the monitor reports what it can.
  HAMI_RETURN_IF_ERROR((*lib)->Require(
      {"nvmlInit_v2", "nvmlErrorString", "nvmlDeviceGetCount_v2", "nvmlDeviceGetHandleByIndex_v2",
       "nvmlDeviceGetHandleByUUID", "nvmlDeviceGetUUID", "nvmlDeviceGetName",
       "nvmlDeviceGetMemoryInfo"},
      "the monitor"));
  const nvml::Api& a = (*lib)->api();
  if (nvmlReturn_t r = a.init(); r != NVML_SUCCESS) return Error(a, "nvmlInit", r);
  return std::unique_ptr<NvmlStats>(new NvmlStats(a));
}

Result<std::vector<HostGpu>> NvmlStats::Gpus() {
  const nvml::Api& a = api_;
  unsigned count = 0;
  if (nvmlReturn_t r = a.count(&count); r != NVML_SUCCESS) return Error(a, "device count", r);
  std::vector<HostGpu> gpus;
  for (unsigned i = 0; i < count; ++i) {
    nvmlDevice_t d = nullptr;
    if (nvmlReturn_t r = a.by_index(i, &d); r != NVML_SUCCESS) {
      return Error(a, "device " + std::to_string(i), r);
    }
    HostGpu g;
    g.index = i;
    char text[NVML_DEVICE_UUID_V2_BUFFER_SIZE] = {};
    if (nvmlReturn_t r = a.uuid(d, text, sizeof(text)); r != NVML_SUCCESS) {
      return Error(a, "device UUID", r);
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
    g.migs = ReadMigDevices(a, d);
    gpus.push_back(std::move(g));
  }
  return gpus;
}

Result<std::vector<GpuProcess>> NvmlStats::Processes(const std::string& uuid) {
  const nvml::Api& a = api_;
  Result<nvmlDevice_t> d = Handle(a, uuid);
  if (!d.ok()) return d.status();
  std::vector<GpuProcess> out;
  // The list may grow between the two calls: retry with a larger buffer a few times.
  for (unsigned capacity = 64; capacity <= 65536; capacity *= 4) {
    unsigned n = capacity;
    nvmlReturn_t r;
    if (a.processes_v3 != nullptr) {
      std::vector<nvmlProcessInfo_t> infos(capacity);
      r = a.processes_v3(*d, &n, infos.data());
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
    if (r != NVML_ERROR_INSUFFICIENT_SIZE) return Error(a, "running processes", r);
  }
  return Status(StatusCode::kResourceExhausted, "more than 65536 processes on " + uuid);
}

Result<std::vector<ProcessSample>> NvmlStats::Samples(const std::string& uuid, uint64_t since_us) {
  const nvml::Api& a = api_;
  std::vector<ProcessSample> out;
  if (a.process_utilization == nullptr) return out;
  Result<nvmlDevice_t> d = Handle(a, uuid);
  if (!d.ok()) return d.status();
  std::vector<nvmlProcessUtilizationSample_t> samples(1024);
  unsigned n = static_cast<unsigned>(samples.size());
  nvmlReturn_t r = a.process_utilization(*d, samples.data(), &n, since_us);
  if (r == NVML_ERROR_NOT_FOUND) return out;  // no sample newer than since_us
  if (r != NVML_SUCCESS) return Error(a, "process utilization", r);
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
