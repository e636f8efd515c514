#include "extender/service.h"

#include <time.h>

#include <algorithm>
#include <climits>
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>

#include "common/log.h"
#include "device/handshake.h"
#include "device/mig_allocation.h"
#include "device/node_lock.h"
#include "extender/extender_args.h"
#include "extender/k8s_objects.h"
#include "extender/metrics/scheduler_metrics.h"
#include "extender/webhook/admission.h"
#include "k8s/api_error.h"
#include "k8s/object.h"
#include "k8s/typed.h"
#include "net/http_server.h"

namespace hami::scheduler {
namespace {

using Json = nlohmann::json;

const k8s::Resource kResourceQuotas{"v1", "resourcequotas", true};

std::string ErrorReply(std::string_view message) {
  Json j;
  j["error"] = std::string(message);
  return j.dump();
}

int32_t LocalOffsetSeconds(int64_t unix_seconds) {
  time_t t = static_cast<time_t>(unix_seconds);
  tm local{};
  localtime_r(&t, &local);
  return static_cast<int32_t>(local.tm_gmtoff);
}

std::string PodKey(std::string_view ns, std::string_view name) {
  std::string k(ns);
  k.push_back('/');
  k.append(name);
  return k;
}

// The summary of a failed filter, grouped by reason: "no available node, 3 nodes do not meet:
// 2 CardInsufficientMemory (node-a, node-b); 1 NodeInsufficientDevice (node-c)".
std::string FailureSummary(const Decision& d) {
  std::map<std::string, std::vector<std::string>> by_reason;
  for (const auto& [node, reason] : d.FailedNodes()) by_reason[reason].push_back(node);
  std::string out = d.FailedMessage();
  if (by_reason.empty()) return out;
  out += ":";
  bool first = true;
  for (const auto& [reason, nodes] : by_reason) {
    out += first ? " " : "; ";
    first = false;
    out += std::to_string(nodes.size()) + " nodes " + reason + " (";
    for (size_t i = 0; i < nodes.size() && i < 5; ++i) out += (i ? ", " : "") + nodes[i];
    if (nodes.size() > 5) out += ", ...";
    out += ")";
  }
  return out;
}

// The webhook's view of node capacity, read from the node informer's cache on demand (only
// rules of vendors that need it ask: an Enflame vGCU container).
class InformerCapacityFacts final : public device::NodeCapacityFacts {
 public:
  explicit InformerCapacityFacts(const k8s::Informer* nodes) : nodes_(nodes) {}
  std::map<int64_t, int32_t> CapacityRatios(std::string_view numerator,
                                            std::string_view denominator) const override {
    std::map<int64_t, int32_t> out;
    if (nodes_ == nullptr) return out;
    for (const k8s::ObjectPtr& n : nodes_->List()) {
      int64_t num = NodeCapacityOf(*n, numerator);
      int64_t den = NodeCapacityOf(*n, denominator);
      if (num > 0 && den > 0) ++out[num / den];
    }
    return out;
  }

 private:
  const k8s::Informer* nodes_;
};

// The webhook's quota pre-check as a function (the service's reads the ledger under its shared
// lock only while checking).
class FunctionQuotaChecker final : public QuotaChecker {
 public:
  using Fn = std::function<Status(std::string_view, std::string_view, int64_t, int64_t)>;
  explicit FunctionQuotaChecker(Fn fn) : fn_(std::move(fn)) {}
  Status Check(std::string_view ns, std::string_view vendor, int64_t mem_mib,
               int64_t cores) const override {
    return fn_(ns, vendor, mem_mib, cores);
  }

 private:
  Fn fn_;
};

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
      ledger_(vendors_, clock_, LedgerOptions{options_.reservation_ttl_seconds}),
      quota_(vendors_) {}

SchedulerService::~SchedulerService() { Stop(); }

Status SchedulerService::Start() {
  if (started_.exchange(true)) return OkStatus();
  events_.Start();
  leader_.store(!options_.leader_elect);

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
              NoteNodeChange();  // binds waiting for this lock look again
              return;
            }
            OnNode(n, false);
          },
      .on_delete = [this](const k8s::ObjectPtr& n) { OnNode(n, true); },
  });
  quotas_ = std::make_unique<k8s::Informer>(client_, kResourceQuotas, k8s::InformerOptions{});
  auto on_quota = [this](const k8s::ObjectPtr& q) {
    WriterLock lock(mu_);
    Status s = quota_.Upsert(*q);
    if (!s.ok()) HAMI_LOG(Warning) << s.message();
  };
  quotas_->AddEventHandler({
      .on_add = on_quota,
      .on_update = [on_quota](const k8s::ObjectPtr&, const k8s::ObjectPtr& q) { on_quota(q); },
      .on_delete =
          [this](const k8s::ObjectPtr& q) {
            WriterLock lock(mu_);
            quota_.Remove(k8s::Namespace(*q), k8s::Name(*q));
          },
  });
  // Nodes first, so pods find their nodes registered when the pod list arrives.
  nodes_->Start();
  pods_->Start();
  quotas_->Start();
  {
    MutexLock lock(bg_mu_);
    stopping_ = false;
  }
  background_ = std::thread([this] { BackgroundLoop(); });
  if (options_.leader_elect) leader_thread_ = std::thread([this] { LeaderLoop(); });
  HAMI_LOG(Info) << "scheduler " << options_.scheduler_name << " started: node policy "
                 << NodePolicyName(options_.node_policy) << ", gpu policy " << options_.gpu_policy
                 << (options_.leader_elect ? ", following lease " + options_.lease_namespace + "/" +
                                                 options_.lease_name + " as " + options_.identity
                                           : ", leader election off");
  return OkStatus();
}

void SchedulerService::Stop() {
  if (!started_.exchange(false)) return;
  {
    MutexLock lock(bg_mu_);
    stopping_ = true;
  }
  bg_cv_.notify_all();
  ready_cv_.notify_all();
  NoteNodeChange();  // binds waiting for a node lock see the service stopping
  if (leader_thread_.joinable()) leader_thread_.join();
  if (background_.joinable()) background_.join();
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
  auto deadline = std::chrono::steady_clock::now() + timeout;
  UniqueLock lock(ready_mu_);
  while (!Ready()) {
    if (!started_.load()) return false;
    if (ready_cv_.wait_until(lock.native(),
                             std::min(deadline, std::chrono::steady_clock::now() +
                                                    std::chrono::milliseconds(100))) ==
            std::cv_status::timeout &&
        std::chrono::steady_clock::now() >= deadline) {
      return Ready();
    }
  }
  return true;
}

bool SchedulerService::EnterBindGate(const std::string& node,
                                     std::chrono::steady_clock::time_point deadline) {
  UniqueLock l(bind_gates_mu_);
  if (!bind_gates_cv_.wait_until(l.native(), deadline, [&]() REQUIRES(bind_gates_mu_) {
        return busy_nodes_.count(node) == 0;
      })) {
    return false;
  }
  busy_nodes_.insert(node);
  return true;
}

void SchedulerService::LeaveBindGate(const std::string& node) {
  {
    MutexLock l(bind_gates_mu_);
    busy_nodes_.erase(node);
  }
  bind_gates_cv_.notify_all();
}

// ---------------------------------------------------------------------------------------------
// Informer handlers.

