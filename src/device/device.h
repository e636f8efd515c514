// Device model: what a node offers (DeviceInfo), what is consumed on it (DeviceUsage), what a
// container asks for (ContainerRequest) and what it was given (ContainerDevice, PodDevices).
//
// These are the plain value types shared by the annotation codecs, the vendor modules and (later)
// the scheduler's ledger and placement engine. Units follow HAMi's wire formats: memory in MiB,
// cores in percent of one device (100 = a whole device; registration `devcore` is 100 x core
// scaling), counts are slots (concurrent tasks a device admits).
//
// Thread safety: plain values; no shared state.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace hami::device {

// Device operating modes as registered in the `mode` field. Modes are kept as strings because
// the wire format carries any vendor's string; these are the ones NVIDIA uses.
inline constexpr std::string_view kModeHamiCore = "hami-core";
inline constexpr std::string_view kModeMig = "mig";
inline constexpr std::string_view kModeMps = "mps";

// Sentinel of ContainerRequest::mem_percent: no percentage requested.
inline constexpr int32_t kMemPercentUnset = 101;
// A request of this many cores on a device of this many total cores claims the device exclusively.
inline constexpr int32_t kExclusiveCores = 100;

// One placement of a MIG profile on a GPU: GPU slices [start, start + size).
struct MigPlacement {
  uint32_t start = 0;
  uint32_t size = 0;

  bool Overlaps(const MigPlacement& o) const {
    return start < o.start + o.size && o.start < start + size;
  }
  friend bool operator==(const MigPlacement&, const MigPlacement&) = default;
};

// A MIG profile a GPU in `mig` mode can host, with every placement it may take.
struct MigProfile {
  std::string name;        // e.g. "2g.10gb"
  int32_t memory_mib = 0;  // wire key memoryMB
  int32_t core = 0;        // percent of the GPU's compute
  uint32_t slice_count = 0;
  std::vector<MigPlacement> placements;

  friend bool operator==(const MigProfile&, const MigProfile&) = default;
};

// A physical device as a node registers it (`hami.io/node-<vendor>-register`).
struct DeviceInfo {
  std::string id;       // UUID, e.g. "GPU-03f69c50-..."
  uint32_t index = 0;   // device index on the node
  int32_t count = 0;    // split count: maximum concurrent tasks (slots)
  int32_t devmem = 0;   // MiB, after memory scaling
  int32_t devcore = 0;  // percent units, 100 x core scaling
  std::string type;     // model string, e.g. "NVIDIA-Tesla V100-PCIE-32GB"
  int32_t numa = 0;     // NUMA node
  std::string mode;     // kModeHamiCore / kModeMig / kModeMps (or another vendor's string)
  std::vector<MigProfile> mig_profiles;  // only for mode "mig"
  bool health = false;                   // absent in JSON means false
  // Vendor key (CommonWord, e.g. "NVIDIA") set by the vendor module that decoded the device;
  // not part of any wire format.
  std::string vendor;
  // The registration's `custominfo` (vendor plugins' extras: Ascend's NetworkID, Vastai's AIC
  // and DeviceStrategy): key -> scalar as text (strings as they are, numbers and booleans as JSON
  // writes them). Read, never written.
  std::map<std::string, std::string> custom;
  // The device's topology group as its vendor module names it (devices of one group are better
  // used together: Ascend's network, one Vastai card's dies); empty = none.
  std::string group;

  bool IsMig() const { return mode == kModeMig; }
  friend bool operator==(const DeviceInfo&, const DeviceInfo&) = default;
};

// Amount of one device's capacity in use. Additive.
struct Usage {
  int32_t slots = 0;
  int64_t mem_mib = 0;
  int64_t cores = 0;

  Usage& operator+=(const Usage& o) {
    slots += o.slots;
    mem_mib += o.mem_mib;
    cores += o.cores;
    return *this;
  }
  Usage& operator-=(const Usage& o) {
    slots -= o.slots;
    mem_mib -= o.mem_mib;
    cores -= o.cores;
    return *this;
  }
  friend bool operator==(const Usage&, const Usage&) = default;
};

// A MIG instance reserved on a device (profile plus its placement).
struct MigInstanceUse {
  std::string profile;
  MigPlacement placement;
  friend bool operator==(const MigInstanceUse&, const MigInstanceUse&) = default;
};

