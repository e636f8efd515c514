// Vendors whose node agents register devices with HAMi-style annotations (a registration in
// JSON or legacy text, a handshake key) and whose pods ask for a device count, memory and a
// share of compute: Hygon DCU, the Iluvatar chips, Biren, Vastai and Kunlunxin vXPU. Ascend
// (templates) has its own module (ascend_vendor.h); vendors that register through node capacity
// are in capacity_vendor.h.
//
// Request rules, per container (values from limits, else requests):
//  - count = the count resource; absent or 0: no request from this vendor (memory or cores
//    without a count are not a request, as upstream's modules read them).
//  - mem = the memory resource x memory_factor (MiB); over int32 after scaling is refused.
//    Absent or 0: default_memory_mib when set, else the whole device (mem_percent 100).
//    Count-only vendors (Biren, Vastai) take no memory and no cores: devices are shared by
//    their slot count alone.
//  - cores = the core resource in 0..100, else default_cores (the vendor's chart default:
//    100 for DCU, so a count alone asks for whole cards). Iluvatar's webhook writes count x 100
//    for multi-device requests: its cores may go up to 100 x count and are clamped to 100.
//  - negative, fractional, garbage and overflowing values are refused with the reason.
//
//   std::unique_ptr<Vendor> dcu = MakeHygonDcuVendor(config.vendors.at("hygon"));
//
// Thread safety: immutable after construction.
#pragma once

#include <functional>
#include <map>
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

// Kunlunxin vXPU memory partitions (MiB): a quarter, a half or a whole 96 GiB card.
inline constexpr int64_t kKunlunCardMemoryMiB = 98304;

struct AnnotatedVendorSpec {
  std::string key;
  ResourceNames names;
  VendorAnnotationKeys keys;
  int32_t default_memory_mib = 0;
  int32_t default_cores = 0;
  bool count_only = false;              // no memory, no cores (Biren, Vastai)
  bool cores_scale_with_count = false;  // cores up to 100 x count, clamped to 100 (Iluvatar)
  // When > 0, cores are not read: they are memory x 100 / this (Kunlunxin vXPU's partitions).
  int64_t cores_from_memory_of = 0;
  int32_t min_cores = 0;               // a given core resource below this is refused (AMD: 1)
  bool cores_in_device_units = false;  // Vendor::cores_in_device_units (AMD)
  bool lists_device_type = false;      // Vendor::lists_device_type (AMD)
  NodeLockKind node_lock = NodeLockKind::kShared;
  bool one_device_per_pod = false;  // Vendor::one_device_per_pod (MetaX whole cards, Mthreads)
  std::string own_node_lock;        // with NodeLockKind::kOwn
  // Rounds a memory request (MiB) up to what the vendor can hand out; nullopt when nothing fits.
  // Used by the webhook and by request parsing (Kunlunxin vXPU).
  std::function<std::optional<int64_t>(int64_t)> round_memory;
  // Environment variables the webhook sets on a container that asks for this vendor, unless
  // already set; "$CONTAINER" stands for the container's name (Iluvatar's SOL_CONTINER_NAME).
  std::map<std::string, std::string> container_env;
};

class AnnotatedVendor : public Vendor {
 public:
  explicit AnnotatedVendor(AnnotatedVendorSpec spec);

  std::string_view Key() const override { return spec_.key; }
  const ResourceNames& resource_names() const override { return spec_.names; }
  const VendorAnnotationKeys& annotation_keys() const override { return spec_.keys; }
  Result<std::optional<ContainerRequest>> ParseRequest(const ContainerResources& c) const override;
  Result<ContainerMutation> MutateContainer(const ContainerResources& c,
                                            const AdmissionContext& ctx) const override;
  bool cores_in_device_units() const override { return spec_.cores_in_device_units; }
  bool lists_device_type() const override { return spec_.lists_device_type; }
  NodeLockKind node_lock() const override { return spec_.node_lock; }
  bool one_device_per_pod() const override { return spec_.one_device_per_pod; }
  std::string_view own_node_lock() const override { return spec_.own_node_lock; }

 protected:
  const AnnotatedVendorSpec& spec() const { return spec_; }

 private:
  AnnotatedVendorSpec spec_;
};

// A spec keyed `key` with the section's resource names, memory factor and request defaults.
AnnotatedVendorSpec SpecFromSection(std::string key, const VendorResources& config);

std::unique_ptr<Vendor> MakeHygonDcuVendor(const VendorResources& config);
// Iluvatar chip `chip.common_word` (e.g. "BI-V150"): registration `hami.io/node-<CW>-register`
// (legacy text), handshake `hami.io/node-handshake-<CW>`, memory in 256 MiB units, UUID
// selectors `hami.io/use-<CW>-uuid` / `hami.io/no-use-<CW>-uuid`.
std::unique_ptr<Vendor> MakeIluvatarVendor(const IluvatarChipConfig& chip);
// Biren ("Biren", `hami.io/node-biren-register`, pods `hami.io/Biren-devices-*`) and Vastai
// ("Vastai", `hami.io/node-va-register`, pods `hami.io/Vastai-devices-*`): count only.
std::unique_ptr<Vendor> MakeBirenVendor(const VendorResources& config);
std::unique_ptr<Vendor> MakeVastaiVendor(const VendorResources& config);
// Kunlunxin vXPU ("XPU", `hami.io/node-register-xpu`): memory rounded up to 24576, 49152 or
// 98304 MiB; cores follow memory (25, 50, 100); no memory asks for a whole card.
std::unique_ptr<Vendor> MakeKunlunVxpuVendor(const VendorResources& config);
// AMD ("AMD", `hami.io/node-amd-register` JSON: devmem MiB, devcore the card's compute units,
// type the product name): `amd.com/gpu`, `gpumem` (MiB; none: the whole card), `gpucores`
// (percent of the card's CUs, 1..100, default 100); pods get `hami.io/amd-devices-to-allocate` /
// `-allocated` as `<uuid>,<product>,<MiB>,<CUs>`; `amd.com/use-gputype`, `nouse-gputype`,
// `use-gpu-uuid`, `nouse-gpu-uuid`. No handshake: allocatable `amd.com/gpu` tells.
std::unique_ptr<Vendor> MakeAmdVendor(const VendorResources& config);

}  // namespace hami::device
