// SchedulerService's background work: node registration and handshake, releasing node locks a
// finished allocation left behind, and following the leader's Lease (see service.h).
#include <time.h>

#include <algorithm>
#include <nlohmann/json.hpp>
#include <optional>

#include "common/log.h"
#include "device/handshake.h"
#include "device/node_lock.h"
#include "extender/k8s_objects.h"
#include "extender/service.h"
#include "extender/service_internal.h"
#include "k8s/api_error.h"
#include "k8s/object.h"
#include "k8s/typed.h"

namespace hami::scheduler {

using service_internal::LocalOffsetSeconds;

// ---------------------------------------------------------------------------------------------
// Node registration and handshake.

bool SchedulerService::JudgeVendor(const device::Vendor& vendor, const k8s::Object& node,
                                   const device::Annotations& annos, int64_t now,
                                   VendorNodeState& vs, NodeObject& obj,
                                   k8s::AnnotationChanges& writes, std::string& why) {
  const device::VendorAnnotationKeys& keys = vendor.annotation_keys();
  const std::string count_res(vendor.registration_capacity().empty()
                                  ? std::string_view(vendor.resource_names().count)
                                  : vendor.registration_capacity());
  const int64_t alloc = NodeAllocatable(node, count_res);
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
    writes[keys.node_handshake] =
        device::EncodeHandshakeRequesting(device::UnixToCivil(now, LocalOffsetSeconds(now)));
  }
  // Allocatable tracking: a device plugin that went away zeroes the count.
  const bool lost = alloc <= 0 && (vs.allocatable > 0 || vs.plugin_lost);
  if (lost) {
    healthy = false;
    vendor_why = "allocatable " + count_res + " dropped to 0 (device plugin gone?)";
  }
  vs.allocatable = alloc;
  vs.plugin_lost = lost;
  if (healthy) return true;
  why = vendor_why;
  // Its devices leave the ledger.
  if (std::string_view res = vendor.registration_capacity(); !res.empty()) {
    obj.capacity.erase(std::string(res));
  } else {
    obj.annotations.erase(keys.node_register);
  }
  writes.erase(keys.node_handshake);
  if (vs.in_ledger) {
    HAMI_LOG(Warning) << "node " << k8s::Name(node) << ": " << vendor.Key()
                      << " devices removed from scheduling: " << vendor_why;
    // Ask its device plugin to register again.
    if (!keys.node_handshake.empty()) writes[keys.node_handshake] = std::nullopt;
  }
  vs.in_ledger = false;
  return false;
}

void SchedulerService::ReconcileNode(const k8s::Object& node) {
  const std::string name = k8s::Name(node);
  const device::Annotations annos = AnnotationsOf(node);
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
    const std::string key(vendor->Key());
    if (!device::VendorPresentOn(*vendor, device::NodeView{name, annos, obj.capacity})) {
      state.vendors.erase(key);
      continue;
    }
    healthy_any |=
        JudgeVendor(*vendor, node, annos, now, state.vendors[key], obj, node_writes, why);
  }
  if (healthy_any) {
    bool registered;  // some vendor's devices are in (a broken one leaves only its own out)
    Status s = cache_.UpsertNode(obj, &registered);
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
    cache_.RemoveNode(name);
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
  if (node_writes.empty()) return;
  Result<k8s::WriteAck> r = k8s::PatchNodeAnnotations(client_, name, node_writes);
  if (!r.ok()) {
    HAMI_LOG(Warning) << "node " << name << ": handshake not written: " << r.status().ToString();
  }
}

void SchedulerService::ReconcileNodes() {
  if (!nodes_) return;
  for (const k8s::ObjectPtr& n : nodes_->List()) ReconcileNode(*n);
  const size_t expired = cache_.ExpireReservations();
  if (expired > 0) HAMI_LOG(Info) << expired << " reservations expired (pods never bound)";
}

// ---------------------------------------------------------------------------------------------
// Node locks a finished allocation left behind.

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
    releases_.push_back(LockRelease{node, ns, pod, clock_.Now() + options_.lock_release_grace});
  }
  {
    MutexLock s(stats_mu_);
    ++stats_.lock_releases_queued;
  }
  // The background loop sleeps until the oldest entry is due: only a first entry changes that.
  // (Waking it for every bound pod cost a context switch per pod.)
  if (first) bg_cv_.notify_all();
}

