#include "scheduler/node_locker.h"

#include "common/log.h"
#include "device/node_lock.h"
#include "k8s/api_error.h"
#include "k8s/object.h"
#include "k8s/typed.h"

namespace hami::scheduler {
std::string NodeLockOf(const k8s::Object& node) {
  return k8s::GetString(node, "/metadata/annotations/hami.io~1mutex.lock");
}

NodeLocker::NodeLocker(k8s::RestClient& client, const Clock& clock, NodeLockOptions options)
    : client_(client), clock_(clock), options_(options) {}

bool NodeLocker::Stale(std::string_view value, std::string* why, std::string* holder) {
  Result<device::NodeLockValue> lock = device::DecodeNodeLock(value);
  if (!lock.ok()) {
    *why = "unreadable value \"" + std::string(value) + "\"";
    return true;
  }
  *holder = lock->IsLegacy() ? "unknown pod" : lock->pod_namespace + "/" + lock->pod_name;
  int64_t age = clock_.NowUnixSeconds() - lock->time.unix_seconds;
  if (age > options_.expire_seconds) {
    *why = "expired (" + std::to_string(age) + " s old)";
    return true;
  }
  if (lock->IsLegacy()) return false;
  Result<k8s::Object> pod = k8s::GetPod(client_, lock->pod_namespace, lock->pod_name);
  if (!pod.ok()) {
    if (k8s::IsNotFound(pod.status())) {
      *why = "holder pod " + *holder + " no longer exists";
      return true;
    }
    return false;  // cannot tell: do not take it
  }
  std::string phase = k8s::GetString(*pod, "/metadata/annotations/hami.io~1bind-phase");
  if (phase != kBindPhaseAllocating) {
    *why = "holder pod " + *holder + " is not allocating (bind-phase \"" + phase + "\")";
    return true;
  }
  return false;
}

Status NodeLocker::Write(std::string_view node, const std::string& rv, const std::string* value) {
  nlohmann::json patch;
  patch["metadata"]["resourceVersion"] = rv;
  if (value != nullptr) {
    patch["metadata"]["annotations"][std::string(device::kNodeLockAnnotation)] = *value;
  } else {
    patch["metadata"]["annotations"][std::string(device::kNodeLockAnnotation)] = nullptr;
  }
  return client_.PatchAck(k8s::kNodes, "", node, k8s::PatchType::kMerge, patch.dump()).status();
}

Status NodeLocker::Acquire(std::string_view node, std::string_view ns, std::string_view pod,
                           const k8s::Object* cached_node) {
  device::NodeLockValue mine;
  mine.time.unix_seconds = clock_.NowUnixSeconds();
  mine.pod_namespace = std::string(ns);
  mine.pod_name = std::string(pod);
  const std::string value = device::EncodeNodeLock(mine);
  Status last;
  for (int attempt = 0; attempt < options_.max_attempts; ++attempt) {
    k8s::Object current;
    if (attempt == 0 && cached_node != nullptr) {
      current = *cached_node;
    } else {
      Result<k8s::Object> got = k8s::GetNode(client_, node);
      if (!got.ok()) return got.status().WithContext("node lock: read node " + std::string(node));
      current = std::move(*got);
    }
    std::string held = NodeLockOf(current);
    if (!held.empty()) {
      Result<device::NodeLockValue> lock = device::DecodeNodeLock(held);
      if (lock.ok() && lock->HeldBy(ns, pod)) return OkStatus();
      std::string why, holder;
      if (!Stale(held, &why, &holder)) {
        return UnavailableError("node lock contention: node " + std::string(node) +
                                " is locked by " + holder + " (allocation in progress)");
      }
      HAMI_LOG(Warning) << "node lock on " << node << ": taking over from " << holder << ": "
                        << why;
    }
    last = Write(node, k8s::ResourceVersion(current), &value);
    if (last.ok()) {
      HAMI_VLOG(4) << "node lock on " << node << " taken for " << ns << "/" << pod;
      return OkStatus();
    }
    if (!k8s::IsConflict(last)) return last.WithContext("node lock: write " + std::string(node));
  }
  return last.WithContext("node lock: " + std::string(node) + " kept changing");
}

Status NodeLocker::Release(std::string_view node, std::string_view ns, std::string_view pod,
                           const k8s::Object* cached_node) {
  Status last;
  for (int attempt = 0; attempt < options_.max_attempts; ++attempt) {
    Result<k8s::Object> got = attempt == 0 && cached_node != nullptr
                                  ? Result<k8s::Object>(*cached_node)
                                  : k8s::GetNode(client_, node);
    if (!got.ok()) {
      if (k8s::IsNotFound(got.status())) return OkStatus();
      return got.status().WithContext("node lock release: read node " + std::string(node));
    }
    std::string held = NodeLockOf(*got);
    if (held.empty()) return OkStatus();
    Result<device::NodeLockValue> lock = device::DecodeNodeLock(held);
    if (!lock.ok() || !lock->HeldBy(ns, pod)) return OkStatus();
    last = Write(node, k8s::ResourceVersion(*got), nullptr);
    if (last.ok()) {
      HAMI_VLOG(4) << "node lock on " << node << " released for " << ns << "/" << pod;
      return OkStatus();
    }
    if (!k8s::IsConflict(last)) return last.WithContext("node lock release " + std::string(node));
  }
  return last;
}

}  // namespace hami::scheduler
