// SchedulerService: lifecycle, informer handlers and inspection. The filter is in
// service_filter.cc, the webhook, metrics and routes in service_http.cc; binds, registration,
// lock releases and leader following are the parts of binder.h, node_registrar.h,
// lock_releaser.h and lease_follower.h.
#include "extender/service.h"

#include <time.h>

#include <algorithm>
#include <nlohmann/json.hpp>

#include "common/log.h"
#include "extender/k8s_objects.h"
#include "extender/service_internal.h"
#include "k8s/object.h"

namespace hami::extender {

using scheduler::AssumeCache;
using scheduler::EngineOptions;
using scheduler::GpuPolicy;
using scheduler::Ledger;
using scheduler::LedgerOptions;
using scheduler::NodePolicyName;
using scheduler::OverCommit;
using scheduler::ParseGpuPolicy;
using scheduler::PodObject;

namespace service_internal {

std::string ErrorReply(std::string_view message) {
  nlohmann::json j;
  j["error"] = std::string(message);
  return j.dump();
}

std::string PodKey(std::string_view ns, std::string_view name) {
  std::string k(ns);
  k.push_back('/');
  k.append(name);
  return k;
}

int32_t LocalOffsetSeconds(int64_t unix_seconds) {
  time_t t = static_cast<time_t>(unix_seconds);
  tm local{};
  localtime_r(&t, &local);
  return static_cast<int32_t>(local.tm_gmtoff);
}

}  // namespace service_internal

namespace {

const k8s::Resource kResourceQuotas{"v1", "resourcequotas", true};

}  // namespace

Result<std::unique_ptr<SchedulerService>> SchedulerService::Create(
    k8s::RestClient& client, const device::DeviceConfig& config, SchedulerOptions options,
    const Clock* clock) {
  HAMI_ASSIGN_OR_RETURN(device::VendorRegistry vendors,
                        device::VendorRegistry::FromConfig(config, options.vendors));
  if (vendors.vendors().empty()) {
    return InvalidArgumentError("device config enables no vendor (no nvidia: section)");
  }
  GpuPolicy probe;
  if (!ParseGpuPolicy(options.gpu_policy, &probe)) {
    return InvalidArgumentError("--gpu-scheduler-policy \"" + options.gpu_policy +
                                "\" is not a known policy");
  }
  return std::unique_ptr<SchedulerService>(
      new SchedulerService(client, config, std::move(vendors), std::move(options), clock));
}

SchedulerService::SchedulerService(k8s::RestClient& client, device::DeviceConfig config,
                                   device::VendorRegistry vendors, SchedulerOptions options,
                                   const Clock* clock)
    : client_(client),
      config_(std::move(config)),
      vendors_(std::move(vendors)),
      options_(std::move(options)),
      clock_(clock != nullptr ? *clock : system_clock_),
      engine_(EngineOptions{options_.node_policy, options_.gpu_policy}),
      locker_(client, clock_, device::NodeLockOptions{options_.node_lock_timeout_seconds, 5}),
      events_(client),
      cache_(vendors_, clock_, LedgerOptions{options_.reservation_ttl_seconds}),
      quota_(vendors_),
      lease_(client, clock_,
             LeaseFollowerOptions{options_.leader_elect, options_.lease_namespace,
                                  options_.lease_name, options_.identity, options_.lease_poll,
                                  options_.pod_namespace, options_.pod_name},
             [this](bool leader) {
               registrar_.LeaderChanged(leader);
               ready_cv_.notify_all();
               Changed();
             }),
      registrar_(client, clock_, vendors_, cache_,
                 NodeRegistrarOptions{options_.register_interval, options_.handshake_grace},
                 [this] { return lease_.IsLeader(); },
                 [this] {
                   ready_cv_.notify_all();
                   Changed();
                 }),
      releaser_(locker_, clock_, options_.lock_release_grace,
                [this](const std::string& node) { return CachedNode(node); },
                [this] { Changed(); }),
      binder_(BinderParts{client, clock_, vendors_, cache_, locker_, events_},
              BinderOptions{options_.scheduler_name, options_.identity, options_.node_lock_wait,
                            options_.bind_outcome_grace},
              BinderHooks{[this] { return AwaitReady(); },
                          [this](const std::string& key) {
                            return pods_ ? pods_->Get(key) : k8s::ObjectPtr();
                          },
                          [this](const std::string& node) { return CachedNode(node); },
                          [this] { Changed(); }}) {}

SchedulerService::~SchedulerService() { Stop(); }

Status SchedulerService::Start() {
  if (started_.exchange(true)) return OkStatus();
  events_.Start();
  binder_.Start();
  releaser_.Start();

  k8s::InformerOptions pod_opts;
  pod_opts.transform = TrimPodForScheduler;  // every pod of the cluster is cached: keep little
  pods_ = std::make_unique<k8s::Informer>(client_, k8s::kPods, pod_opts);
  pods_->AddEventHandler({
      .on_add = [this](const k8s::ObjectPtr& p) { OnPod(p, false); },
      .on_update = [this](const k8s::ObjectPtr&, const k8s::ObjectPtr& p) { OnPod(p, false); },
      .on_delete = [this](const k8s::ObjectPtr& p) { OnPod(p, true); },
  });
  k8s::InformerOptions node_opts;
  node_opts.label_selector = options_.node_label_selector;
  nodes_ = std::make_unique<k8s::Informer>(client_, k8s::kNodes, node_opts);
  nodes_->AddEventHandler({
      .on_add = [this](const k8s::ObjectPtr& n) { OnNode(n, false); },
      .on_update =
          [this](const k8s::ObjectPtr& old, const k8s::ObjectPtr& n) {
            if (device::OnlyNodeLockChanged(*old, *n)) {
              binder_.NodeChanged(k8s::Name(*n), false);  // binds waiting for it look again
              return;
            }
            OnNode(n, false);
          },
      .on_delete = [this](const k8s::ObjectPtr& n) { OnNode(n, true); },
  });
  quotas_ = std::make_unique<k8s::Informer>(client_, kResourceQuotas, k8s::InformerOptions{});
  quotas_->AddEventHandler({
      .on_add = [this](const k8s::ObjectPtr& q) { OnQuota(q, false); },
      .on_update = [this](const k8s::ObjectPtr&, const k8s::ObjectPtr& q) { OnQuota(q, false); },
      .on_delete = [this](const k8s::ObjectPtr& q) { OnQuota(q, true); },
  });
  registrar_.Start(*nodes_);  // its first pass waits for the node list
  // Nodes first, so pods find their nodes registered when the pod list arrives.
  nodes_->Start();
  pods_->Start();
  quotas_->Start();
  lease_.Start();
  HAMI_LOG(Info) << "scheduler " << options_.scheduler_name << " started: node policy "
                 << NodePolicyName(options_.node_policy) << ", gpu policy " << options_.gpu_policy
                 << (options_.leader_elect ? ", following lease " + options_.lease_namespace + "/" +
                                                 options_.lease_name + " as " + options_.identity
                                           : ", leader election off");
  return OkStatus();
}

void SchedulerService::Stop() {
  if (!started_.exchange(false)) return;
  ready_cv_.notify_all();  // requests waiting for readiness see the service stopping
  lease_.Stop();
  registrar_.Stop();
  releaser_.Stop();
  binder_.Stop();  // binds waiting for a node lock give up
  if (pods_) pods_->Stop();
  if (nodes_) nodes_->Stop();
  if (quotas_) quotas_->Stop();
  events_.Stop();
}

bool SchedulerService::Ready() const {
  return started_.load() && lease_.IsLeader() && registrar_.RegisteredOnce() && pods_ &&
         pods_->HasSynced() && nodes_->HasSynced() && quotas_->HasSynced();
}

bool SchedulerService::WaitReady(std::chrono::milliseconds timeout) {
  const MonoTime deadline = clock_.Now() + timeout;
  UniqueLock lock(ready_mu_);
  while (!Ready()) {
    if (!started_.load()) return false;
    const MonoTime now = clock_.Now();
    if (now >= deadline) return Ready();
    // Readiness has several sources (informers sync without notifying): look every 100 ms.
    clock_.WaitUntil(ready_cv_, lock.native(),
                     std::min(deadline, now + std::chrono::milliseconds(100)));
  }
  return true;
}

Status SchedulerService::AwaitReady() {
  if (Ready() || WaitReady(options_.filter_ready_wait)) return OkStatus();
  return Status(StatusCode::kUnavailable, IsLeader()
                                              ? "scheduler not ready: cluster view not synced yet"
                                              : "scheduler not ready: not the leader");
}

// ---------------------------------------------------------------------------------------------
// Informer handlers.

void SchedulerService::OnPod(const k8s::ObjectPtr& obj, bool deleted) {
  const k8s::Object& pod = *obj;
  const int64_t rv = ResourceVersionNumber(pod);
  const std::string uid = k8s::Uid(pod);
  if (!uid.empty() && deleted) {
    cache_.ObservePodGone(uid);
    releaser_.ObservePod(pod, true);
  } else if (!uid.empty()) {
    const PodObject p = PodObjectOf(pod);
    Status problem;
    std::vector<std::string> dropped;
    const AssumeCache::Observed seen = cache_.ObservePod(p, rv, &problem, &dropped);
    if (!problem.ok()) {
      HAMI_LOG(Warning) << "pod " << p.name_space << "/" << p.name
                        << ": allocation annotations ignored: " << problem.message();
    }
    for (const std::string& other : dropped) {
      HAMI_LOG(Warning) << "pod " << p.name_space << "/" << p.name << " runs on " << p.node_name
                        << " with devices reserved for pending pod " << other
                        << ": that reservation is dropped (it is placed again when scheduled)";
    }
    if (seen == AssumeCache::Observed::kStale) {
      Count(&ServiceStats::stale_pod_events);  // applying it would undo our placement
    } else {
      releaser_.ObservePod(pod, false);
    }
  }
  // Counted once the event is fully handled (a test waits on it to know a change was seen).
  {
    MutexLock l(stats_mu_);
    ++stats_.pod_events;
    stats_.last_pod_version = std::max(stats_.last_pod_version, rv);
  }
  Changed();
}

void SchedulerService::OnQuota(const k8s::ObjectPtr& quota, bool deleted) {
  {
    MutexLock lock(quota_mu_);
    if (deleted) {
      quota_.Remove(k8s::Namespace(*quota), k8s::Name(*quota));
    } else if (Status s = quota_.Upsert(*quota); !s.ok()) {
      HAMI_LOG(Warning) << s.message();
    }
  }
  Changed();
}

void SchedulerService::OnNode(const k8s::ObjectPtr& obj, bool deleted) {
  const std::string name = k8s::Name(*obj);
  if (deleted) {
    registrar_.NodeDeleted(name);
  } else {
    registrar_.NodeChanged(name);
  }
  binder_.NodeChanged(name, deleted);
}

k8s::ObjectPtr SchedulerService::CachedNode(const std::string& name) const {
  return nodes_ ? nodes_->Get(name) : nullptr;
}

void SchedulerService::Count(uint64_t ServiceStats::*counter) {
  {
    MutexLock s(stats_mu_);
    ++(stats_.*counter);
  }
  Changed();
}

void SchedulerService::Changed() { changes_.Notify(); }

// ---------------------------------------------------------------------------------------------
// Inspection.

ServiceStats SchedulerService::stats() const {
  const BindStats b = binder_.stats();
  const LockReleaser::Stats r = releaser_.stats();
  ServiceStats st;
  {
    MutexLock s(stats_mu_);
    st = stats_;
  }
  st.binds = b.binds;
  st.bind_errors = b.bind_errors;
  st.lock_waits = b.lock_waits;
  st.bind_busy += b.bind_busy;  // the filter counts its own refusals
  st.bind_unsettled = b.bind_unsettled;
  st.bind_recovered = b.bind_recovered;
  st.binds_waiting = b.binds_waiting;
  st.locks_released = r.released;
  st.lock_releases_queued = r.queued;
  return st;
}

bool SchedulerService::WaitFor(const std::function<bool()>& done,
                               std::chrono::milliseconds timeout) const {
  return changes_.WaitUntil(done, timeout);
}

std::string SchedulerService::LedgerDump() const {
  return cache_.Read([](const Ledger& ledger) { return ledger.CanonicalDump(); });
}

Status SchedulerService::CheckLedger() const {
  return cache_.Read([](const Ledger& ledger) { return ledger.CheckConsistency(); });
}

std::vector<OverCommit> SchedulerService::OverCommitted() const {
  return cache_.Read([](const Ledger& ledger) { return ledger.OverCommitted(); });
}

}  // namespace hami::extender
