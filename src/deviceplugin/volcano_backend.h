// VolcanoUnitsBackend: Volcano's memory or cores resource (`volcano.sh/vgpu-memory`,
// `volcano.sh/vgpu-cores`) as a kubelet device plugin backend. Its devices are units of the
// node's GPUs (volcano_devices.h) that exist so the node's capacity carries the resource pods
// put in their limits; the GPUs themselves are handed over by the count resource's Allocate
// (volcano_allocator.h). Allocate checks that kubelet's IDs are this resource's and answers
// each container with nothing.
//
// Thread safety: every method may be called from any thread.
#pragma once

#include <atomic>
#include <functional>
#include <string>
#include <vector>

#include "deviceplugin/plugin_backend.h"

namespace hami::deviceplugin {

class VolcanoUnitsBackend final : public DevicePluginBackend {
 public:
  // Registrar::ResourceDevices for this resource.
  using DeviceSource = std::function<uint64_t(uint64_t known, std::chrono::milliseconds timeout,
                                              std::vector<PluginDevice>* out)>;

  VolcanoUnitsBackend(std::string resource, DeviceSource devices);

  std::string ResourceName() const override { return resource_; }
  uint64_t Devices(uint64_t known, std::chrono::milliseconds timeout,
                   std::vector<PluginDevice>* out) override {
    return devices_(known, timeout, out);
  }
  // No preference: which units a container gets makes no difference.
  std::vector<std::vector<std::string>> PreferredAllocation(
      const std::vector<PreferredRequest>& requests) override {
    return std::vector<std::vector<std::string>>(requests.size());
  }
  // InvalidArgument, naming the ID, for one this resource does not offer; an empty answer per
  // container otherwise.
  Result<std::vector<ContainerAllocation>> Allocate(
      const std::vector<std::vector<std::string>>& requests) override;

  uint64_t allocations() const { return allocations_; }  // containers answered

 private:
  const std::string resource_;
  const DeviceSource devices_;
  std::atomic<uint64_t> allocations_{0};
};

}  // namespace hami::deviceplugin