// A device together with what is consumed on it: the unit the placement engine works on.
struct DeviceUsage {
  DeviceInfo info;
  Usage used;
  std::vector<MigInstanceUse> mig_in_use;

  int32_t FreeSlots() const { return info.count - used.slots; }
  int64_t FreeMemMiB() const { return info.devmem - used.mem_mib; }
  int64_t FreeCores() const { return info.devcore - used.cores; }
};

// What one container asks of one vendor (HAMi's ContainerDeviceRequest). The same per-device
// amounts apply to each of the `count` devices.
struct ContainerRequest {
  std::string vendor;                      // vendor key, e.g. "NVIDIA"
  int32_t count = 0;                       // number of physical devices
  int32_t mem_mib = 0;                     // per device, after memoryFactor; 0 = use mem_percent
  int32_t mem_percent = kMemPercentUnset;  // 0..100 of device memory, kMemPercentUnset if unset
  int32_t cores = 0;                       // per device, 0..100
  int32_t priority = -1;                   // task priority (0 high, 1 low); -1 = not given

  // Memory this request takes on a device with `device_mem_mib` total.
  int64_t MemOn(int64_t device_mem_mib) const {
    if (mem_mib > 0) return mem_mib;
    if (mem_percent != kMemPercentUnset) return device_mem_mib * mem_percent / 100;
    return 0;
  }
  // gpucores: 100 claims whole devices: no other task may share them.
  bool Exclusive() const { return cores >= kExclusiveCores; }
  friend bool operator==(const ContainerRequest&, const ContainerRequest&) = default;
};

// One container's requests, at most one per vendor, in vendor-key order.
using ContainerRequests = std::vector<ContainerRequest>;

// One device given to a container (wire form `UUID,TYPE,MEM,CORES`).
struct ContainerDevice {
  std::string uuid;
  std::string type;  // vendor key, e.g. "NVIDIA"
  int32_t mem_mib = 0;
  int32_t cores = 0;
  // Device index at scheduling time; not on the wire, -1 after decoding.
  int32_t index = -1;
  // The device's registered devcore at scheduling time (AWS Neuron's core mask); not on the
  // wire, 0 after decoding.
  int32_t devcore = 0;

  friend bool operator==(const ContainerDevice& a, const ContainerDevice& b) {
    return a.uuid == b.uuid && a.type == b.type && a.mem_mib == b.mem_mib && a.cores == b.cores;
  }
};

using ContainerDevices = std::vector<ContainerDevice>;
// One vendor's devices for a whole pod: exactly one entry per container, init containers first
// (spec order), then regular containers; containers without devices have an empty entry.
using PodSingleDevice = std::vector<ContainerDevices>;
// Multi-vendor pods: vendor key -> that vendor's index-aligned list.
using PodDevices = std::map<std::string, PodSingleDevice>;

// Kubernetes object annotations (or labels): key -> value.
using Annotations = std::map<std::string, std::string, std::less<>>;

// A node's integer status.capacity entries (extended resources), resource name -> amount. Vendors
// whose device plugins register no annotation (Cambricon, Metax GPU, ...) are read from these.
using NodeCapacity = std::map<std::string, int64_t, std::less<>>;

// A node as the vendor modules read it. A view: the referenced maps must outlive it.
struct NodeView {
  std::string_view name;
  const Annotations& annotations;
  const NodeCapacity& capacity;
  // The node labels vendor modules read (kInstanceTypeLabel); null when unknown.
  const Annotations* labels = nullptr;

  // capacity[resource], 0 when absent.
  int64_t Capacity(std::string_view resource) const {
    auto it = capacity.find(resource);
    return it == capacity.end() ? 0 : it->second;
  }
};

// The node labels a vendor module may read (copied into the scheduler's node objects).
inline constexpr std::string_view kInstanceTypeLabel = "node.kubernetes.io/instance-type";

// The minimal container representation request parsing needs: resource name -> quantity text
// exactly as written in the pod spec (e.g. "1", "4096", "500m", "2Ki").
struct ContainerResources {
  std::string name;
  std::map<std::string, std::string, std::less<>> limits;
  std::map<std::string, std::string, std::less<>> requests;
};

// A pod as far as device requests are concerned: init containers first, then regular ones.
struct PodResources {
  std::vector<ContainerResources> init_containers;
  std::vector<ContainerResources> containers;

  size_t ContainerCount() const { return init_containers.size() + containers.size(); }
};

}  // namespace hami::device
