#include "deviceplugin/volcano_api.h"

#include <memory>

#include "common/log.h"
#include "k8s/object.h"
#include "k8s/typed.h"

namespace hami::deviceplugin {

namespace {

// Container limits as the quantity text the selection rule parses (numbers as JSON writes them).
void ReadLimits(const k8s::Object& spec, const char* list,
                std::vector<device::ContainerResources>* out) {
  auto cs = spec.find(list);
  if (cs == spec.end() || !cs->is_array()) return;
  for (const k8s::Object& c : *cs) {
    if (!c.is_object()) continue;
    device::ContainerResources r;
    r.name = c.value("name", "");
    const k8s::Object* limits = nullptr;
    if (auto res = c.find("resources"); res != c.end() && res->is_object()) {
      if (auto l = res->find("limits"); l != res->end() && l->is_object()) limits = &*l;
    }
    if (limits != nullptr) {
      for (auto it = limits->begin(); it != limits->end(); ++it) {
        r.limits[it.key()] = it->is_string() ? it->get<std::string>() : it->dump();
      }
    }
    out->push_back(std::move(r));
  }
}

}  // namespace

device::VolcanoPod VolcanoPodOf(const k8s::Object& pod) {
  device::VolcanoPod v;
  v.uid = k8s::Uid(pod);
  v.name = k8s::Name(pod);
  v.ns = k8s::Namespace(pod);
  v.node_name = k8s::GetString(pod, "/spec/nodeName");
  v.phase = k8s::GetString(pod, "/status/phase");
  v.deleting = !k8s::GetString(pod, "/metadata/deletionTimestamp").empty();
  if (auto m = pod.find("metadata"); m != pod.end() && m->is_object()) {
    if (auto a = m->find("annotations"); a != m->end() && a->is_object()) {
      for (auto it = a->begin(); it != a->end(); ++it) {
        if (it->is_string()) v.annotations[it.key()] = it->get<std::string>();
      }
    }
  }
  if (auto spec = pod.find("spec"); spec != pod.end() && spec->is_object()) {
    ReadLimits(*spec, "initContainers", &v.resources.init_containers);
    ReadLimits(*spec, "containers", &v.resources.containers);
  }
  return v;
}

const k8s::Object& VolcanoNodePods::item(size_t i) const { return list->at("items").at(i); }

Result<VolcanoNodePods> ListVolcanoNodePods(k8s::RestClient& client, const std::string& node) {
  k8s::ListOptions opts;
  // Only Pending pods can be served: the list stays one node's admissions, not its history.
  opts.field_selector = "spec.nodeName=" + node + ",status.phase=Pending";
  Result<k8s::Object> list = k8s::ListPods(client, "", opts);
  if (!list.ok()) {
    return Status(StatusCode::kUnavailable,
                  "cannot list the pending pods of node " + node + ": " + list.status().message());
  }
  if (auto items = list->find("items"); items == list->end() || !items->is_array()) {
    (*list)["items"] = k8s::Object::array();
  }
  VolcanoNodePods out;
  for (const k8s::Object& item : list->at("items")) out.pods.push_back(VolcanoPodOf(item));
  out.list = std::make_shared<const k8s::Object>(std::move(*list));
  return out;
}

void ReleaseVolcanoNodeLock(k8s::RestClient& client, const std::string& node,
                            std::string_view key, const std::string& why) {
  // Volcano's lock keys ("hamivgpu", "gpu") need no JSON or JSON Pointer escaping.
  std::string patch =
      R"([{"op":"remove","path":"/metadata/annotations/)" + std::string(key) + R"("}])";
  Result<k8s::WriteAck> ack =
      client.PatchAck(k8s::kNodes, "", node, k8s::PatchType::kJsonPatch, std::move(patch));
  if (ack.ok()) {
    HAMI_LOG(Info) << "node " << node << ": released Volcano's node lock " << key << " (" << why
                   << ")";
  } else if (ack.status().code() == StatusCode::kInvalidArgument) {
    HAMI_VLOG(2) << "node " << node << ": no Volcano node lock " << key << " to release";
  } else {
    HAMI_LOG(Warning) << "cannot release Volcano's node lock " << key << " on " << node << ": "
                      << ack.status().message() << "; the scheduler takes it over after 5 minutes";
  }
}

void WarnPod(k8s::RestClient& client, const std::string& node, const k8s::ObjectPtr& pod,
             const std::string& reason, const std::string& message) {
  k8s::EventSpec ev;
  ev.involved = pod;
  ev.type = "Warning";
  ev.reason = reason;
  ev.message = "hami-device-plugin on " + node + ": " + message;
  ev.component = "hami-device-plugin";
  ev.host = node;
  if (Result<k8s::WriteAck> e = k8s::CreateEvent(client, ev); !e.ok()) {
    HAMI_LOG(Warning) << "cannot post event " << reason << ": " << e.status().message();
  }
}

}  // namespace hami::deviceplugin
