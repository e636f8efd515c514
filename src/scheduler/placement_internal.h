// Internal to the placement engine: the pod's resolved context, the scratch a node's evaluation
// works in, and the functions the engine's files share: placement.cc (the node loop and the chosen
// node's assignment), pod_context.cc (BuildContext, ShapeKey), node_evaluator.cc (EvaluateNode:
// fitting a node), node_topology.cc (NUMA groups, topology plug-ins, link scores) and node_mig.cc
// (profiles and placements on MIG-mode GPUs). Include only from those files.
//
// The per-device work (CheckDevice, the candidate walk, the evaluator's members) stays in
// node_evaluator.cc with internal linkage, so GCC inlines it as it did when the engine was one
// file; what crosses a file is called once per node or per pod, or only for MIG-mode devices.
// Counted in instructions in bench/RESULTS.md ("Placement split").
//
// Thread safety: a PodContext is read-only once built (but for its filters' lazily filled type and
// mode answers) and belongs to one placement, as does a Scratch (one thread).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "device/device.h"
#include "device/mig_allocation.h"
#include "device/scoring_weights.h"
#include "device/text_util.h"
#include "device/vendor.h"
#include "scheduler/fit_reason.h"
#include "scheduler/ledger.h"
#include "scheduler/placement.h"
#include "scheduler/policy.h"

