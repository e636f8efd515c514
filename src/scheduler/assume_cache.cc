#include "scheduler/assume_cache.h"

#include <utility>

namespace hami::scheduler {

AssumeCache::AssumeCache(const device::VendorRegistry& vendors, const Clock& clock,
                         LedgerOptions options)
    : clock_(clock), ledger_(vendors, clock, options) {}

const AssumeCache::PodEntry* AssumeCache::FindEntry(const std::string& uid) const {
  auto it = pods_.find(uid);
  return it != pods_.end() ? &it->second : nullptr;
}

AssumeCache::PodEntry* AssumeCache::FindEntry(const std::string& uid) {
  auto it = pods_.find(uid);
  return it != pods_.end() ? &it->second : nullptr;
}

void AssumeCache::Tidy(const std::string& uid) {
  if (auto it = pods_.find(uid); it != pods_.end() && it->second.empty()) pods_.erase(it);
}

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
  for (auto it = pods_.begin(); it != pods_.end();) {
    PodEntry& e = it->second;
    const LedgerPod* p = ledger_.FindPod(it->first);
    if (!e.pending || (p != nullptr && p->state == PodState::kReserved)) {
      ++it;
      continue;
    }
    if (e.write == Write::kUnwritten) e.write = Write::kNone;
    e.pending.reset();
    it = e.empty() ? pods_.erase(it) : std::next(it);
  }
  return expired;
}

bool AssumeCache::Tracks(const std::string& uid) const {
  ReaderLock lock(mu_);
  const PodEntry* e = FindEntry(uid);
  return ledger_.FindPod(uid) != nullptr || (e != nullptr && e->write != Write::kNone);
}

AssumeCache::Observed AssumeCache::ObservePod(const PodObject& pod, int64_t rv, Status* problem,
                                              std::vector<std::string>* dropped) {
  const bool annotated = pod.annotations.count(kAssignedNodeAnnotation) > 0;
  // Most pods in a cluster never ask for a device: a shared look keeps their events from
  // queueing behind filters for the exclusive lock.
  if (!annotated && !Tracks(pod.uid)) return Observed::kIgnored;
  WriterLock lock(mu_);
  if (PodEntry* e = FindEntry(pod.uid); e != nullptr) {
    // A bind whose answer was lost is settled by the pod itself showing a node.
    if (!pod.node_name.empty()) e->unsettled.reset();
    // Older than the placement we wrote (or are about to write): applying it would undo it.
    const bool stale = rv >= 0 && (e->write == Write::kUnwritten ||
                                   (e->write == Write::kWritten && rv < e->written_rv));
    if (stale) return Observed::kStale;
    e->write = Write::kNone;
    Tidy(pod.uid);
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
    if (ledger_.FindPod(uid) == nullptr && pods_.count(uid) == 0) return;
  }
  WriterLock lock(mu_);
  PodEntry* e = FindEntry(uid);
  if (unless_binding && e != nullptr && !e->binding.empty()) return;
  if (ledger_.FindPod(uid) != nullptr) {
    ledger_.RemovePod(uid);
    ++generation_;
  }
  if (e == nullptr) return;
  // A running bind keeps its mark (EndBind clears it); the rest of what we knew goes.
  e->write = Write::kNone;
  e->pending.reset();
  e->unsettled.reset();
  Tidy(uid);
}

std::string AssumeCache::PrepareToPlace(const std::string& uid,
                                        std::optional<HeldLockRef>* release,
                                        std::string* written_on) {
  WriterLock lock(mu_);
  PodEntry* e = FindEntry(uid);
  if (e != nullptr && !e->binding.empty()) {
    return "a bind of this pod to " + e->binding + " is still running";
  }
  if (e != nullptr && e->unsettled) {
    Duration left = e->unsettled->until - clock_.Now();
    if (left > Duration::zero()) {
      return "the answer to this pod's Binding to " + e->unsettled->lock.node +
             " was lost; its devices stay reserved until the API server shows whether it "
             "landed (at most " +
             std::to_string(std::chrono::ceil<std::chrono::seconds>(left).count()) + " s more)";
    }
    // Long enough for a lost request to have landed: the pod is not bound, so its devices go
    // (below) and so does the lock its bind may hold with them.
    *release = std::move(e->unsettled->lock);
    e->unsettled.reset();
  }
  // A retried pod gives its earlier choice back first, unless that choice is written on the pod
  // (by a bind whose Binding failed, or seen on it after a restart): the caller withdraws it
  // from the pod before the devices go (Forget), or a rebuilt ledger would count them twice.
  if (const LedgerPod* old = ledger_.FindPod(uid);
      old != nullptr && old->state == PodState::kReserved) {
    if ((e == nullptr || !e->pending) && written_on != nullptr) {
      *written_on = std::string(ledger_.strings().nodes.Get(ledger_.nodes()[old->node].name));
    } else {
      ForgetLocked(uid);
    }
  }
  Tidy(uid);
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
  pods_[spec.uid].write = Write::kUnwritten;
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
  pods_[uid].pending = Placement{std::move(node), std::move(patch)};
}

void AssumeCache::Forget(const std::string& uid) {
  WriterLock lock(mu_);
  ForgetLocked(uid);
}

void AssumeCache::ForgetLocked(const std::string& uid) {
  if (PodEntry* e = FindEntry(uid); e != nullptr) {
    e->pending.reset();
    if (e->write == Write::kUnwritten) e->write = Write::kNone;
    Tidy(uid);
  }
  if (const LedgerPod* p = ledger_.FindPod(uid); p != nullptr && p->state == PodState::kReserved) {
    ledger_.RemovePod(uid);
    ++generation_;
  }
}

AssumeCache::BindTicket AssumeCache::BeginBind(const std::string& uid, std::string_view node,
                                               bool take_placement) {
  BindTicket t;
  WriterLock lock(mu_);
  PodEntry& e = pods_[uid];
  if (!e.binding.empty()) {
    t.running_on = e.binding;
    return t;
  }
  e.binding = std::string(node);
  if (take_placement && e.pending && e.pending->node == node) {
    t.placement = std::move(e.pending);
    e.pending.reset();
  }
  return t;
}

void AssumeCache::EndBind(const std::string& uid) {
  WriterLock lock(mu_);
  if (PodEntry* e = FindEntry(uid); e != nullptr) {
    e->binding.clear();
    Tidy(uid);
  }
}

void AssumeCache::PlacementWritten(const std::string& uid, int64_t rv) {
  WriterLock lock(mu_);
  if (rv >= 0) {
    PodEntry& e = pods_[uid];
    e.write = Write::kWritten;
    e.written_rv = rv;
  } else if (PodEntry* e = FindEntry(uid); e != nullptr) {
    e->write = Write::kNone;
    Tidy(uid);
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
  pods_[uid].unsettled = Unsettled{std::move(lock_ref), clock_.Now() + grace};
}

uint64_t AssumeCache::generation() const {
  ReaderLock lock(mu_);
  return generation_;
}

}  // namespace hami::scheduler