void SchedulerService::OnPod(const k8s::ObjectPtr& obj, bool deleted) {
  const k8s::Object& pod = *obj;
  // Counted once the event is fully handled (a test waits on it to know a change was seen).
  struct Handled {
    SchedulerService* s;
    int64_t rv;
    ~Handled() {
      MutexLock l(s->stats_mu_);
      ++s->stats_.pod_events;
      s->stats_.last_pod_version = std::max(s->stats_.last_pod_version, rv);
    }
  } handled{this, ResourceVersionNumber(pod)};
  std::string uid = k8s::Uid(pod);
  if (uid.empty()) return;
  PodObject p = PodObjectOf(pod);
  const bool annotated = p.annotations.count(kAssignedNodeAnnotation) > 0;
  if (!annotated) {
    // Most pods in a cluster never ask for a device: a shared look keeps their events from
    // queueing behind filters for the exclusive lock.
    ReaderLock lock(mu_);
    if (ledger_.FindPod(uid) == nullptr && written_.count(uid) == 0) {
      lock.Unlock();
      MaybeReleaseLock(pod, deleted);
      return;
    }
  }
  {
    WriterLock lock(mu_);
    if (deleted) {
      if (ledger_.FindPod(uid) != nullptr) {
        ledger_.RemovePod(uid);
        ++generation_;
      }
      written_.erase(uid);
      pending_.erase(uid);
      unsettled_.erase(uid);
    } else {
      // A bind whose answer was lost is settled by the pod itself showing a node.
      if (!unsettled_.empty() && !k8s::GetString(pod, "/spec/nodeName").empty()) {
        unsettled_.erase(uid);
      }
      auto w = written_.find(uid);
      if (w != written_.end()) {
        int64_t rv = ResourceVersionNumber(pod);
        if (rv >= 0 && rv < w->second) {
          // Older than the annotations this service wrote: applying it would undo our placement.
          MutexLock s(stats_mu_);
          ++stats_.stale_pod_events;
          return;
        }
        written_.erase(w);
      }
      if (annotated || ledger_.FindPod(uid) != nullptr) {
        Status s = ledger_.UpsertPod(p);
        ++generation_;
        if (!s.ok()) {
          HAMI_LOG(Warning) << "pod " << p.name_space << "/" << p.name
                            << ": allocation annotations ignored: " << s.message();
        }
      }
    }
  }
  MaybeReleaseLock(pod, deleted);
}

void SchedulerService::MaybeReleaseLock(const k8s::Object& pod, bool gone) {
  std::string node = k8s::GetString(pod, "/spec/nodeName");
  if (node.empty()) node = k8s::GetString(pod, "/metadata/annotations/hami.io~1vgpu-node");
  if (node.empty()) return;
  std::string phase = k8s::GetString(pod, "/metadata/annotations/hami.io~1bind-phase");
  std::string pod_phase = k8s::GetString(pod, "/status/phase");
  bool finished = gone || phase == kBindPhaseSuccess || phase == kBindPhaseFailed ||
                  pod_phase == "Succeeded" || pod_phase == "Failed";
  if (!finished) return;
  k8s::ObjectPtr hold;
  const k8s::Object* n = CachedNode(node, &hold);
  if (n == nullptr) return;
  std::string held = NodeLockOf(*n);
  if (held.empty()) return;
  Result<device::NodeLockValue> lock = device::DecodeNodeLock(held);
  std::string ns = k8s::Namespace(pod), name = k8s::Name(pod);
  if (!lock.ok() || !lock->HeldBy(ns, name)) return;
  QueueLockRelease(node, ns, name);
}

void SchedulerService::QueueLockRelease(const std::string& node, const std::string& ns,
                                        const std::string& pod) {
  std::string key = node + "/" + ns + "/" + pod;
  bool first;
  {
    MutexLock l(bg_mu_);
    if (!release_pending_.insert(key).second) return;
    // Every entry has the same grace, so appending keeps releases_ in due order.
    first = releases_.empty();
    releases_.push_back(
        LockRelease{node, ns, pod, std::chrono::steady_clock::now() + options_.lock_release_grace});
  }
  {
    MutexLock s(stats_mu_);
    ++stats_.lock_releases_queued;
  }
  // The background loop sleeps until the oldest entry is due: only a first entry changes that.
  // (Waking it for every bound pod cost a context switch per pod.)
  if (first) bg_cv_.notify_all();
}

void SchedulerService::OnNode(const k8s::ObjectPtr& obj, bool deleted) {
  std::string name = k8s::Name(*obj);
  if (deleted) {
    {
      WriterLock lock(mu_);
      ledger_.RemoveNode(name);
      ++generation_;
    }
    MutexLock l(bg_mu_);
    node_state_.erase(name);
    HAMI_LOG(Info) << "node " << name << ": deleted, no longer scheduled";
  } else {
    MutexLock l(bg_mu_);
    dirty_nodes_.insert(name);
  }
  bg_cv_.notify_all();
  NoteNodeChange();
}

void SchedulerService::NoteNodeChange() {
  {
    MutexLock l(lock_wait_mu_);
    ++node_changes_;
  }
  lock_wait_cv_.notify_all();
}

const k8s::Object* SchedulerService::CachedNode(const std::string& name,
                                                k8s::ObjectPtr* hold) const {
  if (!nodes_) return nullptr;
  *hold = nodes_->Get(name);
  return hold->get();
}

// ---------------------------------------------------------------------------------------------
// Node registration and handshake.