namespace hami::scheduler::placement_internal {

using device::ContainerRequest;

// One vendor's device selectors on the pod, resolved against the ledger's string tables.
struct VendorFilter {
  std::vector<std::string> use_types;    // folded (device::text::FoldTypeName)
  std::vector<std::string> nouse_types;  // folded
  bool has_use_uuid = false;
  std::vector<uint32_t> use_uuids;
  std::vector<uint32_t> nouse_uuids;
  bool has_mode = false;
  bool mode_exact = false;  // VendorAnnotationKeys::mode_select_exact
  std::string mode_value;
  bool numa_bind = false;
  bool mig_allowed = true;                   // vgpu-mode absent or mentions mig
  bool cores_in_units = false;               // the vendor's devcore counts its own units (AMD CUs)
  bool core_mask = false;                    // the vendor's devcore is a bitmask of cores (Neuron)
  bool device_type_in_list = false;          // device lists name the device's type (AMD)
  const device::Vendor* topology = nullptr;  // the vendor chooses multi-device sets itself
  bool equal_partitions = false;             // a used device takes only its tasks' size
  bool one_device = false;                   // the pod's containers share one device
  const device::Vendor* share = nullptr;     // the vendor's task-class rule (uses_task_classes)
  uint8_t task_class = 0;                    // the pod's class for `share`
  bool no_cores = false;                     // the pod's tasks take no compute on this vendor
  bool mutex_group = false;                  // Vendor::mutex_takes_group
  bool link_score = false;                   // Vendor::scores_links for this pod
  // Lazily filled per type / mode id (node_evaluator.cc, TypeOk): 0 unknown, 1 ok, 2 mismatch.
  mutable std::vector<uint8_t> type_ok;
  mutable std::vector<uint8_t> mode_ok;
};

struct Req {
  uint8_t vendor = 0;
  ContainerRequest r;
};

// Everything about the pod that does not depend on the node.
struct PodContext {
  const Ledger* ledger = nullptr;
  std::vector<VendorFilter> filters;  // per vendor index
  std::vector<std::vector<Req>> containers;
  size_t init_count = 0;
  device::ScoringWeights w;
  bool has_pod_gpu = false;
  bool has_pod_node = false;
  GpuPolicy pod_gpu;
  NodePolicy pod_node = NodePolicy::kBinpack;
  const GpuPolicy* global_gpu = nullptr;
  NodePolicy global_node = NodePolicy::kBinpack;
  TraceLevel trace = TraceLevel::kNodes;
  // The pod's task class for the ledger (its first class-using vendor's).
  bool has_task_class = false;
  uint8_t task_class = 0;
  bool any_link_score = false;  // some filter has link_score (skips LinkScore otherwise)
  // Per vendor index: quota room (-1 = unlimited).
  std::vector<int64_t> quota_mem, quota_cores;
  bool has_quota = false;
};

struct Work {
  int32_t slots;
  int64_t mem;
  int64_t cores;
};

struct MigOcc {
  uint16_t device;
  device::MigPlacement placement;
};

struct Cand {
  uint16_t dev;
  bool idle;
  int32_t numa;
  uint32_t index;
  int64_t memreq;
  int64_t cores;  // the request's cores on this device, in the device's units
  int64_t free_after;
  double score;
  double vendor_pref;  // Vendor::DevicePreference (0 for vendors without task classes)
};

// One chosen device while materialising the placement.
struct Assign {
  uint16_t container;
  uint8_t vendor;
  uint16_t dev;
  int32_t mem;
  int32_t cores;
  int32_t mig_profile;  // index into the node's profile list for the device, -1 if none
  device::MigPlacement placement;
};

// A device this evaluation gave a container.
struct Taken {
  uint16_t container;
  uint8_t vendor;
  uint16_t dev;
};

struct Scratch {
  std::vector<device::DeviceCandidate> topo;
  std::vector<Taken> taken;
  std::vector<Work> base, work, peak;
  std::vector<MigOcc> occ;
  std::vector<Cand> cands;
  std::vector<uint16_t> order, pick, group;
  std::vector<uint8_t> reason;  // per device: CardReason, kCount = passed
  bool record = false;
  std::vector<Assign> assigns;
  Decision* decision = nullptr;
  uint32_t verdict = 0;
};

// node_evaluator.cc: fits the pod of `ctx` on node `slot` of its ledger, in scratch `s` (reused
// from node to node); fills `v` (fit, policy, score, preference, or the failure). With
// s.decision set, every device's verdict is recorded there; with s.record, the devices taken go
// to s.assigns.
void EvaluateNode(const PodContext& ctx, Scratch& s, uint32_t slot, NodeVerdict* v);

// node_mig.cc: the request and the instance on a device in MIG mode (device `dev` of `node`).

// Rewrites a request's memory and cores on MIG device `dev` (`*memreq` and `*cores` come in as
// on any device) into the terms its profiles are chosen by, so that whole-GPU and percentage
// requests are served by the allowed profiles although even the largest holds less than the
// GPU's total memory (upstream's B6). A percentage, whole GPU (100 %) included, becomes the
// memory of the smallest profile spanning at least that share of the memory slices the widest
// profile spans. An explicit gpumem is kept: one bigger than every profile stays infeasible.
// Cores are capped at the profiles' highest core figure: 100 % is the biggest allowed instance.
void MigRequest(const LedgerNode& node, uint16_t dev, const ContainerRequest& r,
                int64_t* memreq, int64_t* cores);

// The first profile of device `dev` (memory, then slices ascending) with at least `memreq` MiB
// and, when `cores` > 0, a core figure of at least `cores`, that has a placement no instance in
// s.occ overlaps: its index in node.mig->profiles[dev] and that placement. False when none.
bool FindMigSlot(const LedgerNode& node, uint16_t dev, int64_t memreq, int64_t cores,
                 const Scratch& s, int32_t* profile_out, device::MigPlacement* placement_out);

// node_topology.cc: choices and scores that depend on where devices sit. They read the candidates
// (s.cands, by index in s.order) and what the evaluation took (s.taken); the evaluator takes the
// devices they choose.

// Looks for a NUMA node whose candidates can hold `need` devices (a MIG-capable one: `need`
// instances, when `mig_request`), trying NUMA nodes in the order of their most preferred device.
// True with that node's candidates in s.group, in preference order.
bool FindNumaGroup(const LedgerNode& node, int32_t need, bool mig_request, Scratch& s);

// The choice of the vendor's topology plug-in (`plugin`) of `need` devices among `pool` (indices
// into s.cands); its `picked` are positions in `pool`.
device::TopologyChoice ChooseByTopologyPlugin(const LedgerStrings& strs, const LedgerNode& node,
                                              const device::Vendor& plugin,
                                              const std::vector<uint16_t>& pool, int32_t need,
                                              Scratch& s);

// Topology-aware policy: `need` devices of `pool` (at least `need` long) by link score, into
// s.pick. One device is the one least linked to the others (keeping well-connected GPUs free);
// several, the best-linked set.
void ChooseByLinkScore(const LedgerNode& node, const std::vector<uint16_t>& pool, int32_t need,
                       Scratch& s);

// NodeVerdict::preference, its link part (Vendor::scores_links): per such vendor, with a link
// worth 10 between two devices of one group, 10 x the links among the devices its whole-device
// requests took, less the links lost: those of the node's idle devices (before the pod) that
// neither the taken set nor the idle rest keeps.
double LinkScore(const PodContext& ctx, const LedgerNode& node, const Scratch& s);

// NodeVerdict::preference, its topology part: per (container, vendor) request of several devices
// (but those LinkScore counts), the share of them in its biggest topology group.
double Cohesion(const PodContext& ctx, const LedgerNode& node, const Scratch& s);

// The pod's context against `ledger`: scoring weights, policies (reported in `resolved`), the
// selectors of the vendors it asks for, quota room, and its requests by vendor index. An error for
// a malformed scoring-weights annotation or a request for a vendor the ledger does not know.
Result<PodContext> BuildContext(const Ledger& ledger, const PodSpec& pod,
                                const EngineOptions& options, const GpuPolicy& global_gpu,
                                ResolvedPolicies* resolved);

// Everything in the context a node's verdict depends on besides the node itself, as bytes: the
// verdict cache's key.
std::string ShapeKey(const PodContext& ctx);

}  // namespace hami::scheduler::placement_internal
