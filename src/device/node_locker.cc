#include "device/node_locker.h"

#include <algorithm>
#include <initializer_list>

#include "common/log.h"
#include "device/node_lock.h"
#include "device/wire_time.h"
#include "k8s/api_error.h"
#include "k8s/object.h"
#include "k8s/typed.h"

namespace hami::device {
std::string NodeLockOf(const k8s::Object& node) {
  return k8s::GetString(node, "/metadata/annotations/hami.io~1mutex.lock");
}

namespace {

// Whether objects `a` and `b` have the same members apart from those named in `ignored`.
// Non-objects compare whole.
bool SameMembersExcept(const nlohmann::json& a, const nlohmann::json& b,
                       std::initializer_list<std::string_view> ignored) {
  if (!a.is_object() || !b.is_object()) return a == b;
  auto is_ignored = [&](const std::string& key) {
    return std::find(ignored.begin(), ignored.end(), key) != ignored.end();
  };
  auto counted = [&](const nlohmann::json& o) {
    size_t n = 0;
    for (auto it = o.begin(); it != o.end(); ++it) n += is_ignored(it.key()) ? 0 : 1;
    return n;
  };
  if (counted(a) != counted(b)) return false;
  for (auto it = a.begin(); it != a.end(); ++it) {
    if (is_ignored(it.key())) continue;
    auto other = b.find(it.key());
    if (other == b.end() || *other != it.value()) return false;
  }
  return true;
}

// The member `key` of `o`, or an empty object when `o` is not an object or lacks it.
const nlohmann::json& MemberOrEmpty(const nlohmann::json& o, const char* key) {
  static const nlohmann::json kEmpty = nlohmann::json::object();
  if (!o.is_object()) return kEmpty;
  auto it = o.find(key);
  return it == o.end() ? kEmpty : *it;
}

}  // namespace

bool OnlyNodeLockChanged(const k8s::Object& before, const k8s::Object& after) {
  if (!before.is_object() || !after.is_object()) return false;
  const nlohmann::json& mb = MemberOrEmpty(before, "metadata");
  const nlohmann::json& ma = MemberOrEmpty(after, "metadata");
  return SameMembersExcept(before, after, {"metadata"}) &&
         SameMembersExcept(mb, ma, {"resourceVersion", "managedFields", "annotations"}) &&
         SameMembersExcept(MemberOrEmpty(mb, "annotations"), MemberOrEmpty(ma, "annotations"),
                           {device::kNodeLockAnnotation});
}

NodeLocker::NodeLocker(k8s::RestClient& client, const Clock& clock, NodeLockOptions options)
    : client_(client), clock_(clock), options_(options) {}

bool NodeLocker::Stale(std::string_view node, std::string_view value, std::string* why,
                       std::string* holder) {
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
  std::string bound_to = k8s::GetString(*pod, "/spec/nodeName");
  if (phase == kBindPhaseSuccess || phase == kBindPhaseFailed) {
    *why = "holder pod " + *holder + " finished allocating (bind-phase \"" + phase + "\")";
    return true;
  }
  if (!bound_to.empty() && bound_to != node) {
    *why = "holder pod " + *holder + " runs on node " + bound_to;
    return true;
  }
  if (!bound_to.empty() && phase != kBindPhaseAllocating) {
    *why = "holder pod " + *holder + " was bound without allocating (bind-phase \"" + phase + "\")";
    return true;
  }
  if (bound_to.empty() && phase.empty() && age > kBindInFlightSeconds) {
    // The Binding that stamps bind-phase follows the lock within milliseconds.
    *why = "holder pod " + *holder + " was never bound (lock " + std::to_string(age) + " s old)";
    return true;
  }
  return false;  // allocating, or its bind is in flight
}

Status TakeTimestampLock(k8s::RestClient& client, const Clock& clock, std::string_view node,
                         const std::string& annotation, int64_t expire_seconds) {
  Status last;
  for (int attempt = 0; attempt < 5; ++attempt) {
    Result<k8s::Object> n = k8s::GetNode(client, node);
    if (!n.ok()) return n.status();
    const int64_t now = clock.NowUnixSeconds();
    std::string pointer = "/metadata/annotations/";
    for (char c : annotation) pointer += c == '~' ? "~0" : c == '/' ? "~1" : std::string(1, c);
    std::string held = k8s::GetString(*n, pointer);
    if (!held.empty()) {
      Result<device::Timestamp> t = device::ParseRfc3339(held);
      if (t.ok() && now - t->unix_seconds < expire_seconds) {
        return Status(StatusCode::kUnavailable,
                      "node " + std::string(node) + " has " + annotation + " " + held + " (" +
                          std::to_string(now - t->unix_seconds) +
                          " s old): another allocation of this vendor is running");
      }
    }
    nlohmann::json patch;
    patch["metadata"]["resourceVersion"] = k8s::ResourceVersion(*n);
    patch["metadata"]["annotations"][annotation] = device::FormatRfc3339(device::Timestamp{now});
    last = client.PatchAck(k8s::kNodes, "", node, k8s::PatchType::kMerge, patch.dump()).status();
    if (!k8s::IsConflict(last)) return last;
  }
  return last;
}

Status ClearTimestampLock(k8s::RestClient& client, std::string_view node,
                          const std::string& annotation) {
  nlohmann::json patch;
  patch["metadata"]["annotations"][annotation] = nullptr;
  return client.PatchAck(k8s::kNodes, "", node, k8s::PatchType::kMerge, patch.dump()).status();
}

Status NodeLocker::Write(std::string_view node, const std::string& rv, const std::string* value,
                         Companion* companion) {
  nlohmann::json patch;
  patch["metadata"]["resourceVersion"] = rv;
  if (value != nullptr) {
    patch["metadata"]["annotations"][std::string(device::kNodeLockAnnotation)] = *value;
  } else {
    patch["metadata"]["annotations"][std::string(device::kNodeLockAnnotation)] = nullptr;
  }
  if (companion == nullptr || companion->sent) {
    return client_.PatchAck(k8s::kNodes, "", node, k8s::PatchType::kMerge, patch.dump()).status();
  }
  k8s::RestClient::PatchItem lock;
  lock.resource = &k8s::kNodes;
  lock.name = std::string(node);
  lock.patch = patch.dump();
  std::vector<Result<k8s::WriteAck>> acks = client_.PatchAckBatch({companion->patch, lock});
  companion->sent = true;
  companion->result = std::move(acks[0]);
  return acks[1].status();
}

Status NodeLocker::Acquire(std::string_view node, std::string_view ns, std::string_view pod,
                           const k8s::Object* cached_node, Companion* companion) {
  device::NodeLockValue mine;
  mine.time.unix_seconds = clock_.NowUnixSeconds();
  mine.pod_namespace = std::string(ns);
  mine.pod_name = std::string(pod);
  const std::string value = device::EncodeNodeLock(mine);
  Status last;
  bool use_cache = cached_node != nullptr;
  for (int attempt = 0; attempt < options_.max_attempts; ++attempt) {
    k8s::Object current;
    const bool from_cache = use_cache;
    use_cache = false;
    if (from_cache) {
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
      if (from_cache) {
        // The cache may lag a release: ask the server before judging the holder (a stale
        // verdict would cost a pod read and a conflicting write).
        --attempt;
        continue;
      }
      std::string why, holder;
      if (!Stale(node, held, &why, &holder)) {
        return UnavailableError("node lock contention: node " + std::string(node) +
                                " is locked by " + holder + " (allocation in progress)");
      }
      HAMI_LOG(Warning) << "node lock on " << node << ": taking over from " << holder << ": "
                        << why;
    }
    last = Write(node, k8s::ResourceVersion(current), &value, companion);
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

}  // namespace hami::device
