// Ledger: the scheduler's view of every device slice in the cluster, rebuilt from exactly two
// sources: node registrations (what each device offers) and pods' `*-devices-allocated`
// annotations (what each scheduled pod holds), plus reservations the placement engine made that
// are not yet visible on the pod.
//
// Life of a pod entry:
//   Reserve()            placement chose devices (in memory, expires at now + reservation_ttl)
//   UpsertPod()          the pod carries the annotations: reserved until bound (expiry counted
//                        from `hami.io/vgpu-time`), bound once spec.nodeName is set
//   Confirm()            the service bound the pod (no expiry from now on)
//   ExpireReservations() drops reservations that never bound
//   UpsertPod() with a terminal phase, or RemovePod(): released
//
// Usage per device = sum of its pods' charges. A pod's charge on a device is the init-container
// collapse of its lists: init containers run one after another (peak memory and cores, one slot),
// app containers together (sums, one slot per container); the charge is the larger of the two per
// field. Once every init container has terminated successfully only the app part is charged.
//
// Every update costs O(change): a pod touches only its devices; a node re-registration re-applies
// only that node's pods. Rebuilding a fresh ledger from the same objects at the same time yields
// the same CanonicalDump() / Fingerprint() (tested by the property tests).
//
// Over-commitment: the engine never places a request that does not fit, so devices it fills never
// exceed slots, memory or cores (but a MIG device's cores: its instances' rounded-up core figures
// may sum past 100 and are no limit there). Annotations written elsewhere (another scheduler, a
// shrunken re-registration) are recorded as they are, never hidden; OverCommitted() lists such
// devices and the engine sees them as full.
//
// Representation: strings (UUIDs, models, node names) are interned once; devices and charges hold
// 32-bit ids. Nodes and devices are never looked up by string on the placement hot path.
//
// Thread safety: not synchronised. The service serialises writers and lets the placement engine
// read under the same (shared) lock. The Clock must outlive the ledger.
#pragma once

#include <cstdint>
#include <memory>
#include <queue>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "common/clock.h"
#include "common/status.h"
#include "device/device.h"
#include "device/mig_allocation.h"
#include "device/vendor.h"
#include "scheduler/interner.h"
#include "scheduler/objects.h"
#include "scheduler/policy.h"

namespace hami::scheduler {

struct LedgerOptions {
  // How long a reservation may wait for its pod to bind before it is dropped.
  int64_t reservation_ttl_seconds = 300;
};

enum class DeviceMode : uint8_t { kHamiCore, kMig, kMps, kOther };

// One device: registration (fixed until the node re-registers) and current usage.
struct LedgerDevice {
  uint32_t uuid = 0;       // LedgerStrings::uuids
  uint32_t type = 0;       // LedgerStrings::types
  uint32_t mode_name = 0;  // LedgerStrings::modes
  uint32_t index = 0;
  int32_t count = 0;    // slots
  int32_t devmem = 0;   // MiB
  int32_t devcore = 0;  // percent units
  int32_t numa = 0;
  uint8_t vendor = 0;  // index into VendorRegistry::vendors()
  DeviceMode mode = DeviceMode::kHamiCore;
  bool health = false;
  bool cordoned = false;
  uint32_t group = 0;  // LedgerStrings::groups id + 1; 0 = no topology group
  // Usage.
  int32_t used_slots = 0;
  int32_t mig_anomalies = 0;  // MIG reservations without a MIG device, or the reverse
  int64_t used_mem = 0;
  int64_t used_cores = 0;