void SchedulerService::ReconcileNode(const k8s::Object& node) {
  const std::string name = k8s::Name(node);
  device::Annotations annos = AnnotationsOf(node);
  const int64_t now = clock_.NowUnixSeconds();
  // Only the background thread writes node_state_ (OnNode erases deleted nodes): read it once,
  // write it back once.
  NodeState state;
  {
    MutexLock l(bg_mu_);
    state = node_state_[name];
  }
  // Each vendor of the node is judged on its own (registration, handshake, allocatable): one
  // whose device plugin is gone leaves the ledger, the node's other vendors stay.
  NodeObject obj = NodeObjectOf(node);
  k8s::AnnotationChanges node_writes;  // handshakes to request, or to clear
  bool healthy_any = false;
  std::string why;
  for (const auto& vendor : vendors_.vendors()) {
    const device::VendorAnnotationKeys& keys = vendor->annotation_keys();
    const std::string key(vendor->Key());
    if (!device::VendorPresentOn(*vendor, device::NodeView{name, annos, obj.capacity})) {
      state.vendors.erase(key);
      continue;
    }
    VendorNodeState& vs = state.vendors[key];
    const std::string count_res(vendor->registration_capacity().empty()
                                    ? std::string_view(vendor->resource_names().count)
                                    : vendor->registration_capacity());
    int64_t alloc = NodeAllocatable(node, count_res);
    std::string hs_value;
    if (auto h = annos.find(keys.node_handshake); h != annos.end()) hs_value = h->second;
    bool healthy = true;
    std::string vendor_why;
    device::Handshake hs = device::DecodeHandshake(hs_value);
    if (keys.node_handshake.empty()) {
      // No handshake protocol (capacity vendors): allocatable alone tells.
    } else if (hs.state == device::HandshakeState::kRequesting) {
      int64_t age = 0;
      if (hs.time) age = now - device::CivilToUnix(*hs.time, LocalOffsetSeconds(now));
      if (age > options_.handshake_grace.count() && alloc <= 0) {
        healthy = false;
        vendor_why = "handshake " + hs_value + " unanswered for " + std::to_string(age) +
                     " s and allocatable " + count_res + " is 0";
      }
    } else {
      node_writes[keys.node_handshake] =
          device::EncodeHandshakeRequesting(device::UnixToCivil(now, LocalOffsetSeconds(now)));
    }
    // Allocatable tracking: a device plugin that went away zeroes the count.
    bool lost = alloc <= 0 && (vs.allocatable > 0 || vs.plugin_lost);
    if (lost) {
      healthy = false;
      vendor_why = "allocatable " + count_res + " dropped to 0 (device plugin gone?)";
    }
    vs.allocatable = alloc;
    vs.plugin_lost = lost;
    if (healthy) {
      healthy_any = true;
      continue;
    }
    why = vendor_why;
    // Its devices leave the ledger.
    if (std::string_view res = vendor->registration_capacity(); !res.empty()) {
      obj.capacity.erase(std::string(res));
    } else {
      obj.annotations.erase(keys.node_register);
    }
    node_writes.erase(keys.node_handshake);
    if (vs.in_ledger) {
      HAMI_LOG(Warning) << "node " << name << ": " << key
                        << " devices removed from scheduling: " << vendor_why;
      // Ask its device plugin to register again.
      if (!keys.node_handshake.empty()) node_writes[keys.node_handshake] = std::nullopt;
    }
    vs.in_ledger = false;
  }
  if (healthy_any) {
    Status s;
    bool registered;  // some vendor's devices are in (a broken one leaves only its own out)
    {
      WriterLock lock(mu_);
      s = ledger_.UpsertNode(obj);
      int32_t slot = ledger_.FindNode(name);
      registered = slot >= 0 && ledger_.nodes()[slot].registered;
      ++generation_;
    }
    if (!s.ok()) {
      HAMI_LOG(Warning) << "node " << name << ": registration not usable: " << s.message();
    }
    if (registered && !state.in_ledger) {
      HAMI_LOG(Info) << "node " << name << ": registered for scheduling";
    }
    state.in_ledger = registered;
    for (auto& [key, vs] : state.vendors) {
      vs.in_ledger = registered &&
                     device::VendorPresentOn(*vendors_.Find(key),
                                             device::NodeView{name, obj.annotations, obj.capacity});
    }
  } else if (state.in_ledger || !why.empty()) {
    {
      WriterLock lock(mu_);
      ledger_.RemoveNode(name);
      ++generation_;
    }
    if (state.in_ledger) {
      HAMI_LOG(Warning) << "node " << name << ": removed from scheduling: "
                        << (why.empty() ? "no device registration" : why);
      for (const auto& vendor : vendors_.vendors()) {  // ask the device plugins to register again
        const std::string& hs_key = vendor->annotation_keys().node_handshake;
        if (!hs_key.empty()) node_writes[hs_key] = std::nullopt;
      }
    }
    state.in_ledger = false;
  }
  {
    MutexLock l(bg_mu_);
    node_state_[name] = state;
  }
  if (!node_writes.empty()) {
    Result<k8s::WriteAck> r = k8s::PatchNodeAnnotations(client_, name, node_writes);
    if (!r.ok()) {
      HAMI_LOG(Warning) << "node " << name << ": handshake not written: " << r.status().ToString();
    }
  }
}

void SchedulerService::ReconcileNodes() {
  if (!nodes_) return;
  for (const k8s::ObjectPtr& n : nodes_->List()) ReconcileNode(*n);
  size_t expired;
  {
    WriterLock lock(mu_);
    expired = ledger_.ExpireReservations();
    if (expired > 0) {
      ++generation_;
      // Placements that were never bound and never written go with their reservations.
      for (auto it = pending_.begin(); it != pending_.end();) {
        const LedgerPod* p = ledger_.FindPod(it->first);
        if (p != nullptr && p->state == PodState::kReserved) {
          ++it;
          continue;
        }
        if (auto w = written_.find(it->first); w != written_.end() && w->second == INT64_MAX) {
          written_.erase(w);
        }
        it = pending_.erase(it);
      }
    }
  }
  if (expired > 0) HAMI_LOG(Info) << expired << " reservations expired (pods never bound)";
}

void SchedulerService::BackgroundLoop() {
  auto next_full = std::chrono::steady_clock::now();
  bool was_leader = false;
  // Lock releases are checked in batches: the loop wakes this long after the oldest is due and
  // handles every entry due by then (one wake-up per batch rather than per pod). The grace is a
  // lower bound, so a release checked up to a quarter of it late (at most 250 ms) is fine.
  const auto batch = std::min<std::chrono::steady_clock::duration>(std::chrono::milliseconds(250),
                                                                   options_.lock_release_grace / 4);
  for (;;) {
    std::vector<std::string> dirty;
    std::vector<LockRelease> releases;
    bool full = false;
    {
      UniqueLock l(bg_mu_);
      auto release_due = [&]() REQUIRES(bg_mu_) {
        return !releases_.empty() &&
               releases_.front().due + batch <= std::chrono::steady_clock::now();
      };
      auto wake = next_full;
      if (!releases_.empty()) wake = std::min(wake, releases_.front().due + batch);
      bg_cv_.wait_until(l.native(), wake, [&]() REQUIRES(bg_mu_) {
        return stopping_ || !dirty_nodes_.empty() || release_due() || full_pass_ ||
               (!releases_.empty() && releases_.front().due + batch < wake);
      });
      if (stopping_) return;
      dirty.assign(dirty_nodes_.begin(), dirty_nodes_.end());
      dirty_nodes_.clear();
      auto now = std::chrono::steady_clock::now();
      auto first_later = std::find_if(releases_.begin(), releases_.end(),
                                      [&](const LockRelease& r) { return r.due > now; });
      releases.assign(std::make_move_iterator(releases_.begin()),
                      std::make_move_iterator(first_later));
      releases_.erase(releases_.begin(), first_later);
      full = full_pass_;
      full_pass_ = false;
    }
    for (const LockRelease& r : releases) {
      // The device plugin normally cleared it during the grace: then the cached node says so
      // and nothing is written.
      k8s::ObjectPtr hold;
      const k8s::Object* n = CachedNode(r.node, &hold);
      std::string held = n != nullptr ? NodeLockOf(*n) : std::string();
      Result<device::NodeLockValue> lock = device::DecodeNodeLock(held);
      if (!held.empty() && lock.ok() && lock->HeldBy(r.ns, r.pod)) {
        Status s = locker_.Release(r.node, r.ns, r.pod, n);
        if (!s.ok()) {
          HAMI_LOG(Warning) << "node lock on " << r.node << " not released: " << s.ToString();
        } else {
          HAMI_LOG(Info) << "node lock on " << r.node << " released for " << r.ns << "/" << r.pod
                         << ": the pod finished allocating and its device plugin did not clear it";
          MutexLock g(stats_mu_);
          ++stats_.locks_released;
        }
      }
      MutexLock l(bg_mu_);
      release_pending_.erase(r.node + "/" + r.ns + "/" + r.pod);
    }
    bool leader = leader_.load();
    if (!leader) {
      was_leader = false;
      registered_once_.store(false);
      next_full = std::chrono::steady_clock::now() + std::chrono::milliseconds(200);
      continue;
    }
    bool synced = nodes_->HasSynced();
    if (leader && synced &&
        (full || !was_leader || std::chrono::steady_clock::now() >= next_full ||
         !registered_once_.load())) {
      ReconcileNodes();
      next_full = std::chrono::steady_clock::now() + options_.register_interval;
      was_leader = true;
      if (!registered_once_.exchange(true)) {
        HAMI_LOG(Info) << "registration pass done: scheduler ready";
      }
      ready_cv_.notify_all();
    } else if (leader && synced) {
      for (const std::string& name : dirty) {
        k8s::ObjectPtr n = nodes_->Get(name);
        if (n) ReconcileNode(*n);
      }
    } else {
      next_full = std::chrono::steady_clock::now() + std::chrono::milliseconds(100);
    }
  }
}

