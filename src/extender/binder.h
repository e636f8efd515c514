// Binder: the scheduler extender's bind verb. One bind of a pod to a node takes the node's
// allocation lock (HAMi's shared `hami.io/mutex.lock`, or a vendor's own), writes the placement
// the filter reserved onto the pod, and creates the Binding, which carries
// `hami.io/bind-phase: allocating` and `hami.io/bind-time` (the API server copies a Binding's
// annotations onto the pod, so the device plugin never sees the node without the phase). On
// every way out the AssumeCache learns what became of the placement.
//
//   Binder binder(parts, options, hooks);
//   binder.Start();
//   std::string answer = binder.Bind(body);       // may wait for a busy node on this thread
//   binder.BindAsync(body, done);                 // a wait continues on a binder thread
//   binder.NodeChanged("node-a", false);           // from the node informer: waiters look again
//   binder.Stop();
//
// Waiting: binds to one node enter it one at a time in this process (concurrent binds would all
// race for the annotation the moment it is released); a bind then waits while another
// allocation holds the node's lock, waking on that node's events or once a second (the lock
// may expire or its holder die without an event). Every wait of one bind shares one budget,
// node_lock_wait, so a bind answers within it plus its writes.
//
// Thread safety: Bind/BindAsync/NodeChanged/stats from any thread; Start/Stop from the owner's.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <string_view>
#include <unordered_map>

#include "common/clock.h"
#include "common/status.h"
#include "common/thread_annotations.h"
#include "common/thread_pool.h"
#include "device/node_locker.h"
#include "device/vendor.h"
#include "extender/event_recorder.h"
#include "k8s/object_fwd.h"
#include "k8s/rest_client.h"
#include "scheduler/assume_cache.h"

namespace hami::extender {

// What the binder works with; every one must outlive it.
struct BinderParts {
  k8s::RestClient& client;
  const Clock& clock;
  const device::VendorRegistry& vendors;
  scheduler::AssumeCache& cache;
  device::NodeLocker& locker;
  EventRecorder& events;
};

struct BinderOptions {
  std::string scheduler_name = "hami-scheduler";  // events' reporting component
  std::string identity;                           // events' reporting instance
  // How long a bind waits, in all, for other binds and allocations on its node.
  std::chrono::milliseconds node_lock_wait{28000};
  // A bind whose Binding's answer was lost keeps the pod's devices reserved this long, or until
  // the pod shows it bound or is deleted.
  std::chrono::milliseconds bind_outcome_grace{30000};
};

// The service's views the binder reads, and what it tells the service.
struct BinderHooks {
  // OK once the service may answer binds (waiting for it a while), else why not.
  std::function<Status()> await_ready;
  // The informer caches' current copies ("ns/name" for pods); null when unknown.
  std::function<k8s::ObjectPtr(const std::string&)> pod, node;
  // Optional: runs after each change of stats(), on the thread that made it, with no lock of
  // the binder held (whoever waits on the counters looks again).
  std::function<void()> stats_changed{};
};

struct BindStats {
  uint64_t binds = 0, bind_errors = 0, lock_waits = 0;
  uint64_t bind_busy = 0;       // binds refused: a bind of the pod was still running
  uint64_t bind_unsettled = 0;  // binds that ended with the Binding's outcome unknown
  uint64_t bind_recovered = 0;  // binds whose lost answer turned out to be a success
  uint64_t binds_waiting = 0;   // binds waiting for another allocation's node lock right now
};

class Binder {
 public:
  Binder(BinderParts parts, BinderOptions options, BinderHooks hooks);
  ~Binder();
  Binder(const Binder&) = delete;
  Binder& operator=(const Binder&) = delete;

  void Start();
  // Waiting binds give up; no bind continues afterwards.
  void Stop();

  // kube-scheduler's ExtenderBindingArgs -> ExtenderBindingResult (JSON). Never throws.
  std::string Bind(std::string_view body);
  // Bind that never holds the calling thread through a wait for a busy node: `done` gets the
  // answer, before BindAsync returns when the bind needed no wait, else later from a binder
  // thread.
  void BindAsync(std::string_view body, std::function<void(std::string)> done);

  // A node event (`deleted`: the node is gone): binds waiting for its lock look again.
  void NodeChanged(const std::string& node, bool deleted);

  BindStats stats() const;

 private:
  friend class BindAttempt;  // one bind's steps (binder.cc)

  // How many events a node (and all nodes: Stop) had when a bind last read it.
  struct NodeChangeMark {
    uint64_t node = 0, all = 0;
  };

  void StartBind(std::string_view body, bool may_wait, std::function<void(std::string)> done);
  // The Binding, with lost answers resolved where possible (`*unknown`: it may still land).
  Status PostBinding(const std::string& ns, const std::string& name, const std::string& uid,
                     const std::string& node, const std::map<std::string, std::string>& stamp,
                     bool* unknown);
  void Count(uint64_t BindStats::*counter, int delta = 1);

  // The per-node gate: one bind per node past it at a time in this process.
  bool EnterGate(const std::string& node, MonoTime deadline);
  bool TryEnterGate(const std::string& node);
  void LeaveGate(const std::string& node);
  NodeChangeMark MarkOf(const std::string& node) EXCLUDES(changes_mu_);
  NodeChangeMark MarkOfLocked(const std::string& node) const REQUIRES(changes_mu_);
  // Waits until `node` had an event since `*seen`, the binder stops, or `until`; then updates
  // `*seen`. Cancelled when the binder is stopping.
  Status WaitForNodeChange(const std::string& node, NodeChangeMark* seen, MonoTime until);

  BinderParts parts_;
  const BinderOptions options_;
  const BinderHooks hooks_;
  std::atomic<bool> running_{false};

  mutable Mutex stats_mu_;
  BindStats stats_ GUARDED_BY(stats_mu_);

  // Node events, counted per node so a wait wakes for its own node only; Stop counts for all.
  Mutex changes_mu_;
  std::condition_variable changes_cv_;
  std::unordered_map<std::string, uint64_t> node_changes_ GUARDED_BY(changes_mu_);
  uint64_t all_changes_ GUARDED_BY(changes_mu_) = 0;

  Mutex gates_mu_;
  std::condition_variable gates_cv_;
  std::set<std::string> busy_nodes_ GUARDED_BY(gates_mu_);  // a bind is past the gate

  // Binds that must wait for a busy node continue here (BindAsync).
  std::unique_ptr<ThreadPool> binders_;
};

}  // namespace hami::extender
