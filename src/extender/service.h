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
// The rest is done by parts that each own their state, queue and thread, wired here:
//   Binder (binder.h)          the bind verb: node lock, placement write, Binding. Over HTTP a
//                              bind that has to wait for a busy node answers from a binder
//                              thread, so waiting binds hold no HTTP worker.
//   NodeRegistrar              which nodes' devices are scheduled (registration, handshake).
//   LockReleaser               node locks a finished allocation's device plugin left behind.
//   LeaseFollower              leader or not (the Lease its kube-scheduler holds).
//
// Readiness: informers synced, first registration pass done, and leader (when leader election
// is on). Filter and bind requests wait for readiness.
//
// Thread safety: Filter/Bind/Webhook/Metrics may be called concurrently from HTTP workers.
// Start (at most once) and Stop from the owning thread.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "common/change_signal.h"
#include "common/clock.h"
#include "common/status.h"
#include "common/thread_annotations.h"
#include "device/config.h"
#include "device/node_locker.h"
#include "device/vendor.h"
#include "extender/binder.h"
#include "extender/event_recorder.h"
#include "extender/lease_follower.h"
#include "extender/lock_releaser.h"
#include "extender/node_registrar.h"
#include "extender/quota.h"
#include "k8s/informer.h"
#include "k8s/rest_client.h"
#include "scheduler/assume_cache.h"
#include "scheduler/ledger.h"
#include "scheduler/placement.h"

namespace hami::net {
class HttpServer;
}

namespace hami::extender {

struct SchedulerOptions {
  std::string scheduler_name = "hami-scheduler";  // --scheduler-name
  // --node-scheduler-policy
  scheduler::NodePolicy node_policy = scheduler::NodePolicy::kBinpack;
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
  std::string Bind(std::string_view body) { return binder_.Bind(body); }
  // Bind that never holds the calling thread through a wait for a busy node (Binder::BindAsync;
  // the HTTP route answers this way, so a wait costs no HTTP worker).
  void BindAsync(std::string_view body, std::function<void(std::string)> done) {
    binder_.BindAsync(body, std::move(done));
  }
  // InvalidArgument for a body that is not an AdmissionReview (HTTP 400).
  Result<std::string> Webhook(std::string_view body);
  std::string Metrics();

  // POST /filter, /bind, /webhook and the readiness check.
  void RegisterRoutes(net::HttpServer& server);

  bool Ready() const;
  bool IsLeader() const { return lease_.IsLeader(); }
  // Blocks until ready or `timeout`; true when ready.
  bool WaitReady(std::chrono::milliseconds timeout);
  // One registration pass over every cached node (what the periodic loop runs).
  void ReconcileNodes() { registrar_.ReconcileNodes(); }

  // Inspection (tests, debugging).
  ServiceStats stats() const;
  // Blocks until `done()` holds or `timeout` of real time passed (whatever clock the service
  // was given: the bound is a failure, not a decision); true when it holds. `done` is looked at
  // again after every change of stats() and of leadership, and after each registration pass;
  // it runs with no lock of the service held. Not told of: an informer's first sync (the
  // informer tells no one), so a wait for Ready() must know the informers synced first.
  bool WaitFor(const std::function<bool()>& done, std::chrono::milliseconds timeout) const;
  std::string LedgerDump() const;
  Status CheckLedger() const;
  std::vector<scheduler::OverCommit> OverCommitted() const;
  const device::VendorRegistry& vendors() const { return vendors_; }

 private:
  SchedulerService(k8s::RestClient& client, device::DeviceConfig config,
                   device::VendorRegistry vendors, SchedulerOptions options, const Clock* clock);

  // Informer handlers (service.cc).
  void OnPod(const k8s::ObjectPtr& pod, bool deleted);
  void OnNode(const k8s::ObjectPtr& node, bool deleted);
  void OnQuota(const k8s::ObjectPtr& quota, bool deleted);
  k8s::ObjectPtr CachedNode(const std::string& name) const;
  void Count(uint64_t ServiceStats::*counter);
  // Wakes WaitFor: something it promises to look again after has changed. Called with no lock
  // that a `done` of WaitFor might take held.
  void Changed();
  // OK once ready (waiting up to filter_ready_wait), else why not (Unavailable).
  Status AwaitReady();

  // Filter (service_filter.cc).
  std::string FilterError(std::string message);
  std::string FilterSimulation(const std::string& pod_json, const nlohmann::json& nodes);
  // Takes an earlier placement (node, device lists, time, label) off the unbound pod: a merge
  // patch with the pod's uid as precondition. OK when it is gone.
  Status WithdrawPlacement(const scheduler::PodSpec& spec);
  std::string PlaceAndAnswer(const k8s::ObjectPtr& pod, scheduler::PodSpec& spec,
                             const std::string& key, const std::vector<std::string_view>& nodes);
  std::string RecordPlacement(const k8s::ObjectPtr& pod, const scheduler::PodSpec& spec,
                              const std::string& key, const scheduler::Decision& d);
  void RecordFilterEvent(const k8s::ObjectPtr& pod, bool ok, const std::string& message);
  std::vector<scheduler::QuotaRoom> QuotaRoomOf(const scheduler::Ledger& ledger,
                                                const scheduler::PodSpec& spec) const;

  k8s::RestClient& client_;
  const device::DeviceConfig config_;
  const device::VendorRegistry vendors_;
  const SchedulerOptions options_;
  RealClock system_clock_;
  const Clock& clock_;
  const scheduler::PlacementEngine engine_;
  device::NodeLocker locker_;
  EventRecorder events_;

  // The allocation view and every pod's place in the filter/bind lifecycle.
  scheduler::AssumeCache cache_;
  // Namespace quotas; read with the cache's ledger (lock order: the cache's lock, then this).
  mutable Mutex quota_mu_;
  QuotaBook quota_ GUARDED_BY(quota_mu_);

  std::unique_ptr<k8s::Informer> pods_, nodes_, quotas_;

  // The parts, each with its own state, queue and thread (see their headers): leader
  // following, node registration, releasing locks finished holders left, and binds.
  LeaseFollower lease_;
  NodeRegistrar registrar_;
  LockReleaser releaser_;
  Binder binder_;

  std::atomic<bool> started_{false};
  // Readiness has several sources; waiters look again when one of the parts says so.
  mutable Mutex ready_mu_;
  std::condition_variable ready_cv_;

  mutable Mutex stats_mu_;
  ServiceStats stats_ GUARDED_BY(stats_mu_);  // the filter's and the informers' counters

  mutable ChangeSignal changes_;  // WaitFor's wake-ups, told by Changed()
};

}  // namespace hami::extender