// ---------------------------------------------------------------------------------------------
// Leader following.

void SchedulerService::SetLeader(bool leader) {
  if (leader_.exchange(leader) == leader) return;
  HAMI_LOG(Info) << (leader ? "became leader" : "lost leadership") << " (lease "
                 << options_.lease_namespace << "/" << options_.lease_name << ")";
  if (leader) {
    MutexLock l(bg_mu_);
    full_pass_ = true;
  } else {
    registered_once_.store(false);
  }
  bg_cv_.notify_all();
  ready_cv_.notify_all();
  if (!options_.pod_name.empty() && !options_.pod_namespace.empty()) {
    Json patch;
    patch["metadata"]["labels"]["hami.io/scheduler-role"] = leader ? "leader" : "follower";
    Result<k8s::Object> r = client_.Patch(k8s::kPods, options_.pod_namespace, options_.pod_name,
                                          k8s::PatchType::kMerge, patch.dump());
    if (!r.ok()) HAMI_LOG(Warning) << "scheduler-role label: " << r.status().ToString();
  }
}

void SchedulerService::LeaderLoop() {
  std::string seen_holder, seen_renew;
  auto seen_at = std::chrono::steady_clock::now();
  for (;;) {
    {
      UniqueLock l(bg_mu_);
      if (bg_cv_.wait_for(l.native(), options_.lease_poll,
                          [&]() REQUIRES(bg_mu_) { return stopping_; })) {
        return;
      }
    }
    Result<k8s::Object> lease =
        k8s::GetLease(client_, options_.lease_namespace, options_.lease_name);
    if (!lease.ok()) {
      if (!k8s::IsNotFound(lease.status())) {
        HAMI_VLOG(2) << "lease read failed: " << lease.status().ToString();
      }
      SetLeader(false);
      continue;
    }
    std::string holder = k8s::GetString(*lease, "/spec/holderIdentity");
    std::string renew = k8s::GetString(*lease, "/spec/renewTime");
    int64_t duration = k8s::GetInt(*lease, "/spec/leaseDurationSeconds", 15);
    auto now = std::chrono::steady_clock::now();
    if (holder != seen_holder || renew != seen_renew) {
      seen_holder = holder;
      seen_renew = renew;
      seen_at = now;
    }
    bool fresh = now - seen_at <= std::chrono::seconds(duration);
    bool ours = !options_.identity.empty() && holder.rfind(options_.identity, 0) == 0;
    SetLeader(ours && fresh);
  }
}

// ---------------------------------------------------------------------------------------------
// Filter.

std::string SchedulerService::FilterSimulation(const std::string& pod_json, const Json& nodes) {
  Result<k8s::Object> pod = k8s::ParseObject(pod_json);
  if (!pod.ok()) return ErrorReply("pod: " + pod.status().message());
  Ledger scratch(vendors_, clock_, LedgerOptions{options_.reservation_ttl_seconds});
  std::map<std::string, Json> by_name;
  if (nodes.contains("items") && nodes["items"].is_array()) {
    for (const Json& n : nodes["items"]) {
      Status s = scratch.UpsertNode(NodeObjectOf(n));
      if (!s.ok()) HAMI_VLOG(4) << "simulation: node " << k8s::Name(n) << ": " << s.message();
      by_name[k8s::Name(n)] = n;
    }
  }
  PodSpec spec;
  spec.uid = k8s::Uid(*pod);
  spec.name_space = k8s::Namespace(*pod);
  spec.name = k8s::Name(*pod);
  spec.annotations = AnnotationsOf(*pod);
  Result<device::PodRequests> req = device::ParsePodRequests(vendors_, PodResourcesOf(*pod));
  if (!req.ok()) return ErrorReply(req.status().message());
  spec.requests = std::move(*req);
  std::vector<std::string> names;
  for (const auto& [n, _] : by_name) names.push_back(n);
  std::vector<std::string_view> views(names.begin(), names.end());
  Result<Decision> d = engine_.Place(scratch, spec, views);
  if (!d.ok()) return ErrorReply(d.status().message());
  Json out;
  out["failedNodes"] = Json::object();
  for (const auto& [n, reason] : d->FailedNodes()) out["failedNodes"][n] = reason;
  out["nodes"]["items"] = Json::array();
  if (d->fit()) out["nodes"]["items"].push_back(by_name[d->node]);
  return out.dump();
}

