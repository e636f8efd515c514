#include "deviceplugin/discovery.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>

#include "deviceplugin/device_ids.h"

namespace hami::deviceplugin {
namespace {

int32_t ClampInt32(double v) {
  if (!(v > 0)) return 0;
  if (v >= static_cast<double>(std::numeric_limits<int32_t>::max())) {
    return std::numeric_limits<int32_t>::max();
  }
  return static_cast<int32_t>(v);
}

int LevelScore(int level) {
  switch (level) {
    case 0:
      return 60;  // same board
    case 10:
      return 50;  // one PCIe switch
    case 20:
      return 40;  // several switches
    case 30:
      return 30;  // one host bridge
    case 40:
      return 20;  // same NUMA node
    case 50:
      return 10;  // across CPUs
    default:
      return 0;
  }
}

}  // namespace

bool FilteredOut(const GpuInfo& g, const device::FilterDevices& f) {
  return std::find(f.uuids.begin(), f.uuids.end(), g.uuid) != f.uuids.end() ||
         std::find(f.indexes.begin(), f.indexes.end(), g.index) != f.indexes.end();
}

std::string RegisteredType(const GpuInfo& g) {
  return g.name.rfind("NVIDIA", 0) == 0 ? g.name : "NVIDIA-" + g.name;
}

namespace {

// Single strategy: each MIG device of `g` as a whole device of its own (one slot, its
// instance's memory, all of its SMs); `next_index` numbers them across the node.
void RegisterMigDevices(const GpuInfo& g, const device::NodeDeviceSettings& s,
                        const std::set<std::string>& unhealthy, uint32_t* next_index,
                        Registration* out) {
  for (const MigDeviceInfo& m : g.mig_devices) {
    device::DeviceInfo d;
    d.id = m.uuid;
    d.index = (*next_index)++;
    d.count = 1;
    d.devmem = ClampInt32(static_cast<double>(m.memory_mib));
    d.devcore = 100;
    d.type = RegisteredType(g);
    d.numa = std::max(0, g.numa_node);
    d.mode = device::OperatingModeName(s.operating_mode);
    d.health = unhealthy.count(m.uuid) == 0 && unhealthy.count(g.uuid) == 0;
    d.vendor = "NVIDIA";
    out->devices.push_back(std::move(d));
  }
}

}  // namespace

Registration BuildRegistration(const Inventory& inventory, const device::NodeDeviceSettings& s,
                               const std::set<std::string>& unhealthy, MigStrategy mig) {
  Registration out;
  uint32_t mig_index = 0;
  for (const GpuInfo& g : inventory.gpus) {
    if (FilteredOut(g, s.filter_devices)) continue;
    if (g.mig_enabled) {
      if (mig == MigStrategy::kSingle) RegisterMigDevices(g, s, unhealthy, &mig_index, &out);
      if (mig == MigStrategy::kNone) {
        out.warnings.push_back(g.uuid +
                               ": MIG is enabled on this GPU; hami-core cannot share it, so it "
                               "is not registered (disable MIG to share it, or offer its MIG "
                               "devices with --mig-strategy=mixed or single)");
      }
      continue;
    }
    double mib = 0;
    if (g.memory_bytes.has_value()) {
      mib = static_cast<double>(*g.memory_bytes / (1024 * 1024));
    } else if (s.preconfigured_device_memory_mib > 0) {
      mib = static_cast<double>(s.preconfigured_device_memory_mib);
    } else {
      out.warnings.push_back(g.uuid +
                             ": the driver does not report its memory and "
                             "preConfiguredDeviceMemory is 0, so it is not registered");
      continue;
    }
    device::DeviceInfo d;
    d.id = g.uuid;
    d.index = g.index;
    d.count = ClampInt32(s.device_split_count);
    d.devmem = ClampInt32(std::floor(mib * s.device_memory_scaling));
    d.devcore = ClampInt32(std::floor(100 * s.device_core_scaling));
    d.type = RegisteredType(g);
    d.numa = std::max(0, g.numa_node);
    d.mode = device::OperatingModeName(s.operating_mode);
    d.health = unhealthy.count(g.uuid) == 0;
    d.vendor = "NVIDIA";
    out.devices.push_back(std::move(d));
  }
  return out;
}

device::DevicePairScores BuildPairScores(const Inventory& inventory,
                                         const std::vector<device::DeviceInfo>& registered,
                                         std::vector<std::string>* warnings) {
  std::map<std::string, device::DevicePairScore> by_uuid;
  std::set<std::string> served;
  for (const device::DeviceInfo& d : registered) served.insert(d.id);
  for (const GpuPair& p : inventory.pairs) {
    if (p.a >= inventory.gpus.size() || p.b >= inventory.gpus.size()) continue;
    const std::string& a = inventory.gpus[p.a].uuid;
    const std::string& b = inventory.gpus[p.b].uuid;
    if (!served.count(a) || !served.count(b)) continue;
    int64_t score = LevelScore(p.p2p_level) + 100 * static_cast<int64_t>(p.nvlinks);
    if (p.asymmetric) {
      score = 0;
      if (warnings != nullptr) {
        warnings->push_back("GPUs " + a + " and " + b +
                            " report different NVLinks to each other; their pair score is 0");
      }
    }
    by_uuid[a].uuid = a;
    by_uuid[a].scores[b] = score;
    by_uuid[b].uuid = b;
    by_uuid[b].scores[a] = score;
  }
  device::DevicePairScores out;
  for (const device::DeviceInfo& d : registered) {  // registration order
    auto it = by_uuid.find(d.id);
    if (it != by_uuid.end()) out.push_back(std::move(it->second));
  }
  return out;
}

std::vector<PluginDevice> BuildPluginDevices(const std::vector<device::DeviceInfo>& registered,
                                             bool numa_topology) {
  std::vector<PluginDevice> out;
  for (const device::DeviceInfo& d : registered) {
    for (int32_t i = 0; i < d.count; ++i) {
      out.push_back(
          {ReplicaId(d.id, static_cast<uint32_t>(i)), d.id, d.health, numa_topology ? d.numa : -1});
    }
  }
  return out;
}

}  // namespace hami::deviceplugin
