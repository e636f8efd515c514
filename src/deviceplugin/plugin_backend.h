// DevicePluginBackend: what one kubelet device plugin socket serves, without the transport.
// GrpcPlugin (grpc_plugin.h) puts one on kubelet's v1beta1 gRPC API. Implementations:
// PluginService (plugin_service.h: HAMi's shared vGPUs, allocated from the scheduler's
// annotations, or Volcano's resources), WholeDeviceBackend (whole_device_backend.h: existing MIG
// devices of one profile, or whole GPUs, allocated as kubelet chose them) and
// VolcanoUnitsBackend (volcano_backend.h).
//
// Thread safety: every method may be called from any thread, concurrently (gRPC's threads).
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "common/status.h"
#include "deviceplugin/allocation.h"
#include "deviceplugin/discovery.h"

namespace hami::deviceplugin {

class DevicePluginBackend {
 public:
  virtual ~DevicePluginBackend() = default;

  // The extended resource kubelet knows the devices by ("nvidia.com/gpu").
  virtual std::string ResourceName() const = 0;
  // The device list and its generation: at once when it differs from `known`, else after
  // waiting up to `timeout` for a change (or shutdown).
  virtual uint64_t Devices(uint64_t known, std::chrono::milliseconds timeout,
                           std::vector<PluginDevice>* out) = 0;
  // GetPreferredAllocation: the IDs to prefer, one list per request.
  virtual std::vector<std::vector<std::string>> PreferredAllocation(
      const std::vector<PreferredRequest>& requests) = 0;
  // Allocate: one answer per container request (the device IDs kubelet chose for it). Errors
  // carry the codes GrpcPlugin maps onto gRPC's (see grpc_plugin.h).
  virtual Result<std::vector<ContainerAllocation>> Allocate(
      const std::vector<std::vector<std::string>>& requests) = 0;
};

}  // namespace hami::deviceplugin