std::string SchedulerService::Filter(std::string_view body) {
  {
    MutexLock s(stats_mu_);
    ++stats_.filters;
  }
  auto fail = [this](std::string msg) {
    MutexLock s(stats_mu_);
    ++stats_.filter_errors;
    return ErrorReply(msg);
  };
  Result<ExtenderArgs> args = ParseExtenderArgs(body);
  if (!args.ok()) return fail("extender args are not a JSON object: " + args.status().message());
  if (!args->pod.is_object()) return fail("extender args missing pod");
  auto pod_ptr = std::make_shared<const k8s::Object>(std::move(args->pod));
  const k8s::Object& pod = *pod_ptr;
  const std::string key = PodKey(k8s::Namespace(pod), k8s::Name(pod));

  PodSpec spec;
  spec.uid = k8s::Uid(pod);
  spec.name_space = k8s::Namespace(pod);
  spec.name = k8s::Name(pod);
  spec.annotations = AnnotationsOf(pod);
  Result<device::PodRequests> req = device::ParsePodRequests(vendors_, PodResourcesOf(pod));
  if (!req.ok()) {
    std::string msg = "pod " + key + ": invalid device request: " + req.status().message();
    HAMI_LOG(Warning) << msg;
    events_.Record(k8s::EventSpec{pod_ptr, "Pod", "Warning", "FilteringFailed", msg,
                                  options_.scheduler_name, options_.identity});
    return fail(msg);
  }
  spec.requests = std::move(*req);

  // Views into `args`, which outlives them: no copy of thousands of node names per filter.
  if (args->names_not_list) return fail("extender args: nodenames is not a list");
  const bool by_name = args->has_names;
  const std::vector<std::string_view>& views = args->names;
  if (spec.requests.Empty()) {
    // Not ours to constrain: every offered node stays.
    Json out = Json::object();
    if (by_name) {
      out["nodenames"] = Json::array();
      for (std::string_view v : views) out["nodenames"].push_back(std::string(v));
    } else if (!args->nodes.is_null()) {
      out["nodes"] = args->nodes;
    }
    return out.dump();
  }
  if (!by_name) {
    if (!args->nodes.is_object()) return fail("extender args carry no nodes");
    return FilterSimulation(pod.dump(), args->nodes);
  }
  if (spec.uid.empty()) return fail("pod " + key + " has no uid");
  if (!Ready() && !WaitReady(options_.filter_ready_wait)) {
    return fail(IsLeader() ? "scheduler not ready: cluster view not synced yet"
                           : "scheduler not ready: not the leader");
  }

  // Place under the shared lock; reserve under the exclusive one if nothing changed meanwhile.
  Decision d;
  {
    WriterLock lock(mu_);
    if (std::string busy = BindInFlightReason(spec.uid); !busy.empty()) {
      // kube-scheduler gave up on a bind that is still running (or whose outcome is unknown):
      // placing the pod again now could bind it twice. Every node fails until that settles.
      lock.Unlock();
      HAMI_LOG(Info) << "pod " << key << ": not placed again: " << busy;
      events_.Record(k8s::EventSpec{pod_ptr, "Pod", "Warning", "FilteringFailed", busy,
                                    options_.scheduler_name, options_.identity});
      {
        MutexLock s(stats_mu_);
        ++stats_.bind_busy;
      }
      Json out;
      out["nodenames"] = Json::array();
      out["failedNodes"] = Json::object();
      for (std::string_view v : views) out["failedNodes"][std::string(v)] = busy;
      return out.dump();
    }
    if (const LedgerPod* old = ledger_.FindPod(spec.uid);
        old != nullptr && old->state == PodState::kReserved) {
      GiveBackReservationLocked(spec.uid);  // a retried pod gives its earlier choice back first
    }
  }
  uint64_t seen_generation;
  {
    ReaderLock lock(mu_);
    seen_generation = generation_;
    if (quota_.HasQuota(spec.name_space)) {
      spec.quota = quota_.Room(ledger_, spec.name_space, spec.uid);
    }
    Result<Decision> placed = engine_.Place(ledger_, spec, views);
    if (!placed.ok()) return fail("pod " + key + ": " + placed.status().message());
    d = std::move(*placed);
  }
  if (d.fit()) {
    WriterLock lock(mu_);
    if (generation_ != seen_generation) {
      // Someone wrote meanwhile: confirm the choice still holds, else place again.
      if (quota_.HasQuota(spec.name_space)) {
        spec.quota = quota_.Room(ledger_, spec.name_space, spec.uid);
      }
      std::string_view chosen[] = {d.node};
      Result<Decision> again = engine_.Place(ledger_, spec, chosen);
      bool same = again.ok() && again->fit();
      if (!same) {
        again = engine_.Place(ledger_, spec, views);
        if (!again.ok()) return fail("pod " + key + ": " + again.status().message());
      }
      std::vector<NodeVerdict> verdicts = std::move(d.verdicts);
      int32_t chosen_index = d.chosen;
      d = std::move(*again);
      if (same) {  // keep every node's verdict for the event text
        verdicts[chosen_index].score = d.verdicts[0].score;
        d.verdicts = std::move(verdicts);
        d.chosen = chosen_index;
      }
      MutexLock s(stats_mu_);
      ++stats_.replaced_after_race;
    }
    if (d.fit()) {
      Status s = ledger_.Reserve(d.ToReservation(spec));
      ++generation_;
      if (!s.ok()) return fail("pod " + key + ": reservation failed: " + s.message());
      // Until the bind writes the placement, events of the pod (which carry none) would undo
      // the reservation: ignored from this moment (the same critical section).
      written_[spec.uid] = INT64_MAX;
    }
  }
  if (!d.fit()) {
    std::string msg = FailureSummary(d);
    HAMI_LOG(Info) << "pod " << key << ": no node fits: " << msg;
    events_.Record(k8s::EventSpec{pod_ptr, "Pod", "Warning", "FilteringFailed", msg,
                                  options_.scheduler_name, options_.identity});
    {
      MutexLock s(stats_mu_);
      ++stats_.filter_no_fit;
    }
    Json out;
    out["nodenames"] = Json::array();
    out["failedNodes"] = Json::object();
    for (const auto& [n, reason] : d.FailedNodes()) out["failedNodes"][n] = reason;
    return out.dump();
  }

  // The placement goes onto the pod (the source of truth from then on) in the bind, in one
  // round trip with the node lock; until then the reservation holds the devices.
  device::Annotations annos;
  const int64_t decided_at = clock_.NowUnixSeconds();
  Status enc = device::EncodePodDevices(
      vendors_, d.devices, d.container_count, &annos,
      device::PodWriteContext{d.node, decided_at, &spec.annotations, &spec.requests});
  if (!enc.ok()) {
    {
      WriterLock lock(mu_);
      GiveBackReservationLocked(spec.uid);
    }
    std::string msg =
        "pod " + key + ": placement on " + d.node + " not encodable: " + enc.ToString();
    HAMI_LOG(Warning) << msg;
    events_.Record(k8s::EventSpec{pod_ptr, "Pod", "Warning", "FilteringFailed", msg,
                                  options_.scheduler_name, options_.identity});
    return fail(msg);
  }
  k8s::AnnotationChanges changes;
  for (auto& [k, v] : annos) changes[k] = v;
  changes[std::string(kAssignedNodeAnnotation)] = d.node;
  changes[std::string(kAssignedTimeAnnotation)] = std::to_string(decided_at);
  if (!d.mig.empty()) {
    changes[std::string(device::kMigAllocationsAnnotation)] = device::EncodeMigAllocations(d.mig);
  }
  Json patch;
  for (const auto& [k, v] : changes) patch["metadata"]["annotations"][k] = *v;
  patch["metadata"]["labels"][std::string(kAssignedNodeAnnotation)] = d.node;
  {
    WriterLock lock(mu_);
    pending_[spec.uid] = PendingPlacement{d.node, patch.dump()};
  }
  std::string msg = d.SucceedMessage();
  std::string lists;  // every vendor's device list written
  for (const auto& vendor : vendors_.vendors()) {
    auto it = changes.find(vendor->annotation_keys().allocated);
    if (it == changes.end() || !it->second) continue;
    lists += (lists.empty() ? "" : " ") + std::string(vendor->Key()) + "=" + *it->second;
  }
  HAMI_LOG(Info) << "pod " << key << ": " << msg << "; devices " << (lists.empty() ? "-" : lists);
  events_.Record(k8s::EventSpec{pod_ptr, "Pod", "Normal", "FilteringSucceed", msg,
                                options_.scheduler_name, options_.identity});
  {
    MutexLock s(stats_mu_);
    ++stats_.filter_fit;
  }
  Json out;
  out["nodenames"] = Json::array({d.node});
  out["failedNodes"] = Json::object();
  for (const auto& [n, reason] : d.FailedNodes()) out["failedNodes"][n] = reason;
  return out.dump();
}

