#include "sim/kubescheduler/predicates.h"

#include <string>

#include "k8s/typed.h"

namespace hami::sim {

using k8s::Object;
using k8s::ObjectPtr;

namespace {

// The taint kube-scheduler's NodeUnschedulable check looks for in a pod's tolerations.
constexpr char kUnschedulableTaint[] = "node.kubernetes.io/unschedulable";

// The object without fields that change on every write or that kube-scheduler does not react
// to (pod status, node heartbeats), for deciding whether an update is worth a requeue.
Object Stripped(const Object& obj, bool is_pod) {
  Object copy = obj;
  if (copy.contains("metadata") && copy["metadata"].is_object()) {
    Object& md = copy["metadata"];
    md.erase("resourceVersion");
    md.erase("managedFields");
    md.erase("generation");
  }
  if (is_pod) {
    copy.erase("status");
  } else if (copy.contains("status") && copy["status"].is_object() &&
             copy["status"].contains("conditions") && copy["status"]["conditions"].is_array()) {
    for (Object& c : copy["status"]["conditions"]) {
      if (c.is_object()) c.erase("lastHeartbeatTime");
    }
  }
  return copy;
}

}  // namespace

bool IsTerminal(const Object& pod) {
  std::string phase = k8s::GetString(pod, "/status/phase");
  return phase == "Succeeded" || phase == "Failed";
}

bool IsAssigned(const Object& pod) { return !k8s::GetString(pod, "/spec/nodeName").empty(); }

bool IsBeingDeleted(const Object& obj) {
  auto md = obj.find("metadata");
  if (md == obj.end() || !md->is_object()) return false;
  auto ts = md->find("deletionTimestamp");
  return ts != md->end() && !ts->is_null();
}

bool ChangedForScheduling(const ObjectPtr& before, const ObjectPtr& after, bool is_pod) {
  if (before == after) return false;  // an informer resync
  if (!before || !after) return true;
  return Stripped(*before, is_pod) != Stripped(*after, is_pod);
}

bool ToleratesUnschedulable(const Object& pod) {
  const Object* tolerations = nullptr;
  if (auto spec = pod.find("spec"); spec != pod.end() && spec->is_object()) {
    if (auto t = spec->find("tolerations"); t != spec->end() && t->is_array()) tolerations = &*t;
  }
  if (tolerations == nullptr) return false;
  for (const Object& t : *tolerations) {
    if (!t.is_object()) continue;
    std::string key = t.value("key", "");
    std::string op = t.value("operator", "Equal");
    std::string effect = t.value("effect", "");
    if (!effect.empty() && effect != "NoSchedule") continue;
    if (key.empty() && op == "Exists") return true;
    if (key == kUnschedulableTaint && (op == "Exists" || t.value("value", "").empty())) {
      return true;
    }
  }
  return false;
}

bool MatchesNodeSelector(const Object& pod, const Object& node) {
  auto spec = pod.find("spec");
  if (spec == pod.end() || !spec->is_object()) return true;
  auto selector = spec->find("nodeSelector");
  if (selector == spec->end() || !selector->is_object()) return true;
  const Object* labels = nullptr;
  if (auto md = node.find("metadata"); md != node.end() && md->is_object()) {
    if (auto l = md->find("labels"); l != md->end() && l->is_object()) labels = &*l;
  }
  for (const auto& [key, want] : selector->items()) {
    if (labels == nullptr) return false;
    auto have = labels->find(key);
    if (have == labels->end() || *have != want) return false;
  }
  return true;
}

}  // namespace hami::sim
