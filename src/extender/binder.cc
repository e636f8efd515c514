// Binder (see binder.h). One bind is a BindAttempt: the node lock(s), the placement's write
// onto the pod, the Binding, and on every way out the cache told what became of the placement.
#include "extender/binder.h"

#include <strings.h>

#include <algorithm>
#include <nlohmann/json.hpp>
#include <optional>
#include <utility>
#include <vector>

#include "common/log.h"
#include "device/node_lock.h"
#include "extender/k8s_objects.h"
#include "extender/service_internal.h"
#include "k8s/api_error.h"
#include "k8s/object.h"
#include "k8s/typed.h"

namespace hami::extender {

using scheduler::AssumeCache;
using scheduler::HeldLockRef;

// What kube-scheduler's ExtenderBindingArgs name.
struct BindArgs {
  std::string ns, name, uid, node;
};

namespace {

using service_internal::ErrorReply;
using service_internal::OutcomeUnknown;
using service_internal::PodKey;

Result<BindArgs> ParseBindArgs(std::string_view body) {
  Result<nlohmann::json> args = k8s::ParseJson(body);
  if (!args.ok() || !args->is_object()) {
    return InvalidArgumentError("binding args are not a JSON object");
  }
  // kube-scheduler sends the Go field names ("PodName", ...; its types have no JSON tags) and
  // Go's decoder matches names without regard to case: so do we (ASCII case only).
  auto str = [&](std::string_view k) {
    std::string value;
    for (auto it = args->begin(); it != args->end(); ++it) {
      const std::string& key = it.key();
      if (key.size() == k.size() && ::strncasecmp(key.data(), k.data(), k.size()) == 0) {
        value = it->is_string() ? it->get<std::string>() : std::string();
      }
    }
    return value;
  };
  BindArgs out{str("podNamespace"), str("podName"), str("podUID"), str("node")};
  if (out.name.empty() || out.node.empty()) {
    return InvalidArgumentError("binding args need podName and node");
  }
  if (out.ns.empty()) out.ns = "default";
  return out;
}

}  // namespace

// One bind of one pod to one node. Run() answers the extender through `done`; the destructor
// ends the pod's bind in the cache.
class BindAttempt : public std::enable_shared_from_this<BindAttempt> {
 public:
  using Done = std::function<void(std::string)>;

  BindAttempt(Binder& b, BindArgs args, k8s::ObjectPtr pod, MonoTime deadline)
      : b_(b),
        p_(b.parts_),
        a_(std::move(args)),
        key_(PodKey(a_.ns, a_.name)),
        pod_(std::move(pod)),
        deadline_(deadline) {
    if (a_.uid.empty()) a_.uid = k8s::Uid(*pod_);
  }
  ~BindAttempt() {
    if (began_) p_.cache.EndBind(a_.uid);
  }
  // With `may_wait`, waits for a busy node on this thread; without, a bind that has to wait
  // continues on a binder thread and calls `done` from there.
  void Run(bool may_wait, Done done);

 private:
  std::string Start();  // checks and the cache's bind ticket: "" to go on, else the answer
  void Continue(Done& done);
  void Answer(Done& done, std::string answer);
  std::string Complete();  // with the locks held: the placement write and the Binding
  // Which vendors the pod asks for decides the locks: HAMi's shared one for vendors whose
  // plugins speak its protocol, a vendor's own (Cambricon), or none.
  void DecideLocks();
  // Once the placement's write is decided: it reached the pod (pod events up to that write are
  // stale from now on), or it did not and the devices go back (kube-scheduler filters the pod
  // again after a failed bind).
  void Settle();
  // "" or why not; with `would_wait`, returns "" with *would_wait set at a need to wait.
  std::string TakeLocks(bool* would_wait);
  // Takes the node's allocation lock by the deadline: through the node's gate, then the lock
  // itself, waiting while another allocation holds it. A write whose answer was lost is tried
  // again (the lock held by this pod counts as taken); when the bind gives up after one, a lock
  // it may have taken is cleared. With `would_wait`, returns at the first need to wait (the
  // gate is busy, or another allocation holds the lock) with *would_wait true.
  Status AcquireNodeLock(bool* would_wait);
  // Waits for the node to change (or a second, or the deadline) and reads it again.
  Status AwaitNodeChange(Binder::NodeChangeMark* seen);
  // The cached node afresh; NotFound when it is gone.
  Status ReadNode();
  void Unlock();
  std::string WritePlacement();  // "" or why not
  std::string StampAndBind();
  std::string Fail(const std::string& msg);