std::string SchedulerService::BindInFlightReason(const std::string& uid) {
  if (auto b = binding_.find(uid); b != binding_.end()) {
    return "a bind of this pod to " + b->second + " is still running";
  }
  auto u = unsettled_.find(uid);
  if (u == unsettled_.end()) return "";
  auto left = u->second.until - std::chrono::steady_clock::now();
  if (left <= std::chrono::steady_clock::duration::zero()) {
    // Long enough for a lost request to have landed: the pod is not bound, so its devices may
    // go (the caller gives the reservation back) and the lock its bind may hold with them.
    QueueLockRelease(u->second.node, u->second.ns, u->second.name);
    unsettled_.erase(u);
    return "";
  }
  return "the answer to this pod's Binding to " + u->second.node +
         " was lost; its devices stay reserved until the API server shows whether it landed "
         "(at most " +
         std::to_string(std::chrono::ceil<std::chrono::seconds>(left).count()) + " s more)";
}

void SchedulerService::GiveBackReservationLocked(const std::string& uid) {
  pending_.erase(uid);
  if (auto w = written_.find(uid); w != written_.end() && w->second == INT64_MAX) written_.erase(w);
  if (const LedgerPod* p = ledger_.FindPod(uid); p != nullptr && p->state == PodState::kReserved) {
    ledger_.RemovePod(uid);
    ++generation_;
  }
}

// ---------------------------------------------------------------------------------------------
// Bind.

namespace {

// A write whose answer never came: it may or may not have been applied.
bool OutcomeUnknown(const Status& s) {
  return s.code() == StatusCode::kUnknown || s.code() == StatusCode::kDeadlineExceeded ||
         s.code() == StatusCode::kUnavailable;
}

}  // namespace

// A lost answer is retried (a Binding is applied at most once: a retry of one that landed is
// refused with 409), and a refusal after a lost answer is checked with a fresh read: a pod on
// `node` is our success. `*unknown` is set when the pod may still end up bound by a request
// that is somewhere on its way.
Status SchedulerService::PostBinding(const std::string& ns, const std::string& name,
                                     const std::string& uid, const std::string& node,
                                     const std::map<std::string, std::string>& stamp,
                                     bool* unknown) {
  *unknown = false;
  bool lost = false;
  Status s;
  for (int attempt = 0; attempt < 3; ++attempt) {
    s = k8s::BindPod(client_, ns, name, uid, node, stamp);
    if (s.ok()) return s;
    if (!OutcomeUnknown(s)) break;
    lost = true;
  }
  if (!lost) return s;
  Result<k8s::Object> fresh = k8s::GetPod(client_, ns, name);
  if (fresh.ok() && (uid.empty() || k8s::Uid(*fresh) == uid)) {
    std::string on = k8s::GetString(*fresh, "/spec/nodeName");
    if (on == node) {
      HAMI_LOG(Info) << "pod " << ns << "/" << name << ": the Binding whose answer was lost "
                     << "had landed on " << node;
      MutexLock g(stats_mu_);
      ++stats_.bind_recovered;
      return OkStatus();
    }
    if (!on.empty()) return s;  // bound elsewhere: nothing of ours can land any more
  } else if (fresh.ok() || k8s::IsNotFound(fresh.status())) {
    return s;  // another pod of that name, or none: no Binding of ours can land
  }
  *unknown = true;
  return s;
}

