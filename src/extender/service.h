// SchedulerService: the `hami-scheduler` process minus flag parsing. It keeps the cluster view
// (pods, nodes, ResourceQuotas through informers; node registrations judged by the handshake
// rules), answers the scheduler-extender verbs and the admission webhook, and renders metrics.
//
//   auto svc = SchedulerService::Create(client, device_config, options).value();
//   HAMI_RETURN_IF_ERROR(svc->Start());
//   svc->RegisterRoutes(*https_server);          // POST /filter, /bind, /webhook; /readyz check
//   metrics_server->SetMetricsHandler([&] { return svc->Metrics(); });
//
// Filter (kube-scheduler `filterVerb`): places the pod on one of the offered nodes, reserves the
// devices in the ledger at once (so concurrent filters never hand out the same slice), then
// writes the placement onto the pod (`hami.io/vgpu-node`, `hami.io/vgpu-time`, the vendors'
// device lists; label `hami.io/vgpu-node`). Placement runs under a shared lock; the reservation
// is taken under the exclusive lock after checking nothing changed meanwhile (else the chosen
// node is re-checked, and in the worst case the pod is placed again).
//
// Bind (`bindVerb`): takes the HAMi node lock (waiting up to node_lock_wait while another pod's
// allocation is in progress on that node) and creates the Binding, which carries
// `hami.io/bind-phase: allocating` and `hami.io/bind-time` (the API server copies a Binding's
// annotations onto the pod; a pod with a phase from an earlier attempt is stamped first). The lock
// is released by the node's device plugin when allocation ends; the service also releases it when
// it sees the holder finish (bind-phase success/failed), end, or disappear, so locks are held no
// longer than an allocation takes. Over HTTP a bind that has to wait for a busy node answers
// from a binder thread (BindAsync, the route's deferred answer): waiting binds hold no HTTP
// worker, so filters, webhooks and probes keep being served.
//
// Readiness: informers synced, first registration pass done, and leader (when leader election
// is on: like upstream, the service follows the Lease its kube-scheduler holds and leads when the
// holder identity starts with its own identity). Filter requests wait for readiness.
//
// Thread safety: Filter/Bind/Webhook/Metrics may be called concurrently from HTTP workers.
// Start/Stop from the owning thread.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <unordered_map>
#include <string_view>
#include <thread>
#include <vector>

#include "common/clock.h"
#include "common/status.h"
#include "common/thread_annotations.h"
#include "common/thread_pool.h"
#include "device/config.h"
#include "device/vendor.h"
#include "extender/event_recorder.h"
#include "extender/node_locker.h"
#include "extender/quota.h"
#include "k8s/informer.h"
#include "k8s/leader_election.h"
#include "k8s/rest_client.h"
#include "k8s/work_queue.h"
#include "scheduler/assume_cache.h"
#include "scheduler/ledger.h"
#include "scheduler/placement.h"

namespace hami::net {
class HttpServer;
}

