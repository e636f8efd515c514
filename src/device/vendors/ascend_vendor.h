// Huawei Ascend NPUs: one vendor per chip of the `vnpus` (or the user's flat `ascend:`) section,
// keyed by the chip's commonWord (e.g. "Ascend910B3").
//
// Wire (upstream-compatible): the node registers `hami.io/node-register-<CW>` (JSON) and
// answers the handshake `hami.io/node-handshake-<CW>`; pods get `hami.io/<CW>-devices-to-allocate`
// and `-allocated`, plus `huawei.com/<CW>` (a JSON list, one entry per NPU in container order:
// {"UUID": ..., "temp": <template name>} for a vNPU slice, {"UUID": ...} for a whole card, or
// {"UUID","memory","core"} in hami-core mode) and `predicate-time` (unix seconds) for Huawei's
// device plugin. `hami.io/use-<CW>-uuid` / `hami.io/no-use-<CW>-uuid` narrow by UUID.
//
// Requests: `huawei.com/<CW>` NPUs, `huawei.com/<CW>-memory` MiB (x memoryFactor),
// `huawei.com/<CW>-core`. The webhook rounds memory up to the smallest template that holds it
// (hard split, the default) and writes the rounded value back; no memory means a whole card
// (memoryAllocatable). Refused with the reason: memory above the card's capacity, a vNPU slice
// for more than one NPU, `-core` outside hami-core mode (pod annotation
// `huawei.com/vnpu-mode: hami-core`), and on 910C super-pod chips an NPU count other than 1 or
// an even number (1 is raised to 2: a module is two NPUs).
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

inline constexpr std::string_view kAscendModeAnnotation = "huawei.com/vnpu-mode";
inline constexpr std::string_view kAscendHamiCoreMode = "hami-core";
inline constexpr std::string_view kAscendPredicateTimeAnnotation = "predicate-time";
inline constexpr std::string_view kAscendNodeHamiCoreAnnotation = "hami-vnpu-core";
inline constexpr std::string_view kAscendHardSplitMode = "hard-split";
inline constexpr std::string_view kAscendNetworkIdKey = "NetworkID";  // registration custominfo

class AscendVendor final : public Vendor {
 public:
  // `hami_core_default`: the section's hamiVnpuCore, for nodes without the hami-vnpu-core
  // annotation.
  explicit AscendVendor(AscendChipConfig chip, bool hami_core_default = false);
  // Devices carry the node's split mode: "hami-core" (soft split: node annotation
  // hami-vnpu-core "true", or hamiVnpuCore without it) or "hard-split" (templates). A pod in
  // hami-core mode (huawei.com/vnpu-mode) fits only hami-core nodes.
  Result<std::vector<DeviceInfo>> DecodeNodeDevices(const NodeView& node) const override;

  std::string_view Key() const override { return chip_.common_word; }
  const ResourceNames& resource_names() const override { return names_; }
  const VendorAnnotationKeys& annotation_keys() const override { return keys_; }
  Result<std::optional<ContainerRequest>> ParseRequest(const ContainerResources& c) const override;
  Result<ContainerMutation> MutateContainer(const ContainerResources& c,
                                            const AdmissionContext& ctx) const override;
  void EncodePodExtras(const PodSingleDevice& devices, const PodWriteContext& ctx,
                       Annotations* pod) const override;
  // Super-pod chips (910C): NPUs are taken by module, the two NPUs 2k and 2k+1 together. Other
  // 910 chips whose plugin reports a NetworkID per NPU (custominfo): NPUs of one network
  // together (ChooseByGroup).
  bool has_topology_rule() const override;
  TopologyChoice ChooseDevices(std::span<const DeviceCandidate> candidates,
                               int32_t need) const override;

  // The memory (MiB) a request of `mib` is given and the template's name ("" for a whole
  // card); nullopt when `mib` exceeds the card.
  struct Rounded {
    int64_t memory_mib = 0;
    std::string template_name;
  };
  std::optional<Rounded> RoundMemory(int64_t mib) const;
  const AscendChipConfig& chip() const { return chip_; }

 private:
  AscendChipConfig chip_;
  bool hami_core_default_ = false;
  ResourceNames names_;
  VendorAnnotationKeys keys_;
};

}  // namespace hami::device