std::string SchedulerService::Bind(std::string_view body) {
  Result<Json> args = k8s::ParseJson(body);
  if (!args.ok() || !args->is_object()) return ErrorReply("binding args are not a JSON object");
  auto str = [&](const char* k) {
    auto it = args->find(k);
    return it != args->end() && it->is_string() ? it->get<std::string>() : std::string();
  };
  std::string ns = str("podNamespace"), name = str("podName"), uid = str("podUID"),
              node = str("node");
  if (name.empty() || node.empty()) return ErrorReply("binding args need podName and node");
  if (ns.empty()) ns = "default";
  const std::string key = PodKey(ns, name);
  // Every wait below (another bind to the node in this process, another allocation's node
  // lock) shares one budget, so a bind answers within node_lock_wait plus its writes.
  const auto deadline = std::chrono::steady_clock::now() + options_.node_lock_wait;
  {
    MutexLock s(stats_mu_);
    ++stats_.binds;
  }
  // As for filters: a fresh instance answers once its view of nodes and pods is complete.
  if (!Ready() && !WaitReady(options_.filter_ready_wait)) {
    MutexLock s(stats_mu_);
    ++stats_.bind_errors;
    return ErrorReply(IsLeader() ? "scheduler not ready: cluster view not synced yet"
                                 : "scheduler not ready: not the leader");
  }
  k8s::ObjectPtr pod = pods_ ? pods_->Get(key) : nullptr;
  if (!pod || (!uid.empty() && k8s::Uid(*pod) != uid)) {
    Result<k8s::Object> fresh = k8s::GetPod(client_, ns, name);
    if (!fresh.ok()) {
      if (k8s::IsNotFound(fresh.status()) && !uid.empty()) {
        WriterLock lock(mu_);
        if (binding_.count(uid) == 0) {
          ledger_.RemovePod(uid);
          unsettled_.erase(uid);
          ++generation_;
        }
      }
      MutexLock s(stats_mu_);
      ++stats_.bind_errors;
      return ErrorReply("pod " + key + ": " + fresh.status().ToString());
    }
    pod = std::make_shared<const k8s::Object>(std::move(*fresh));
  }
  auto bind_fail = [&](const std::string& msg) {
    HAMI_LOG(Warning) << "pod " << key << ": binding to " << node << " failed: " << msg;
    events_.Record(k8s::EventSpec{pod, "Pod", "Warning", "BindingFailed", msg,
                                  options_.scheduler_name, options_.identity});
    MutexLock s(stats_mu_);
    ++stats_.bind_errors;
    return ErrorReply(msg);
  };
  k8s::ObjectPtr node_hold;
  const k8s::Object* cached = CachedNode(node, &node_hold);
  if (cached == nullptr) return bind_fail("node " + node + " not found");

  // Which vendors the pod asks for decides the locks: HAMi's shared one for vendors whose
  // plugins speak its protocol, a vendor's own (Cambricon), or none.
  Result<device::PodRequests> req = device::ParsePodRequests(vendors_, PodResourcesOf(*pod));
  const bool has_devices = req.ok() && !req->Empty();
  bool needs_lock = false;
  std::set<std::string> own_locks;
  if (has_devices) {
    for (const device::ContainerRequests& c : req->containers) {
      for (const device::ContainerRequest& r : c) {
        const device::Vendor* v = vendors_.Find(r.vendor);
        if (v == nullptr) continue;
        needs_lock |= v->node_lock() == device::NodeLockKind::kShared;
        if (v->node_lock() == device::NodeLockKind::kOwn) {
          own_locks.emplace(v->own_node_lock());
        }
      }
    }
  }
  if (uid.empty()) uid = k8s::Uid(*pod);
  // One bind per pod at a time (kube-scheduler retries a pod whose bind outlived its extender
  // timeout while that bind may still succeed). The placement this instance's filter reserved
  // and has not written yet; without one, the pod must already carry a placement on this node
  // (an earlier attempt wrote it).
  std::optional<PendingPlacement> placement;
  {
    WriterLock lock(mu_);
    if (auto b = binding_.find(uid); b != binding_.end()) {
      std::string running = b->second;
      lock.Unlock();
      {
        MutexLock g(stats_mu_);
        ++stats_.bind_busy;
      }
      return bind_fail("a bind of this pod to " + running + " is still running");
    }
    binding_.emplace(uid, node);
    if (has_devices) {
      auto it = pending_.find(uid);
      if (it != pending_.end() && it->second.node == node) {
        placement = std::move(it->second);
        pending_.erase(it);
      }
    }
  }
  struct Running {  // ends this bind's entry in binding_ on every way out
    SchedulerService* self;
    const std::string& uid;
    ~Running() {
      WriterLock lock(self->mu_);
      self->binding_.erase(uid);
    }
  } running{this, uid};
  if (has_devices && !placement &&
      k8s::GetString(*pod, "/metadata/annotations/hami.io~1vgpu-node") != node) {
    return bind_fail("no device placement on node " + node +
                     " for this pod (it was filtered before a scheduler restart, by another "
                     "instance, or its reservation expired); it will be filtered again");
  }
  NodeLocker::Companion companion;
  if (placement) {
    companion.patch.resource = &k8s::kPods;
    companion.patch.ns = ns;
    companion.patch.name = name;
    companion.patch.patch = placement->patch;
  }
  // Once the placement's write is decided: it reached the pod (pod events up to that write are
  // stale from now on), or it did not and the devices go back (kube-scheduler filters the pod
  // again after a failed bind).
  auto settle = [&] {
    if (!placement) return;
    WriterLock lock(mu_);
    if (!companion.sent) return GiveBackReservationLocked(uid);
    if (!companion.result.ok()) {
      if (OutcomeUnknown(companion.result.status())) {
        // The write may have reached the pod with its answer lost: giving the devices back
        // could hand them to another pod while this one holds them. They stay reserved until
        // the pod's own state (its next event) or the reservation's expiry settles it.
        HAMI_LOG(Warning) << "pod " << key << ": placement write on " << node
                          << " has an unknown outcome (" << companion.result.status().ToString()
                          << "); its devices stay reserved until the pod shows it";
        return;
      }
      return GiveBackReservationLocked(uid);
    }
    int64_t rv = ResourceVersionNumberOf(companion.result->resource_version);
    if (rv >= 0) {
      written_[uid] = rv;
    } else {
      written_.erase(uid);
    }
  };
  bool locked = false;
  if (needs_lock) {
    Status s = AcquireNodeLock(node, ns, name, deadline, &cached, &node_hold,
                               placement ? &companion : nullptr);
    if (!s.ok()) {
      settle();
      return bind_fail(s.message());
    }
    locked = true;
  }
  std::vector<std::string> own_taken;
  auto unlock = [&] {
    for (const std::string& a : own_taken) {
      if (Status s = ClearTimestampLock(client_, node, a); !s.ok()) {
        HAMI_LOG(Warning) << "node " << node << ": " << a << " not cleared: " << s.ToString();
      }
    }
    own_taken.clear();
    if (!locked) return;
    Status s;
    for (int attempt = 0; attempt < 3; ++attempt) {  // a lock left behind stalls the node
      s = locker_.Release(node, ns, name);
      if (s.ok()) return;
    }
    HAMI_LOG(Warning) << "node lock on " << node << ": " << s.ToString();
  };
  for (const std::string& a : own_locks) {
    Status s = TakeTimestampLock(client_, clock_, node, a);
    if (!s.ok()) {
      unlock();
      settle();
      return bind_fail(s.message());
    }
    own_taken.push_back(a);
  }
  if (placement) {
    // Not sent with the lock (the pod already held it), or lost with the connection: alone now
    // (a merge patch, safe to repeat).
    if (!companion.sent || OutcomeUnknown(companion.result.status())) {
      companion.result =
          client_.PatchAck(k8s::kPods, ns, name, k8s::PatchType::kMerge, placement->patch);
    }
    companion.sent = true;
    settle();
    if (!companion.result.ok()) {
      unlock();
      return bind_fail("placement not recorded on the pod: " +
                       companion.result.status().ToString());
    }
  }
  std::map<std::string, std::string> stamp = {
      {std::string(kBindPhaseAnnotation), std::string(kBindPhaseAllocating)},
      {std::string(kBindTimeAnnotation), std::to_string(clock_.NowUnixSeconds())}};
  if (!k8s::GetString(*pod, "/metadata/annotations/hami.io~1bind-phase").empty()) {
    // A phase left by an earlier attempt would make our fresh lock look finished to other
    // schedulers until the Binding lands: stamp `allocating` first, as upstream always does.
    Result<k8s::WriteAck> stamped =
        k8s::PatchPodAnnotations(client_, ns, name, {stamp.begin(), stamp.end()});
    if (!stamped.ok()) {
      unlock();
      return bind_fail("bind-phase not written: " + stamped.status().ToString());
    }
  }
  // The Binding carries the stamp: the pod gets its node and `allocating` in one write, so the
  // device plugin never sees one without the other.
  bool unknown = false;
  Status bound = PostBinding(ns, name, uid, node, stamp, &unknown);
  if (!bound.ok()) {
    if (!unknown) {
      unlock();
      return bind_fail(bound.ToString());
    }
    // The pod may be bound (its device plugin then allocates under our lock and clears it):
    // its devices and the lock stay until the pod shows it or the grace passes.
    {
      WriterLock lock(mu_);
      unsettled_[uid] =
          Unsettled{node, ns, name, std::chrono::steady_clock::now() + options_.bind_outcome_grace};
    }
    {
      MutexLock g(stats_mu_);
      ++stats_.bind_unsettled;
    }
    return bind_fail("Binding's outcome unknown (" + bound.ToString() +
                     "); the pod's devices stay reserved until the API server shows it");
  }
  {
    WriterLock lock(mu_);
    if (!uid.empty() && ledger_.FindPod(uid) != nullptr) {
      (void)ledger_.Confirm(uid);
      ++generation_;
    } else if (placement) {
      // Nothing should take a reservation away during its bind; the pod's next event restores
      // the entry, but say so, since until then its devices look free.
      HAMI_LOG(Warning) << "pod " << key << ": bound to " << node
                        << ", but its reservation had left the ledger meanwhile";
    }
  }
  std::string msg = "Successfully binding node [" + node + "] to " + key;
  HAMI_LOG(Info) << "pod " << key << ": bound to " << node;
  events_.Record(k8s::EventSpec{pod, "Pod", "Normal", "BindingSucceed", msg,
                                options_.scheduler_name, options_.identity});
  return "{}";
}