  Binder& b_;
  const BinderParts& p_;
  BindArgs a_;
  const std::string key_;
  k8s::ObjectPtr pod_;
  const MonoTime deadline_;
  bool began_ = false;  // the cache has this bind running
  bool has_devices_ = false, needs_lock_ = false, locked_ = false;
  bool waited_ = false;     // a wait for the lock was logged and counted
  bool lock_lost_ = false;  // a lock write's answer was lost (the lock may be ours)
  std::set<std::string> own_locks_;
  std::vector<std::string> own_taken_;
  std::optional<AssumeCache::Placement> placement_;
  device::NodeLocker::Companion companion_;
  k8s::ObjectPtr node_;  // the cached node as last read
};

std::string BindAttempt::Fail(const std::string& msg) {
  HAMI_LOG(Warning) << "pod " << key_ << ": binding to " << a_.node << " failed: " << msg;
  p_.events.Record(k8s::EventSpec{pod_, "Pod", "Warning", "BindingFailed", msg,
                                  b_.options_.scheduler_name, b_.options_.identity});
  b_.Count(&BindStats::bind_errors);
  return ErrorReply(msg);
}

void BindAttempt::DecideLocks() {
  Result<device::PodRequests> req = device::ParsePodRequests(p_.vendors, PodResourcesOf(*pod_));
  has_devices_ = req.ok() && !req->Empty();
  if (!has_devices_) return;
  for (const device::ContainerRequests& c : req->containers) {
    for (const device::ContainerRequest& r : c) {
      const device::Vendor* v = p_.vendors.Find(r.vendor);
      if (v == nullptr) continue;
      needs_lock_ |= v->node_lock() == device::NodeLockKind::kShared;
      if (v->node_lock() == device::NodeLockKind::kOwn) own_locks_.emplace(v->own_node_lock());
    }
  }
}

void BindAttempt::Run(bool may_wait, Done done) {
  if (std::string answer = Start(); !answer.empty()) return Answer(done, std::move(answer));
  bool would_wait = false;
  std::string why = TakeLocks(may_wait ? nullptr : &would_wait);
  if (would_wait) {
    // The wait (up to node_lock_wait) happens on a binder thread, not on the caller's.
    b_.binders_->Submit(
        [self = shared_from_this(), done = std::move(done)]() mutable { self->Continue(done); });
    return;
  }
  Answer(done, why.empty() ? Complete() : Fail(why));
}

void BindAttempt::Continue(Done& done) {
  std::string why = TakeLocks(nullptr);
  Answer(done, why.empty() ? Complete() : Fail(why));
}

void BindAttempt::Answer(Done& done, std::string answer) {
  // The pod's bind ends before kube-scheduler reads the answer: a filter it sends right after
  // a failure must not find this bind still running.
  if (std::exchange(began_, false)) p_.cache.EndBind(a_.uid);
  if (std::exchange(waited_, false)) b_.Count(&BindStats::binds_waiting, -1);
  done(std::move(answer));
}

std::string BindAttempt::Complete() {
  if (std::string why = WritePlacement(); !why.empty()) return Fail(why);
  return StampAndBind();
}

std::string BindAttempt::Start() {
  node_ = b_.hooks_.node(a_.node);
  if (node_ == nullptr) return Fail("node " + a_.node + " not found");
  DecideLocks();
  // One bind per pod at a time (kube-scheduler retries a pod whose bind outlived its extender
  // timeout while that bind may still succeed). The placement this instance's filter reserved
  // and has not written yet; without one, the pod must already carry a placement on this node
  // (an earlier attempt wrote it).
  AssumeCache::BindTicket ticket = p_.cache.BeginBind(a_.uid, a_.node, has_devices_);
  if (!ticket.running_on.empty()) {
    b_.Count(&BindStats::bind_busy);
    return Fail("a bind of this pod to " + ticket.running_on + " is still running");
  }
  began_ = true;
  placement_ = std::move(ticket.placement);
  if (has_devices_ && !placement_ &&
      k8s::GetString(*pod_, "/metadata/annotations/hami.io~1vgpu-node") != a_.node) {
    return Fail("no device placement on node " + a_.node +
                " for this pod (it was filtered before a scheduler restart, by another "
                "instance, or its reservation expired); it will be filtered again");
  }
  if (placement_) {
    companion_.patch.resource = &k8s::kPods;
    companion_.patch.ns = a_.ns;
    companion_.patch.name = a_.name;
    companion_.patch.patch = placement_->patch;
  }
  return "";
}

void BindAttempt::Settle() {
  if (!placement_) return;
  if (!companion_.sent) return p_.cache.Forget(a_.uid);
  if (!companion_.result.ok()) {
    if (OutcomeUnknown(companion_.result.status())) {
      // The write may have reached the pod with its answer lost: giving the devices back could
      // hand them to another pod while this one holds them. They stay reserved until the pod's
      // own state (its next event) or the reservation's expiry settles it.
      HAMI_LOG(Warning) << "pod " << key_ << ": placement write on " << a_.node
                        << " has an unknown outcome (" << companion_.result.status().ToString()
                        << "); its devices stay reserved until the pod shows it";
      return;
    }
    return p_.cache.Forget(a_.uid);
  }
  p_.cache.PlacementWritten(a_.uid, ResourceVersionNumberOf(companion_.result->resource_version));
}

std::string BindAttempt::TakeLocks(bool* would_wait) {
  if (needs_lock_ && !locked_) {
    Status s = AcquireNodeLock(would_wait);
    if (would_wait != nullptr && *would_wait) return "";
    if (!s.ok()) {
      Settle();
      return s.message();
    }
    locked_ = true;
  }
  for (const std::string& a : own_locks_) {
    Status s = device::TakeTimestampLock(p_.client, p_.clock, a_.node, a);
    if (!s.ok()) {
      Unlock();
      Settle();
      return s.message();
    }
    own_taken_.push_back(a);
  }
  return "";
}

Status BindAttempt::ReadNode() {
  node_ = b_.hooks_.node(a_.node);
  if (node_ == nullptr) return Status(StatusCode::kNotFound, "node " + a_.node + " disappeared");
  return OkStatus();
}

Status BindAttempt::AcquireNodeLock(bool* would_wait) {
  if (would_wait != nullptr) {
    *would_wait = false;
    if (!b_.TryEnterGate(a_.node)) {
      *would_wait = true;
      return OkStatus();
    }
  } else if (!b_.EnterGate(a_.node, deadline_)) {
    return Status(StatusCode::kUnavailable,
                  "other binds to node " + a_.node + " in this scheduler did not finish in time");
  }
  struct Leave {
    Binder& b;
    const std::string& node;
    ~Leave() { b.LeaveGate(node); }
  } leave{b_, a_.node};
  // Binds queued at the gate read the node afresh from the cache: the copy taken before may
  // be many lock writes old, and a write on it could only conflict. Node events counted from
  // before each read wake the wait below.
  Binder::NodeChangeMark seen = b_.MarkOf(a_.node);
  HAMI_RETURN_IF_ERROR(ReadNode());
  device::NodeLocker::Companion* companion = placement_ ? &companion_ : nullptr;
  for (;;) {
    Status s = p_.locker.Acquire(a_.node, a_.ns, a_.name, node_.get(),
                                 companion != nullptr && !companion->sent ? companion : nullptr);
    if (s.ok()) return s;
    lock_lost_ = lock_lost_ || OutcomeUnknown(s);
    // Contention, a node that kept changing under our writes (another scheduler's binds,
    // kubelet's status), or a lost answer: wait and try again until the deadline.
    bool retry = s.code() == StatusCode::kUnavailable || k8s::IsConflict(s) || OutcomeUnknown(s);
    if (!retry || p_.clock.Now() >= deadline_) {
      if (lock_lost_) (void)p_.locker.Release(a_.node, a_.ns, a_.name);  // only if ours
      return s;
    }
    if (!waited_) {
      waited_ = true;
      auto left = std::chrono::ceil<std::chrono::seconds>(deadline_ - p_.clock.Now());
      HAMI_LOG(Info) << "pod " << key_ << ": waiting up to " << left.count() << " s for node "
                     << a_.node << ": " << s.message();
      b_.Count(&BindStats::lock_waits);
      b_.Count(&BindStats::binds_waiting);  // until the bind answers (Answer)
    }
    if (would_wait != nullptr) {
      *would_wait = true;  // the caller waits elsewhere
      return OkStatus();
    }
    HAMI_RETURN_IF_ERROR(AwaitNodeChange(&seen));
  }
}

Status BindAttempt::AwaitNodeChange(Binder::NodeChangeMark* seen) {
  // The holder's lock is judged again (a read of the node and of the holder pod) when the node
  // changes, else once a second: a waiting bind must not poll the API server, since hundreds
  // may wait at once (at 1,000 nodes, 10 polls a second each quadrupled the API server's CPU
  // per pod).
  const MonoTime until = std::min(deadline_, p_.clock.Now() + std::chrono::seconds(1));
  HAMI_RETURN_IF_ERROR(b_.WaitForNodeChange(a_.node, seen, until));
  return ReadNode();
}

void BindAttempt::Unlock() {
  for (const std::string& a : own_taken_) {
    if (Status s = device::ClearTimestampLock(p_.client, a_.node, a); !s.ok()) {
      HAMI_LOG(Warning) << "node " << a_.node << ": " << a << " not cleared: " << s.ToString();
    }
  }
  own_taken_.clear();
  if (!locked_) return;
  Status s;
  for (int attempt = 0; attempt < 3; ++attempt) {  // a lock left behind stalls the node
    s = p_.locker.Release(a_.node, a_.ns, a_.name);
    if (s.ok()) return;
  }
  HAMI_LOG(Warning) << "node lock on " << a_.node << ": " << s.ToString();
}

std::string BindAttempt::WritePlacement() {
  if (!placement_) return "";
  // Not sent with the lock (the pod already held it), or lost with the connection: alone now
  // (a merge patch, safe to repeat).
  if (!companion_.sent || OutcomeUnknown(companion_.result.status())) {
    companion_.result =
        p_.client.PatchAck(k8s::kPods, a_.ns, a_.name, k8s::PatchType::kMerge, placement_->patch);
  }
  companion_.sent = true;
  Settle();
  if (companion_.result.ok()) return "";
  Unlock();
  return "placement not recorded on the pod: " + companion_.result.status().ToString();
}

std::string BindAttempt::StampAndBind() {
  std::map<std::string, std::string> stamp = {
      {std::string(device::kBindPhaseAnnotation), std::string(device::kBindPhaseAllocating)},
      {std::string(device::kBindTimeAnnotation), std::to_string(p_.clock.NowUnixSeconds())}};
  if (!k8s::GetString(*pod_, "/metadata/annotations/hami.io~1bind-phase").empty()) {
    // A phase left by an earlier attempt would make our fresh lock look finished to other
    // schedulers until the Binding lands: stamp `allocating` first, as upstream always does.
    Result<k8s::WriteAck> stamped =
        k8s::PatchPodAnnotations(p_.client, a_.ns, a_.name, {stamp.begin(), stamp.end()});
    if (!stamped.ok()) {
      Unlock();
      return Fail("bind-phase not written: " + stamped.status().ToString());
    }
  }
  // The Binding carries the stamp: the pod gets its node and `allocating` in one write, so the
  // device plugin never sees one without the other.
  bool unknown = false;
  Status bound = b_.PostBinding(a_.ns, a_.name, a_.uid, a_.node, stamp, &unknown);
  if (!bound.ok() && !unknown) {
    Unlock();
    return Fail(bound.ToString());
  }
  if (!bound.ok()) {
    // The pod may be bound (its device plugin then allocates under our lock and clears it):
    // its devices and the lock stay until the pod shows it or the grace passes.
    p_.cache.MarkUnsettled(a_.uid, HeldLockRef{a_.node, a_.ns, a_.name},
                           b_.options_.bind_outcome_grace);
    b_.Count(&BindStats::bind_unsettled);
    return Fail("Binding's outcome unknown (" + bound.ToString() +
                "); the pod's devices stay reserved until the API server shows it");
  }
  if (!p_.cache.FinishBinding(a_.uid) && placement_) {
    // Nothing should take a reservation away during its bind; the pod's next event restores
    // the entry, but say so, since until then its devices look free.
    HAMI_LOG(Warning) << "pod " << key_ << ": bound to " << a_.node
                      << ", but its reservation had left the ledger meanwhile";
  }
  HAMI_LOG(Info) << "pod " << key_ << ": bound to " << a_.node;
  p_.events.Record(k8s::EventSpec{pod_, "Pod", "Normal", "BindingSucceed",
                                  "Successfully binding node [" + a_.node + "] to " + key_,
                                  b_.options_.scheduler_name, b_.options_.identity});
  return "{}";
}

// ---------------------------------------------------------------------------------------------
// Binder.

Binder::Binder(BinderParts parts, BinderOptions options, BinderHooks hooks)
    : parts_(parts), options_(std::move(options)), hooks_(std::move(hooks)) {}

Binder::~Binder() { Stop(); }

void Binder::Start() {
  if (running_.exchange(true)) return;
  binders_ = std::make_unique<ThreadPool>("hami-binder", 64);
}

void Binder::Stop() {
  if (!running_.exchange(false)) return;
  {
    MutexLock l(changes_mu_);
    ++all_changes_;
  }
  changes_cv_.notify_all();  // binds waiting for a node lock see the binder stopping
  if (binders_) binders_->Stop();
}

std::string Binder::Bind(std::string_view body) {
  std::string out;
  StartBind(body, /*may_wait=*/true, [&out](std::string answer) { out = std::move(answer); });
  return out;
}

void Binder::BindAsync(std::string_view body, std::function<void(std::string)> done) {
  StartBind(body, /*may_wait=*/false, std::move(done));
}

void Binder::StartBind(std::string_view body, bool may_wait,
                       std::function<void(std::string)> done) {
  Result<BindArgs> args = ParseBindArgs(body);
  if (!args.ok()) return done(ErrorReply(args.status().message()));
  const std::string key = PodKey(args->ns, args->name);
  // Every wait below (another bind to the node in this process, another allocation's node
  // lock) shares one budget, so a bind answers within node_lock_wait plus its writes.
  const MonoTime deadline = parts_.clock.Now() + options_.node_lock_wait;
  Count(&BindStats::binds);
  // As for filters: a fresh instance answers once its view of nodes and pods is complete.
  if (Status ready = hooks_.await_ready(); !ready.ok()) {
    Count(&BindStats::bind_errors);
    return done(ErrorReply(ready.message()));
  }
  k8s::ObjectPtr pod = hooks_.pod(key);
  if (!pod || (!args->uid.empty() && k8s::Uid(*pod) != args->uid)) {
    Result<k8s::Object> fresh = k8s::GetPod(parts_.client, args->ns, args->name);
    if (!fresh.ok()) {
      if (k8s::IsNotFound(fresh.status()) && !args->uid.empty()) {
        parts_.cache.ObservePodGone(args->uid, /*unless_binding=*/true);
      }
      Count(&BindStats::bind_errors);
      return done(ErrorReply("pod " + key + ": " + fresh.status().ToString()));
    }
    pod = std::make_shared<const k8s::Object>(std::move(*fresh));
  }
  auto attempt = std::make_shared<BindAttempt>(*this, std::move(*args), std::move(pod), deadline);
  attempt->Run(may_wait, std::move(done));
}

// A lost answer is retried (a Binding is applied at most once: a retry of one that landed is
// refused with 409), and a refusal after a lost answer is checked with a fresh read: a pod on
// `node` is our success. `*unknown` is set when the pod may still end up bound by a request
// that is somewhere on its way.
Status Binder::PostBinding(const std::string& ns, const std::string& name,
                           const std::string& uid, const std::string& node,
                           const std::map<std::string, std::string>& stamp, bool* unknown) {
  *unknown = false;
  bool lost = false;
  Status s;
  for (int attempt = 0; attempt < 3; ++attempt) {
    s = k8s::BindPod(parts_.client, ns, name, uid, node, stamp);
    if (s.ok()) return s;
    if (!OutcomeUnknown(s)) break;
    lost = true;
  }
  if (!lost) return s;
  Result<k8s::Object> fresh = k8s::GetPod(parts_.client, ns, name);
  if (fresh.ok() && (uid.empty() || k8s::Uid(*fresh) == uid)) {
    std::string on = k8s::GetString(*fresh, "/spec/nodeName");
    if (on == node) {
      HAMI_LOG(Info) << "pod " << ns << "/" << name << ": the Binding whose answer was lost "
                     << "had landed on " << node;
      Count(&BindStats::bind_recovered);
      return OkStatus();
    }
    if (!on.empty()) return s;  // bound elsewhere: nothing of ours can land any more
  } else if (fresh.ok() || k8s::IsNotFound(fresh.status())) {
    return s;  // another pod of that name, or none: no Binding of ours can land
  }
  *unknown = true;
  return s;
}

void Binder::Count(uint64_t BindStats::*counter, int delta) {
  {
    MutexLock l(stats_mu_);
    stats_.*counter += static_cast<uint64_t>(static_cast<int64_t>(delta));
  }
  if (hooks_.stats_changed) hooks_.stats_changed();
}

BindStats Binder::stats() const {
  MutexLock l(stats_mu_);
  return stats_;
}

void Binder::NodeChanged(const std::string& node, bool deleted) {
  {
    MutexLock l(changes_mu_);
    if (deleted) {
      node_changes_.erase(node);  // a waiter's mark no longer matches: it looks and finds none
    } else {
      ++node_changes_[node];
    }
  }
  changes_cv_.notify_all();
}

Binder::NodeChangeMark Binder::MarkOf(const std::string& node) {
  MutexLock l(changes_mu_);
  return MarkOfLocked(node);
}

Binder::NodeChangeMark Binder::MarkOfLocked(const std::string& node) const {
  auto it = node_changes_.find(node);
  return NodeChangeMark{it == node_changes_.end() ? 0 : it->second, all_changes_};
}

Status Binder::WaitForNodeChange(const std::string& node, NodeChangeMark* seen, MonoTime until) {
  {
    UniqueLock l(changes_mu_);
    for (;;) {
      NodeChangeMark now = MarkOfLocked(node);
      if (now.node != seen->node || now.all != seen->all || parts_.clock.Now() >= until) break;
      parts_.clock.WaitUntil(changes_cv_, l.native(), until);
    }
    *seen = MarkOfLocked(node);
  }
  if (!running_.load()) return Status(StatusCode::kCancelled, "scheduler stopping");
  return OkStatus();
}

bool Binder::EnterGate(const std::string& node, MonoTime deadline) {
  UniqueLock l(gates_mu_);
  while (busy_nodes_.count(node) > 0) {
    if (parts_.clock.Now() >= deadline) return false;
    parts_.clock.WaitUntil(gates_cv_, l.native(), deadline);
  }
  busy_nodes_.insert(node);
  return true;
}

bool Binder::TryEnterGate(const std::string& node) {
  MutexLock l(gates_mu_);
  return busy_nodes_.insert(node).second;
}

void Binder::LeaveGate(const std::string& node) {
  {
    MutexLock l(gates_mu_);
    busy_nodes_.erase(node);
  }
  gates_cv_.notify_all();
}

}  // namespace hami::extender
