// MetaX GPUs, both modules of the `metax:` section:
//  - whole cards ("Metax-GPU"): node capacity `metax-tech.com/gpu`, cards `<node>-metax-<i>`
//    (64 GiB, one task each); pods get `hami.io/metax-gpu-devices-to-allocate` / `-allocated`.
//    Off when the section's resourceCountName is the sGPU count (the user's documents describe
//    the sGPU resources in the flat keys).
//  - shared sGPUs ("Metax-SGPU"): the node annotation `metax-tech.com/node-gpu-devices` (JSON
//    list of {uuid, model, totalDevCount, totalCompute, totalVRam (MiB), numa, healthy, ...}
//    written by MetaX's plugin); requests `metax-tech.com/sgpu`, `vcore` (percent, default
//    100), `vmemory` (a bare number is GiB, a number with a unit is bytes: `4` = `4Gi` = 4096
//    MiB); pods get `hami.io/metax-sgpu-devices-to-allocate` / `-allocated`,
//    `metax-tech.com/gpu-devices-allocated` (JSON: per container, [{uuid, compute, vRam}]) and
//    `metax-tech.com/predicate-time`; the webhook sets `metax-tech.com/sgpu-qos-policy:
//    best-effort` when a pod names none (not for `metax-tech.com/sgpu-app-class: online`) and
//    refuses unknown policies and app classes, and app-class pods of more than one sGPU.
//    `metax-tech.com/use-gpuuuid` / `nouse-gpuuuid` narrow by UUID. Sharing (task classes, see
//    MetaxSgpuVendor::CanShare): pods without an app class never share an sGPU with online or
//    offline pods, offline pods never join online ones (CardAppClassMismatch); a used sGPU takes
//    only pods of its QoS policy unless the pod takes all of its compute
//    (CardQosPolicyMismatch); online pods are given no compute (device lists record 0 cores)
//    and prefer sGPUs with fewer online tasks. A pod's sGPUs stay in one MetaLink zone
//    (`linkZone` above 0) where they can.
//
// Thread safety: immutable after construction.
#pragma once

#include <memory>

#include "device/config.h"
#include "device/vendor.h"

namespace hami::device {

inline constexpr std::string_view kMetaxDevicesAnnotation = "metax-tech.com/node-gpu-devices";
// Node annotations MetaX's plugin publishes for whole cards: JSON {"<cards>": loss} and
// {"<cards>": score}; binpack takes the node of least loss, spread the one of highest score.
inline constexpr std::string_view kMetaxTopologyLosses = "metax-tech.com/gpu.topology.losses";
inline constexpr std::string_view kMetaxTopologyScores = "metax-tech.com/gpu.topology.scores";

// nullptr when the section's count resource is the sGPU count (no whole-card module).
std::unique_ptr<Vendor> MakeMetaxGpuVendor(const VendorResources& config);
std::unique_ptr<Vendor> MakeMetaxSgpuVendor(const VendorResources& config);

}  // namespace hami::device
