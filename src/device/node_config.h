// The per-node device plugin configuration `config.json` (ConfigMap `<release>-device-plugin`):
//
//   {"nodeconfig":[{"name":"node-a","operatingmode":"hami-core","devicesplitcount":5,
//     "devicememoryscaling":1.5,"devicecorescaling":1,"preconfigureddevicememory":0,
//     "libcudaloglevel":"1","enablenumatopology":true,"migstrategy":"none",
//     "filterdevices":{"uuid":["GPU-x"],"index":[3]},"enablegetpreferredallocation":true}]}
//
// The entry whose name equals the plugin's node name overrides the global NvidiaConfig: fields
// present in the entry win, absent ones keep the global value. `migstrategy` is kept as text
// here; the device plugin lets it override --mig-strategy for that node (upstream ignores it).
// Member names match case-insensitively (Go's JSON decoder); `libcudaloglevel`
// may be a string or a number.
//
// Thread safety: pure functions.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "device/config.h"

namespace hami::device {

struct FilterDevices {
  std::vector<std::string> uuids;
  std::vector<uint32_t> indexes;
  friend bool operator==(const FilterDevices&, const FilterDevices&) = default;
};

// How a node's GPUs are shared: HAMi-core's libvgpu (the default), NVIDIA's MPS daemon, or MIG
// partitions. The wire spelling ("hami-core", "mps", "mig") is config.json's `operatingmode`
// and the registration's per-device `mode`.
enum class OperatingMode { kHamiCore, kMps, kMig };
std::string_view OperatingModeName(OperatingMode mode);
// nullopt for anything but the three spellings.
std::optional<OperatingMode> ParseOperatingMode(std::string_view text);

struct NodeConfigEntry {
  std::string name;
  std::optional<OperatingMode> operating_mode;
  std::optional<uint32_t> device_split_count;
  std::optional<double> device_memory_scaling;
  std::optional<double> device_core_scaling;
  std::optional<int64_t> preconfigured_device_memory_mib;
  std::optional<int32_t> lib_cuda_log_level;
  std::optional<bool> enable_numa_topology;
  std::optional<std::string> mig_strategy;
  std::optional<FilterDevices> filter_devices;
  std::optional<bool> enable_get_preferred_allocation;
};

struct NodeConfigFile {
  std::vector<NodeConfigEntry> nodes;
};

// Errors name the entry and field: `nodeconfig[1].devicesplitcount: must be at least 1`.
// Entries need a non-empty, unique name.
Result<NodeConfigFile> ParseNodeConfigJson(std::string_view text);

// The settings one node's device plugin runs with.
struct NodeDeviceSettings {
  OperatingMode operating_mode = OperatingMode::kHamiCore;
  uint32_t device_split_count = 10;
  double device_memory_scaling = 1;
  double device_core_scaling = 1;
  int64_t preconfigured_device_memory_mib = 0;
  int32_t lib_cuda_log_level = 1;
  bool enable_numa_topology = false;
  FilterDevices filter_devices;
  bool enable_get_preferred_allocation = false;
};

// Global values overridden by the entry named `node_name` (if any).
NodeDeviceSettings ResolveNodeSettings(const NvidiaConfig& global, const NodeConfigFile& file,
                                       std::string_view node_name);

}  // namespace hami::device
