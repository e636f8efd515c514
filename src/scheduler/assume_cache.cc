#include "scheduler/assume_cache.h"

#include <utility>

namespace hami::scheduler {

AssumeCache::AssumeCache(const device::VendorRegistry& vendors, const Clock& clock,
                         LedgerOptions options)
    : clock_(clock), ledger_(vendors, clock, options) {}

Status AssumeCache::UpsertNode(const NodeObject& node, bool* registered) {
  WriterLock lock(mu_);
  Status s = ledger_.UpsertNode(node);
  int32_t slot = ledger_.FindNode(node.name);
  *registered = slot >= 0 && ledger_.nodes()[slot].registered;
  ++generation_;
  return s;
}

void AssumeCache::RemoveNode(std::string_view name) {
  WriterLock lock(mu_);
  ledger_.RemoveNode(name);
  ++generation_;
}

size_t AssumeCache::ExpireReservations() {
  WriterLock lock(mu_);
  size_t expired = ledger_.ExpireReservations();
  if (expired == 0) return 0;
  ++generation_;
  // Placements that were never bound and never written go with their reservations.
  for (auto it = pending_.begin(); it != pending_.end();) {
    const LedgerPod* p = ledger_.FindPod(it->first);
    if (p != nullptr && p->state == PodState::kReserved) {
      ++it;
      continue;
    }
    if (auto w = written_.find(it->first); w != written_.end() && w->second == kUnwritten) {
      written_.erase(w);
    }
    it = pending_.erase(it);
  }
  return expired;
}

bool AssumeCache::Tracks(const std::string& uid) const {
  ReaderLock lock(mu_);
  return ledger_.FindPod(uid) != nullptr || written_.count(uid) > 0;
}

AssumeCache::Observed AssumeCache::ObservePod(const PodObject& pod, int64_t rv, Status* problem,
                                              std::vector<std::string>* dropped) {
  const bool annotated = pod.annotations.count(kAssignedNodeAnnotation) > 0;
  // Most pods in a cluster never ask for a device: a shared look keeps their events from
  // queueing behind filters for the exclusive lock.
  if (!annotated && !Tracks(pod.uid)) return Observed::kIgnored;
  WriterLock lock(mu_);
  // A bind whose answer was lost is settled by the pod itself showing a node.
  if (!unsettled_.empty() && !pod.node_name.empty()) unsettled_.erase(pod.uid);
  if (auto w = written_.find(pod.uid); w != written_.end()) {
    // Older than the placement we wrote: applying it would undo that placement.
    if (rv >= 0 && rv < w->second) return Observed::kStale;
    written_.erase(w);
  }
  if (annotated || ledger_.FindPod(pod.uid) != nullptr) {
    *problem = ledger_.UpsertPod(pod, dropped);
    ++generation_;
  }
  return Observed::kApplied;
}

void AssumeCache::ObservePodGone(const std::string& uid, bool unless_binding) {
  {
    ReaderLock lock(mu_);
    if (ledger_.FindPod(uid) == nullptr && written_.count(uid) == 0 && pending_.count(uid) == 0 &&
        unsettled_.count(uid) == 0) {
      return;
    }
  }
  WriterLock lock(mu_);
  if (unless_binding && binding_.count(uid) > 0) return;
  if (ledger_.FindPod(uid) != nullptr) {
    ledger_.RemovePod(uid);
    ++generation_;
  }
  written_.erase(uid);
  pending_.erase(uid);
  unsettled_.erase(uid);
}

std::string AssumeCache::PrepareToPlace(const std::string& uid,
                                        std::optional<HeldLockRef>* release,
                                        std::string* written_on) {
  WriterLock lock(mu_);
  if (auto b = binding_.find(uid); b != binding_.end()) {
    return "a bind of this pod to " + b->second + " is still running";
  }
  if (auto u = unsettled_.find(uid); u != unsettled_.end()) {
    Duration left = u->second.until - clock_.Now();
    if (left > Duration::zero()) {
      return "the answer to this pod's Binding to " + u->second.lock.node +
             " was lost; its devices stay reserved until the API server shows whether it "
             "landed (at most " +
             std::to_string(std::chrono::ceil<std::chrono::seconds>(left).count()) + " s more)";
    }
    // Long enough for a lost request to have landed: the pod is not bound, so its devices go
    // (below) and so does the lock its bind may hold with them.
    *release = std::move(u->second.lock);
    unsettled_.erase(u);
  }
  // A retried pod gives its earlier choice back first, unless that choice is written on the pod
  // (by a bind whose Binding failed, or seen on it after a restart): the caller withdraws it
  // from the pod before the devices go (Forget), or a rebuilt ledger would count them twice.
  if (const LedgerPod* old = ledger_.FindPod(uid);
      old != nullptr && old->state == PodState::kReserved) {
    if (pending_.count(uid) == 0 && written_on != nullptr) {
      *written_on = std::string(ledger_.strings().nodes.Get(ledger_.nodes()[old->node].name));
    } else {
      ForgetLocked(uid);
    }
  }
  return "";
}

Result<AssumeCache::Placed> AssumeCache::PlaceAndAssume(const PlacementEngine& engine,
                                                        PodSpec& spec,
                                                        std::span<const std::string_view> nodes,
                                                        const RoomFn& room) {
  Placed out;
  uint64_t seen_generation;
  {
    ReaderLock lock(mu_);
    seen_generation = generation_;
    if (room) spec.quota = room(ledger_);
    HAMI_ASSIGN_OR_RETURN(out.decision, engine.Place(ledger_, spec, nodes));
  }
  if (!out.decision.fit()) return out;
  WriterLock lock(mu_);
  if (generation_ != seen_generation) {
    HAMI_ASSIGN_OR_RETURN(out.decision,
                          RecheckLocked(engine, spec, std::move(out.decision), nodes, room));
    out.replaced_after_race = true;
    if (!out.decision.fit()) return out;
  }
  Status s = ledger_.Reserve(out.decision.ToReservation(spec));
  ++generation_;
  if (!s.ok()) return Status(s.code(), "reservation failed: " + s.message());
  // Until the bind writes the placement, events of the pod (which carry none) would undo the
  // reservation: ignored from this moment (the same critical section).
  written_[spec.uid] = kUnwritten;
  return out;
}

// Someone wrote between placing and reserving: the chosen node is checked again, and when it
// no longer fits the pod is placed again over every node.
Result<Decision> AssumeCache::RecheckLocked(const PlacementEngine& engine, PodSpec& spec,
                                            Decision d, std::span<const std::string_view> nodes,
                                            const RoomFn& room) {
  if (room) spec.quota = room(ledger_);
  std::string_view chosen[] = {d.node};
  Result<Decision> again = engine.Place(ledger_, spec, chosen);
  if (!again.ok() || !again->fit()) return engine.Place(ledger_, spec, nodes);
  // Same node: keep every node's verdict for the event text, with the chosen one's new score.
  d.verdicts[d.chosen].score = again->verdicts[0].score;
  std::vector<NodeVerdict> verdicts = std::move(d.verdicts);
  const int32_t chosen_index = d.chosen;
  d = std::move(*again);
  d.verdicts = std::move(verdicts);
  d.chosen = chosen_index;
  return d;
}

void AssumeCache::RecordPlacement(const std::string& uid, std::string node, std::string patch) {
  WriterLock lock(mu_);
  pending_[uid] = Placement{std::move(node), std::move(patch)};
}

void AssumeCache::Forget(const std::string& uid) {
  WriterLock lock(mu_);
  ForgetLocked(uid);
}

void AssumeCache::ForgetLocked(const std::string& uid) {
  pending_.erase(uid);
  if (auto w = written_.find(uid); w != written_.end() && w->second == kUnwritten)
    written_.erase(w);
  if (const LedgerPod* p = ledger_.FindPod(uid); p != nullptr && p->state == PodState::kReserved) {
    ledger_.RemovePod(uid);
    ++generation_;
  }
}

AssumeCache::BindTicket AssumeCache::BeginBind(const std::string& uid, std::string_view node,
                                               bool take_placement) {
  BindTicket t;
  WriterLock lock(mu_);
  if (auto b = binding_.find(uid); b != binding_.end()) {
    t.running_on = b->second;
    return t;
  }
  binding_.emplace(uid, std::string(node));
  if (!take_placement) return t;
  if (auto it = pending_.find(uid); it != pending_.end() && it->second.node == node) {
    t.placement = std::move(it->second);
    pending_.erase(it);
  }
  return t;
}

void AssumeCache::EndBind(const std::string& uid) {
  WriterLock lock(mu_);
  binding_.erase(uid);
}

void AssumeCache::PlacementWritten(const std::string& uid, int64_t rv) {
  WriterLock lock(mu_);
  if (rv >= 0) {
    written_[uid] = rv;
  } else {
    written_.erase(uid);
  }
}

bool AssumeCache::FinishBinding(const std::string& uid) {
  WriterLock lock(mu_);
  if (uid.empty() || ledger_.FindPod(uid) == nullptr) return false;
  (void)ledger_.Confirm(uid);
  ++generation_;
  return true;
}

void AssumeCache::MarkUnsettled(const std::string& uid, HeldLockRef lock_ref, Duration grace) {
  WriterLock lock(mu_);
  unsettled_[uid] = Unsettled{std::move(lock_ref), clock_.Now() + grace};
}

uint64_t AssumeCache::generation() const {
  ReaderLock lock(mu_);
  return generation_;
}

}  // namespace hami::scheduler
