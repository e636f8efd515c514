#include "monitor/pod_directory.h"

#include "device/mig_allocation.h"
#include "k8s/object.h"

namespace hami::monitor {

namespace {

// Copies the names of `pod.spec[list]` (containers or initContainers) into `out` as objects
// holding only their name.
void KeepNames(const k8s::Object& pod, const char* list, k8s::Object& out) {
  out = k8s::Object::array();
  if (auto s = pod.find("spec"); s != pod.end() && s->is_object()) {
    if (auto cs = s->find(list); cs != s->end() && cs->is_array()) {
      for (const k8s::Object& c : *cs) {
        if (c.is_object() && c.contains("name") && c["name"].is_string()) {
          out.push_back(k8s::Object{{"name", c["name"]}});
        }
      }
    }
  }
}

// The names of `pod.spec[list]`, skipping entries without a string name.
std::vector<std::string> Names(const k8s::Object& pod, const char* list) {
  std::vector<std::string> names;
  if (auto s = pod.find("spec"); s != pod.end() && s->is_object()) {
    if (auto cs = s->find(list); cs != s->end() && cs->is_array()) {
      for (const k8s::Object& c : *cs) {
        if (!c.is_object()) continue;
        if (auto n = c.find("name"); n != c.end() && n->is_string()) {
          names.push_back(n->get<std::string>());
        }
      }
    }
  }
  return names;
}

// The pod's MIG allocations annotation; nullptr when it has none.
const k8s::Object* MigAnnotation(const k8s::Object& pod) {
  auto m = pod.find("metadata");
  if (m == pod.end() || !m->is_object()) return nullptr;
  auto a = m->find("annotations");
  if (a == m->end() || !a->is_object()) return nullptr;
  auto it = a->find(std::string(device::kMigAllocationsAnnotation));
  return it == a->end() ? nullptr : &*it;
}

}  // namespace

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
    if (const k8s::Object* mig = MigAnnotation(pod)) {
      md["annotations"][std::string(device::kMigAllocationsAnnotation)] = *mig;
    }
  }
  KeepNames(pod, "containers", out["spec"]["containers"]);
  KeepNames(pod, "initContainers", out["spec"]["initContainers"]);
  return out;
}

PodRef PodRefOf(const k8s::Object& pod) {
  PodRef ref;
  ref.ns = k8s::Namespace(pod);
  ref.name = k8s::Name(pod);
  ref.containers = Names(pod, "containers");
  ref.init_containers = Names(pod, "initContainers");
  if (const k8s::Object* mig = MigAnnotation(pod); mig != nullptr && mig->is_string()) {
    ref.mig_allocations = mig->get<std::string>();
  }
  return ref;
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
  std::string uid = k8s::Uid(*pod);
  if (uid.empty()) return;
  PodRef ref = PodRefOf(*pod);
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

std::map<std::string, PodRef> InformerPodDirectory::MigPods() const {
  std::map<std::string, PodRef> out;
  MutexLock lock(mu_);
  for (const auto& [uid, pod] : by_uid_) {
    if (!pod.mig_allocations.empty()) out.emplace(uid, pod);
  }
  return out;
}

}  // namespace hami::monitor
