#include "deviceplugin/allocation.h"

#include <algorithm>

#include "common/env_limits.h"
#include "device/pod_devices.h"
#include "device/text_util.h"
#include "deviceplugin/device_ids.h"

namespace hami::deviceplugin {
namespace {

bool EnvTrue(const ContainerView& c, const char* key) {
  auto it = c.env.find(key);
  if (it == c.env.end()) return false;
  bool v = false;
  return ParseBool(it->second.c_str(), &v) == nullptr && v;
}

std::string JoinComma(const std::vector<std::string>& items) {
  std::string out;
  for (const std::string& item : items) out += (out.empty() ? "" : ",") + item;
  return out;
}

// The device list of one container through the chosen strategies.
void DeviceList(const PodView& pod, const AllocationSettings& settings, ContainerAllocation* a) {
  std::vector<std::string> uuids;  // each GPU once, in the scheduler's order
  for (const device::ContainerDevice& d : a->devices) {
    if (std::find(uuids.begin(), uuids.end(), d.uuid) == uuids.end()) uuids.push_back(d.uuid);
  }
  RuntimeDeviceList(uuids, pod.uid, settings, a);
}

void HamiCoreEnv(const PodView& pod, const ContainerView& c, const AllocationSettings& s,
                 const std::function<std::string()>& cache_name, ContainerAllocation* a) {
  const std::string vgpu = s.hook_path + "/vgpu";
  for (size_t i = 0; i < a->devices.size(); ++i) {
    a->envs["CUDA_DEVICE_MEMORY_LIMIT_" + std::to_string(i)] =
        std::to_string(a->devices[i].mem_mib) + "m";
  }
  if (!a->devices.empty() && a->devices[0].cores > 0) {
    a->envs["CUDA_DEVICE_SM_LIMIT"] = std::to_string(a->devices[0].cores);
  }
  a->envs["CUDA_DEVICE_MEMORY_SHARED_CACHE"] = vgpu + "/" + cache_name();
  if (s.device_memory_scaling > 1) a->envs["CUDA_OVERSUBSCRIBE"] = "true";
  if (s.lib_cuda_log_level >= 0) {
    a->envs["LIBCUDA_LOG_LEVEL"] = std::to_string(s.lib_cuda_log_level);
  }
  if (s.disable_core_limit) a->envs["GPU_CORE_UTILIZATION_POLICY"] = "disable";
  a->host_dir = ContainerHostDir(s, pod.uid, c.name);
  a->mounts.push_back({vgpu, a->host_dir, false});
  a->mounts.push_back({vgpu + "/libvgpu.so", vgpu + "/" + s.libvgpu_file, true});
  if (!EnvTrue(c, "CUDA_DISABLE_CONTROL")) {
    a->mounts.push_back({"/etc/ld.so.preload", vgpu + "/ld.so.preload", true});
  }
}

void MpsEnv(const AllocationSettings& s, ContainerAllocation* a) {
  a->envs["CUDA_MPS_PIPE_DIRECTORY"] = s.mps_pipe_directory;
  a->mounts.push_back({s.mps_pipe_directory, s.mps_pipe_directory, false});
  if (!a->devices.empty() && a->devices[0].cores > 0 && a->devices[0].cores < 100) {
    a->envs["CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"] = std::to_string(a->devices[0].cores);
  }
  std::string limits;
  for (size_t i = 0; i < a->devices.size(); ++i) {
    if (a->devices[i].mem_mib <= 0) continue;
    if (!limits.empty()) limits += ',';
    limits += std::to_string(i) + "=" + std::to_string(a->devices[i].mem_mib) + "M";
  }
  if (!limits.empty()) a->envs["CUDA_MPS_PINNED_DEVICE_MEM_LIMIT"] = limits;
}

// A pod UID or container name is used as a path component on the host: only the characters
// Kubernetes allows in them (UIDs are hex and dashes, container names DNS labels).
bool SafePathPart(const std::string& s) {
  return !s.empty() && s.size() <= 253 && std::all_of(s.begin(), s.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-';
  });
}

bool HasDevices(const device::PodSingleDevice& pod) {
  return std::any_of(pod.begin(), pod.end(),
                     [](const device::ContainerDevices& c) { return !c.empty(); });
}

// InvalidArgument when kubelet asks for a device ID this plugin does not advertise.
Status CheckRequestedIds(const std::vector<std::vector<std::string>>& requests,
                         const ReplicaMap& replicas) {
  for (const std::vector<std::string>& ids : requests) {
    for (const std::string& id : ids) {
      if (!replicas.count(id)) {
        return InvalidArgumentError("device ID \"" + id + "\" is not one of this plugin's devices");
      }
    }
  }
  return OkStatus();
}

// The devices the pod's to-allocate annotation still reserves, one entry per container of the
// pod; FailedPrecondition when the annotation is absent, unreadable or lists too many containers.
Result<device::PodSingleDevice> PendingDevices(const PodView& pod,
                                               const AllocationSettings& settings) {
  auto ann = pod.annotations.find(settings.to_allocate_key);
  if (ann == pod.annotations.end()) {
    return Status(StatusCode::kFailedPrecondition,
                  "pod " + pod.Key() + " has no " + settings.to_allocate_key + " annotation");
  }
  Result<device::PodSingleDevice> entries = device::DecodePodSingleDevice(ann->second);
  if (!entries.ok()) {
    return Status(
        StatusCode::kFailedPrecondition,
        "pod " + pod.Key() + ": " + settings.to_allocate_key + ": " + entries.status().message());
  }
  device::PodSingleDevice pending = std::move(*entries);
  device::PadToContainers(&pending, pod.containers.size());
  if (pending.size() > pod.containers.size()) {
    return Status(StatusCode::kFailedPrecondition,
                  "pod " + pod.Key() + ": " + settings.to_allocate_key + " lists " +
                      std::to_string(pending.size()) + " containers, the pod has " +
                      std::to_string(pod.containers.size()));
  }
  return pending;
}

}  // namespace

