// PlacementEngine: decides which node and which devices a pod gets, from a Ledger snapshot.
//
// For every candidate node it fits the pod container by container (init containers each against
// the node as it is, since they run one after another; app containers cumulatively, since they
// run together), vendor by vendor, applying every device filter of HAMi's NVIDIA Fit in upstream's
// order: health, cordon (`hami.io/device-cordon`), type (use/nouse-gputype,
// `nvidia.com/vgpu-mode`), UUID (use/nouse-gpuuuid), slots, mutex, memory (absolute or percentage),
// cores, exclusive card, compute exhausted, MIG profile and placement; then `nvidia.com/numa-bind`
// grouping, the GPU policy's ordering (policy.h) and topology-aware set choice. A node that fits
// gets the usage score of the node with the pod placed; the node policy picks the best one.
//
//   PlacementEngine engine(EngineOptions{});
//   Result<Decision> d = engine.Place(ledger, pod, node_names, TraceLevel::kNodes);
//   if (d.ok() && d->fit()) ledger.Reserve(d->ToReservation(pod));
//
// Device and node scores are computed with the pod's own request included (our fix of upstream,
// docs/compatibility.md): score = 10 * (w_slot * slots/count + w_core * cores/total_cores +
// w_mem * mem/total_mem), weights from `hami.io/device-scoring-weights` (default 1,1,1).
//
// Implementation, by file: placement.cc (the node loop, the verdict cache, the chosen node's
// assignment, decision messages), pod_context.cc (what the pod asks, resolved once per filter),
// node_evaluator.cc (fitting a node device by device) and node_topology.cc (NUMA groups, topology
// plug-ins, link scores); their shared types are in placement_internal.h.
//
// Thread safety: the engine is immutable; Place() may run concurrently on one Ledger as long as no
// thread mutates that Ledger meanwhile.
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "device/device.h"
#include "device/mig_allocation.h"
#include "device/scoring_weights.h"
#include "device/vendor.h"
#include "scheduler/fit_reason.h"
#include "scheduler/ledger.h"
#include "scheduler/policy.h"

namespace hami::scheduler {

// Room left under the pod namespace's ResourceQuota for one vendor (`limits.<memory resource>`,
// `limits.<core resource>`); an absent field means no limit.
struct QuotaRoom {
  std::string vendor;
  std::optional<int64_t> mem_mib;
  std::optional<int64_t> cores;
};

// The pod being placed.
struct PodSpec {
  std::string uid;
  std::string name_space;
  std::string name;
  device::Annotations annotations;
  device::PodRequests requests;  // from device::ParsePodRequests
  // Namespace quota room; a node whose placement would take more fails with ResourceQuotaNotFit.
  std::vector<QuotaRoom> quota;
};

struct EngineOptions {
  NodePolicy node_policy = NodePolicy::kBinpack;  // --node-scheduler-policy
  std::string gpu_policy = "spread";              // --gpu-scheduler-policy
};

enum class TraceLevel : uint8_t {
  kNodes,    // per node: fit and score, or the reasons
  kDevices,  // also per device: score, reason, chosen
};

struct NodeVerdict {
  // The ledger's interned name; for a name the ledger does not know, the caller's string.
  std::string_view node;
  int32_t slot = -1;  // ledger node slot, -1 when unknown
  bool fit = false;
  NodePolicy policy = NodePolicy::kBinpack;
  double score = 0;  // usage score with the pod placed (fit nodes)
  // Policy-neutral preference, added to the policy's ordering (fit nodes): 10 x the sum over
  // the pod's multi-device requests of the share of their devices in their biggest topology
  // group (Ascend networks, Vastai cards) or, for whole-device requests of a vendor that scores
  // links (Vendor::scores_links: MetaX sGPU topology-aware), the links kept and lost, plus the
  // vendors' Vendor::DevicePreference of the devices taken (MetaX sGPU online pods) and the
  // node's published preference for the number taken (Vendor::DecodeNodePreferences: MetaX whole
  // cards); upstream's ScoreNode of those vendors.
  double preference = 0;
  NodeFailure failure;
};

struct DeviceVerdict {
  uint32_t verdict = 0;  // index into Decision::verdicts
  uint16_t device = 0;   // local index on the node
  int16_t container = 0;
  bool chosen = false;
  bool passed = false;
  CardReason reason = CardReason::kCount;  // when !passed
  double score = 0;
};

struct ResolvedPolicies {
  NodePolicy node = NodePolicy::kBinpack;
  PolicySource node_source = PolicySource::kGlobal;
  GpuPolicy gpu;
  PolicySource gpu_source = PolicySource::kGlobal;
  std::vector<std::string> ignored;  // unknown policy tokens seen on the pod
};

struct Decision {
  bool requests_devices = false;  // false: the pod asks for no device at all
  ResolvedPolicies policies;      // pod level (a node annotation may override per node)
  device::ScoringWeights weights;
  std::vector<NodeVerdict> verdicts;           // one per requested node, in request order
  std::vector<DeviceVerdict> device_verdicts;  // TraceLevel::kDevices only
  int32_t chosen = -1;                         // index into verdicts
  // The placement (when fit()): every vendor list has one entry per container, init first.
  std::string node;
  device::PodDevices devices;
  std::vector<device::MigAllocation> mig;
  size_t container_count = 0;
  size_t init_container_count = 0;
  uint8_t task_class = 0;  // the pod's Vendor::TaskClass, for the reservation

