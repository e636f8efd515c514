// What a node's GPUs become for the scheduler and for kubelet: the registration annotation
// entries (`hami.io/node-nvidia-register`), the pair scores (`hami.io/node-nvidia-score`) and
// the replica device list of ListAndWatch. Pure functions of the driver's inventory, the node's
// settings (device-config.yaml merged with its config.json entry) and the health the plugin has
// observed.
//
//   Registration reg = BuildRegistration(inventory, settings, unhealthy_uuids);
//   std::string annotation = device::EncodeNodeDevicesJson(reg.devices);
//
// Registration rules (upstream's, plus the checks noted):
//  - devices named by `filterdevices` (UUID or index) are left out;
//  - `devmem` = total MiB x deviceMemoryScaling; a device whose memory the driver cannot report
//    uses preConfiguredDeviceMemory, or is left out (with a warning) when that is 0;
//  - `devcore` = 100 x deviceCoreScaling, `count` = deviceSplitCount, `mode` = operating mode;
//  - `type` = the model name prefixed "NVIDIA-" unless it starts with "NVIDIA";
//  - `numa` = the device's NUMA node (0 when unknown or negative);
//  - a GPU with MIG enabled cannot be shared by hami-core: with the MIG strategy none it is left
//    out with a warning; with mixed it is left out silently (its MIG devices are offered as
//    nvidia.com/mig-<profile>, mig_resources.h); with single each of its MIG devices is
//    registered as a device of its own: one slot, `devmem` the instance's memory (no scaling: it
//    is a hard partition), `devcore` 100, the GPU's type and NUMA node, `index` numbering the
//    node's MIG devices from 0, unhealthy when it or its GPU is.
//
// Thread safety: pure functions.
#pragma once

#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include "device/device.h"
#include "device/node_config.h"
#include "device/topology_score.h"
#include "deviceplugin/gpu_driver.h"
#include "deviceplugin/mig_resources.h"

namespace hami::deviceplugin {

struct Registration {
  std::vector<device::DeviceInfo> devices;  // registration entries, in driver index order
  std::vector<std::string> warnings;        // devices left out and why
};

// The registration's `type` of a GPU: its model name, prefixed "NVIDIA-" unless it starts with
// "NVIDIA".
std::string RegisteredType(const GpuInfo& g);

// Whether `filterdevices` (by UUID or index) hides the GPU from the plugin.
bool FilteredOut(const GpuInfo& g, const device::FilterDevices& f);

Registration BuildRegistration(const Inventory& inventory, const device::NodeDeviceSettings& s,
                               const std::set<std::string>& unhealthy,
                               MigStrategy mig = MigStrategy::kNone);

// Link scores between the registered devices (both directions): the PCIe path (same board 60,
// one switch 50, several switches 40, one host bridge 30, same NUMA node 20, across CPUs 10) plus
// 100 per NVLink. A pair whose two ends disagree about their links scores 0 and is named in
// `warnings`.
device::DevicePairScores BuildPairScores(const Inventory& inventory,
                                         const std::vector<device::DeviceInfo>& registered,
                                         std::vector<std::string>* warnings);

// One kubelet device (a replica of a physical GPU).
struct PluginDevice {
  std::string id;   // "<UUID>-<i>"
  std::string gpu;  // the UUID of the GPU it is a replica of
  bool healthy = true;
  int numa_node = -1;  // -1: no topology advertised
  friend bool operator==(const PluginDevice&, const PluginDevice&) = default;
};

// `count` replicas per registered device, carrying its health; NUMA topology only when
// `numa_topology` (enableNumaTopology).
std::vector<PluginDevice> BuildPluginDevices(const std::vector<device::DeviceInfo>& registered,
                                             bool numa_topology);

}  // namespace hami::deviceplugin