Result<ContainerAllocation> AllocateContainer(const PodView& pod, size_t index,
                                              const device::ContainerDevices& reserved,
                                              size_t request_size,
                                              const std::set<std::string>& node_gpus,
                                              const AllocationSettings& settings,
                                              const std::function<std::string()>& cache_name) {
  const bool mps = settings.operating_mode == device::OperatingMode::kMps;
  ContainerAllocation a;
  a.container_index = index;
  a.container_name = pod.containers[index].name;
  a.devices = reserved;
  if (a.devices.size() != request_size) {
    return Status(StatusCode::kFailedPrecondition,
                  "pod " + pod.Key() + " container " + a.container_name +
                      ": the scheduler reserved " + std::to_string(a.devices.size()) +
                      " GPU(s), kubelet asks for " + std::to_string(request_size) +
                      " (device number not matched)");
  }
  for (const device::ContainerDevice& d : a.devices) {
    if (!node_gpus.count(d.uuid)) {
      return Status(StatusCode::kFailedPrecondition, "pod " + pod.Key() + " container " +
                                                         a.container_name + ": GPU " + d.uuid +
                                                         " is not served by this node's plugin");
    }
  }
  // MIG: the container gets MIG devices, named once they exist (mig_allocate.h); no libvgpu.
  if (settings.operating_mode == device::OperatingMode::kMig) return a;
  DeviceList(pod, settings, &a);
  if (!mps && (!SafePathPart(pod.uid) || !SafePathPart(a.container_name))) {
    return InvalidArgumentError("pod " + pod.Key() + ": UID \"" + pod.uid +
                                "\" or container name \"" + a.container_name +
                                "\" cannot name a host directory");
  }
  if (mps) {
    MpsEnv(settings, &a);
  } else {
    HamiCoreEnv(pod, pod.containers[index], settings, cache_name, &a);
  }
  return a;
}

namespace {

// Whether no container of the pod waits for devices any more: none left in `pending`, nor in
// any other vendor's to-allocate annotation (one that cannot be read counts as waiting).
bool AllocationComplete(const PodView& pod, const AllocationSettings& settings,
                        const device::PodSingleDevice& pending) {
  bool complete = !HasDevices(pending);
  for (const std::string& key : settings.other_to_allocate_keys) {
    auto other = pod.annotations.find(key);
    if (other == pod.annotations.end()) continue;
    Result<device::PodSingleDevice> o = device::DecodePodSingleDevice(other->second);
    if (!o.ok() || HasDevices(*o)) complete = false;
  }
  return complete;
}

}  // namespace

void RuntimeDeviceList(const std::vector<std::string>& uuids, const std::string& key,
                       const AllocationSettings& settings, ContainerAllocation* a) {
  const DeviceListStrategies& s = settings.device_list;
  if (s.AnyCdi()) {
    std::vector<std::string> names;
    for (const std::string& u : uuids) names.push_back(std::string(kCdiGpuKind) + "=" + u);
    if (s.cdi_annotations) {
      a->annotations["cdi.k8s.io/hami-device-plugin_" + key] = JoinComma(names);
    }
    if (s.cdi_cri) a->cdi_devices = std::move(names);
  }
  if (s.volume_mounts) {
    // The toolkit reads the list from the mount points, not the variable.
    a->envs["NVIDIA_VISIBLE_DEVICES"] = kVolumeMountDeviceRoot;
    for (const std::string& u : uuids) {
      a->mounts.push_back({std::string(kVolumeMountDeviceRoot) + "/" + u, "/dev/null", true});
    }
  } else if (s.envvar) {
    a->envs["NVIDIA_VISIBLE_DEVICES"] = JoinComma(uuids);
  }
  if (s.OnlyCdi()) return;
  if (settings.gdrcopy) a->envs["NVIDIA_GDRCOPY"] = "enabled";
  if (settings.gds) a->envs["NVIDIA_GDS"] = "enabled";
  if (settings.mofed) a->envs["NVIDIA_MOFED"] = "enabled";
}

