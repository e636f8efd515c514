// Vendors whose device plugins register no HAMi annotation: the scheduler synthesises their
// devices from node status.capacity, as upstream does, and their presence on a node is that
// capacity being above zero (no handshake).
//
//  - Cambricon MLU ("MLU"): capacity `cambricon.com/mlu.smlu.vcore` (100 per card) and
//    `...vmemory` (memoryFactor MiB units, 256 by default as Cambricon's plugin counts); cards
//    `<node>-cambricon-mlu-<i>`, 100 slots each, memory split evenly. Pods also get
//    `CAMBRICON_DSMLU_ASSIGNED=false` and `CAMBRICON_DSMLU_PROFILE=<index>_<cores>_<memory
//    units>` (the pod's first card) for Cambricon's plugin.
//  - Enflame GCU whole cards ("GCU"): capacity `enflame.com/gcu`, cards `<node>-GCU-<i>`, one task
//    each.
//  - Enflame vGCU ("Enflame", the v2.9 design the user's documents configure): capacity
//    `enflame.com/gcu-count` (cards) and `enflame.com/shared-gcu` (the slices Enflame's plugin
//    cuts them into: factor = shared / cards); cards `<node>-enflame-<i>` of 100 units (percent)
//    of memory, 100 tasks each. `enflame.com/vgcu: n` with `enflame.com/vgcu-percentage: p`
//    (1..100, default 100; several cards are taken whole). The webhook rounds p up to whole
//    slices and writes the slices as `enflame.com/shared-gcu` (the resource kubelet hands to
//    Enflame's plugin) next to the rounded percentage, in limits and requests; it takes the
//    factor most nodes report and refuses the pod while no node reports one. Pods get
//    `hami.io/enflame-vgpu-devices-allocated`, `enflame.com/gcu-assigned=false`,
//    `enflame.com/gcu-assigned-time` (unix ns) and `enflame.com/gcu-assigned-id` (card indices
//    of the first container with cards). `enflame.com/use-gpuuuid`/`nouse-gpuuuid` narrow by card.
//  - Kunlunxin whole cards ("kunlun"): capacity `kunlunxin.com/xpu`, cards `<node>-kunlun-<i>`
//    (96 GiB, the upper half on NUMA 1); pods get `hami.io/kunlun-allocated` and
//    `BAIDU_COM_DEVICE_IDX` (the card indices).
//  - Moore Threads ("Mthreads"): capacity `mthreads.com/sgpu-core` (16 per GPU) and
//    `mthreads.com/sgpu-memory` (512 MiB units); a container's memory and cores are for all its
//    GPUs together and split evenly; pods get `hami.io/mthreads-vgpu-devices-allocated`,
//    `mthreads.com/gpu-index`, `mthreads.com/predicate-node` and `mthreads.com/predicate-time`.
//
// Thread safety: immutable after construction.
#pragma once

#include <memory>

#include "device/config.h"
#include "device/vendor.h"

namespace hami::device {

// Kunlunxin's board rule (eight cards in two groups of four, indices 0-3 and 4-7, linked pairwise
// across: 0-4, 1-5, ...): 1, 2 or 4 cards from one group, the one with the fewest usable cards
// that still holds them; else 2 from a linked pair and 4 from two pairs linked both ways; 8 take
// the board; other counts none (NumaNotFit). `idle_only`: whole cards, only unused ones count.
TopologyChoice ChooseKunlunBoard(std::span<const DeviceCandidate> candidates, int32_t need,
                                 bool idle_only);

std::unique_ptr<Vendor> MakeCambriconMluVendor(const VendorResources& config);
inline constexpr std::string_view kEnflameGcuCount = "enflame.com/gcu-count";
inline constexpr std::string_view kEnflameSharedGcu = "enflame.com/shared-gcu";
// The slices per card a vGCU pod's shared-gcu count was worked out for (the webhook writes it;
// a pod may name one to pick nodes cutting their cards that way); such a pod fits only nodes
// whose shared-gcu / gcu-count is that number.
inline constexpr std::string_view kEnflameSlicesAnnotation = "hami.io/enflame-slices-per-card";

std::unique_ptr<Vendor> MakeEnflameGcuVendor(const VendorResources& config);
// Null when the section names no vGCU resource.
std::unique_ptr<Vendor> MakeEnflameVgcuVendor(const VendorResources& config);
std::unique_ptr<Vendor> MakeKunlunVendor(const VendorResources& config);
std::unique_ptr<Vendor> MakeMthreadsVendor(const VendorResources& config);

}  // namespace hami::device
