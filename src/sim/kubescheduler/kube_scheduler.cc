#include "sim/kubescheduler/kube_scheduler.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <map>
#include <mutex>
#include <random>
#include <thread>
#include <utility>
#include <vector>

#include "common/log.h"
#include "common/thread_annotations.h"
#include "k8s/informer.h"
#include "k8s/leader_election.h"
#include "k8s/object.h"
#include "k8s/typed.h"
#include "sim/kubescheduler/diagnosis.h"
#include "sim/kubescheduler/predicates.h"
#include "sim/kubescheduler/scheduling_queue.h"
#include "sim/kubescheduler/work_pool.h"

namespace hami::sim {
namespace {

using k8s::Object;
using k8s::ObjectPtr;

// kube-scheduler cuts event messages at this length.
constexpr size_t kMaxEventMessage = 1024;

std::string Truncate(std::string s) {
  if (s.size() > kMaxEventMessage) {
    s.resize(kMaxEventMessage - 3);
    s += "...";
  }
  return s;
}

std::string Hostname() {
  char buf[256] = {0};
  if (gethostname(buf, sizeof(buf) - 1) != 0 || buf[0] == '\0') return "localhost";
  return buf;
}

std::chrono::seconds CeilSeconds(std::chrono::milliseconds d) {
  auto s = std::chrono::ceil<std::chrono::seconds>(d);
  return std::max(s, std::chrono::seconds(1));
}

// The outcome of the filtering part of a cycle.
struct Decision {
  CycleOutcome outcome = CycleOutcome::kError;
  std::string node;     // kScheduled
  std::string message;  // kUnschedulable / kError
};

SchedulingQueueOptions QueueOptions(const KubeSchedulerConfig& config,
                                    const KubeSchedulerOptions& options) {
  SchedulingQueueOptions q;
  q.initial_backoff = options.initial_backoff.value_or(config.pod_initial_backoff);
  q.max_backoff = options.max_backoff.value_or(config.pod_max_backoff);
  q.unschedulable_timeout = options.unschedulable_timeout;
  q.assumed_ttl = options.assumed_ttl;
  return q;
}

}  // namespace

size_t NumFeasibleNodesToFind(int64_t percentage, size_t num_nodes) {
  constexpr size_t kMinFeasibleNodes = 100;
  constexpr int64_t kMinPercentage = 5;
  if (num_nodes < kMinFeasibleNodes || percentage >= 100) return num_nodes;
  if (percentage <= 0) {
    percentage = std::max<int64_t>(50 - static_cast<int64_t>(num_nodes) / 125, kMinPercentage);
  }
  size_t n = num_nodes * static_cast<size_t>(percentage) / 100;
  return std::max(n, kMinFeasibleNodes);
}

std::string DefaultLeaderIdentity() {
  std::random_device rd;
  std::mt19937_64 gen((static_cast<uint64_t>(rd()) << 32) ^ rd());
  uint64_t hi = gen();
  uint64_t lo = gen();
  // Version-4 UUID layout, as kube-scheduler's identity suffix.
  hi = (hi & 0xffffffffffff0fffULL) | 0x0000000000004000ULL;
  lo = (lo & 0x3fffffffffffffffULL) | 0x8000000000000000ULL;
  char uuid[40];
  std::snprintf(uuid, sizeof(uuid), "%08x-%04x-%04x-%04x-%012llx", static_cast<unsigned>(hi >> 32),
                static_cast<unsigned>((hi >> 16) & 0xffff), static_cast<unsigned>(hi & 0xffff),
                static_cast<unsigned>(lo >> 48),
                static_cast<unsigned long long>(lo & 0xffffffffffffULL));
  return Hostname() + "_" + uuid;
}

class KubeScheduler::Impl {
 public:
  Impl(k8s::RestClient& client, KubeSchedulerConfig config, KubeSchedulerOptions options)
      : client_(client),
        config_(std::move(config)),
        options_(std::move(options)),
        clock_(options_.clock != nullptr ? *options_.clock : client.clock()),
        identity_(options_.identity.empty() ? DefaultLeaderIdentity() : options_.identity),
        host_(Hostname()),
        queue_(clock_, QueueOptions(config_, options_)),
        pods_(client, k8s::kPods, k8s::InformerOptions{}),
        nodes_(client, k8s::kNodes, k8s::InformerOptions{}) {
    pods_.AddEventHandler(
        {.on_add = [this](const ObjectPtr& p) { OnPodAdd(p); },
         .on_update = [this](const ObjectPtr& a, const ObjectPtr& b) { OnPodUpdate(a, b); },
         .on_delete = [this](const ObjectPtr& p) { OnPodDelete(p); }});
    // kube-scheduler retries unschedulable pods when a node appears or changes; a deleted node
    // cannot make anything fit.
    nodes_.AddEventHandler(
        {.on_add = [this](const ObjectPtr&) { queue_.MoveAllToActiveOrBackoff(); },
         .on_update =
             [this](const ObjectPtr& a, const ObjectPtr& b) {
               if (ChangedForScheduling(a, b, /*is_pod=*/false)) queue_.MoveAllToActiveOrBackoff();
             }});
  }

