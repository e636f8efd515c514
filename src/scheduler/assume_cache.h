// AssumeCache: the scheduler's allocation view with the pod lifecycle the service drives through
// it. It owns the Ledger, a generation counter bumped on every change, and what the scheduler
// has decided but the API server does not show yet, so the service keeps no per-pod state of
// its own. Kubernetes-free: pods and nodes arrive as objects.h values, a resource version as a
// number.
//
// A pod the scheduler places goes through:
//
//   Place (shared lock) -> Assume (exclusive: re-checked if the ledger changed, then reserved;
//   the pod's informer events are ignored from then on, since they do not carry the placement yet)
//   -> RecordPlacement (the patch the bind will write) -> BeginBind (takes the patch; one bind per
//   pod) -> PlacementWritten(rv) (events older than rv stay ignored) or Forget (devices back)
//   -> FinishBinding (reservation confirmed) or MarkUnsettled (the Binding's answer was lost)
//   -> EndBind.
//
// Informer events come in through ObservePod / ObservePodGone and node registrations through
// UpsertNode / RemoveNode.
//
//   AssumeCache cache(vendors, clock, LedgerOptions{300});
//   Result<AssumeCache::Placed> p = cache.PlaceAndAssume(engine, spec, nodes, room);
//   if (p.ok() && p->decision.fit()) cache.RecordPlacement(spec.uid, p->decision.node, patch);
//
// Thread safety: every member may be called from any thread. Reads (Place, Read) share a lock;
// changes take it exclusively. Callbacks passed in run under that lock and must not call back.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "common/clock.h"
#include "common/status.h"
#include "common/thread_annotations.h"
#include "device/vendor.h"
#include "scheduler/ledger.h"
#include "scheduler/objects.h"
#include "scheduler/placement.h"

namespace hami::scheduler {

// A node lock a pod may hold (node, pod namespace, pod name).
struct HeldLockRef {
  std::string node, ns, name;
};

class AssumeCache {
 public:
  // What the filter must write onto the pod before its Binding: a merge patch of the
  // placement's annotations and label, for `node`.
  struct Placement {
    std::string node;
    std::string patch;
  };
  struct Placed {
    Decision decision;
    bool replaced_after_race = false;  // the ledger changed between placing and reserving
  };
  // The namespace's quota room for a pod, read from the ledger (under the cache's lock).
  using RoomFn = std::function<std::vector<QuotaRoom>(const Ledger&)>;

  // `vendors` and `clock` must outlive the cache.
  AssumeCache(const device::VendorRegistry& vendors, const Clock& clock, LedgerOptions options);
  AssumeCache(const AssumeCache&) = delete;
  AssumeCache& operator=(const AssumeCache&) = delete;

  // --- Nodes (the registration pass) ---
  // `*registered`: some vendor's devices of the node are scheduled after the change.
  Status UpsertNode(const NodeObject& node, bool* registered);
  void RemoveNode(std::string_view name);
  // Reservations past their time leave (with placements never written); returns how many.
  size_t ExpireReservations();

  // --- Informer events ---
  enum class Observed {
    kApplied,  // the pod's allocation (or its absence) is now what the ledger holds
    kStale,    // older than the placement this scheduler wrote (or is about to write): ignored
    kIgnored,  // a pod the cache does not track and that carries no placement
  };
  // `rv`: the event's resource version as a number (-1 when not numeric). `*problem` gets a
  // placement annotation the ledger could not use (the pod then holds nothing); `*dropped` the
  // reserved pods a bound one displaced (Ledger::UpsertPod).
  Observed ObservePod(const PodObject& pod, int64_t rv, Status* problem,
                      std::vector<std::string>* dropped = nullptr);
  // The pod is gone: its devices, placement and any unsettled bind are forgotten. With
  // `unless_binding`, nothing changes while a bind of the pod runs (a bind that found the pod
  // missing must not pull the devices from under another bind of it).
  void ObservePodGone(const std::string& uid, bool unless_binding = false);
  // The cache knows the pod (devices held or a placement of ours pending): its events matter.
  bool Tracks(const std::string& uid) const;

