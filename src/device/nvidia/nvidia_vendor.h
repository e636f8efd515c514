// The NVIDIA vendor module: resource names from `device-config.yaml`, upstream's annotation keys,
// and the request rules of HAMi's NVIDIA GenerateResourceRequests with our stricter validation.
//
// Request rules, per container (values from limits, else requests):
//  - count = nvidia.com/gpu. Absent but gpumem, gpumem-percentage or gpucores given: count =
//    defaultGPUNum (what upstream's webhook injects). Count 0, or nothing given: no request.
//  - mem = nvidia.com/gpumem (MiB) x memoryFactor; over int32 is rejected.
//  - mem_percent = nvidia.com/gpumem-percentage in 0..100 (over 100 rejected; 0 means unset).
//  - neither: mem = defaultMemory when non-zero, else mem_percent = 100 (the whole memory).
//  - cores = nvidia.com/gpucores in 0..100, else defaultCores. cores 100 = exclusive device.
//  - priority = nvidia.com/priority (non-negative), else unset (-1).
//  - negative, fractional, garbage and overflowing values are rejected with the reason.
//
// Thread safety: immutable after construction.
#pragma once

#include <optional>
#include <string_view>

#include "device/config.h"
#include "device/vendor.h"

namespace hami::device {

inline constexpr std::string_view kNvidiaVendorKey = "NVIDIA";

// NVIDIA annotation keys (upstream names).
inline constexpr std::string_view kNvidiaRegisterAnnotation = "hami.io/node-nvidia-register";
inline constexpr std::string_view kNvidiaHandshakeAnnotation = "hami.io/node-handshake";
inline constexpr std::string_view kNvidiaToAllocateAnnotation = "hami.io/vgpu-devices-to-allocate";
inline constexpr std::string_view kNvidiaAllocatedAnnotation = "hami.io/vgpu-devices-allocated";
inline constexpr std::string_view kNvidiaUseGpuType = "nvidia.com/use-gputype";
inline constexpr std::string_view kNvidiaNoUseGpuType = "nvidia.com/nouse-gputype";
inline constexpr std::string_view kNvidiaUseGpuUuid = "nvidia.com/use-gpuuuid";
inline constexpr std::string_view kNvidiaNoUseGpuUuid = "nvidia.com/nouse-gpuuuid";
inline constexpr std::string_view kNvidiaNumaBind = "nvidia.com/numa-bind";
inline constexpr std::string_view kNvidiaVgpuMode = "nvidia.com/vgpu-mode";

class NvidiaVendor final : public Vendor {
 public:
  explicit NvidiaVendor(NvidiaConfig config);

  const NvidiaConfig& config() const { return config_; }

  // Vendor
  std::string_view Key() const override { return kNvidiaVendorKey; }
  const ResourceNames& resource_names() const override { return names_; }
  const VendorAnnotationKeys& annotation_keys() const override { return keys_; }
  Result<std::optional<ContainerRequest>> ParseRequest(const ContainerResources& c) const override;

 private:
  NvidiaConfig config_;
  ResourceNames names_;
  VendorAnnotationKeys keys_;
};

}  // namespace hami::device
