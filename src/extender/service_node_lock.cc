// SchedulerService's node lock taking for binds: one bind per node at a time in this process,
// then HAMi's node lock, waiting while another allocation holds it (see service.h).
#include <algorithm>

#include "common/log.h"
#include "extender/service.h"
#include "extender/service_internal.h"
#include "k8s/api_error.h"

namespace hami::scheduler {

using service_internal::OutcomeUnknown;

bool SchedulerService::EnterBindGate(const std::string& node, MonoTime deadline) {
  UniqueLock l(bind_gates_mu_);
  while (busy_nodes_.count(node) > 0) {
    if (clock_.Now() >= deadline) return false;
    clock_.WaitUntil(bind_gates_cv_, l.native(), deadline);
  }
  busy_nodes_.insert(node);
  return true;
}

bool SchedulerService::TryEnterBindGate(const std::string& node) {
  MutexLock l(bind_gates_mu_);
  return busy_nodes_.insert(node).second;
}

void SchedulerService::LeaveBindGate(const std::string& node) {
  {
    MutexLock l(bind_gates_mu_);
    busy_nodes_.erase(node);
  }
  bind_gates_cv_.notify_all();
}

// Takes `node`'s allocation lock for ns/pod by `deadline`: one bind per node at a time in this
// process, then the lock itself, waiting while another allocation holds it. A write whose
// answer was lost is tried again (the lock held by this pod counts as taken); when the bind
// gives up after one, a lock it may have taken is cleared.
Status SchedulerService::AcquireNodeLock(const std::string& node, const std::string& ns,
                                         const std::string& pod, MonoTime deadline,
                                         const k8s::Object** cached, k8s::ObjectPtr* hold,
                                         NodeLocker::Companion* companion, LockWait* state,
                                         bool* would_wait) {
  if (would_wait != nullptr) {
    *would_wait = false;
    if (!TryEnterBindGate(node)) {
      *would_wait = true;
      return OkStatus();
    }
  } else if (!EnterBindGate(node, deadline)) {
    return Status(StatusCode::kUnavailable,
                  "other binds to node " + node + " in this scheduler did not finish in time");
  }
  struct Leave {
    SchedulerService* self;
    const std::string& node;
    ~Leave() { self->LeaveBindGate(node); }
  } leave{this, node};
  // Binds queued at the gate read the node afresh from the cache: the copy taken before may
  // be many lock writes old, and a write on it could only conflict. Node events counted from
  // before each read wake the wait below.
  NodeChangeMark seen;
  {
    MutexLock l(lock_wait_mu_);
    seen = NodeChangeMarkOf(node);
  }
  if ((*cached = CachedNode(node, hold)) == nullptr) {
    return Status(StatusCode::kNotFound, "node " + node + " disappeared");
  }
  for (;;) {
    Status s = locker_.Acquire(node, ns, pod, *cached,
                               companion != nullptr && !companion->sent ? companion : nullptr);
    if (s.ok()) return s;
    state->lost = state->lost || OutcomeUnknown(s);
    // Contention, a node that kept changing under our writes (another scheduler's binds,
    // kubelet's status), or a lost answer: wait and try again until the deadline.
    bool retry = s.code() == StatusCode::kUnavailable || k8s::IsConflict(s) || OutcomeUnknown(s);
    if (!retry || clock_.Now() >= deadline) {
      if (state->lost) (void)locker_.Release(node, ns, pod);  // best effort: only if ours
      return s;
    }
    if (!state->waited) {
      state->waited = true;
      auto left = std::chrono::ceil<std::chrono::seconds>(deadline - clock_.Now());
      HAMI_LOG(Info) << "pod " << ns << "/" << pod << ": waiting up to " << left.count()
                     << " s for node " << node << ": " << s.message();
      Count(&ServiceStats::lock_waits);
      Count(&ServiceStats::binds_waiting);  // until the bind answers (BindAttempt::Answer)
    }
    if (would_wait != nullptr) {
      *would_wait = true;  // the caller waits elsewhere
      return OkStatus();
    }
    // The holder's lock is judged again (a read of the node and of the holder pod) when the
    // node changes, else once a second: a waiting bind must not poll the API server, since
    // hundreds may wait at once (at 1,000 nodes, 10 polls a second each quadrupled the API
    // server's CPU per pod).
    HAMI_RETURN_IF_ERROR(WaitForNodeChange(
        node, &seen, cached, hold, std::min(deadline, clock_.Now() + std::chrono::seconds(1))));
  }
}

// Waits for an event of this node since the last cache read (its lock cleared), the service
// stopping, or `until` (a lock expires, or its holder dies, without an event), then reads the
// node again from the cache.
Status SchedulerService::WaitForNodeChange(const std::string& node, NodeChangeMark* seen,
                                           const k8s::Object** cached, k8s::ObjectPtr* hold,
                                           MonoTime until) {
  {
    UniqueLock l(lock_wait_mu_);
    for (;;) {
      NodeChangeMark now = NodeChangeMarkOf(node);
      if (now.node != seen->node || now.all != seen->all || clock_.Now() >= until) break;
      clock_.WaitUntil(lock_wait_cv_, l.native(), until);
    }
    *seen = NodeChangeMarkOf(node);
  }
  if (!started_.load()) return Status(StatusCode::kCancelled, "scheduler stopping");
  if ((*cached = CachedNode(node, hold)) == nullptr) {
    return Status(StatusCode::kNotFound, "node " + node + " disappeared");
  }
  return OkStatus();
}

}  // namespace hami::scheduler
