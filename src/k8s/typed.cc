#include "k8s/typed.h"

#include <cstdio>

#include "k8s/object.h"

namespace hami::k8s {

Result<Object> GetPod(RestClient& c, std::string_view ns, std::string_view name) {
  return c.Get(kPods, ns, name);
}
Result<Object> ListPods(RestClient& c, std::string_view ns, const ListOptions& options) {
  return c.ListAll(kPods, ns, options);
}
Result<Object> GetNode(RestClient& c, std::string_view name) { return c.Get(kNodes, "", name); }
Result<Object> ListNodes(RestClient& c, const ListOptions& options) {
  return c.ListAll(kNodes, "", options);
}

std::string AnnotationMergePatch(const AnnotationChanges& changes) {
  Object annotations = Object::object();
  for (const auto& [k, v] : changes) {
    annotations[k] = v.has_value() ? Object(*v) : Object(nullptr);
  }
  Object patch = {{"metadata", {{"annotations", std::move(annotations)}}}};
  return patch.dump();
}

Result<WriteAck> PatchPodAnnotations(RestClient& c, std::string_view ns, std::string_view name,
                                     const AnnotationChanges& changes) {
  return c.PatchAck(kPods, ns, name, PatchType::kMerge, AnnotationMergePatch(changes));
}

Result<WriteAck> PatchNodeAnnotations(RestClient& c, std::string_view name,
                                      const AnnotationChanges& changes) {
  return c.PatchAck(kNodes, "", name, PatchType::kMerge, AnnotationMergePatch(changes));
}

Status BindPod(RestClient& c, std::string_view ns, std::string_view pod, std::string_view uid,
               std::string_view node, const std::map<std::string, std::string>& annotations) {
  Object binding = {{"apiVersion", "v1"},
                    {"kind", "Binding"},
                    {"metadata", {{"name", pod}, {"namespace", ns}}},
                    {"target", {{"apiVersion", "v1"}, {"kind", "Node"}, {"name", node}}}};
  if (!uid.empty()) binding["metadata"]["uid"] = uid;
  for (const auto& [k, v] : annotations) binding["metadata"]["annotations"][k] = v;
  return c.CreateAck(kPods, ns, pod, binding.dump(), "binding").status();
}

Object MakeEvent(const EventSpec& spec, WallTimePoint now) {
  Object involved_ref = Object::object();
  std::string name;
  std::string ns;
  if (spec.involved) {
    const Object& o = *spec.involved;
    name = Name(o);
    ns = Namespace(o);
    std::string kind = GetString(o, "/kind");
    std::string api_version = GetString(o, "/apiVersion");
    involved_ref["kind"] = kind.empty() ? spec.kind : kind;
    involved_ref["apiVersion"] = api_version.empty() ? "v1" : api_version;
    involved_ref["name"] = name;
    if (!ns.empty()) involved_ref["namespace"] = ns;
    if (std::string uid = Uid(o); !uid.empty()) involved_ref["uid"] = uid;
    if (std::string rv = ResourceVersion(o); !rv.empty()) involved_ref["resourceVersion"] = rv;
  }
  // Events of cluster-scoped objects live in "default", as kube components do.
  std::string event_ns = ns.empty() ? "default" : ns;
  char suffix[32];
  auto nanos = std::chrono::duration_cast<std::chrono::nanoseconds>(now.time_since_epoch()).count();
  std::snprintf(suffix, sizeof(suffix), "%llx", static_cast<unsigned long long>(nanos));
  std::string ts = FormatTime(now);
  Object ev = {{"apiVersion", "v1"},
               {"kind", "Event"},
               {"metadata", {{"name", name + "." + suffix}, {"namespace", event_ns}}},
               {"involvedObject", involved_ref},
               {"reason", spec.reason},
               {"message", spec.message},
               {"type", spec.type},
               {"source", {{"component", spec.component}}},
               {"firstTimestamp", ts},
               {"lastTimestamp", ts},
               {"count", 1},
               {"reportingComponent", spec.component},
               {"reportingInstance", spec.host}};
  if (!spec.host.empty()) ev["source"]["host"] = spec.host;
  return ev;
}

Result<WriteAck> CreateEvent(RestClient& c, const EventSpec& spec) {
  Object ev = MakeEvent(spec, c.clock().WallNow());
  std::string ns = Namespace(ev);
  return c.CreateAck(kEvents, ns, Name(ev), ev.dump());
}

std::vector<Result<WriteAck>> CreateEvents(RestClient& c, const std::vector<EventSpec>& specs) {
  std::vector<std::pair<std::string, std::string>> items;
  items.reserve(specs.size());
  for (const EventSpec& spec : specs) {
    Object ev = MakeEvent(spec, c.clock().WallNow());
    items.emplace_back(Namespace(ev), ev.dump());
  }
  return c.CreateAckBatch(kEvents, items);
}

Result<Object> GetLease(RestClient& c, std::string_view ns, std::string_view name) {
  return c.Get(kLeases, ns, name);
}
Result<Object> CreateLease(RestClient& c, std::string_view ns, const Object& lease) {
  return c.Create(kLeases, ns, lease);
}
Result<Object> UpdateLease(RestClient& c, std::string_view ns, const Object& lease) {
  return c.Update(kLeases, ns, lease);
}

}  // namespace hami::k8s
