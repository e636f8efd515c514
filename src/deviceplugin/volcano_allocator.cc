#include "deviceplugin/volcano_allocator.h"

#include <limits>
#include <memory>
#include <optional>
#include <set>
#include <sstream>

#include "common/log.h"
#include "common/uuid.h"
#include "device/volcano_vgpu.h"
#include "deviceplugin/allocator.h"
#include "deviceplugin/hook_install.h"
#include "k8s/api_error.h"
#include "k8s/object.h"
#include "k8s/typed.h"

namespace hami::deviceplugin {

namespace {

constexpr int kAttempts = 4;

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

std::string Describe(const device::ContainerDevices& devices, int32_t factor) {
  std::ostringstream os;
  for (size_t i = 0; i < devices.size(); ++i) {
    os << (i ? ", " : "") << devices[i].uuid << " (" << int64_t{devices[i].mem_mib} * factor
       << " MiB, " << devices[i].cores << " % cores)";
  }
  return os.str();
}

std::string RandomCacheName() { return NewRandomUuid() + ".cache"; }

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

struct VolcanoAllocator::Picked {
  k8s::ObjectPtr object;
  device::VolcanoPod pod;
  PodView view;  // init containers first
  std::optional<device::VolcanoPick> pick;
};

VolcanoAllocator::VolcanoAllocator(k8s::RestClient& client, VolcanoAllocatorOptions options,
                                   std::function<ReplicaMap()> replicas)
    : client_(client), options_(std::move(options)), replicas_(std::move(replicas)) {}

VolcanoAllocator::Stats VolcanoAllocator::stats() const {
  MutexLock l(stats_mu_);
  return stats_;
}

void VolcanoAllocator::Count(bool ok, size_t n) {
  MutexLock l(stats_mu_);
  (ok ? stats_.allocations : stats_.allocation_failures) += n;
}

Result<std::vector<ContainerAllocation>> VolcanoAllocator::Allocate(
    const std::vector<std::vector<std::string>>& requests) {
  MutexLock serial(mu_);
  std::vector<ContainerAllocation> out;
  for (const std::vector<std::string>& ids : requests) {
    HAMI_ASSIGN_OR_RETURN(ContainerAllocation a, AllocateOne(ids));
    out.push_back(std::move(a));
  }
  return out;
}

Result<ContainerAllocation> VolcanoAllocator::AllocateOne(const std::vector<std::string>& ids) {
  const std::string& node = options_.node_name;
  const ReplicaMap replicas = replicas_();
  for (const std::string& id : ids) {
    if (!replicas.count(id)) {
      Count(false, 1);
      return InvalidArgumentError("device ID \"" + id + "\" is not one of this plugin's " +
                                  options_.volcano.count_resource + " devices");
    }
  }
  device::VolcanoResourceNames names{.count = options_.volcano.count_resource,
                                     .memory = options_.volcano.memory_resource};
  for (int attempt = 1;; ++attempt) {
    k8s::ListOptions opts;
    opts.field_selector = "spec.nodeName=" + node;
    Result<k8s::Object> list = k8s::ListPods(client_, "", opts);
    if (!list.ok()) {
      Count(false, 1);
      return Status(StatusCode::kUnavailable,
                    "cannot list the pods of node " + node + ": " + list.status().message());
    }
    std::vector<const k8s::Object*> objects;
    std::vector<device::VolcanoPod> pods;
    if (auto items = list->find("items"); items != list->end() && items->is_array()) {
      for (const k8s::Object& item : *items) {
        objects.push_back(&item);
        pods.push_back(VolcanoPodOf(item));
      }
    }
    size_t defective = std::numeric_limits<size_t>::max();
    Result<device::VolcanoPick> pick =
        device::SelectVolcanoPod(pods, node, ids.size(), names, &defective);
    auto picked = [&](size_t i) {
      Picked p;
      p.object = std::make_shared<const k8s::Object>(*objects[i]);
      p.pod = pods[i];
      p.view = PodViewOf(*objects[i]);
      return p;
    };
    if (!pick.ok()) {
      if (defective < pods.size()) {
        MarkFailed(picked(defective), pick.status().message());
      } else {
        HAMI_LOG(Warning) << "Allocate " << names.count << " on node " << node
                          << " refused: " << pick.status().message();
        ReleaseLock("no pod could be served");
        Count(false, 1);
      }
      return pick.status();
    }
    Picked p = picked(pick->pod);
    p.pick = std::move(*pick);
    Result<ContainerAllocation> r = Serve(p, ids.size(), attempt == kAttempts);
    if (!r.ok() && r.status().code() == StatusCode::kAborted) {
      HAMI_VLOG(2) << "pod " << p.pod.Key() << " changed while allocating; reading it again";
      continue;
    }
    return r;
  }
}

Result<ContainerAllocation> VolcanoAllocator::Serve(const Picked& p, size_t request_size,
                                                    bool last_try) {
  const device::VolcanoPick& pick = *p.pick;
  const int32_t factor = options_.volcano.memory_factor;
  std::set<std::string> node_gpus;
  for (const auto& [id, gpu] : replicas_()) node_gpus.insert(gpu);
  device::ContainerDevices devices = pick.devices;
  for (device::ContainerDevice& d : devices) {
    const int64_t mib = int64_t{d.mem_mib} * factor;
    if (mib > std::numeric_limits<int32_t>::max()) {
      std::string why = "GPU " + d.uuid + ": " + std::to_string(d.mem_mib) +
                        " memory units x gpuMemoryFactor " + std::to_string(factor) +
                        " is more MiB than a GPU has";
      MarkFailed(p, why);
      return InvalidArgumentError("pod " + p.pod.Key() + ": " + why);
    }
    d.mem_mib = static_cast<int32_t>(mib);
  }
  const size_t index = p.pod.resources.init_containers.size() + pick.container;
  Result<ContainerAllocation> a =
      AllocateContainer(p.view, index, devices, request_size, node_gpus, options_.allocation,
                        RandomCacheName);
  if (a.ok() && !a->host_dir.empty()) {
    if (Status s = RecreateContainerDir(a->host_dir); !s.ok()) a = s;
  }
  if (!a.ok()) {
    MarkFailed(p, a.status().message());
    return a.status();
  }
  nlohmann::json patch;
  patch["metadata"]["resourceVersion"] = k8s::ResourceVersion(*p.object);
  nlohmann::json& anns = patch["metadata"]["annotations"];
  anns[std::string(device::kVolcanoDevicesToAllocateAnnotation)] =
      device::VolcanoToAllocateAfter(pick);
  if (pick.last) {
    anns[std::string(device::kVolcanoBindPhaseAnnotation)] =
        std::string(device::kVolcanoBindPhaseSuccess);
    anns[std::string(device::kVolcanoVgpuTimeAnnotation)] =
        device::FormatVolcanoTime(device::kVolcanoVgpuTimeDone);
  }
  Result<k8s::WriteAck> ack =
      client_.PatchAck(k8s::kPods, p.pod.ns, p.pod.name, k8s::PatchType::kMerge, patch.dump());
  if (!ack.ok() && k8s::IsConflict(ack.status()) && !last_try) {
    return Status(StatusCode::kAborted, "conflict: " + ack.status().message());
  }
  if (!ack.ok()) {
    std::string why = "recording the allocation on the pod failed: " + ack.status().message();
    MarkFailed(p, why);
    return Status(StatusCode::kUnavailable, "pod " + p.pod.Key() + ": " + why);
  }
  HAMI_LOG(Info) << "pod " << p.pod.Key() << " container " << a->container_name
                 << ": allocated " << Describe(pick.devices, factor) << " on node "
                 << options_.node_name << " (Volcano vGPU)";
  if (pick.last) {
    ReleaseLock("pod " + p.pod.Key() + " is served");
    HAMI_LOG(Info) << "pod " << p.pod.Key() << ": bind phase success";
    if (!pick.memory_only.empty()) {
      std::string list;
      for (size_t c : pick.memory_only) {
        list += (list.empty() ? "" : ", ") + p.pod.resources.containers[c].name;
      }
      Warn(p.object, "VolcanoMemoryOnlyContainer",
           "container(s) " + list + " set " + options_.volcano.memory_resource +
               " without " + options_.volcano.count_resource +
               ": Volcano reserved a GPU for them, but kubelet asks the device plugin only for "
               "containers with a " + options_.volcano.count_resource +
               " limit, so they run without one; add " + options_.volcano.count_resource +
               ": 1 to their limits");
    }
  }
  Count(true, 1);
  return a;
}

void VolcanoAllocator::MarkFailed(const Picked& p, const std::string& reason) {
  HAMI_LOG(Warning) << "pod " << p.pod.Key() << ": Volcano vGPU allocation on node "
                    << options_.node_name << " failed: " << reason;
  Result<k8s::WriteAck> w = k8s::PatchPodAnnotations(
      client_, p.pod.ns, p.pod.name,
      {{std::string(device::kVolcanoBindPhaseAnnotation),
        std::string(device::kVolcanoBindPhaseFailed)},
       {std::string(device::kVolcanoVgpuTimeAnnotation),
        device::FormatVolcanoTime(device::kVolcanoVgpuTimeDone)}});
  if (!w.ok()) {
    HAMI_LOG(Warning) << "pod " << p.pod.Key() << ": cannot record bind phase failed: "
                      << w.status().message();
  }
  Warn(p.object, "AllocationFailed", reason);
  ReleaseLock("the allocation of pod " + p.pod.Key() + " failed");
  Count(false, 1);
}

void VolcanoAllocator::Warn(const k8s::ObjectPtr& pod, const std::string& reason,
                            const std::string& message) {
  k8s::EventSpec ev;
  ev.involved = pod;
  ev.type = "Warning";
  ev.reason = reason;
  ev.message = "hami-device-plugin on " + options_.node_name + ": " + message;
  ev.component = "hami-device-plugin";
  ev.host = options_.node_name;
  if (Result<k8s::WriteAck> e = k8s::CreateEvent(client_, ev); !e.ok()) {
    HAMI_LOG(Warning) << "cannot post event " << reason << ": " << e.status().message();
  }
}

void VolcanoAllocator::ReleaseLock(const std::string& why) {
  // One write whether or not the lock is there: a JSON Patch `remove` of a key the node does
  // not have is refused (422), which here just means there was no lock. The scheduler sets the
  // lock only when it is absent or expired, so whatever is there now is the lock this
  // allocation's pod was placed under (or one that has expired).
  const std::string key(device::kVolcanoNodeLockAnnotation);
  // The key needs no JSON or JSON Pointer escaping ("hamivgpu").
  std::string patch = R"([{"op":"remove","path":"/metadata/annotations/)" + key + R"("}])";
  Result<k8s::WriteAck> ack = client_.PatchAck(k8s::kNodes, "", options_.node_name,
                                               k8s::PatchType::kJsonPatch, std::move(patch));
  if (ack.ok()) {
    HAMI_LOG(Info) << "node " << options_.node_name << ": released Volcano's node lock " << key
                   << " (" << why << ")";
  } else if (ack.status().code() == StatusCode::kInvalidArgument) {
    HAMI_VLOG(2) << "node " << options_.node_name << ": no Volcano node lock to release";
  } else {
    HAMI_LOG(Warning) << "cannot release Volcano's node lock on " << options_.node_name << ": "
                      << ack.status().message() << "; the scheduler takes it over after 5 minutes";
  }
}

}  // namespace hami::deviceplugin