  ~Impl() { Stop(); }

  Status Start();
  void Stop();

  const KubeSchedulerConfig& config() const { return config_; }
  const std::string& identity() const { return identity_; }
  bool IsLeader() const { return leader_.load(); }
  bool HasSynced() const { return pods_.HasSynced() && nodes_.HasSynced(); }
  KubeSchedulerStats Stats() const {
    KubeSchedulerStats out;
    {
      MutexLock lock(stats_mu_);
      out = stats_;
    }
    out.queue = queue_.Sizes();
    return out;
  }
  int Attempts(const std::string& key) const {
    MutexLock lock(stats_mu_);
    auto it = attempts_.find(key);
    return it == attempts_.end() ? 0 : it->second;
  }

 private:
  bool IsPendingForUs(const Object& pod) const {
    std::string name = k8s::GetString(pod, "/spec/schedulerName");
    if (name.empty()) name = "default-scheduler";
    return name == config_.scheduler_name && !IsAssigned(pod) && !IsBeingDeleted(pod) &&
           !IsTerminal(pod);
  }

  void OnPodAdd(const ObjectPtr& pod);
  void OnPodUpdate(const ObjectPtr& before, const ObjectPtr& after);
  void OnPodDelete(const ObjectPtr& pod);
  void Worker();
  void RunElection();
  void RunCycle(const QueuedPod& qp);
  Decision Decide(const Object& pod, const std::vector<ObjectPtr>& nodes);
  void Bind(const QueuedPod& qp, const ObjectPtr& pod, const std::string& node);
  void Fail(const QueuedPod& qp, const ObjectPtr& pod, const std::string& message,
            CycleOutcome outcome);
  void RecordEvent(const ObjectPtr& pod, const char* type, const char* reason, std::string message);

  k8s::RestClient& client_;
  const KubeSchedulerConfig config_;
  const KubeSchedulerOptions options_;
  hami::Clock& clock_;
  const std::string identity_;
  const std::string host_;

  SchedulingQueue queue_;
  k8s::Informer pods_;
  k8s::Informer nodes_;
  // Filled by Start() before the threads that read them exist.
  std::vector<std::unique_ptr<Extender>> extenders_;
  std::unique_ptr<WorkPool> bind_pool_;
  std::unique_ptr<WorkPool> event_pool_;
  std::vector<std::thread> workers_;
  std::thread election_;
  hami::Cancellation stop_;
  std::atomic<bool> leader_{false};

  Mutex lifecycle_mu_;
  bool started_ GUARDED_BY(lifecycle_mu_) = false;
  bool stopped_ GUARDED_BY(lifecycle_mu_) = false;

