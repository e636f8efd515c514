// SchedulerService: lifecycle, informer handlers and inspection. The verbs and background work
// live beside it: service_filter.cc, service_bind.cc (with service_node_lock.cc),
// service_nodes.cc (registration, lock releases, leader following), service_http.cc (webhook,
// metrics, routes).
#include "extender/service.h"

#include <time.h>

#include <algorithm>
#include <nlohmann/json.hpp>

#include "common/log.h"
#include "extender/k8s_objects.h"
#include "extender/service_internal.h"
#include "k8s/object.h"

namespace hami::scheduler {

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
      locker_(client, clock_, NodeLockOptions{options_.node_lock_timeout_seconds, 5}),
      events_(client),
      cache_(vendors_, clock_, LedgerOptions{options_.reservation_ttl_seconds}),
      quota_(vendors_) {}

SchedulerService::~SchedulerService() { Stop(); }

Status SchedulerService::Start() {
  if (started_.exchange(true)) return OkStatus();
  events_.Start();
  leader_.store(!options_.leader_elect);
  queue_ = std::make_unique<k8s::WorkQueue>(clock_);  // before the informers feed it
  binders_ = std::make_unique<ThreadPool>("hami-binder", 64);
  stop_ = std::make_unique<Cancellation>();

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
            if (OnlyNodeLockChanged(*old, *n)) {
              NoteNodeChange(k8s::Name(*n));  // binds waiting for this lock look again
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
  // Nodes first, so pods find their nodes registered when the pod list arrives.
  nodes_->Start();
  pods_->Start();
  quotas_->Start();
  queue_->Add("resync");
  if (options_.leader_elect) {
    k8s::LeaderElectionConfig lease;
    lease.ns = options_.lease_namespace;
    lease.name = options_.lease_name;
    lease.identity = options_.identity;
    lease_ = std::make_unique<k8s::LeaderElector>(client_, lease);
    queue_->Add("lease");
  }
  worker_ = std::thread([this] { RunWorker(); });
  HAMI_LOG(Info) << "scheduler " << options_.scheduler_name << " started: node policy "
                 << NodePolicyName(options_.node_policy) << ", gpu policy " << options_.gpu_policy
                 << (options_.leader_elect ? ", following lease " + options_.lease_namespace + "/" +
                                                 options_.lease_name + " as " + options_.identity
                                           : ", leader election off");
  return OkStatus();
}

void SchedulerService::Stop() {
  if (!started_.exchange(false)) return;
  if (stop_) stop_->Cancel();
  if (queue_) queue_->ShutDown();
  ready_cv_.notify_all();
  NoteEveryNodeChanged();  // binds waiting for a node lock see the service stopping
  if (worker_.joinable()) worker_.join();
  if (binders_) binders_->Stop();  // binds waiting for a node lock saw the service stopping
  if (pods_) pods_->Stop();
  if (nodes_) nodes_->Stop();
  if (quotas_) quotas_->Stop();
  events_.Stop();
}

bool SchedulerService::Ready() const {
  return started_.load() && leader_.load() && registered_once_.load() && pods_ &&
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

// ---------------------------------------------------------------------------------------------
// Informer handlers.

void SchedulerService::OnPod(const k8s::ObjectPtr& obj, bool deleted) {
  const k8s::Object& pod = *obj;
  const int64_t rv = ResourceVersionNumber(pod);
  const std::string uid = k8s::Uid(pod);
  if (!uid.empty() && deleted) {
    cache_.ObservePodGone(uid);
    MaybeReleaseLock(pod, true);
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
      MaybeReleaseLock(pod, false);
    }
  }
  // Counted once the event is fully handled (a test waits on it to know a change was seen).
  MutexLock l(stats_mu_);
  ++stats_.pod_events;
  stats_.last_pod_version = std::max(stats_.last_pod_version, rv);
}

void SchedulerService::OnQuota(const k8s::ObjectPtr& quota, bool deleted) {
  MutexLock lock(quota_mu_);
  if (deleted) return quota_.Remove(k8s::Namespace(*quota), k8s::Name(*quota));
  Status s = quota_.Upsert(*quota);
  if (!s.ok()) HAMI_LOG(Warning) << s.message();
}

void SchedulerService::OnNode(const k8s::ObjectPtr& obj, bool deleted) {
  std::string name = k8s::Name(*obj);
  if (deleted) {
    cache_.RemoveNode(name);
    {
      MutexLock l(node_state_mu_);
      node_state_.erase(name);
    }
    HAMI_LOG(Info) << "node " << name << ": deleted, no longer scheduled";
  } else {
    queue_->Add("node/" + name);
  }
  NoteNodeChange(name, deleted);
}

void SchedulerService::NoteNodeChange(const std::string& node, bool deleted) {
  {
    MutexLock l(lock_wait_mu_);
    if (deleted) {
      node_changes_.erase(node);  // a waiter's mark no longer matches: it looks and finds none
    } else {
      ++node_changes_[node];
    }
  }
  lock_wait_cv_.notify_all();
}

void SchedulerService::NoteEveryNodeChanged() {
  {
    MutexLock l(lock_wait_mu_);
    ++all_node_changes_;
  }
  lock_wait_cv_.notify_all();
}

SchedulerService::NodeChangeMark SchedulerService::NodeChangeMarkOf(const std::string& node) const {
  auto it = node_changes_.find(node);
  return NodeChangeMark{it == node_changes_.end() ? 0 : it->second, all_node_changes_};
}

const k8s::Object* SchedulerService::CachedNode(const std::string& name,
                                                k8s::ObjectPtr* hold) const {
  if (!nodes_) return nullptr;
  *hold = nodes_->Get(name);
  return hold->get();
}

void SchedulerService::Count(uint64_t ServiceStats::*counter) {
  MutexLock s(stats_mu_);
  ++(stats_.*counter);
}

void SchedulerService::Uncount(uint64_t ServiceStats::*counter) {
  MutexLock s(stats_mu_);
  --(stats_.*counter);
}

// ---------------------------------------------------------------------------------------------
// Inspection.

ServiceStats SchedulerService::stats() const {
  MutexLock s(stats_mu_);
  return stats_;
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

}  // namespace hami::scheduler