Result<DeviceListStrategies> ParseDeviceListStrategies(const std::string& text) {
  DeviceListStrategies out;
  out.envvar = false;
  bool named = false;
  for (std::string_view part : device::text::Split(text, ',')) {
    std::string_view item = device::text::TrimSpace(part);
    named = named || !item.empty();
    if (item == "envvar") {
      out.envvar = true;
    } else if (item == "volume-mounts") {
      out.volume_mounts = true;
    } else if (item == "cdi-annotations") {
      out.cdi_annotations = true;
    } else if (item == "cdi-cri") {
      out.cdi_cri = true;
    } else if (!item.empty()) {
      return InvalidArgumentError("unknown device list strategy " + device::text::Quote(item) +
                                  " (expected envvar, volume-mounts, cdi-annotations or cdi-cri)");
    }
  }
  return named ? out : DeviceListStrategies{};  // nothing named: the default
}

std::string ContainerHostDir(const AllocationSettings& s, const std::string& pod_uid,
                             const std::string& container) {
  return s.hook_path + "/vgpu/containers/" + pod_uid + "_" + container;
}

Result<AllocationPlan> PlanAllocation(const PodView& pod,
                                      const std::vector<std::vector<std::string>>& requests,
                                      const ReplicaMap& replicas,
                                      const AllocationSettings& settings,
                                      const std::function<std::string()>& cache_name) {
  std::set<std::string> node_gpus;
  for (const auto& [id, uuid] : replicas) node_gpus.insert(uuid);
  HAMI_RETURN_IF_ERROR(CheckRequestedIds(requests, replicas));
  HAMI_ASSIGN_OR_RETURN(device::PodSingleDevice pending, PendingDevices(pod, settings));

  AllocationPlan plan;
  size_t next = 0;
  for (size_t r = 0; r < requests.size(); ++r) {
    while (next < pending.size() && pending[next].empty()) ++next;
    if (next == pending.size()) {
      return Status(StatusCode::kFailedPrecondition,
                    "pod " + pod.Key() + ": no container is waiting for GPUs any more (request " +
                        std::to_string(r + 1) + " of " + std::to_string(requests.size()) + ")");
    }
    HAMI_ASSIGN_OR_RETURN(ContainerAllocation a,
                          AllocateContainer(pod, next, pending[next], requests[r].size(),
                                            node_gpus, settings, cache_name));
    pending[next].clear();
    plan.containers.push_back(std::move(a));
  }
  plan.to_allocate = device::EncodePodSingleDevice(pending);
  plan.complete = AllocationComplete(pod, settings, pending);
  return plan;
}

std::vector<std::string> PreferredDevices(const PodView& pod, const std::string& to_allocate_key,
                                          size_t request_index, const PreferredRequest& request,
                                          const ReplicaMap& replicas) {
  auto gpu_of = [&](const std::string& id) {
    auto it = replicas.find(id);
    return it != replicas.end() ? it->second : PhysicalId(id);
  };
  auto ann = pod.annotations.find(to_allocate_key);
  if (ann == pod.annotations.end()) return {};
  Result<device::PodSingleDevice> entries = device::DecodePodSingleDevice(ann->second);
  if (!entries.ok()) return {};
  std::vector<const device::ContainerDevices*> waiting;
  for (const device::ContainerDevices& c : *entries) {
    if (!c.empty()) waiting.push_back(&c);
  }
  if (request_index >= waiting.size()) return {};
  const device::ContainerDevices& want = *waiting[request_index];
  if (request.size <= 0 || static_cast<size_t>(request.size) > want.size()) return {};

  std::vector<std::string> out = request.must_include;
  std::set<std::string> chosen(out.begin(), out.end());
  std::set<std::string> covered;
  for (const std::string& id : out) covered.insert(gpu_of(id));
  for (int32_t i = 0; i < request.size && out.size() < static_cast<size_t>(request.size); ++i) {
    const std::string& uuid = want[static_cast<size_t>(i)].uuid;
    if (covered.count(uuid)) continue;
    std::string pick;
    for (const std::string& id : request.available) {
      if (!chosen.count(id) && gpu_of(id) == uuid) {
        pick = id;
        break;
      }
    }
    if (pick.empty()) return {};  // no free replica of that GPU: no preference
    chosen.insert(pick);
    covered.insert(uuid);
    out.push_back(pick);
  }
  return out.size() == static_cast<size_t>(request.size) ? out : std::vector<std::string>{};
}

}  // namespace hami::deviceplugin
