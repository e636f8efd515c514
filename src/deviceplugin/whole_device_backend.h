// MigBackend: one resource of the mixed MIG strategy ("nvidia.com/mig-1g.10gb") as a kubelet
// device plugin backend. Its devices are the node's MIG devices of that profile, as the
// registrar currently sees them (their health included); kubelet chooses which ones a container
// gets, and Allocate hands them over as they are (mig_resources.h: MigAllocation). There is no
// scheduler annotation and no HAMi pending pod involved: a pod asking only for
// nvidia.com/mig-<profile> is scheduled by kube-scheduler on the node's capacity alone.
//
//   MigBackend mig("nvidia.com/mig-1g.10gb", settings,
//                  [&](uint64_t known, auto timeout, auto* out) {
//                    return service.MigDevices("nvidia.com/mig-1g.10gb", known, timeout, out);
//                  });
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

class MigBackend final : public DevicePluginBackend {
 public:
  // Registrar::ResourceDevices for this resource.
  using DeviceSource = std::function<uint64_t(uint64_t known, std::chrono::milliseconds timeout,
                                              std::vector<PluginDevice>* out)>;

  MigBackend(std::string resource, AllocationSettings settings, DeviceSource devices);

  std::string ResourceName() const override { return resource_; }
  uint64_t Devices(uint64_t known, std::chrono::milliseconds timeout,
                   std::vector<PluginDevice>* out) override {
    return devices_(known, timeout, out);
  }
  // The IDs that must be included, then the available ones in device list order (which keeps a
  // container's instances on as few GPUs as the list allows), up to the size asked.
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