  mutable Mutex stats_mu_;
  KubeSchedulerStats stats_ GUARDED_BY(stats_mu_);
  std::map<std::string, int> attempts_ GUARDED_BY(stats_mu_);
  size_t next_start_node_ GUARDED_BY(stats_mu_) = 0;  // where the next cycle's walk starts
};

Status KubeScheduler::Impl::Start() {
  {
    MutexLock lock(lifecycle_mu_);
    if (started_) return FailedPreconditionError("kube-scheduler already started");
    started_ = true;
  }
  for (size_t i = 0; i < config_.extenders.size(); ++i) {
    const ExtenderConfig& ec = config_.extenders[i];
    Result<std::unique_ptr<Extender>> ext =
        options_.extender_factory ? options_.extender_factory(ec) : Extender::Create(ec);
    if (!ext.ok()) return ext.status().WithContext("extenders[" + std::to_string(i) + "]");
    if (!ec.prioritize_verb.empty()) {
      HAMI_LOG(Warning) << "extender " << ec.url_prefix << ": prioritizeVerb \""
                        << ec.prioritize_verb
                        << "\" ignored (scoring is not simulated; the first feasible node wins)";
    }
    if (!ec.preempt_verb.empty()) {
      HAMI_LOG(Warning) << "extender " << ec.url_prefix << ": preemptVerb ignored";
    }
    extenders_.push_back(std::move(ext).value());
  }

  const bool elect = config_.leader_election.leader_elect;
  queue_.SetPaused(elect);
  leader_ = !elect;
  bind_pool_ = std::make_unique<WorkPool>(options_.bind_workers);
  event_pool_ = std::make_unique<WorkPool>(1);
  pods_.Start();
  nodes_.Start();
  for (int i = 0; i < std::max(options_.workers, 1); ++i) {
    workers_.emplace_back([this] { Worker(); });
  }
  if (elect) election_ = std::thread([this] { RunElection(); });
  HAMI_LOG(Info) << "kube-scheduler " << config_.scheduler_name << " started (identity "
                 << identity_ << ", " << extenders_.size() << " extender(s), "
                 << std::max(options_.workers, 1) << " worker(s)"
                 << (elect ? ", leader election on " + config_.leader_election.resource_namespace +
                                 "/" + config_.leader_election.resource_name
                           : std::string())
                 << ")";
  return OkStatus();
}

void KubeScheduler::Impl::Stop() {
  {
    MutexLock lock(lifecycle_mu_);
    if (!started_ || stopped_) return;
    stopped_ = true;
  }
  stop_.Cancel();
  queue_.Close();
  for (std::thread& t : workers_) t.join();
  workers_.clear();
  if (bind_pool_) bind_pool_->Stop();
  // After the workers: the lease is only given up once nothing schedules any more.
  if (election_.joinable()) election_.join();
  leader_ = false;
  // Each informer notices cancellation only at its transport's next check (up to a second), so
  // both are stopped at once.
  std::thread node_stopper([this] { nodes_.Stop(); });
  pods_.Stop();
  node_stopper.join();
  if (event_pool_) event_pool_->Stop();
}

void KubeScheduler::Impl::OnPodAdd(const ObjectPtr& pod) {
  if (IsPendingForUs(*pod)) queue_.AddOrUpdate(k8s::ObjectKey(*pod), /*changed=*/true);
}

void KubeScheduler::Impl::OnPodUpdate(const ObjectPtr& before, const ObjectPtr& after) {
  std::string key = k8s::ObjectKey(*after);
  if (IsPendingForUs(*after)) {
    queue_.AddOrUpdate(key, ChangedForScheduling(before, after, /*is_pod=*/true));
  } else {
    queue_.Delete(key);
  }
  // A bound pod that finished frees its node's resources.
  if (before && IsAssigned(*before) && !IsTerminal(*before) && IsTerminal(*after)) {
    queue_.MoveAllToActiveOrBackoff();
  }
}

void KubeScheduler::Impl::OnPodDelete(const ObjectPtr& pod) {
  std::string key = k8s::ObjectKey(*pod);
  queue_.Delete(key);
  {
    MutexLock lock(stats_mu_);
    attempts_.erase(key);
  }
  if (IsAssigned(*pod)) queue_.MoveAllToActiveOrBackoff();
}

void KubeScheduler::Impl::Worker() {
  if (!pods_.WaitForSync(&stop_) || !nodes_.WaitForSync(&stop_)) return;
  while (std::optional<QueuedPod> qp = queue_.Pop(&stop_)) RunCycle(*qp);
}

void KubeScheduler::Impl::RunElection() {
  const LeaderElectionSettings& s = config_.leader_election;
  k8s::LeaderElectionConfig lec;
  lec.ns = s.resource_namespace;
  lec.name = s.resource_name;
  lec.identity = identity_;
  lec.lease_duration = CeilSeconds(s.lease_duration);
  lec.renew_deadline = CeilSeconds(s.renew_deadline);
  lec.retry_period = CeilSeconds(s.retry_period);
  k8s::LeaderCallbacks callbacks;
  callbacks.on_started_leading = [this] {
    HAMI_LOG(Info) << "leader election: " << identity_ << " acquired lease "
                   << config_.leader_election.resource_namespace << "/"
                   << config_.leader_election.resource_name;
    leader_ = true;
    queue_.SetPaused(false);
  };
  callbacks.on_stopped_leading = [this] {
    leader_ = false;
    queue_.SetPaused(true);
    HAMI_LOG(Info) << "leader election: " << identity_ << " stopped leading";
  };
  callbacks.on_new_leader = [this](const std::string& holder) {
    if (holder != identity_) HAMI_LOG(Info) << "leader election: current leader is " << holder;
  };
  while (!stop_.cancelled()) {
    k8s::LeaderElector elector(client_, lec, callbacks);
    elector.Run(stop_);
  }
}

Decision KubeScheduler::Impl::Decide(const Object& pod, const std::vector<ObjectPtr>& nodes) {
  if (nodes.empty()) return {CycleOutcome::kError, "", "no nodes available to schedule pods"};
  Diagnosis diagnosis;
  std::vector<ObjectPtr> feasible;
  const bool tolerates_unschedulable = ToleratesUnschedulable(pod);
  const size_t want = NumFeasibleNodesToFind(config_.percentage_of_nodes_to_score, nodes.size());
  size_t start;
  {
    MutexLock lock(stats_mu_);
    start = next_start_node_ % nodes.size();
  }
  size_t processed = 0;
  for (; processed < nodes.size() && feasible.size() < want; ++processed) {
    const ObjectPtr& node = nodes[(start + processed) % nodes.size()];
    const Object& n = *node;
    auto spec = n.find("spec");
    bool unschedulable =
        spec != n.end() && spec->is_object() && spec->value("unschedulable", false) == true;
    if (unschedulable && !tolerates_unschedulable) {
      diagnosis.Add(k8s::Name(n), kReasonNodeUnschedulable);
    } else if (!MatchesNodeSelector(pod, n)) {
      diagnosis.Add(k8s::Name(n), kReasonNodeSelectorMismatch);
    } else {
      feasible.push_back(node);
    }
  }
  {
    MutexLock lock(stats_mu_);
    next_start_node_ = (start + processed) % nodes.size();
  }

  for (const std::unique_ptr<Extender>& ext : extenders_) {
    if (feasible.empty()) break;
    if (!ext->IsFilter() || !ext->IsInterested(pod)) continue;
    hami::MonoTime t0 = clock_.Now();
    Result<ExtenderFilterResult> r = ext->Filter(pod, feasible);
    {
      MutexLock lock(stats_mu_);
      stats_.extender_filter_calls++;
      stats_.filter_latency.Record(clock_.Now() - t0);
      if (!r.ok()) stats_.extender_filter_errors++;
    }
    if (!r.ok()) {
      if (ext->IsIgnorable()) {
        HAMI_LOG(Warning) << "extender " << ext->name()
                          << " failed and is ignorable, skipping it: " << r.status().message();
        continue;
      }
      return {CycleOutcome::kError, "", r.status().message()};
    }
    for (const auto& [node, reason] : r->failed_and_unresolvable_nodes) {
      diagnosis.Add(node, reason);
    }
    for (const auto& [node, reason] : r->failed_nodes) {
      // An extender listing a node in both maps means the unresolvable verdict.
      if (r->failed_and_unresolvable_nodes.count(node) == 0) diagnosis.Add(node, reason);
    }
    std::map<std::string, ObjectPtr> by_name;
    for (const ObjectPtr& n : feasible) by_name[k8s::Name(*n)] = n;
    std::vector<ObjectPtr> passed;
    for (const std::string& name : r->node_names) passed.push_back(by_name[name]);
    feasible = std::move(passed);
  }
  if (feasible.empty()) return {CycleOutcome::kUnschedulable, "", diagnosis.Message(nodes.size())};
  return {CycleOutcome::kScheduled, k8s::Name(*feasible.front()), ""};
}

void KubeScheduler::Impl::RunCycle(const QueuedPod& qp) {
  ObjectPtr pod = pods_.Get(qp.key);
  if (!pod || !IsPendingForUs(*pod)) {
    queue_.Done(qp.key, CycleOutcome::kDropped);
    MutexLock lock(stats_mu_);
    stats_.dropped++;
    return;
  }
  hami::MonoTime start = clock_.Now();
  {
    MutexLock lock(stats_mu_);
    stats_.cycles++;
    attempts_[qp.key] = qp.attempt;
  }
  HAMI_VLOG(2) << "pod " << qp.key << ": scheduling attempt " << qp.attempt;
  Decision d = Decide(*pod, nodes_.List());
  {
    MutexLock lock(stats_mu_);
    stats_.cycle_latency.Record(clock_.Now() - start);
  }
  if (d.outcome != CycleOutcome::kScheduled) return Fail(qp, pod, d.message, d.outcome);
  bind_pool_->Submit([this, qp, pod, node = d.node] { Bind(qp, pod, node); });
}

void KubeScheduler::Impl::Bind(const QueuedPod& qp, const ObjectPtr& pod, const std::string& node) {
  const std::string ns = k8s::Namespace(*pod);
  const std::string name = k8s::Name(*pod);
  const std::string uid = k8s::Uid(*pod);
  Extender* binder = nullptr;
  for (const std::unique_ptr<Extender>& ext : extenders_) {
    if (ext->IsBinder() && ext->IsInterested(*pod)) {
      binder = ext.get();
      break;
    }
  }
  hami::MonoTime t0 = clock_.Now();
  Status s = binder != nullptr ? binder->Bind({name, ns, uid, node})
                               : k8s::BindPod(client_, ns, name, uid, node);
  hami::MonoTime t1 = clock_.Now();
  {
    MutexLock lock(stats_mu_);
    stats_.bind_latency.Record(t1 - t0);
    if (binder != nullptr) {
      stats_.extender_bind_calls++;
      if (!s.ok()) stats_.extender_bind_errors++;
    } else {
      stats_.api_bind_calls++;
    }
    if (!s.ok()) {
      stats_.binding_failures++;
    } else {
      stats_.scheduled++;
      stats_.scheduling_latency.Record(t1 - qp.first_seen);
    }
  }
  if (!s.ok()) {
    Fail(qp, pod, "Binding rejected: " + s.message(), CycleOutcome::kError);
    // The pod's claim on the node is gone, which may let others fit (kube-scheduler forgets the
    // assumed pod and retries the unschedulable ones).
    queue_.MoveAllToActiveOrBackoff();
    return;
  }
  queue_.Done(qp.key, CycleOutcome::kScheduled);
  HAMI_LOG(Info) << "pod " << qp.key << ": bound to " << node << " (attempt " << qp.attempt
                 << (binder != nullptr ? ", by extender " + binder->name() : std::string()) << ")";
  RecordEvent(pod, "Normal", "Scheduled",
              "Successfully assigned " + ns + "/" + name + " to " + node);
}

void KubeScheduler::Impl::Fail(const QueuedPod& qp, const ObjectPtr& pod,
                               const std::string& message, CycleOutcome outcome) {
  {
    MutexLock lock(stats_mu_);
    if (outcome == CycleOutcome::kUnschedulable) {
      stats_.unschedulable++;
    } else {
      stats_.errors++;
    }
  }
  queue_.Done(qp.key, outcome);
  HAMI_LOG(Warning) << "pod " << qp.key
                    << (outcome == CycleOutcome::kUnschedulable ? ": unschedulable: "
                                                                : ": scheduling failed: ")
                    << message << " (attempt " << qp.attempt << ")";
  RecordEvent(pod, "Warning", "FailedScheduling", message);
}

void KubeScheduler::Impl::RecordEvent(const ObjectPtr& pod, const char* type, const char* reason,
                                      std::string message) {
  k8s::EventSpec spec;
  spec.involved = pod;
  spec.type = type;
  spec.reason = reason;
  spec.message = Truncate(std::move(message));
  spec.component = config_.scheduler_name;
  spec.host = host_;
  // Asynchronous, like client-go's event broadcaster: a slow API server must not stall cycles.
  event_pool_->Submit([this, spec = std::move(spec)] {
    Result<k8s::WriteAck> r = k8s::CreateEvent(client_, spec);
    if (!r.ok()) {
      HAMI_VLOG(1) << "event " << spec.reason << " for pod " << k8s::ObjectKey(*spec.involved)
                   << " not recorded: " << r.status().message();
      MutexLock lock(stats_mu_);
      stats_.events_failed++;
    }
  });
}

KubeScheduler::KubeScheduler(k8s::RestClient& client, KubeSchedulerConfig config,
                             KubeSchedulerOptions options)
    : impl_(std::make_unique<Impl>(client, std::move(config), std::move(options))) {}

KubeScheduler::~KubeScheduler() = default;

Status KubeScheduler::Start() { return impl_->Start(); }
void KubeScheduler::Stop() { impl_->Stop(); }
const KubeSchedulerConfig& KubeScheduler::config() const { return impl_->config(); }
const std::string& KubeScheduler::identity() const { return impl_->identity(); }
bool KubeScheduler::IsLeader() const { return impl_->IsLeader(); }
bool KubeScheduler::HasSynced() const { return impl_->HasSynced(); }
KubeSchedulerStats KubeScheduler::Stats() const { return impl_->Stats(); }
int KubeScheduler::Attempts(const std::string& pod_key) const { return impl_->Attempts(pod_key); }

}  // namespace hami::sim