// Takes `node`'s allocation lock for ns/pod by `deadline`: one bind per node at a time in this
// process, then the lock itself, waiting while another allocation holds it. A write whose
// answer was lost is tried again (the lock held by this pod counts as taken); when the bind
// gives up after one, a lock it may have taken is cleared.
Status SchedulerService::AcquireNodeLock(const std::string& node, const std::string& ns,
                                         const std::string& pod,
                                         std::chrono::steady_clock::time_point deadline,
                                         const k8s::Object** cached, k8s::ObjectPtr* hold,
                                         NodeLocker::Companion* companion) {
  if (!EnterBindGate(node, deadline)) {
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
  uint64_t seen = 0;
  {
    MutexLock l(lock_wait_mu_);
    seen = node_changes_;
  }
  if ((*cached = CachedNode(node, hold)) == nullptr) {
    return Status(StatusCode::kNotFound, "node " + node + " disappeared");
  }
  bool waited = false, lost = false;
  for (;;) {
    Status s = locker_.Acquire(node, ns, pod, *cached,
                               companion != nullptr && !companion->sent ? companion : nullptr);
    if (s.ok()) return s;
    lost = lost || OutcomeUnknown(s);
    // Contention, a node that kept changing under our writes (another scheduler's binds,
    // kubelet's status), or a lost answer: wait and try again until the deadline.
    bool retry = s.code() == StatusCode::kUnavailable || k8s::IsConflict(s) || OutcomeUnknown(s);
    if (!retry || std::chrono::steady_clock::now() >= deadline) {
      if (lost) (void)locker_.Release(node, ns, pod);  // best effort: only if ours
      return s;
    }
    if (!waited) {
      waited = true;
      auto left =
          std::chrono::ceil<std::chrono::seconds>(deadline - std::chrono::steady_clock::now());
      HAMI_LOG(Info) << "pod " << ns << "/" << pod << ": waiting up to " << left.count()
                     << " s for node " << node << ": " << s.message();
      MutexLock g(stats_mu_);
      ++stats_.lock_waits;
    }
    // Wait for a node event since the cache read (its lock cleared, the service stopping), or
    // poll every 100 ms (a timestamp lock expires without one).
    {
      UniqueLock l(lock_wait_mu_);
      lock_wait_cv_.wait_for(l.native(), std::chrono::milliseconds(100),
                             [&]() REQUIRES(lock_wait_mu_) { return node_changes_ != seen; });
      seen = node_changes_;
    }
    if (!started_.load()) return Status(StatusCode::kCancelled, "scheduler stopping");
    if ((*cached = CachedNode(node, hold)) == nullptr) {
      return Status(StatusCode::kNotFound, "node " + node + " disappeared");
    }
  }
}

// ---------------------------------------------------------------------------------------------
// Webhook, metrics, routes, inspection.

Result<std::string> SchedulerService::Webhook(std::string_view body) {
  WebhookOptions opts;
  opts.scheduler_name = options_.scheduler_name;
  opts.force_overwrite_default_scheduler = options_.force_overwrite_default_scheduler;
  InformerCapacityFacts facts(nodes_.get());
  opts.node_facts = &facts;
  FunctionQuotaChecker quota(
      [this](std::string_view ns, std::string_view vendor, int64_t mem_mib, int64_t cores) {
        ReaderLock lock(mu_);
        return quota_.Check(ledger_, ns, vendor, mem_mib, cores);
      });
  return HandleAdmissionReview(body, vendors_, config_, opts, &quota);
}

std::string SchedulerService::Metrics() {
  BuildInfo build;
  build.version = options_.version;
  build.compiler = "g++";
  build.platform = "linux";
  MetricsOptions mo;
  mo.legacy = options_.legacy_metrics;
  PendingPods pending;
  if (pods_ != nullptr) {
    for (const k8s::ObjectPtr& pod : pods_->List()) {
      if (k8s::GetString(*pod, "/spec/schedulerName") != options_.scheduler_name ||
          !k8s::GetString(*pod, "/spec/nodeName").empty() ||
          !k8s::GetString(*pod, "/metadata/deletionTimestamp").empty()) {
        continue;
      }
      ++pending[k8s::Namespace(*pod)];
    }
  }
  const ServiceStats st = stats();
  const std::vector<CounterMetric> counters = {
      {"hami_scheduler_filter_requests_total", "Filter calls from kube-scheduler", "", "",
       st.filters},
      {"hami_scheduler_filter_results_total", "Filter answers by result", "result", "fit",
       st.filter_fit},
      {"hami_scheduler_filter_results_total", "", "result", "no_fit", st.filter_no_fit},
      {"hami_scheduler_filter_results_total", "", "result", "error", st.filter_errors},
      {"hami_scheduler_filter_replaced_after_race_total",
       "Placements redone because the allocation view changed meanwhile", "", "",
       st.replaced_after_race},
      {"hami_scheduler_bind_requests_total", "Bind calls from kube-scheduler", "", "", st.binds},
      {"hami_scheduler_bind_errors_total", "Bind calls answered with an error", "", "",
       st.bind_errors},
      {"hami_scheduler_bind_busy_total",
       "Filter and bind calls refused because a bind of the pod was still running", "", "",
       st.bind_busy},
      {"hami_scheduler_bind_lock_waits_total",
       "Binds that waited for another allocation's node lock", "", "", st.lock_waits},
      {"hami_scheduler_bind_unsettled_total", "Binds whose Binding outcome was unknown", "", "",
       st.bind_unsettled},
      {"hami_scheduler_bind_recovered_total", "Binds whose lost answer turned out to be a success",
       "", "", st.bind_recovered},
      {"hami_scheduler_node_lock_releases_total",
       "Node locks of finished holders their device plugin left behind", "stage", "queued",
       st.lock_releases_queued},
      {"hami_scheduler_node_lock_releases_total", "", "stage", "released", st.locks_released},
      {"hami_scheduler_pod_events_total", "Pod informer events handled", "", "", st.pod_events},
      {"hami_scheduler_stale_pod_events_total",
       "Pod events older than the scheduler's own write, ignored", "", "", st.stale_pod_events},
  };
  ReaderLock lock(mu_);
  std::vector<QuotaMetric> quotas;
  for (const QuotaUsageLine& l : quota_.Lines(ledger_)) {
    quotas.push_back(QuotaMetric{l.ns, l.quota_name, l.resource, static_cast<double>(l.used),
                                 static_cast<double>(l.limit)});
  }
  return RenderSchedulerMetrics(ledger_, quotas, build, mo, pending, counters);
}

void SchedulerService::RegisterRoutes(net::HttpServer& server) {
  server.Handle("POST", "/filter", [this](const net::HttpRequest& req, net::HttpResponse& res) {
    if (req.body.empty()) return res.SetText(400, "empty body\n");
    res.SetJson(200, Filter(req.body));
  });
  server.Handle("POST", "/bind", [this](const net::HttpRequest& req, net::HttpResponse& res) {
    if (req.body.empty()) return res.SetText(400, "empty body\n");
    res.SetJson(200, Bind(req.body));
  });
  server.Handle("POST", "/webhook", [this](const net::HttpRequest& req, net::HttpResponse& res) {
    if (req.body.empty()) return res.SetText(400, "empty body\n");
    Result<std::string> out = Webhook(req.body);
    if (!out.ok()) return res.SetText(400, out.status().message() + "\n");
    res.SetJson(200, std::move(*out));
  });
  server.AddReadinessCheck("scheduler", [this] { return Ready(); });
}

ServiceStats SchedulerService::stats() const {
  MutexLock s(stats_mu_);
  return stats_;
}

std::string SchedulerService::LedgerDump() const {
  ReaderLock lock(mu_);
  return ledger_.CanonicalDump();
}

Status SchedulerService::CheckLedger() const {
  ReaderLock lock(mu_);
  return ledger_.CheckConsistency();
}

std::vector<OverCommit> SchedulerService::OverCommitted() const {
  ReaderLock lock(mu_);
  return ledger_.OverCommitted();
}

}  // namespace hami::scheduler
