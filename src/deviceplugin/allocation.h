// The allocation plan: what kubelet's Allocate and GetPreferredAllocation answer for a pod, as a
// pure function of the pod (its scheduler-written annotations, its containers), the device IDs
// kubelet chose and the plugin's settings. No Kubernetes client and no gRPC here: the service
// (plugin_service.h) finds the pod, applies the plan and writes its results back.
//
// The contract with the scheduler (HAMi's): `hami.io/vgpu-devices-to-allocate` lists, per
// container (init containers first), the GPUs and the memory/cores the scheduler reserved.
// Kubelet calls Allocate once per container that requests the resource, in container order, and
// each call consumes the next non-empty entry. The plan:
//   - checks that every device ID kubelet passed is one of this plugin's replicas and that the
//     entry names as many GPUs as kubelet asked for, all of them on this node;
//   - gives the container exactly the GPUs of the entry (the scheduler's ledger counts those;
//     kubelet's replica IDs only count slots);
//   - hami-core mode: NVIDIA_VISIBLE_DEVICES, CUDA_DEVICE_MEMORY_LIMIT_<i>=<MiB>m per GPU,
//     CUDA_DEVICE_SM_LIMIT (only when cores > 0), CUDA_DEVICE_MEMORY_SHARED_CACHE inside the
//     container's own hook directory, CUDA_OVERSUBSCRIBE when memory scaling > 1,
//     LIBCUDA_LOG_LEVEL, GPU_CORE_UTILIZATION_POLICY=disable when core limits are off; mounts of
//     that directory (host `<hook>/vgpu/containers/<podUID>_<container>`), of libvgpu.so and of
//     /etc/ld.so.preload (left out when the container sets CUDA_DISABLE_CONTROL to true);
//   - how the container runtime learns the GPUs (the device list strategies, as the NVIDIA device
//     plugin's DEVICE_LIST_STRATEGY; any combination): envvar = NVIDIA_VISIBLE_DEVICES with the
//     UUIDs; volume-mounts = NVIDIA_VISIBLE_DEVICES=/var/run/nvidia-container-devices and one
//     mount of /dev/null at <that directory>/<uuid> per GPU (the toolkit's
//     accept-nvidia-visible-devices-as-volume-mounts); cdi-annotations = the annotation
//     cdi.k8s.io/hami-device-plugin_<pod UID> listing nvidia.com/gpu=<uuid>; cdi-cri = the same
//     names as the response's CDI devices. With only CDI strategies no visible-devices variable
//     is set, so the legacy runtime hook does not inject a second time; GDRCopy, GPUDirect Storage
//     and MOFED, when on, as NVIDIA_GDRCOPY / NVIDIA_GDS / NVIDIA_MOFED=enabled (not with CDI
//     alone either);
//   - mig mode: nothing yet: the container's MIG devices are made and named afterwards
//     (mig_allocate.h), and it gets no libvgpu (the instance is the limit);
//   - mps mode: NVIDIA_VISIBLE_DEVICES, CUDA_MPS_PIPE_DIRECTORY and the pipe directory mounted,
//     CUDA_MPS_ACTIVE_THREAD_PERCENTAGE from the cores, CUDA_MPS_PINNED_DEVICE_MEM_LIMIT from the
//     memory (`<ordinal>=<MiB>M` per GPU); no libvgpu.
//   - re-encodes the to-allocate annotation with the consumed entries emptied, and says whether
//     nothing is left to allocate for the pod (then bind-phase becomes success).
//
// Thread safety: pure functions.
#pragma once

#include <cstddef>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "common/status.h"
#include "device/device.h"
#include "device/node_config.h"

