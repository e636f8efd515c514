#include "deviceplugin/nvml_driver.h"

#include <algorithm>
#include <cctype>
#include <fstream>
#include <map>
#include <set>

#include "nvml/library.h"

namespace hami::deviceplugin {

namespace {

// NVML's "00000000:07:00.0" as sysfs names it: "0000:07:00.0", lower case.
std::string SysfsPciName(std::string bus_id) {
  std::transform(bus_id.begin(), bus_id.end(), bus_id.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  size_t colon = bus_id.find(':');
  if (colon == 8 && bus_id.compare(0, 4, "0000") == 0) bus_id.erase(0, 4);
  return bus_id;
}

// The NUMA node sysfs gives an NVIDIA PCI function; nullopt when sysfs has no such NVIDIA device.
std::optional<int> SysfsNumaNode(const std::string& root, const std::string& bus_id) {
  if (bus_id.empty()) return std::nullopt;
  std::string dir = root + "/bus/pci/devices/" + SysfsPciName(bus_id);
  std::ifstream vendor(dir + "/vendor");
  std::string v;
  if (!(vendor >> v) || (v != "0x10de" && v != "0x10DE")) return std::nullopt;
  std::ifstream numa(dir + "/numa_node");
  int node = -1;
  if (!(numa >> node)) return std::nullopt;
  return node;
}

std::string NormalBusId(const char* text) {
  std::string s(text);
  std::transform(s.begin(), s.end(), s.begin(),
                 [](unsigned char c) { return static_cast<char>(std::toupper(c)); });
  return SysfsPciName(s);  // one spelling for comparisons
}

// Every unordered pair of `gpus` (whose NVML handles are `handles`, in the same order): NVML's
// common ancestor level, and NVLinks counted from both ends by matching remote PCI bus ids.
std::vector<GpuPair> Pairs(const nvml::Api& a, const std::vector<GpuInfo>& gpus,
                           const std::vector<nvmlDevice_t>& handles) {
  // NVLinks seen from each GPU: peer bus id -> links, plus links that end at an NVSwitch.
  std::map<std::string, size_t> by_bus;
  for (size_t i = 0; i < gpus.size(); ++i) {
    if (!gpus[i].pci_bus_id.empty()) by_bus[NormalBusId(gpus[i].pci_bus_id.c_str())] = i;
  }
  std::vector<std::map<size_t, int>> direct(gpus.size());
  std::vector<int> to_switch(gpus.size(), 0);
  if (a.nvlink_state != nullptr && a.nvlink_remote != nullptr) {
    for (size_t i = 0; i < handles.size(); ++i) {
      for (unsigned link = 0; link < NVML_NVLINK_MAX_LINKS; ++link) {
        nvmlEnableState_t active = NVML_FEATURE_DISABLED;
        if (a.nvlink_state(handles[i], link, &active) != NVML_SUCCESS) break;  // no more links
        if (active != NVML_FEATURE_ENABLED) continue;
        nvmlIntNvLinkDeviceType_t type = NVML_NVLINK_DEVICE_TYPE_GPU;
        if (a.nvlink_type != nullptr && a.nvlink_type(handles[i], link, &type) == NVML_SUCCESS &&
            type == NVML_NVLINK_DEVICE_TYPE_SWITCH) {
          ++to_switch[i];
          continue;
        }
        nvmlPciInfo_t remote{};
        if (a.nvlink_remote(handles[i], link, &remote) != NVML_SUCCESS) continue;
        auto peer = by_bus.find(NormalBusId(remote.busId));
        if (peer != by_bus.end() && peer->second != i) ++direct[i][peer->second];
      }
    }
  }
  std::vector<GpuPair> pairs;
  for (size_t i = 0; i < handles.size(); ++i) {
    for (size_t j = i + 1; j < handles.size(); ++j) {
      GpuPair p;
      p.a = static_cast<uint32_t>(i);
      p.b = static_cast<uint32_t>(j);
      nvmlGpuTopologyLevel_t level = 0;
      if (a.common_ancestor != nullptr &&
          a.common_ancestor(handles[i], handles[j], &level) == NVML_SUCCESS) {
        p.p2p_level = level;
      }
      int ij = direct[i].count(j) ? direct[i][j] : 0;
      int ji = direct[j].count(i) ? direct[j][i] : 0;
      p.asymmetric = ij != ji;
      p.nvlinks = (p.asymmetric ? 0 : ij) + std::min(to_switch[i], to_switch[j]);
      pairs.push_back(p);
    }
  }
  return pairs;
}

// The profile IDs `dev` gives its media-extensions ("+me") GPU-instance profiles (the REV1
// ones); empty when the driver cannot say (older drivers lack the calls).
std::vector<unsigned> MediaExtensionProfiles(const nvml::Api& a, nvmlDevice_t dev) {
  std::vector<unsigned> ids;
  if (a.gi_profile_info == nullptr) return ids;
  for (unsigned e :
       {NVML_GPU_INSTANCE_PROFILE_1_SLICE_REV1, NVML_GPU_INSTANCE_PROFILE_2_SLICE_REV1}) {
    nvmlGpuInstanceProfileInfo_t p{};
    if (a.gi_profile_info(dev, e, &p) == NVML_SUCCESS) ids.push_back(p.id);
  }
  return ids;
}

// The MIG devices that exist on the MIG-enabled GPU `dev` (named `uuid` in errors), in index
// order, each with its GPU instance's profile and placement. A driver without the MIG device
// calls reports none; one whose GPU instance is gone by the time it is read is left out.
Result<std::vector<MigDeviceInfo>> MigDevices(const nvml::Api& a, nvmlDevice_t dev,
                                              const std::string& uuid) {
  std::vector<MigDeviceInfo> out;
  if (a.mig_max_count == nullptr || a.mig_by_index == nullptr || a.mig_attributes == nullptr ||
      a.mig_gi_id == nullptr || a.mig_ci_id == nullptr || a.gi_by_id == nullptr ||
      a.gi_info == nullptr) {
    return out;
  }
  unsigned max = 0;
  if (nvmlReturn_t r = a.mig_max_count(dev, &max); r != NVML_SUCCESS) {
    return Status(StatusCode::kUnavailable,
                  "nvmlDeviceGetMaxMigDeviceCount(" + uuid + "): " + a.ErrorText(r));
  }
  const std::vector<unsigned> me_ids = MediaExtensionProfiles(a, dev);  // once per GPU
  for (unsigned i = 0; i < max; ++i) {
    nvmlDevice_t mig = nullptr;
    nvmlReturn_t r = a.mig_by_index(dev, i, &mig);
    if (r == NVML_ERROR_NOT_FOUND) continue;  // no MIG device at this index
    std::string where = uuid + " MIG device " + std::to_string(i);
    if (r != NVML_SUCCESS) {
      return Status(StatusCode::kUnavailable,
                    "nvmlDeviceGetMigDeviceHandleByIndex(" + where + "): " + a.ErrorText(r));
    }
    MigDeviceInfo m;
    char buf[NVML_DEVICE_UUID_V2_BUFFER_SIZE] = {};
    nvmlDeviceAttributes_t attr{};
    if ((r = a.uuid(mig, buf, sizeof(buf))) != NVML_SUCCESS ||
        (r = a.mig_attributes(mig, &attr)) != NVML_SUCCESS ||
        (r = a.mig_gi_id(mig, &m.gi_id)) != NVML_SUCCESS ||
        (r = a.mig_ci_id(mig, &m.ci_id)) != NVML_SUCCESS) {
      return Status(StatusCode::kUnavailable, "reading " + where + ": " + a.ErrorText(r));
    }
    nvmlGpuInstance_t gi = nullptr;
    nvmlGpuInstanceInfo_t gi_info{};
    r = a.gi_by_id(dev, m.gi_id, &gi);
    if (r == NVML_ERROR_NOT_FOUND) continue;  // destroyed since it was listed
    if (r != NVML_SUCCESS || (r = a.gi_info(gi, &gi_info)) != NVML_SUCCESS) {
      return Status(StatusCode::kUnavailable, "reading the GPU instance of " + where + ": " +
                                                  a.ErrorText(r));
    }
    m.uuid = buf;
    m.gi_slices = attr.gpuInstanceSliceCount;
    m.ci_slices = attr.computeInstanceSliceCount;
    m.memory_mib = attr.memorySizeMB;
    m.sms = attr.multiprocessorCount;
    m.gi_profile_id = gi_info.profileId;
    m.gi_placement = {gi_info.placement.start, gi_info.placement.size};
    m.media_extensions =
        std::find(me_ids.begin(), me_ids.end(), gi_info.profileId) != me_ids.end();
    out.push_back(std::move(m));
  }
  return out;
}

// The placements of the GPU instances on `dev` that none of `migs` lives in (GPU instances
// without a compute instance), found by listing the instances of every GPU instance profile the
// driver knows. Best effort: a driver without the calls, or a profile it cannot list, adds
// nothing (the instance then stays unseen, as it was before this was read).
std::vector<device::MigPlacement> EmptyGpuInstances(const nvml::Api& a, nvmlDevice_t dev,
                                                    const std::vector<MigDeviceInfo>& migs) {
  std::vector<device::MigPlacement> out;
  if (a.gi_list == nullptr || a.gi_profile_info == nullptr || a.gi_info == nullptr) return out;
  std::set<unsigned> seen;  // GPU instance ids already accounted for
  for (const MigDeviceInfo& m : migs) seen.insert(m.gi_id);
  std::set<unsigned> profiles_listed;
  for (unsigned e = 0; e < NVML_GPU_INSTANCE_PROFILE_COUNT; ++e) {
    nvmlGpuInstanceProfileInfo_t p{};
    if (a.gi_profile_info(dev, e, &p) != NVML_SUCCESS || p.instanceCount == 0 ||
        !profiles_listed.insert(p.id).second) {
      continue;
    }
    std::vector<nvmlGpuInstance_t> gis(p.instanceCount);
    unsigned count = p.instanceCount;
    if (a.gi_list(dev, p.id, gis.data(), &count) != NVML_SUCCESS) continue;
    for (unsigned i = 0; i < count && i < gis.size(); ++i) {
      nvmlGpuInstanceInfo_t info{};
      if (a.gi_info(gis[i], &info) != NVML_SUCCESS || !seen.insert(info.id).second) continue;
      out.push_back({info.placement.start, info.placement.size});
    }
  }
  return out;
}

}  // namespace

std::string NvmlDriver::MigUuidOf(const nvml::Api& a, nvmlDevice_st* dev, unsigned gi_id,
                                  unsigned ci_id) {
  if (a.mig_max_count == nullptr || a.mig_by_index == nullptr || a.mig_gi_id == nullptr ||
      a.mig_ci_id == nullptr) {
    return "";
  }
  unsigned max = 0;
  if (a.mig_max_count(dev, &max) != NVML_SUCCESS) return "";
  for (unsigned i = 0; i < max; ++i) {
    nvmlDevice_t mig = nullptr;
    unsigned gi = 0, ci = 0;
    if (a.mig_by_index(dev, i, &mig) != NVML_SUCCESS || a.mig_gi_id(mig, &gi) != NVML_SUCCESS ||
        a.mig_ci_id(mig, &ci) != NVML_SUCCESS || gi != gi_id || ci != ci_id) {
      continue;
    }
    char buf[NVML_DEVICE_UUID_V2_BUFFER_SIZE] = {};
    if (a.uuid(mig, buf, sizeof(buf)) == NVML_SUCCESS) return buf;
  }
  return "";
}

Result<std::unique_ptr<NvmlDriver>> NvmlDriver::Open(const NvmlDriverOptions& options) {
  Result<const nvml::Library*> lib = nvml::Library::Load(options.library);
  if (!lib.ok()) {
    return Status(StatusCode::kUnavailable,
                  lib.status().message() +
                      ": is the NVIDIA driver installed and visible to this container?");
  }
  // What every driver the plugin supports has; the rest (NUMA node, MIG mode, topology) came
  // later and may be null.
  HAMI_RETURN_IF_ERROR((*lib)->Require(
      {"nvmlInit_v2", "nvmlShutdown", "nvmlErrorString", "nvmlSystemGetDriverVersion",
       "nvmlDeviceGetCount_v2", "nvmlDeviceGetHandleByIndex_v2", "nvmlDeviceGetHandleByUUID",
       "nvmlDeviceGetUUID", "nvmlDeviceGetName", "nvmlDeviceGetMemoryInfo",
       "nvmlDeviceGetPciInfo_v3", "nvmlEventSetCreate", "nvmlDeviceGetSupportedEventTypes",
       "nvmlDeviceRegisterEvents", "nvmlEventSetWait_v2", "nvmlEventSetFree"},
      "the plugin"));
  const nvml::Api& a = (*lib)->api();
  if (nvmlReturn_t r = a.init(); r != NVML_SUCCESS) {
    return Status(StatusCode::kUnavailable, "nvmlInit: " + a.ErrorText(r));
  }
  return std::unique_ptr<NvmlDriver>(new NvmlDriver(options, **lib));
}

NvmlDriver::NvmlDriver(NvmlDriverOptions options, const nvml::Library& nvml)
    : options_(std::move(options)), api_(nvml.api()) {}

NvmlDriver::~NvmlDriver() {
  {
    MutexLock l(events_mu_);
    if (event_set_ != nullptr) api_.event_set_free(static_cast<nvmlEventSet_t>(event_set_));
  }
  api_.shutdown();  // the library itself stays loaded (nvml::Library's contract)
}

Result<Inventory> NvmlDriver::Discover() {
  const nvml::Api& a = api_;
  Inventory inv;
  char version[NVML_SYSTEM_DRIVER_VERSION_BUFFER_SIZE] = {};
  if (a.driver_version(version, sizeof(version)) == NVML_SUCCESS) inv.driver_version = version;
  unsigned count = 0;
  if (nvmlReturn_t r = a.count(&count); r != NVML_SUCCESS) {
    return Status(StatusCode::kUnavailable, "nvmlDeviceGetCount: " + a.ErrorText(r));
  }
  std::vector<nvmlDevice_t> handles;
  for (unsigned i = 0; i < count; ++i) {
    nvmlDevice_t dev = nullptr;
    if (nvmlReturn_t r = a.by_index(i, &dev); r != NVML_SUCCESS) {
      return Status(StatusCode::kUnavailable,
                    "nvmlDeviceGetHandleByIndex(" + std::to_string(i) + "): " + a.ErrorText(r));
    }
    GpuInfo g;
    g.index = i;
    char buf[NVML_DEVICE_UUID_V2_BUFFER_SIZE] = {};
    if (nvmlReturn_t r = a.uuid(dev, buf, sizeof(buf)); r != NVML_SUCCESS) {
      return Status(StatusCode::kUnavailable,
                    "nvmlDeviceGetUUID(" + std::to_string(i) + "): " + a.ErrorText(r));
    }
    g.uuid = buf;
    char name[NVML_DEVICE_NAME_V2_BUFFER_SIZE] = {};
    if (a.name(dev, name, sizeof(name)) == NVML_SUCCESS) g.name = name;
    nvmlMemory_t mem{};
    if (nvmlReturn_t r = a.memory(dev, &mem); r == NVML_SUCCESS) {
      g.memory_bytes = mem.total;
    } else if (r != NVML_ERROR_NOT_SUPPORTED) {
      return Status(StatusCode::kUnavailable,
                    "nvmlDeviceGetMemoryInfo(" + g.uuid + "): " + a.ErrorText(r));
    }
    nvmlPciInfo_t pci{};
    if (a.pci(dev, &pci) == NVML_SUCCESS) g.pci_bus_id = pci.busId;
    if (std::optional<int> n = SysfsNumaNode(options_.sysfs_root, g.pci_bus_id)) {
      g.numa_node = *n;
    } else if (unsigned node = 0; a.numa != nullptr && a.numa(dev, &node) == NVML_SUCCESS) {
      g.numa_node = static_cast<int>(node);
    }
    if (unsigned minor = 0; a.minor != nullptr && a.minor(dev, &minor) == NVML_SUCCESS) {
      g.minor = minor;
    }
    unsigned current = 0, pending = 0;
    if (a.mig_mode != nullptr && a.mig_mode(dev, &current, &pending) == NVML_SUCCESS) {
      g.mig_enabled = current == NVML_DEVICE_MIG_ENABLE;
    }
    if (g.mig_enabled) {
      Result<std::vector<MigDeviceInfo>> migs = MigDevices(a, dev, g.uuid);
      if (migs.ok()) {
        g.mig_devices = std::move(*migs);
        g.empty_gpu_instances = EmptyGpuInstances(a, dev, g.mig_devices);
      } else {
        g.mig_error = migs.status().message();
      }
    }
    inv.gpus.push_back(std::move(g));
    handles.push_back(dev);
  }

  inv.pairs = Pairs(a, inv.gpus, handles);
  return inv;
}

Status NvmlDriver::WatchXids(const std::vector<std::string>& uuids,
                             std::vector<std::string>* unsupported) {
  const nvml::Api& a = api_;
  MutexLock l(events_mu_);
  if (event_set_ != nullptr) {
    a.event_set_free(static_cast<nvmlEventSet_t>(event_set_));
    event_set_ = nullptr;
  }
  nvmlEventSet_t set = nullptr;
  if (nvmlReturn_t r = a.event_set_create(&set); r != NVML_SUCCESS) {
    return Status(StatusCode::kUnavailable, "nvmlEventSetCreate: " + a.ErrorText(r));
  }
  for (const std::string& uuid : uuids) {
    nvmlDevice_t dev = nullptr;
    unsigned long long supported = 0;  // NOLINT(runtime/int): the ABI's type
    if (a.by_uuid(uuid.c_str(), &dev) != NVML_SUCCESS ||
        a.supported_events(dev, &supported) != NVML_SUCCESS ||
        (supported & nvmlEventTypeXidCriticalError) == 0 ||
        a.register_events(dev, nvmlEventTypeXidCriticalError, set) != NVML_SUCCESS) {
      if (unsupported != nullptr) unsupported->push_back(uuid);
    }
  }
  event_set_ = set;
  return OkStatus();
}

Result<std::optional<XidEvent>> NvmlDriver::WaitXid(std::chrono::milliseconds timeout) {
  const nvml::Api& a = api_;
  MutexLock l(events_mu_);
  if (event_set_ == nullptr) return Status(StatusCode::kFailedPrecondition, "no XID watch");
  nvmlEventData_t data{};
  nvmlReturn_t r = a.event_wait(static_cast<nvmlEventSet_t>(event_set_), &data,
                                static_cast<unsigned>(std::max<int64_t>(0, timeout.count())));
  if (r == NVML_ERROR_TIMEOUT) return std::optional<XidEvent>();
  if (r != NVML_SUCCESS) {
    return Status(StatusCode::kUnavailable, "nvmlEventSetWait: " + a.ErrorText(r));
  }
  if ((data.eventType & nvmlEventTypeXidCriticalError) == 0) return std::optional<XidEvent>();
  XidEvent e;
  e.xid = data.eventData;
  char buf[NVML_DEVICE_UUID_V2_BUFFER_SIZE] = {};
  if (data.device != nullptr && a.uuid(data.device, buf, sizeof(buf)) == NVML_SUCCESS) {
    e.uuid = buf;
  }
  // An XID of one MIG instance carries its GPU and compute instance ids (0xFFFFFFFF otherwise).
  constexpr unsigned kNone = 0xFFFFFFFFu;
  if (data.device != nullptr && data.gpuInstanceId != kNone && data.computeInstanceId != kNone) {
    e.mig_uuid = MigUuidOf(a, data.device, data.gpuInstanceId, data.computeInstanceId);
  }
  return std::optional<XidEvent>(e);
}

}  // namespace hami::deviceplugin
