// GpuDriver: the device plugin's seam to the GPU driver. What the plugin needs to know of a
// node's GPUs (identity, memory, NUMA node, how they are linked) and of their faults (critical
// XID events), independent of how it is learned.
//
// The production implementation is NvmlDriver (nvml_driver.h): NVML loaded at run time, the same
// code on a real driver and on the simulated one. FakeGpuDriver (fake_gpu_driver.h) serves unit
// tests.
//
// Thread safety: implementations must allow Discover() and WaitXid() to run concurrently on two
// threads (the registration loop and the health loop).
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "common/status.h"
#include "device/device.h"

namespace hami::deviceplugin {

// One MIG device (a compute instance inside a GPU instance) that exists on a MIG-enabled GPU,
// whoever made it (an operator for static MIG, MigDriver for dynamic MIG).
struct MigDeviceInfo {
  std::string uuid;        // "MIG-8-4-4-4-12" (opaque; new on every create)
  uint32_t gi_id = 0;      // GPU instance id, driver-assigned
  uint32_t ci_id = 0;      // compute instance id within the GI
  uint32_t gi_slices = 0;  // compute slices of the GI ("g" of the profile)
  uint32_t ci_slices = 0;  // compute slices of the CI ("c"); equal to gi_slices for a whole GI
  uint64_t memory_mib = 0;  // the GI's memory, as NVML reports it
  uint32_t sms = 0;         // streaming multiprocessors of the CI
  bool media_extensions = false;  // a "+me" GI profile
  // NVML GPU instance profile id (nvmlGpuInstanceInfo_t.profileId, as MigProfileSpec::profile_id)
  uint32_t gi_profile_id = 0;
  device::MigPlacement gi_placement;  // where its GPU instance sits, in memory slices
  friend bool operator==(const MigDeviceInfo&, const MigDeviceInfo&) = default;
};

// One physical GPU as the driver describes it.
struct GpuInfo {
  uint32_t index = 0;  // driver (NVML) index
  std::string uuid;    // "GPU-8-4-4-4-12"
  std::string name;    // model, e.g. "NVIDIA A100-SXM4-80GB"
  // Total memory; nullopt when the driver cannot say (some integrated and vGPU devices).
  std::optional<uint64_t> memory_bytes;
  std::string pci_bus_id;  // "00000000:07:00.0"; may be empty
  int numa_node = -1;      // -1: unknown
  std::optional<uint32_t> minor;  // of its device node /dev/nvidia<minor>; nullopt: unknown
  bool mig_enabled = false;
  // The MIG devices that exist when mig_enabled, in the driver's MIG device index order.
  std::vector<MigDeviceInfo> mig_devices;
  // Where GPU instances sit that hold no MIG device (no compute instance in them: made by hand
  // and left half done). Nothing can run there, but the place is taken all the same.
  std::vector<device::MigPlacement> empty_gpu_instances;
  // Set when the driver failed to list them (mig_devices then holds none): a MIG read error
  // must not fail discovery of the GPUs that are shared as vGPUs.
  std::string mig_error;
  friend bool operator==(const GpuInfo&, const GpuInfo&) = default;
};

// How two GPUs reach each other. `p2p_level` uses NVML's topology levels (0 same board, 10 one
// PCIe switch, 20 several switches, 30 one host bridge, 40 same NUMA node, 50 across CPUs; -1
// unknown); `nvlinks` counts active NVLinks between them (direct, or through NVSwitches: the
// smaller of the two GPUs' switch links). `asymmetric` is set when the two GPUs disagree about
// their direct links.
struct GpuPair {
  uint32_t a = 0, b = 0;  // positions in Inventory::gpus, a < b
  int p2p_level = -1;
  int nvlinks = 0;
  bool asymmetric = false;
  friend bool operator==(const GpuPair&, const GpuPair&) = default;
};

struct Inventory {
  std::vector<GpuInfo> gpus;
  std::vector<GpuPair> pairs;  // one per unordered pair of gpus (when topology is known)
  std::string driver_version;
};

// A critical XID error reported for one GPU.
struct XidEvent {
  std::string uuid;  // empty: the driver could not say which device
  uint64_t xid = 0;
  // set when the event names a MIG instance that exists: its MIG device UUID (initialised, so
  // that {uuid, xid} aggregates need not name it)
  std::string mig_uuid{};
};

class GpuDriver {
 public:
  virtual ~GpuDriver() = default;

  // Reads the node's GPUs afresh.
  virtual Result<Inventory> Discover() = 0;

  // Subscribes to critical XID events of the given GPUs. `unsupported` receives the UUIDs whose
  // driver cannot report them (they can then never turn unhealthy through XIDs). A later call
  // replaces the subscription.
  virtual Status WatchXids(const std::vector<std::string>& uuids,
                           std::vector<std::string>* unsupported) = 0;
  // Waits up to `timeout` for the next event of the subscription; nullopt on timeout. An error
  // means the driver failed while waiting (the caller decides what that says about health).
  virtual Result<std::optional<XidEvent>> WaitXid(std::chrono::milliseconds timeout) = 0;
};

}  // namespace hami::deviceplugin