namespace hami::scheduler {

struct SchedulerOptions {
  std::string scheduler_name = "hami-scheduler";  // --scheduler-name
  NodePolicy node_policy = NodePolicy::kBinpack;  // --node-scheduler-policy
  std::string gpu_policy = "spread";              // --gpu-scheduler-policy
  bool force_overwrite_default_scheduler = true;  // --force-overwrite-default-scheduler
  std::string node_label_selector;                // --node-label-selector (k=v,...)
  bool legacy_metrics = false;                    // --legacy-metrics
  // Leader election (--leader-elect*): follow this Lease; lead when the holder starts with
  // `identity` (the host name, as kube-scheduler's identity is "<host>_<uuid>").
  bool leader_elect = false;
  std::string lease_namespace = "kube-system";
  std::string lease_name = "hami-scheduler";
  std::string identity;
  std::chrono::milliseconds lease_poll{2000};
  // Own pod (POD_NAMESPACE/POD_NAME) to label hami.io/scheduler-role=leader|follower; optional.
  std::string pod_namespace, pod_name;
  int64_t node_lock_timeout_seconds = 300;  // --node-lock-timeout: lock expiry
  // --node-lock-retry-timeout: how long a bind waits for another allocation on the node.
  std::chrono::milliseconds node_lock_wait{28000};
  // The device plugin clears the node lock when its Allocate ends. The service clears a lock
  // itself only when its holder has finished (bind-phase success/failed, pod ended or gone) and
  // the lock is still there this long afterwards: no duplicate writes in the normal case, and a
  // plugin that died mid-way does not keep the node locked for the whole expiry.
  std::chrono::milliseconds lock_release_grace{2000};
  std::chrono::seconds register_interval{15};
  std::chrono::seconds handshake_grace{60};
  int64_t reservation_ttl_seconds = 300;
  // A bind that gave up with its Binding's outcome unknown (the answer was lost: the pod may be
  // bound) keeps the pod's devices reserved this long, or until the pod shows it bound or is
  // deleted; its filters answer "waiting" meanwhile. Longer than any request can linger.
  std::chrono::milliseconds bind_outcome_grace{30000};
  // How long a filter waits for the service to become ready before answering an error.
  std::chrono::milliseconds filter_ready_wait{25000};
  std::string version = "dev";  // hami_build_info
  // --enable-ascend / --enable-iluvatar: schedule the vnpus / iluvatars config sections.
  device::VendorRegistry::Options vendors;
};

// Counters for logs, metrics and tests.
struct ServiceStats {
  uint64_t filters = 0, filter_fit = 0, filter_no_fit = 0, filter_errors = 0;
  uint64_t replaced_after_race = 0;  // placements redone because the ledger changed meanwhile
  uint64_t binds = 0, bind_errors = 0, lock_waits = 0;
  uint64_t stale_pod_events = 0;  // informer events older than our own write, ignored
  uint64_t locks_released = 0;
  uint64_t lock_releases_queued = 0;  // finished holders whose node lock was queued for release
  uint64_t pod_events = 0;            // pod informer events handled (stale ones included)
  int64_t last_pod_version = 0;  // highest numeric resourceVersion among the pod events handled
  uint64_t bind_busy = 0;        // filters and binds refused: a bind of the pod was still running
  uint64_t bind_unsettled = 0;   // binds that ended with the Binding's outcome unknown
  uint64_t bind_recovered = 0;   // binds whose lost answer turned out to be a success
  uint64_t binds_waiting = 0;    // binds waiting for another allocation's node lock right now
};

class SchedulerService {
 public:
  // `client` and `clock` must outlive the service. Fails on a device config without vendors.
  static Result<std::unique_ptr<SchedulerService>> Create(k8s::RestClient& client,
                                                          const device::DeviceConfig& config,
                                                          SchedulerOptions options,
                                                          const Clock* clock = nullptr);
  ~SchedulerService();
  SchedulerService(const SchedulerService&) = delete;
  SchedulerService& operator=(const SchedulerService&) = delete;

  // Starts informers and the controllers (registration, lock releases, leader following).
  Status Start();
  void Stop();

  // Extender and webhook verbs: request body -> response body (JSON). Never throw.
  std::string Filter(std::string_view body);
  std::string Bind(std::string_view body);
  // Bind that never holds the calling thread through a wait for a busy node: `done` gets the
  // answer, before BindAsync returns when the bind needed no wait, else later from a binder
  // thread (the HTTP route answers this way, so a wait costs no HTTP worker).
  void BindAsync(std::string_view body, std::function<void(std::string)> done);
  // InvalidArgument for a body that is not an AdmissionReview (HTTP 400).
  Result<std::string> Webhook(std::string_view body);
  std::string Metrics();

  // POST /filter, /bind, /webhook and the readiness check.
  void RegisterRoutes(net::HttpServer& server);

  bool Ready() const;
  bool IsLeader() const { return leader_.load(); }
  // Blocks until ready or `timeout`; true when ready.
  bool WaitReady(std::chrono::milliseconds timeout);
  // One registration pass over every cached node (what the periodic loop runs).
  void ReconcileNodes();