namespace hami::deviceplugin {

struct ContainerView {
  std::string name;
  // Literal env values of the spec (entries with valueFrom are not known here).
  std::map<std::string, std::string> env;
};

// What the plan needs of a pod.
struct PodView {
  std::string ns, name, uid;
  std::vector<ContainerView> containers;  // init containers first, then regular ones
  device::Annotations annotations;
  std::string Key() const { return ns + "/" + name; }
};

// The device list strategies: which channels tell the container runtime the GPUs.
struct DeviceListStrategies {
  bool envvar = true;
  bool volume_mounts = false;
  bool cdi_annotations = false;
  bool cdi_cri = false;
  bool AnyCdi() const { return cdi_annotations || cdi_cri; }
  bool OnlyCdi() const { return AnyCdi() && !envvar && !volume_mounts; }
  friend bool operator==(const DeviceListStrategies&, const DeviceListStrategies&) = default;
};

// "envvar", "volume-mounts", "cdi-annotations", "cdi-cri", comma-separated (spaces allowed), as
// the --device-list-strategy flag and DEVICE_LIST_STRATEGY take them; an error names the unknown
// entry. Empty means the default (envvar).
Result<DeviceListStrategies> ParseDeviceListStrategies(const std::string& text);

inline constexpr const char* kVolumeMountDeviceRoot = "/var/run/nvidia-container-devices";
inline constexpr const char* kCdiGpuKind = "nvidia.com/gpu";

struct AllocationSettings {
  std::string hook_path = "/usr/local";  // HOOK_PATH; hami's files live in <hook_path>/vgpu
  // File name under <hook_path>/vgpu mounted as the container's libvgpu.so (the installed,
  // versioned copy, so a plugin upgrade never changes the library of a running container).
  std::string libvgpu_file = "libvgpu.so";
  device::OperatingMode operating_mode = device::OperatingMode::kHamiCore;  // kMps, kMig
  double device_memory_scaling = 1;
  int lib_cuda_log_level = -1;  // < 0: not set
  bool disable_core_limit = false;
  std::string mps_pipe_directory = "/tmp/nvidia-mps";  // same path on the host and inside
  DeviceListStrategies device_list;
  // The NVIDIA container runtime's optional features, asked of it per container as NVIDIA's
  // plugin does (NVIDIA_GDRCOPY / NVIDIA_GDS / NVIDIA_MOFED=enabled; not with CDI alone).
  bool gdrcopy = false, gds = false, mofed = false;
  std::string to_allocate_key = "hami.io/vgpu-devices-to-allocate";
  // Other vendors' to-allocate annotations: while one still lists devices the pod is not done.
  std::vector<std::string> other_to_allocate_keys;
};

struct Mount {
  std::string container_path;
  std::string host_path;
  bool read_only = true;
  friend bool operator==(const Mount&, const Mount&) = default;
};

struct ContainerAllocation {
  size_t container_index = 0;  // into PodView::containers
  std::string container_name;
  device::ContainerDevices devices;  // what the scheduler reserved for it
  std::map<std::string, std::string> envs;
  std::vector<Mount> mounts;
  std::map<std::string, std::string> annotations;  // for the container runtime (CDI)
  std::vector<std::string> cdi_devices;            // fully qualified CDI device names
  // Host directory to (re)create empty, mode 0777, before answering ("" when none).
  std::string host_dir;
};

struct AllocationPlan {
  std::vector<ContainerAllocation> containers;  // one per container request, in kubelet's order
  std::string to_allocate;                      // the annotation's new value
  bool complete = false;  // no container of the pod waits for a device any more
};

// Every device ID the plugin advertises -> the UUID of its GPU.
using ReplicaMap = std::map<std::string, std::string>;

// `requests`: the device IDs of each container request. `cache_name` returns a fresh region file
// name ("<uuid>.cache").
Result<AllocationPlan> PlanAllocation(const PodView& pod,
                                      const std::vector<std::vector<std::string>>& requests,
                                      const ReplicaMap& replicas,
                                      const AllocationSettings& settings,
                                      const std::function<std::string()>& cache_name);

// What container `index` of the pod (an index into PodView::containers) gets for kubelet's
// request of `request_size` device IDs, given the devices the scheduler reserved for it (memory
// in MiB): the contract above for one container. FailedPrecondition when the two disagree in
// number or a reserved GPU is not in `node_gpus`. PlanAllocation's step per container; other
// schedulers' protocols (Volcano) call it directly.
Result<ContainerAllocation> AllocateContainer(const PodView& pod, size_t index,
                                              const device::ContainerDevices& reserved,
                                              size_t request_size,
                                              const std::set<std::string>& node_gpus,
                                              const AllocationSettings& settings,
                                              const std::function<std::string()>& cache_name);

// GetPreferredAllocation for one container request: replicas of the GPUs the pod's next pending
// entries name (`request_index` selects the entry among the non-empty ones), taken from
// `available` after `must_include`. Empty when the pod's annotation does not say (kubelet then
// picks on its own).
struct PreferredRequest {
  std::vector<std::string> available;
  std::vector<std::string> must_include;
  int32_t size = 0;
};
std::vector<std::string> PreferredDevices(const PodView& pod, const std::string& to_allocate_key,
                                          size_t request_index, const PreferredRequest& request,
                                          const ReplicaMap& replicas);

// Tells the container runtime the devices `uuids` (GPU or MIG UUIDs) through the device list
// strategies of `settings` (see above), plus GDRCopy/GDS/MOFED when on. `key` names the CDI
// annotation, cdi.k8s.io/hami-device-plugin_<key>: the pod UID, or anything unique to the
// container when the pod is not known.
void RuntimeDeviceList(const std::vector<std::string>& uuids, const std::string& key,
                       const AllocationSettings& settings, ContainerAllocation* a);

// The directory a container's region and library mount live in, on the host.
std::string ContainerHostDir(const AllocationSettings& s, const std::string& pod_uid,
                             const std::string& container);

}  // namespace hami::deviceplugin