  bool Healthy() const { return health && mig_anomalies == 0; }
};

// A MIG instance held on a device.
struct MigInUse {
  uint32_t profile = 0;  // LedgerStrings::mig_profiles
  device::MigPlacement placement;
  uint32_t pod = 0;  // pod slot holding it
};

// Per-node MIG data, present only on nodes with a device in MIG mode.
struct NodeMig {
  // Per device (local index): profiles sorted by memory then slice count.
  std::vector<std::vector<device::MigProfile>> profiles;
  std::vector<std::vector<MigInUse>> in_use;
};

struct LedgerNode {
  uint32_t name = 0;  // LedgerStrings::nodes
  bool registered = false;
  std::vector<LedgerDevice> devices;
  std::unique_ptr<NodeMig> mig;  // null without MIG devices
  // Per device, the task classes charged to it; null unless a device's vendor
  // uses_task_classes() (devices of other vendors keep zeros).
  std::unique_ptr<std::vector<device::TaskClassCounts>> task_classes;
  // Vendor index -> the node preferences its annotations give (Vendor::DecodeNodePreferences);
  // null when no vendor publishes any for this node.
  std::unique_ptr<std::vector<std::pair<uint8_t, device::NodePreferenceTable>>> preferences;
  std::vector<int32_t> pair_scores;  // devices x devices link scores; empty when not published
  // Node-annotation policies (valid when has_*).
  bool has_node_policy = false;
  bool has_gpu_policy = false;
  NodePolicy node_policy = NodePolicy::kBinpack;
  GpuPolicy gpu_policy;
  // Pods charged to this node (pod slots).
  std::vector<uint32_t> pods;
  // Hash of the annotations the devices were built from, to skip unchanged updates.
  uint64_t registration_hash = 0;
  // Changes whenever anything a placement reads of this node may have changed (registration,
  // health, cordon, policies, any charge). Drawn from one process-wide counter, so a value
  // never repeats, in this ledger or any other: a placement verdict remembered together with
  // the version is still right while the version is (placement.h, verdict cache). Never 0.
  uint64_t version = 0;

  int32_t PairScore(size_t a, size_t b) const {
    return pair_scores.empty() ? 0 : pair_scores[a * devices.size() + b];
  }
};

// One device charged to a pod (after init-container collapse).
struct Charge {
  uint32_t uuid = 0;
  int32_t slots = 0;
  int32_t mem = 0;
  int32_t cores = 0;
};

struct MigCharge {
  uint32_t uuid = 0;
  uint32_t profile = 0;
  device::MigPlacement placement;
};

enum class PodState : uint8_t { kReserved, kBound };

struct LedgerPod {
  std::string uid;
  std::string name_space;
  std::string name;
  uint32_t node = 0;  // node slot
  uint32_t pos_in_node = 0;
  uint32_t generation = 0;
  PodState state = PodState::kReserved;
  bool live = false;
  int64_t expires_at = 0;  // Unix seconds; reserved pods only
  uint8_t task_class = 0;  // Vendor::TaskClass of its class-using vendor (0 without one)
  std::vector<Charge> charges;
  std::vector<MigCharge> mig;
};

// Interned string tables.
struct LedgerStrings {
  StringInterner uuids;
  StringInterner types;
  StringInterner modes;
  StringInterner nodes;
  StringInterner mig_profiles;
  StringInterner groups;  // vendors' topology groups (DeviceInfo::group)
};

// What the placement engine decided for a pod, to hold until the annotations arrive.
struct Reservation {
  std::string uid;
  std::string name_space;
  std::string name;
  std::string node;
  device::PodDevices devices;  // every vendor list index-aligned, init containers first
  size_t init_container_count = 0;
  std::vector<device::MigAllocation> mig;
  uint8_t task_class = 0;  // Vendor::TaskClass of the pod (Decision::task_class)
  // When the reservation was made (Unix seconds); 0 means now. Lets a restarted service restore
  // reservations it still holds with their original expiry.
  int64_t since = 0;
};

struct OverCommit {
  std::string node;
  std::string uuid;
  int32_t used_slots, count;
  int64_t used_mem, devmem, used_cores, devcore;
};

class Ledger {
 public:
  // `vendors` and `clock` must outlive the ledger.
  Ledger(const device::VendorRegistry& vendors, const Clock& clock, LedgerOptions options = {});
  Ledger(Ledger&&) = default;
  Ledger(const Ledger&) = delete;
  Ledger& operator=(const Ledger&) = delete;

  // Replaces what the ledger knows of the node. A vendor's registration that does not decode
  // leaves that vendor's devices out (error returned, naming the annotation; the node's other
  // vendors stay); pods on it stay recorded.
  Status UpsertNode(const NodeObject& node);
  void RemoveNode(std::string_view name);

  // Records the pod's allocation from its annotations; releases it when the pod is terminal or
  // carries no `hami.io/vgpu-node`. A malformed allocation is an error and releases the pod.
  // An unbound pod's placement that would over-commit a device is not counted
  // (FailedPrecondition); a bound pod that would over-commit one displaces reserved pods from it,
  // named ("ns/name") in `*dropped`.
  Status UpsertPod(const PodObject& pod, std::vector<std::string>* dropped = nullptr);
  void RemovePod(std::string_view uid);