  // Inspection (tests, debugging).
  ServiceStats stats() const;
  std::string LedgerDump() const;
  Status CheckLedger() const;
  std::vector<OverCommit> OverCommitted() const;
  const device::VendorRegistry& vendors() const { return vendors_; }

 private:
  friend class BindAttempt;  // one bind's steps (service_bind.cc)

  // What the registration pass knows of one vendor on one node.
  struct VendorNodeState {
    int64_t allocatable = -1;  // -1: never seen
    // Allocatable dropped to 0 after being positive: out until the count comes back (upstream
    // re-admits such a node on the next pass and drops it again a minute later).
    bool plugin_lost = false;
    bool in_ledger = false;  // its devices are scheduled
  };
  struct NodeState {
    std::map<std::string, VendorNodeState> vendors;  // by vendor key
    bool in_ledger = false;
  };

  SchedulerService(k8s::RestClient& client, device::DeviceConfig config,
                   device::VendorRegistry vendors, SchedulerOptions options, const Clock* clock);

  // Informer handlers (service.cc).
  void OnPod(const k8s::ObjectPtr& pod, bool deleted);
  void OnNode(const k8s::ObjectPtr& node, bool deleted);
  void OnQuota(const k8s::ObjectPtr& quota, bool deleted);
  const k8s::Object* CachedNode(const std::string& name, k8s::ObjectPtr* hold) const;
  void Count(uint64_t ServiceStats::*counter);
  void Uncount(uint64_t ServiceStats::*counter);

  // Filter (service_filter.cc).
  std::string FilterError(std::string message);
  std::string FilterSimulation(const std::string& pod_json, const nlohmann::json& nodes);
  // Takes an earlier placement (node, device lists, time, label) off the unbound pod: a merge
  // patch with the pod's uid as precondition. OK when it is gone.
  Status WithdrawPlacement(const PodSpec& spec);
  std::string PlaceAndAnswer(const k8s::ObjectPtr& pod, PodSpec& spec, const std::string& key,
                             const std::vector<std::string_view>& nodes);
  std::string RecordPlacement(const k8s::ObjectPtr& pod, const PodSpec& spec,
                              const std::string& key, const Decision& d);
  void RecordFilterEvent(const k8s::ObjectPtr& pod, bool ok, const std::string& message);
  std::vector<QuotaRoom> QuotaRoomOf(const Ledger& ledger, const PodSpec& spec) const;

  // The controllers (service_nodes.cc): one worker takes keys from queue_ and runs the
  // controller each names: "node/<name>" (that node's registration), "resync" (every node's,
  // again every register_interval), "release/<node>/<ns>/<pod>" (a finished holder's node lock,
  // after the grace), "lease" (leader following, every lease_poll).
  void RunWorker();
  void Process(const std::string& key);
  void Resync();
  void FollowLease();
  // Clears the lock if ns/pod still holds it; false when a write failed (retried, rate-limited).
  bool ReleaseLock(const std::string& node, const std::string& ns, const std::string& pod);
  void ReconcileNode(const k8s::Object& node);
  // Judges one vendor of a node (registration, handshake, allocatable): true when healthy.
  // Handshake writes go to `writes`; an unhealthy vendor's devices leave `obj`, and `why` says
  // why.
  bool JudgeVendor(const device::Vendor& vendor, const k8s::Object& node,
                   const device::Annotations& annos, int64_t now, VendorNodeState& vs,
                   NodeObject& obj, k8s::AnnotationChanges& writes, std::string& why);
  void SetLeader(bool leader);
  void MaybeReleaseLock(const k8s::Object& pod, bool gone);
  // Queues a check that clears `node`'s lock if `ns/pod` still holds it after the grace.
  void QueueLockRelease(const std::string& node, const std::string& ns, const std::string& pod);

