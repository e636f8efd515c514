#include "monitor/pod_directory.h"

#include "k8s/object.h"

namespace hami::monitor {

k8s::Object TrimPodForMonitor(const k8s::Object& pod) {
  if (!pod.is_object()) return pod;
  k8s::Object out = k8s::Object::object();
  for (const char* k : {"apiVersion", "kind"}) {
    if (auto it = pod.find(k); it != pod.end()) out[k] = *it;
  }
  k8s::Object& md = out["metadata"] = k8s::Object::object();
  if (auto m = pod.find("metadata"); m != pod.end() && m->is_object()) {
    for (const char* k : {"name", "namespace", "uid", "resourceVersion"}) {
      if (auto it = m->find(k); it != m->end()) md[k] = *it;
    }
  }
  k8s::Object& names = out["spec"]["containers"] = k8s::Object::array();
  if (auto s = pod.find("spec"); s != pod.end() && s->is_object()) {
    if (auto cs = s->find("containers"); cs != s->end() && cs->is_array()) {
      for (const k8s::Object& c : *cs) {
        if (c.is_object() && c.contains("name") && c["name"].is_string()) {
          names.push_back(k8s::Object{{"name", c["name"]}});
        }
      }
    }
  }
  return out;
}

InformerPodDirectory::InformerPodDirectory(k8s::RestClient& client, const std::string& node) {
  k8s::InformerOptions o;
  o.field_selector = "spec.nodeName=" + node;
  o.transform = TrimPodForMonitor;
  informer_ = std::make_unique<k8s::Informer>(client, k8s::kPods, o);
  informer_->AddEventHandler({
      .on_add = [this](const k8s::ObjectPtr& p) { Put(p); },
      .on_update = [this](const k8s::ObjectPtr&, const k8s::ObjectPtr& p) { Put(p); },
      .on_delete = [this](const k8s::ObjectPtr& p) { Drop(p); },
  });
}

InformerPodDirectory::~InformerPodDirectory() { informer_->Stop(); }

void InformerPodDirectory::Put(const k8s::ObjectPtr& pod) {
  PodRef ref;
  ref.ns = k8s::Namespace(*pod);
  ref.name = k8s::Name(*pod);
  if (auto s = pod->find("spec"); s != pod->end() && s->is_object()) {
    if (auto cs = s->find("containers"); cs != s->end() && cs->is_array()) {
      for (const k8s::Object& c : *cs) {
        if (auto n = c.find("name"); n != c.end() && n->is_string()) {
          ref.containers.push_back(n->get<std::string>());
        }
      }
    }
  }
  std::string uid = k8s::Uid(*pod);
  if (uid.empty()) return;
  MutexLock lock(mu_);
  by_uid_[uid] = std::move(ref);
}

void InformerPodDirectory::Drop(const k8s::ObjectPtr& pod) {
  MutexLock lock(mu_);
  by_uid_.erase(k8s::Uid(*pod));
}

std::optional<PodRef> InformerPodDirectory::Find(const std::string& uid) const {
  MutexLock lock(mu_);
  auto it = by_uid_.find(uid);
  if (it == by_uid_.end()) return std::nullopt;
  return it->second;
}

}  // namespace hami::monitor
