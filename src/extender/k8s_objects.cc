#include "extender/k8s_objects.h"

#include <charconv>
#include <initializer_list>

#include "device/resource_quantity.h"
#include "k8s/object.h"

namespace hami::extender {

using scheduler::NodeObject;
using scheduler::PodObject;
using scheduler::PodPhase;

namespace {

using Json = nlohmann::json;

device::Annotations StringMap(const k8s::Object& obj, const char* pointer) {
  device::Annotations out;
  const Json* m = nullptr;
  Json::json_pointer ptr(pointer);
  if (obj.is_object() && obj.contains(ptr)) m = &obj.at(ptr);
  if (m == nullptr || !m->is_object()) return out;
  for (auto it = m->begin(); it != m->end(); ++it) {
    if (it.value().is_string()) out.emplace(it.key(), it.value().get<std::string>());
  }
  return out;
}

// A quantity as text: strings as they are, integers printed, other numbers printed by nlohmann.
bool QuantityText(const Json& v, std::string* out) {
  if (v.is_string()) {
    *out = v.get<std::string>();
    return true;
  }
  if (v.is_number_integer() || v.is_number_unsigned() || v.is_number_float()) {
    *out = v.dump();
    return true;
  }
  return false;
}

void ReadQuantities(const Json& resources, const char* key,
                    std::map<std::string, std::string, std::less<>>* out) {
  if (!resources.is_object()) return;
  auto it = resources.find(key);
  if (it == resources.end() || !it->is_object()) return;
  for (auto q = it->begin(); q != it->end(); ++q) {
    std::string text;
    if (QuantityText(q.value(), &text)) out->emplace(q.key(), std::move(text));
  }
}

void ReadContainers(const Json& spec, const char* key,
                    std::vector<device::ContainerResources>* out) {
  auto it = spec.find(key);
  if (it == spec.end() || !it->is_array()) return;
  for (const Json& c : *it) {
    device::ContainerResources r;
    if (c.is_object()) {
      if (auto n = c.find("name"); n != c.end() && n->is_string()) r.name = n->get<std::string>();
      if (auto res = c.find("resources"); res != c.end()) {
        ReadQuantities(*res, "limits", &r.limits);
        ReadQuantities(*res, "requests", &r.requests);
      }
    }
    out->push_back(std::move(r));
  }
}

}  // namespace

device::Annotations AnnotationsOf(const k8s::Object& obj) {
  return StringMap(obj, "/metadata/annotations");
}
device::Annotations LabelsOf(const k8s::Object& obj) { return StringMap(obj, "/metadata/labels"); }

device::PodResources PodResourcesOf(const k8s::Object& pod) {
  device::PodResources out;
  if (!pod.is_object()) return out;
  auto spec = pod.find("spec");
  if (spec == pod.end() || !spec->is_object()) return out;
  ReadContainers(*spec, "initContainers", &out.init_containers);
  ReadContainers(*spec, "containers", &out.containers);
  return out;
}

k8s::Object TrimPodForScheduler(const k8s::Object& pod) {
  if (!pod.is_object()) return pod;
  Json out = Json::object();
  // Copies the listed members of `from` that exist into `to`.
  auto keep = [](const Json& from, Json& to, std::initializer_list<const char*> keys) {
    for (const char* k : keys) {
      auto it = from.find(k);
      if (it != from.end()) to[k] = *it;
    }
  };
  keep(pod, out, {"apiVersion", "kind"});
  if (auto md = pod.find("metadata"); md != pod.end() && md->is_object()) {
    Json& m = out["metadata"];
    m = Json::object();
    keep(*md, m,
         {"name", "namespace", "uid", "resourceVersion", "creationTimestamp", "deletionTimestamp",
          "labels", "annotations"});
    if (m.contains("annotations") && m["annotations"].is_object()) {
      m["annotations"].erase("kubectl.kubernetes.io/last-applied-configuration");
    }
  }
  if (auto spec = pod.find("spec"); spec != pod.end() && spec->is_object()) {
    Json& sp = out["spec"];
    sp = Json::object();
    keep(*spec, sp, {"nodeName", "schedulerName", "priority"});
    for (const char* list : {"initContainers", "containers"}) {
      auto it = spec->find(list);
      if (it == spec->end()) continue;
      if (!it->is_array()) {
        sp[list] = *it;  // malformed: kept as is, for the readers to reject as before
        continue;
      }
      Json& cs = sp[list];
      cs = Json::array();
      for (const Json& c : *it) {
        Json kept = Json::object();
        if (c.is_object()) keep(c, kept, {"name", "resources"});
        cs.push_back(std::move(kept));
      }
    }
  }
  if (auto st = pod.find("status"); st != pod.end() && st->is_object()) {
    Json& so = out["status"];
    so = Json::object();
    keep(*st, so, {"phase"});
    if (auto ics = st->find("initContainerStatuses"); ics != st->end()) {
      if (!ics->is_array()) {
        so["initContainerStatuses"] = *ics;
      } else {
        Json& list = so["initContainerStatuses"];
        list = Json::array();
        for (const Json& c : *ics) {
          Json kept = Json::object();
          if (c.is_object()) keep(c, kept, {"name", "state"});
          list.push_back(std::move(kept));
        }
      }
    }
  }
  return out;
}

PodObject PodObjectOf(const k8s::Object& pod) {
  PodObject p;
  p.uid = k8s::Uid(pod);
  p.name_space = k8s::Namespace(pod);
  p.name = k8s::Name(pod);
  p.node_name = k8s::GetString(pod, "/spec/nodeName");
  p.annotations = AnnotationsOf(pod);
  std::string phase = k8s::GetString(pod, "/status/phase");
  if (phase == "Running") {
    p.phase = PodPhase::kRunning;
  } else if (phase == "Succeeded") {
    p.phase = PodPhase::kSucceeded;
  } else if (phase == "Failed") {
    p.phase = PodPhase::kFailed;
  } else if (phase == "Pending" || phase.empty()) {
    p.phase = PodPhase::kPending;
  } else {
    p.phase = PodPhase::kUnknown;
  }
  p.deleting = !k8s::GetString(pod, "/metadata/deletionTimestamp").empty();
  size_t init = 0;
  if (pod.is_object() && pod.contains("spec") && pod["spec"].is_object()) {
    auto it = pod["spec"].find("initContainers");
    if (it != pod["spec"].end() && it->is_array()) init = it->size();
  }
  p.init_container_count = init;
  // Every init container terminated with exit code 0.
  if (init > 0 && pod.is_object() && pod.contains("status") && pod["status"].is_object()) {
    auto st = pod["status"].find("initContainerStatuses");
    if (st != pod["status"].end() && st->is_array() && st->size() == init) {
      bool done = true;
      for (const Json& s : *st) {
        const Json* term = nullptr;
        if (s.is_object() && s.contains("state") && s["state"].is_object() &&
            s["state"].contains("terminated")) {
          term = &s["state"]["terminated"];
        }
        if (term == nullptr || !term->is_object() || !term->contains("exitCode") ||
            !(*term)["exitCode"].is_number_integer() || (*term)["exitCode"].get<int64_t>() != 0) {
          done = false;
          break;
        }
      }
      p.init_containers_done = done;
    }
  }
  return p;
}

NodeObject NodeObjectOf(const k8s::Object& node) {
  NodeObject n;
  n.name = k8s::Name(node);
  n.annotations = AnnotationsOf(node);
  if (node.is_object() && node.contains("metadata") && node["metadata"].is_object()) {
    auto labels = node["metadata"].find("labels");
    if (labels != node["metadata"].end() && labels->is_object()) {
      auto it = labels->find(std::string(device::kInstanceTypeLabel));
      if (it != labels->end() && it->is_string()) {
        n.labels.emplace(std::string(device::kInstanceTypeLabel), it->get<std::string>());
      }
    }
  }
  if (node.is_object() && node.contains("status") && node["status"].is_object()) {
    auto cap = node["status"].find("capacity");
    if (cap != node["status"].end() && cap->is_object()) {
      for (auto it = cap->begin(); it != cap->end(); ++it) {
        // Vendors' resources are the extended ones (a domain/name); cpu, memory, pods are not.
        if (it.key().find('/') == std::string::npos) continue;
        std::string text;
        if (!QuantityText(it.value(), &text)) continue;
        Result<int64_t> v = device::ParseIntegerQuantity(text);
        if (v.ok()) n.capacity[it.key()] = *v;  // cpu "500m" and the like are not devices
      }
    }
  }
  return n;
}

namespace {

// The integer value of status.<field>[resource]; 0 when absent or not an integer.
int64_t NodeStatusQuantity(const k8s::Object& node, const char* field, std::string_view resource) {
  if (!node.is_object() || !node.contains("status") || !node["status"].is_object()) return 0;
  auto alloc = node["status"].find(field);
  if (alloc == node["status"].end() || !alloc->is_object()) return 0;
  auto it = alloc->find(std::string(resource));
  if (it == alloc->end()) return 0;
  std::string text;
  if (!QuantityText(*it, &text)) return 0;
  Result<int64_t> v = device::ParseIntegerQuantity(text);
  return v.ok() ? *v : 0;
}

}  // namespace

int64_t NodeAllocatable(const k8s::Object& node, std::string_view resource) {
  return NodeStatusQuantity(node, "allocatable", resource);
}

int64_t NodeCapacityOf(const k8s::Object& node, std::string_view resource) {
  return NodeStatusQuantity(node, "capacity", resource);
}

int64_t ResourceVersionNumber(const k8s::Object& obj) {
  return ResourceVersionNumberOf(k8s::ResourceVersion(obj));
}

int64_t ResourceVersionNumberOf(std::string_view rv) {
  int64_t v = 0;
  auto [ptr, ec] = std::from_chars(rv.data(), rv.data() + rv.size(), v);
  if (ec != std::errc() || ptr != rv.data() + rv.size() || rv.empty()) return -1;
  return v;
}

}  // namespace hami::extender
