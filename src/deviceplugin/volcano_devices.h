// What a node offers under Volcano's vGPU protocol (scheduler plugin `deviceshare` with
// `deviceshare.VGPUEnable`), as pure functions of the plugin's own registration (discovery.h):
// the records of `volcano.sh/node-vgpu-register` and the device lists of the three kubelet
// resources. Wire facts: ../shared/reference/volcano-deviceshare.md, sections 4.1, 4.2 and 4.4.
//
//   volcano.sh/vgpu-number   "<UUID>-<i>", i < split count    (the plugin's usual replica IDs)
//   volcano.sh/vgpu-memory   "<UUID>-memory-<i>", i < MiB / gpuMemoryFactor
//   volcano.sh/vgpu-cores    "<UUID>-core-<i>", i < 100 x deviceCoreScaling
//
// Only the count resource's Allocate does work (volcano_allocator.h); kubelet needs the memory
// and cores resources in the node's capacity because pods put them in their limits.
//
// Volcano's older modes (`share` set; volcano_share_backend.h, device/volcano_gpushare.h) offer
// one resource instead:
//
//   volcano.sh/gpu-memory    "<index>-<j>", j < MiB / gpuMemoryFactor    (GPU sharing)
//   volcano.sh/gpu-number    "<UUID>", one per GPU                        (GPU number)
//
// and the scheduler reads the other one from the node's status (VolcanoShareCapacity) and the
// unhealthy GPUs from `volcano.sh/gpu-unhealthy-ids` (VolcanoUnhealthyIndices).
//
// Unhealthy GPUs are left out of the register altogether: Volcano's scheduler reads the record's
// health field but never filters on it, so a GPU listed as unhealthy would still get pods. They
// stay in the kubelet lists, marked unhealthy there.
//
// Thread safety: pure functions.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "common/status.h"
#include "device/config.h"
#include "device/device.h"
#include "device/volcano_gpushare.h"
#include "deviceplugin/discovery.h"

namespace hami::deviceplugin {

// The device config's Volcano settings (ConfigMap volcano-vgpu-device-config, `nvidia:`).
struct VolcanoSettings {
  std::string count_resource = "volcano.sh/vgpu-number";   // resourceCountName
  std::string memory_resource = "volcano.sh/vgpu-memory";  // resourceMemoryName
  std::string cores_resource = "volcano.sh/vgpu-cores";    // resourceCoreName
  int32_t memory_factor = 1;  // gpuMemoryFactor: MiB per unit of the memory resource (>= 1)
  double core_scaling = 1;    // deviceCoreScaling: cores IDs per GPU = 100 x this (> 0)
  // Write `volcano.sh/node-vgpu-handshake` for schedulers up to Volcano v1.15.0, which ignore a
  // node without it.
  bool handshake = true;
  // GPU sharing or GPU number instead of vGPU (the resource names above are then unused).
  std::optional<device::VolcanoShareMode> share;
  // GPU sharing: hold each container to its gpu-memory request with libvgpu.so.
  bool enforce_memory = false;
  // Volcano's whole-GPU Jobs (`--volcano=whole`): no Volcano protocol at all, the GPUs offered
  // whole as the count resource ("nvidia.com/gpu"), kubelet choosing them, nothing published on
  // the node (share and the names above are then unused).
  bool whole = false;
  // knownMigGeometries: how Volcano's scheduler cuts GPUs on a node in operating mode mig
  // (device/volcano_mig.h).
  std::vector<device::KnownMigGeometry> mig_geometries;
};

// Kubelet drops a ListAndWatch answer over 4 MiB; about this many memory IDs fit.
inline constexpr size_t kVolcanoMaxMemoryIds = 60000;

// The register records: the healthy registered GPUs in the given order, devmem divided by the
// memory factor (rounded down), health true, the type as Volcano's agent writes it ("NVIDIA-"
// + the NVML name, e.g. "NVIDIA-NVIDIA A100-SXM4-80GB").
std::vector<device::DeviceInfo> VolcanoRegisterDevices(
    const std::vector<device::DeviceInfo>& registered, const VolcanoSettings& s);

// Whole GPUs (`whole`, and GPU number's devices): one device per registered GPU, its UUID as ID,
// carrying its health (and NUMA node when `numa_topology`).
std::vector<PluginDevice> WholeGpuDevices(const std::vector<device::DeviceInfo>& registered,
                                          bool numa_topology);

// The memory and cores resources' device lists, carrying each GPU's health (and NUMA node when
// `numa_topology`).
std::vector<PluginDevice> VolcanoMemoryDevices(const std::vector<device::DeviceInfo>& registered,
                                               const VolcanoSettings& s, bool numa_topology);
std::vector<PluginDevice> VolcanoCoreDevices(const std::vector<device::DeviceInfo>& registered,
                                             const VolcanoSettings& s, bool numa_topology);

// GPU sharing or GPU number: the device list of the one resource, carrying each GPU's health
// (and NUMA node when `numa_topology`). `s.share` must be set.
std::vector<PluginDevice> VolcanoShareDevices(const std::vector<device::DeviceInfo>& registered,
                                              const VolcanoSettings& s, bool numa_topology);

// GPU sharing or GPU number: the resource and quantity the node's status must carry besides the
// kubelet's (Volcano's scheduler needs both): GPU sharing, volcano.sh/gpu-number = the GPUs;
// GPU number, volcano.sh/gpu-memory = 0 (no memory is shared on such a node).
std::pair<std::string, std::string> VolcanoShareCapacity(
    const std::vector<device::DeviceInfo>& registered, const VolcanoSettings& s);

// `volcano.sh/gpu-unhealthy-ids`: the indices of the unhealthy GPUs, "1,3"; "" when none.
std::string VolcanoUnhealthyIndices(const std::vector<device::DeviceInfo>& registered);

// InvalidArgument naming the fix when the settings cannot work: a memory factor below 1, a core
// scaling that is not positive, resource names that are empty or equal, or more memory IDs
// than kubelet accepts (the message gives the smallest gpuMemoryFactor that fits).
Status CheckVolcanoSettings(const std::vector<device::DeviceInfo>& registered,
                            const VolcanoSettings& s);

}  // namespace hami::deviceplugin
