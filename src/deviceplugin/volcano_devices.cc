#include "deviceplugin/volcano_devices.h"

#include <cmath>
#include <functional>

namespace hami::deviceplugin {
namespace {

int64_t MemoryUnits(const device::DeviceInfo& d, const VolcanoSettings& s) {
  return s.memory_factor < 1 ? 0 : d.devmem / s.memory_factor;
}

int64_t CoreUnits(const VolcanoSettings& s) {
  return s.core_scaling > 0 ? static_cast<int64_t>(std::floor(100 * s.core_scaling)) : 0;
}

std::vector<PluginDevice> Units(const std::vector<device::DeviceInfo>& registered,
                                bool numa_topology, const std::string& infix,
                                const std::function<int64_t(const device::DeviceInfo&)>& units) {
  std::vector<PluginDevice> out;
  for (const device::DeviceInfo& d : registered) {
    const int64_t n = units(d);
    for (int64_t i = 0; i < n; ++i) {
      out.push_back({d.id + infix + std::to_string(i), d.id, d.health,
                     numa_topology ? d.numa : -1});
    }
  }
  return out;
}

// More memory IDs than kubelet accepts (GPU sharing, or vGPU's memory resource)?
Status CheckMemoryIds(const std::vector<device::DeviceInfo>& registered,
                      const VolcanoSettings& s) {
  if (s.share == device::VolcanoShareMode::kNumber) return OkStatus();
  const std::string memory_resource =
      s.share ? std::string(device::kVolcanoGpuMemoryResource) : s.memory_resource;
  int64_t mib = 0;
  for (const device::DeviceInfo& d : registered) mib += d.devmem;
  if (mib / s.memory_factor > static_cast<int64_t>(kVolcanoMaxMemoryIds)) {
    const int64_t fit = (mib + kVolcanoMaxMemoryIds - 1) / kVolcanoMaxMemoryIds;
    return InvalidArgumentError(
        "the node's " + std::to_string(mib) + " MiB of GPU memory make " +
        std::to_string(mib / s.memory_factor) + " " + memory_resource +
        " devices with gpuMemoryFactor " + std::to_string(s.memory_factor) +
        "; kubelet refuses lists over " + std::to_string(kVolcanoMaxMemoryIds) +
        " (the resource would stay at 0): set gpuMemoryFactor to " + std::to_string(fit) +
        " or more in the device config");
  }
  return OkStatus();
}

}  // namespace

std::vector<device::DeviceInfo> VolcanoRegisterDevices(
    const std::vector<device::DeviceInfo>& registered, const VolcanoSettings& s) {
  std::vector<device::DeviceInfo> out;
  for (const device::DeviceInfo& d : registered) {
    if (!d.health) continue;
    device::DeviceInfo r = d;
    r.devmem = static_cast<int32_t>(MemoryUnits(d, s));
    // Volcano's agent writes "NVIDIA-" + the NVML name whatever the name; HAMi's registration
    // leaves out the prefix for names that start with "NVIDIA" (RegisteredType).
    if (r.type.rfind("NVIDIA-", 0) != 0) r.type = "NVIDIA-" + r.type;
    out.push_back(std::move(r));
  }
  return out;
}

std::vector<PluginDevice> VolcanoMemoryDevices(const std::vector<device::DeviceInfo>& registered,
                                               const VolcanoSettings& s, bool numa_topology) {
  return Units(registered, numa_topology, "-memory-",
               [&](const device::DeviceInfo& d) { return MemoryUnits(d, s); });
}

std::vector<PluginDevice> VolcanoCoreDevices(const std::vector<device::DeviceInfo>& registered,
                                             const VolcanoSettings& s, bool numa_topology) {
  return Units(registered, numa_topology, "-core-",
               [&](const device::DeviceInfo&) { return CoreUnits(s); });
}

std::vector<PluginDevice> WholeGpuDevices(const std::vector<device::DeviceInfo>& registered,
                                          bool numa_topology) {
  std::vector<PluginDevice> out;
  for (const device::DeviceInfo& d : registered) {
    out.push_back({d.id, d.id, d.health, numa_topology ? d.numa : -1});
  }
  return out;
}

std::vector<PluginDevice> VolcanoShareDevices(const std::vector<device::DeviceInfo>& registered,
                                              const VolcanoSettings& s, bool numa_topology) {
  if (s.share == device::VolcanoShareMode::kNumber) {
    return WholeGpuDevices(registered, numa_topology);
  }
  std::vector<PluginDevice> out;
  for (const device::DeviceInfo& d : registered) {
    const int numa = numa_topology ? d.numa : -1;
    const std::string prefix = std::to_string(d.index) + "-";
    for (int64_t j = 0, n = MemoryUnits(d, s); j < n; ++j) {
      out.push_back({prefix + std::to_string(j), d.id, d.health, numa});
    }
  }
  return out;
}

std::pair<std::string, std::string> VolcanoShareCapacity(
    const std::vector<device::DeviceInfo>& registered, const VolcanoSettings& s) {
  if (s.share == device::VolcanoShareMode::kNumber) {
    return {std::string(device::kVolcanoGpuMemoryResource), "0"};
  }
  return {std::string(device::kVolcanoGpuNumberResource), std::to_string(registered.size())};
}

std::string VolcanoUnhealthyIndices(const std::vector<device::DeviceInfo>& registered) {
  std::vector<uint32_t> indices;
  for (const device::DeviceInfo& d : registered) {
    if (!d.health) indices.push_back(d.index);
  }
  return device::EncodeVolcanoGpuIndices(indices);
}

Status CheckVolcanoSettings(const std::vector<device::DeviceInfo>& registered,
                            const VolcanoSettings& s) {
  if (s.whole) return OkStatus();  // no Volcano protocol: nothing to check
  if (s.memory_factor < 1) {
    return InvalidArgumentError("gpuMemoryFactor must be at least 1, not " +
                                std::to_string(s.memory_factor));
  }
  if (s.share) return CheckMemoryIds(registered, s);
  if (!(s.core_scaling > 0) || !std::isfinite(s.core_scaling)) {
    return InvalidArgumentError("deviceCoreScaling must be a positive number, not " +
                                std::to_string(s.core_scaling));
  }
  const std::string* names[] = {&s.count_resource, &s.memory_resource, &s.cores_resource};
  for (size_t i = 0; i < 3; ++i) {
    if (names[i]->empty()) return InvalidArgumentError("a Volcano resource name is empty");
    for (size_t j = 0; j < i; ++j) {
      if (*names[i] == *names[j]) {
        return InvalidArgumentError("the Volcano resources count, memory and cores must have "
                                    "different names; \"" + *names[i] + "\" is used twice");
      }
    }
  }
  return CheckMemoryIds(registered, s);
}

}  // namespace hami::deviceplugin