  // Holds the engine's choice until the pod's annotations are seen. Replaces any earlier entry
  // for the uid. FailedPrecondition when the node is not registered.
  Status Reserve(const Reservation& r);
  // Marks a reserved pod bound. NotFound for an unknown uid.
  Status Confirm(std::string_view uid);
  // Drops reservations whose time has come; returns how many.
  size_t ExpireReservations();

  // Read access for the placement engine.
  const device::VendorRegistry& vendors() const { return vendors_; }
  const LedgerStrings& strings() const { return strings_; }
  const std::vector<LedgerNode>& nodes() const { return nodes_; }
  // Node slot by name, or -1.
  int32_t FindNode(std::string_view name) const;
  const LedgerPod* FindPod(std::string_view uid) const;
  // The live pod in a slot (LedgerNode::pods), or nullptr.
  const LedgerPod* FindPodSlot(uint32_t slot) const {
    return slot < pods_.size() && pods_[slot].live ? &pods_[slot] : nullptr;
  }
  size_t pod_count() const { return pod_by_uid_.size(); }
  const Clock& clock() const { return clock_; }
  const LedgerOptions& options() const { return options_; }

  // Canonical text of the whole ledger: registered nodes by name with each device's registration
  // and usage, then pods by uid with state, expiry and charges. Independent of update order and
  // of interning.
  std::string CanonicalDump() const;
  uint64_t Fingerprint() const;
  // Internal consistency: every device's usage equals the sum of its pods' charges, indexes agree.
  Status CheckConsistency() const;
  std::vector<OverCommit> OverCommitted() const;
  // Approximate heap bytes held (for the memory benchmark).
  size_t MemoryBytes() const;

 private:
  uint32_t NodeSlot(std::string_view name);
  // UpsertPod's capacity rule for the pod just stored.
  Status GuardCapacity(std::string_view uid, std::vector<std::string>* dropped);
  void ApplyPod(uint32_t pod_slot, int sign);
  void ApplyNodePods(LedgerNode& node, int sign);
  void DetachPod(uint32_t pod_slot);
  Status StorePod(std::string_view uid, std::string_view ns, std::string_view name,
                  std::string_view node, const device::PodDevices& devices, size_t init_count,
                  bool init_done, const std::vector<device::MigAllocation>& mig, PodState state,
                  int64_t expires_at, uint8_t task_class);
  // The task class of a pod holding `devices` (its first class-using vendor's), 0 without one.
  uint8_t TaskClassOf(const device::PodDevices& devices, const device::Annotations& pod) const;
  // `undecodable`: some vendor's registration did not decode (retried on the next update).
  Status BuildDevices(const NodeObject& obj, LedgerNode& node, bool* undecodable);

  const device::VendorRegistry& vendors_;
  // The node annotations the vendors' devices are read from (registrations, settings), each
  // once: what UpsertNode's change detection hashes on every node update.
  std::vector<std::string> device_keys_;
  const Clock& clock_;
  LedgerOptions options_;
  LedgerStrings strings_;
  std::vector<LedgerNode> nodes_;
  std::vector<int32_t> node_by_name_;  // indexed by strings_.nodes id
  std::vector<LedgerPod> pods_;
  std::vector<uint32_t> free_pods_;
  std::unordered_map<std::string, uint32_t> pod_by_uid_;
  struct Expiry {
    int64_t at;
    uint32_t pod;
    uint32_t generation;
    bool operator>(const Expiry& o) const { return at > o.at; }
  };
  std::priority_queue<Expiry, std::vector<Expiry>, std::greater<Expiry>> expiries_;
};

// The collapse described above, exposed for the engine and tests: per device UUID,
// {slots, mem, cores} a pod holds given its lists (init containers first).
struct CollapsedCharge {
  std::string_view uuid;
  int32_t slots = 0;
  int32_t mem = 0;
  int32_t cores = 0;
};
std::vector<CollapsedCharge> CollapsePodDevices(const device::PodDevices& devices,
                                                size_t init_count, bool init_done);

}  // namespace hami::scheduler
