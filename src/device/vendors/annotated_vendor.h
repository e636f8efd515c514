// Vendors whose node agents register devices with HAMi-style annotations (a registration in
// JSON or legacy text, a handshake key) and whose pods ask for a device count, memory and a
// share of compute: Hygon DCU today; Biren, Vastai, AMD and the Ascend/Iluvatar chips follow the
// same shape with their own keys and rules.
//
// Request rules, per container (values from limits, else requests):
//  - count = the count resource; absent or 0: no request from this vendor (memory or cores
//    without a count are not a request, as upstream's modules read them).
//  - mem = the memory resource x memory_factor (MiB); over int32 after scaling is refused.
//    Absent or 0: default_memory_mib when set, else the whole device (mem_percent 100).
//  - cores = the core resource in 0..100, else default_cores (the vendor's chart default:
//    100 for DCU, so a count alone asks for whole cards).
//  - negative, fractional, garbage and overflowing values are refused with the reason.
//
//   std::unique_ptr<Vendor> dcu = MakeHygonDcuVendor(config.vendors.at("hygon"));
//
// Thread safety: immutable after construction.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "device/config.h"
#include "device/vendor.h"

namespace hami::device {

// Hygon DCU: key "DCU"; registration `hami.io/node-dcu-register` (legacy text, 7 or 9 fields),
// handshake `hami.io/node-handshake-dcu`; pods get `hami.io/dcu-devices-to-allocate` and
// `hami.io/dcu-devices-allocated`; `hygon.com/use-dcutype`/`nouse-dcutype` narrow by type,
// `hygon.com/use-gpuuuid`/`nouse-gpuuuid` by UUID.
inline constexpr std::string_view kHygonVendorKey = "DCU";
inline constexpr std::string_view kHygonRegisterAnnotation = "hami.io/node-dcu-register";
inline constexpr std::string_view kHygonHandshakeAnnotation = "hami.io/node-handshake-dcu";
inline constexpr std::string_view kHygonToAllocateAnnotation = "hami.io/dcu-devices-to-allocate";
inline constexpr std::string_view kHygonAllocatedAnnotation = "hami.io/dcu-devices-allocated";

struct AnnotatedVendorSpec {
  std::string key;
  ResourceNames names;
  VendorAnnotationKeys keys;
  int32_t default_memory_mib = 0;
  int32_t default_cores = 0;
};

class AnnotatedVendor final : public Vendor {
 public:
  explicit AnnotatedVendor(AnnotatedVendorSpec spec);

  std::string_view Key() const override { return spec_.key; }
  const ResourceNames& resource_names() const override { return spec_.names; }
  const VendorAnnotationKeys& annotation_keys() const override { return spec_.keys; }
  Result<std::optional<ContainerRequest>> ParseRequest(const ContainerResources& c) const override;

 private:
  AnnotatedVendorSpec spec_;
};

std::unique_ptr<Vendor> MakeHygonDcuVendor(const VendorResources& config);

}  // namespace hami::device
