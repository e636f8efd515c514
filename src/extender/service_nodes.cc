// SchedulerService's controllers: node registration and handshake, releasing node locks a
// finished allocation left behind, and following the leader's Lease, each run by one worker
// from one work queue (see service.h).
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
    MutexLock l(node_state_mu_);
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
    MutexLock l(node_state_mu_);
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
  // Releases fall due on a 250 ms grid (at most a quarter of the grace): the worker wakes once
  // per batch rather than once per bound pod. The grace is a lower bound, so a release checked
  // up to that much late is fine.
  const Duration batch =
      std::min<Duration>(std::chrono::milliseconds(250), options_.lock_release_grace / 4);
  Duration delay = options_.lock_release_grace;
  if (batch > Duration::zero()) {
    const Duration due = (clock_.Now() + delay).time_since_epoch();
    delay += (batch - due % batch) % batch;
  }
  // Counted under the stats lock taken before the key is queued: with no grace a worker may
  // release the lock at once, and whoever sees it released must also see it queued.
  MutexLock s(stats_mu_);
  if (queue_->AddAfter("release/" + node + "/" + ns + "/" + pod, delay)) {
    ++stats_.lock_releases_queued;
  }
}

bool SchedulerService::ReleaseLock(const std::string& node, const std::string& ns,
                                   const std::string& pod) {
  // The device plugin normally cleared it during the grace: then the cached node says so and
  // nothing is written.
  k8s::ObjectPtr hold;
  const k8s::Object* n = CachedNode(node, &hold);
  std::string held = n != nullptr ? NodeLockOf(*n) : std::string();
  Result<device::NodeLockValue> lock = device::DecodeNodeLock(held);
  if (held.empty() || !lock.ok() || !lock->HeldBy(ns, pod)) return true;
  if (Status s = locker_.Release(node, ns, pod, n); !s.ok()) {
    HAMI_LOG(Warning) << "node lock on " << node << " not released: " << s.ToString();
    return false;
  }
  HAMI_LOG(Info) << "node lock on " << node << " released for " << ns << "/" << pod
                 << ": the pod finished allocating and its device plugin did not clear it";
  Count(&ServiceStats::locks_released);
  return true;
}

// ---------------------------------------------------------------------------------------------
// The worker and its controllers.

void SchedulerService::RunWorker() {
  // The controllers judge nodes against the node list: none runs before it is complete.
  if (!nodes_->WaitForSync(stop_.get())) return;
  std::string key;
  while (queue_->Get(&key)) {
    Process(key);
    queue_->Done(key);
  }
}

void SchedulerService::Process(const std::string& key) {
  const size_t slash = key.find('/');
  const std::string_view kind = std::string_view(key).substr(0, slash);
  const std::string rest = slash == std::string::npos ? "" : key.substr(slash + 1);
  if (kind == "resync") return Resync();
  if (kind == "lease") return FollowLease();
  if (kind == "node") {
    // Until the first full pass (and while following), the next full pass sees the node.
    if (!leader_.load() || !registered_once_.load()) return;
    if (k8s::ObjectPtr n = nodes_->Get(rest)) ReconcileNode(*n);
    return;
  }
  if (kind == "release") {
    const size_t a = rest.find('/'), b = rest.find('/', a + 1);
    if (a == std::string::npos || b == std::string::npos) return;
    if (ReleaseLock(rest.substr(0, a), rest.substr(a + 1, b - a - 1), rest.substr(b + 1)) ||
        queue_->NumRequeues(key) >= 5) {
      queue_->Forget(key);  // done, or given up: the lock's own expiry is the last resort
    } else {
      queue_->AddRateLimited(key);
    }
    return;
  }
  HAMI_LOG(Error) << "scheduler work queue: unknown key " << key;
}

// A full registration pass, then again every register_interval while leading.
void SchedulerService::Resync() {
  if (!leader_.load()) {
    registered_once_.store(false);  // becoming leader queues the next pass
    return;
  }
  if (!nodes_->HasSynced()) {
    queue_->AddAfter("resync", std::chrono::milliseconds(100));
    return;
  }
  ReconcileNodes();
  if (!registered_once_.exchange(true)) HAMI_LOG(Info) << "registration pass done: scheduler ready";
  ready_cv_.notify_all();
  queue_->AddAfter("resync", options_.register_interval);
}

// ---------------------------------------------------------------------------------------------
// Leader following.

void SchedulerService::SetLeader(bool leader) {
  if (leader_.exchange(leader) == leader) return;
  HAMI_LOG(Info) << (leader ? "became leader" : "lost leadership") << " (lease "
                 << options_.lease_namespace << "/" << options_.lease_name << ")";
  if (leader) {
    queue_->Add("resync");
  } else {
    registered_once_.store(false);
  }
  ready_cv_.notify_all();
  if (!options_.pod_name.empty() && !options_.pod_namespace.empty()) {
    nlohmann::json patch;
    patch["metadata"]["labels"]["hami.io/scheduler-role"] = leader ? "leader" : "follower";
    Result<k8s::Object> r = client_.Patch(k8s::kPods, options_.pod_namespace, options_.pod_name,
                                          k8s::PatchType::kMerge, patch.dump());
    if (!r.ok()) HAMI_LOG(Warning) << "scheduler-role label: " << r.status().ToString();
  }
}

// Leads while the lease's holder identity starts with ours (kube-scheduler's identity is
// "<host>_<uuid>") and its holder keeps renewing it.
void SchedulerService::FollowLease() {
  // The next read is due lease_poll after this one began (scheduled before acting on this one,
  // so whoever sees the outcome also finds the next read already on the queue).
  queue_->AddAfter("lease", options_.lease_poll);
  Result<k8s::LeaderElector::Observation> seen = lease_->Follow();
  if (!seen.ok()) {
    if (!k8s::IsNotFound(seen.status())) {
      HAMI_VLOG(2) << "lease read failed: " << seen.status().ToString();
    }
    SetLeader(false);
  } else {
    const bool ours = !options_.identity.empty() && seen->holder.rfind(options_.identity, 0) == 0;
    SetLeader(ours && seen->fresh);
  }
}

}  // namespace hami::scheduler