  bool fit() const { return chosen >= 0; }
  // failedNodes of the extender reply: node -> reason.
  std::map<std::string, std::string> FailedNodes() const;
  // The FilteringSucceed event text: `find fit node(<n>), <k> nodes not fit, <m> nodes
  // fit(<n>:<score>,...)`: the chosen node first, at most ten nodes listed.
  std::string SucceedMessage() const;
  // The FilteringFailed event text: `no available node, <n> nodes do not meet`.
  std::string FailedMessage() const;
  // Precondition: fit().
  Reservation ToReservation(const PodSpec& pod) const;
};

class VerdictCache;

// Thread safety: Place and PlaceOnAllNodes may run concurrently (callers hold the ledger's lock
// for reading); the verdict cache has its own locks.
//
// Verdict cache: most filters ask for the same request shape, and between two of them only the
// nodes touched by the last bind changed. The engine remembers, per request shape, each node's
// verdict (fit, score, failure) together with the node's LedgerNode::version, and reuses it while
// the version is unchanged; everything else about the pod (name, uid, unrelated annotations)
// is not part of the shape. The chosen node is always evaluated afresh to materialise the
// devices, so a stale verdict could at worst cost a second, uncached pass (logged), never a
// placement the ledger does not allow. Traced placements (TraceLevel::kDevices) bypass it.
class PlacementEngine {
 public:
  explicit PlacementEngine(EngineOptions options = {});

  // Evaluates `node_names` (unknown ones fail with "node unregistered"). InvalidArgument for a
  // malformed `hami.io/device-scoring-weights` or a request naming an unknown vendor.
  Result<Decision> Place(const Ledger& ledger, const PodSpec& pod,
                         std::span<const std::string_view> node_names,
                         TraceLevel trace = TraceLevel::kNodes) const;
  // Evaluates every registered node (in ledger order).
  Result<Decision> PlaceOnAllNodes(const Ledger& ledger, const PodSpec& pod,
                                   TraceLevel trace = TraceLevel::kNodes) const;

  const EngineOptions& options() const { return options_; }

 private:
  Result<Decision> PlaceSlots(const Ledger& ledger, const PodSpec& pod,
                              std::span<const std::string_view> names,
                              std::span<const int32_t> slots, TraceLevel trace,
                              bool use_cache) const;

  EngineOptions options_;
  GpuPolicy global_gpu_;
  std::shared_ptr<VerdictCache> cache_;  // shared by copies of the engine (same options)
};

// The Filter step of the service: drops the pod's previous (unbound) entry, places it and, when a
// node fits, reserves the devices in the ledger.
Result<Decision> PlaceAndReserve(Ledger& ledger, const PlacementEngine& engine, const PodSpec& pod,
                                 std::span<const std::string_view> node_names,
                                 TraceLevel trace = TraceLevel::kNodes);

}  // namespace hami::scheduler
