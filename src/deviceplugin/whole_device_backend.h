// WholeDeviceBackend: a resource whose devices are handed out whole, as kubelet chose them, as a
// kubelet device plugin backend: one resource of the mixed MIG strategy
// ("nvidia.com/mig-1g.10gb": the node's MIG devices of that profile), or whole GPUs by UUID
// (`--volcano=whole`: "nvidia.com/gpu" for Volcano Jobs that ask for whole GPUs). The devices are
// what the registrar currently lists (their health included); Allocate hands the chosen IDs over
// through the device list strategies and nothing else (mig_resources.h: MigAllocation; no
// libvgpu: the device is not shared). There is no scheduler annotation and no pending pod
// involved: such pods are placed on the node's capacity alone.
//
//   WholeDeviceBackend mig("nvidia.com/mig-1g.10gb", settings,
//                          [&](uint64_t known, auto timeout, auto* out) {
//                            return service.ResourceDevices("nvidia.com/mig-1g.10gb", known,
//                                                           timeout, out);
//                          });
//   GrpcPlugin plugin(mig, {.socket_name = "nvidia-mig-1g.10gb.sock"});
//
// Thread safety: every method may be called from any thread.
#pragma once

#include <atomic>
#include <functional>
#include <string>
#include <vector>

#include "deviceplugin/plugin_backend.h"

namespace hami::deviceplugin {

class WholeDeviceBackend final : public DevicePluginBackend {
 public:
  // Registrar::ResourceDevices for this resource.
  using DeviceSource = std::function<uint64_t(uint64_t known, std::chrono::milliseconds timeout,
                                              std::vector<PluginDevice>* out)>;

  WholeDeviceBackend(std::string resource, AllocationSettings settings, DeviceSource devices);

  std::string ResourceName() const override { return resource_; }
  uint64_t Devices(uint64_t known, std::chrono::milliseconds timeout,
                   std::vector<PluginDevice>* out) override {
    return devices_(known, timeout, out);
  }
  // The IDs that must be included, then the available ones in device list order (which keeps a
  // container's MIG instances on as few GPUs, and its GPUs on as few NUMA nodes, as the list
  // allows), up to the size asked.
  std::vector<std::vector<std::string>> PreferredAllocation(
      const std::vector<PreferredRequest>& requests) override;
  // InvalidArgument, naming the device, for an ID this resource does not offer now; the
  // response for every container otherwise.
  Result<std::vector<ContainerAllocation>> Allocate(
      const std::vector<std::vector<std::string>>& requests) override;

  uint64_t allocations() const { return allocations_; }  // containers served

 private:
  const std::string resource_;
  const AllocationSettings settings_;
  const DeviceSource devices_;
  std::atomic<uint64_t> allocations_{0};
};

}  // namespace hami::deviceplugin