  // Bind (service_bind.cc).
  void StartBind(std::string_view body, bool may_wait, std::function<void(std::string)> done);
  // The Binding, with lost answers resolved where possible.
  Status PostBinding(const std::string& ns, const std::string& name, const std::string& uid,
                     const std::string& node, const std::map<std::string, std::string>& stamp,
                     bool* unknown);
  // How far one bind's lock taking got across its calls (see AcquireNodeLock).
  struct LockWait {
    bool waited = false;  // the wait was logged and counted
    bool lost = false;    // a lock write's answer was lost (the lock may be ours)
  };
  // With `would_wait` set, returns at the first need to wait (another bind to the node in this
  // process, or another allocation's lock) with *would_wait true; the caller continues with a
  // blocking call elsewhere.
  Status AcquireNodeLock(const std::string& node, const std::string& ns, const std::string& pod,
                         MonoTime deadline, const k8s::Object** cached, k8s::ObjectPtr* hold,
                         NodeLocker::Companion* companion, LockWait* state,
                         bool* would_wait = nullptr);
  // How many events a node (and all nodes: Stop) had when a bind last read it.
  struct NodeChangeMark {
    uint64_t node = 0, all = 0;
  };
  Status WaitForNodeChange(const std::string& node, NodeChangeMark* seen,
                           const k8s::Object** cached, k8s::ObjectPtr* hold, MonoTime until);
  bool EnterBindGate(const std::string& node, MonoTime deadline);
  bool TryEnterBindGate(const std::string& node);
  void LeaveBindGate(const std::string& node);

  k8s::RestClient& client_;
  const device::DeviceConfig config_;
  const device::VendorRegistry vendors_;
  const SchedulerOptions options_;
  RealClock system_clock_;
  const Clock& clock_;
  const PlacementEngine engine_;
  NodeLocker locker_;
  EventRecorder events_;

  // The allocation view and every pod's place in the filter/bind lifecycle.
  AssumeCache cache_;
  // Namespace quotas; read with the cache's ledger (lock order: the cache's lock, then this).
  mutable Mutex quota_mu_;
  QuotaBook quota_ GUARDED_BY(quota_mu_);

  std::unique_ptr<k8s::Informer> pods_, nodes_, quotas_;

  // The controllers' work (keys above); rate-limited retries of failed lock releases.
  std::unique_ptr<k8s::WorkQueue> queue_;
  std::unique_ptr<Cancellation> stop_;         // ends the worker's wait for the first node list
  std::unique_ptr<k8s::LeaderElector> lease_;  // read only: the service follows the lease
  // What the registration pass knows of each node (the worker writes it; node deletions erase).
  Mutex node_state_mu_;
  std::map<std::string, NodeState> node_state_ GUARDED_BY(node_state_mu_);

  // Bind waits for a node's lock here. Each node's events count on their own, so a wait wakes
  // for its node only (a global count sent every waiting bind back to the API server on any
  // node's heartbeat); Stop counts for all.
  Mutex lock_wait_mu_;
  std::condition_variable lock_wait_cv_;
  std::unordered_map<std::string, uint64_t> node_changes_ GUARDED_BY(lock_wait_mu_);
  uint64_t all_node_changes_ GUARDED_BY(lock_wait_mu_) = 0;
  void NoteNodeChange(const std::string& node, bool deleted = false) EXCLUDES(lock_wait_mu_);
  void NoteEveryNodeChanged() EXCLUDES(lock_wait_mu_);
  NodeChangeMark NodeChangeMarkOf(const std::string& node) const REQUIRES(lock_wait_mu_);
  // Binds to one node take its lock one at a time in this process (as upstream's in-process
  // per-node mutex): concurrent binds would all race for the annotation the moment it is
  // released, and all but one lose a write and read again. A bind waits at the gate within its
  // own deadline.
  Mutex bind_gates_mu_;
  std::condition_variable bind_gates_cv_;
  std::set<std::string> busy_nodes_ GUARDED_BY(bind_gates_mu_);  // a bind is past the gate

  std::atomic<bool> started_{false};
  std::atomic<bool> registered_once_{false};
  std::atomic<bool> leader_{false};
  mutable Mutex ready_mu_;
  std::condition_variable ready_cv_;

  mutable Mutex stats_mu_;
  ServiceStats stats_ GUARDED_BY(stats_mu_);

  std::thread worker_;
  // Binds that must wait for a busy node continue here (BindAsync).
  std::unique_ptr<ThreadPool> binders_;
};

}  // namespace hami::scheduler