// ---------------------------------------------------------------------------------------------
// The background loop: registration passes (full every register_interval, else the nodes that
// changed) and due lock releases.

SchedulerService::BackgroundWork SchedulerService::WaitForBackgroundWork(MonoTime next_full,
                                                                         Duration batch) {
  BackgroundWork work;
  UniqueLock l(bg_mu_);
  auto wake = next_full;
  if (!releases_.empty()) wake = std::min(wake, releases_.front().due + batch);
  auto release_due = [&]() REQUIRES(bg_mu_) {
    return !releases_.empty() && releases_.front().due + batch <= clock_.Now();
  };
  // A release queued meanwhile that falls due before `wake` moves the wake-up earlier.
  bg_cv_.wait_for(l.native(), std::max<Duration>(Duration::zero(), wake - clock_.Now()),
                  [&]() REQUIRES(bg_mu_) {
                    return stopping_ || !dirty_nodes_.empty() || release_due() || full_pass_ ||
                           (!releases_.empty() && releases_.front().due + batch < wake);
                  });
  if (stopping_) return work;
  work.dirty.assign(dirty_nodes_.begin(), dirty_nodes_.end());
  dirty_nodes_.clear();
  const MonoTime now = clock_.Now();
  auto first_later = std::find_if(releases_.begin(), releases_.end(),
                                  [&](const LockRelease& r) { return r.due > now; });
  work.releases.assign(std::make_move_iterator(releases_.begin()),
                       std::make_move_iterator(first_later));
  releases_.erase(releases_.begin(), first_later);
  work.full = full_pass_;
  full_pass_ = false;
  return work;
}

void SchedulerService::ReleaseLocks(const std::vector<LockRelease>& releases) {
  for (const LockRelease& r : releases) {
    // The device plugin normally cleared it during the grace: then the cached node says so and
    // nothing is written.
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
        Count(&ServiceStats::locks_released);
      }
    }
    MutexLock l(bg_mu_);
    release_pending_.erase(r.node + "/" + r.ns + "/" + r.pod);
  }
}

void SchedulerService::BackgroundLoop() {
  MonoTime next_full = clock_.Now();
  bool was_leader = false;
  // Lock releases are checked in batches: the loop wakes this long after the oldest is due and
  // handles every entry due by then (one wake-up per batch rather than per pod). The grace is a
  // lower bound, so a release checked up to a quarter of it late (at most 250 ms) is fine.
  const Duration batch =
      std::min<Duration>(std::chrono::milliseconds(250), options_.lock_release_grace / 4);
  for (;;) {
    BackgroundWork work = WaitForBackgroundWork(next_full, batch);
    {
      MutexLock l(bg_mu_);
      if (stopping_) return;
    }
    ReleaseLocks(work.releases);
    if (!leader_.load()) {
      was_leader = false;
      registered_once_.store(false);
      next_full = clock_.Now() + std::chrono::milliseconds(200);
      continue;
    }
    if (!nodes_->HasSynced()) {
      next_full = clock_.Now() + std::chrono::milliseconds(100);
      continue;
    }
    if (work.full || !was_leader || clock_.Now() >= next_full || !registered_once_.load()) {
      ReconcileNodes();
      next_full = clock_.Now() + options_.register_interval;
      was_leader = true;
      if (!registered_once_.exchange(true)) {
        HAMI_LOG(Info) << "registration pass done: scheduler ready";
      }
      ready_cv_.notify_all();
      continue;
    }
    for (const std::string& name : work.dirty) {
      if (k8s::ObjectPtr n = nodes_->Get(name)) ReconcileNode(*n);
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
    nlohmann::json patch;
    patch["metadata"]["labels"]["hami.io/scheduler-role"] = leader ? "leader" : "follower";
    Result<k8s::Object> r = client_.Patch(k8s::kPods, options_.pod_namespace, options_.pod_name,
                                          k8s::PatchType::kMerge, patch.dump());
    if (!r.ok()) HAMI_LOG(Warning) << "scheduler-role label: " << r.status().ToString();
  }
}

void SchedulerService::LeaderLoop() {
  std::string seen_holder, seen_renew;
  MonoTime seen_at = clock_.Now();
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
    const MonoTime now = clock_.Now();
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

}  // namespace hami::scheduler