  // --- Filter ---
  // Why the pod may not be placed now (a bind of it is running, or its Binding's answer was lost
  // less than its grace ago), or "" when it may; then its earlier reservation, if any, is given
  // back, except one whose placement is on the pod (written by a bind, or observed): then
  // `*written_on` (when given) names its node and the reservation stays until the caller has
  // withdrawn the placement from the pod and calls Forget. An unsettled bind whose grace has
  // passed is forgotten and the lock it may hold is returned in `*release` for the caller to
  // clear.
  std::string PrepareToPlace(const std::string& uid, std::optional<HeldLockRef>* release,
                             std::string* written_on = nullptr);
  // Places the pod on one of `nodes` and reserves the choice. When the ledger changed between
  // the shared-lock placement and the exclusive reservation, the chosen node is checked again
  // (and in the worst case the pod placed again). A non-fitting decision reserves nothing.
  // `spec.quota` is set from `room`.
  Result<Placed> PlaceAndAssume(const PlacementEngine& engine, PodSpec& spec,
                                std::span<const std::string_view> nodes, const RoomFn& room);
  void RecordPlacement(const std::string& uid, std::string node, std::string patch);
  // Gives back a reserved (not yet bound) pod's devices and forgets its unwritten placement.
  void Forget(const std::string& uid);

  // --- Bind ---
  struct BindTicket {
    std::string running_on;              // non-empty: a bind of the pod is running (refused)
    std::optional<Placement> placement;  // the unwritten placement for this node, if any
  };
  // Starts the pod's bind to `node` unless one is running; takes the unwritten placement when
  // it is for `node` and `take_placement` is set.
  BindTicket BeginBind(const std::string& uid, std::string_view node, bool take_placement);
  void EndBind(const std::string& uid);
  // The placement reached the pod at resource version `rv` (-1: unknown): older events stay
  // ignored, newer ones apply.
  void PlacementWritten(const std::string& uid, int64_t rv);
  // The pod is bound: its reservation is confirmed. False when the pod had left the ledger.
  bool FinishBinding(const std::string& uid);
  // The Binding's answer was lost: the devices stay reserved and filters of the pod answer
  // "waiting" until the pod shows a node, is gone, or `grace` passes.
  void MarkUnsettled(const std::string& uid, HeldLockRef lock, Duration grace);

  // --- Reads ---
  // Runs `fn(ledger)` under the shared lock.
  template <typename Fn>
  auto Read(Fn&& fn) const {
    ReaderLock lock(mu_);
    return fn(static_cast<const Ledger&>(ledger_));
  }
  uint64_t generation() const;

 private:
  struct Unsettled {
    HeldLockRef lock;
    MonoTime until;
  };
  // Whether events of a pod may change the ledger, given the placement this scheduler wrote.
  enum class Write : uint8_t {
    kNone,       // nothing of ours pending: every event applies
    kUnwritten,  // reserved, the placement not on the API server yet: every event is stale
    kWritten,    // written at `written_rv`: older events are stale
  };
  // What the cache knows of one pod beyond the ledger; erased once it holds nothing.
  struct PodEntry {
    Write write = Write::kNone;
    int64_t written_rv = 0;
    std::optional<Placement> pending;  // the placement the bind is to write
    std::string binding;               // the node a running bind targets; empty: none
    std::optional<Unsettled> unsettled;
    bool empty() const {
      return write == Write::kNone && !pending && binding.empty() && !unsettled;
    }
  };
  using PodMap = std::unordered_map<std::string, PodEntry>;

  // The pod's entry, or null.
  const PodEntry* FindEntry(const std::string& uid) const REQUIRES_SHARED(mu_);
  PodEntry* FindEntry(const std::string& uid) REQUIRES(mu_);
  // Drops the entry of `uid` when it holds nothing any more.
  void Tidy(const std::string& uid) REQUIRES(mu_);
  void ForgetLocked(const std::string& uid) REQUIRES(mu_);
  Result<Decision> RecheckLocked(const PlacementEngine& engine, PodSpec& spec, Decision d,
                                 std::span<const std::string_view> nodes, const RoomFn& room)
      REQUIRES(mu_);

  const Clock& clock_;
  mutable SharedMutex mu_;
  Ledger ledger_ GUARDED_BY(mu_);
  uint64_t generation_ GUARDED_BY(mu_) = 0;
  PodMap pods_ GUARDED_BY(mu_);  // by uid
};

}  // namespace hami::scheduler
