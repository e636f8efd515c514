#include "deviceplugin/allocator.h"

#include <cstdlib>
#include <optional>
#include <sstream>

#include "common/log.h"
#include "common/uuid.h"
#include "device/mig_allocation.h"
#include "device/node_lock.h"
#include "deviceplugin/hook_install.h"
#include "deviceplugin/mig_allocate.h"
#include "k8s/api_error.h"
#include "k8s/object.h"
#include "k8s/typed.h"

namespace hami::deviceplugin {

namespace {

constexpr std::string_view kVgpuNodeAnnotation = "hami.io/vgpu-node";

// Region file names: random version-4 UUIDs, as upstream names them.
std::string RandomCacheName() { return NewRandomUuid() + ".cache"; }

std::string Describe(const ContainerAllocation& a) {
  std::ostringstream os;
  for (size_t i = 0; i < a.devices.size(); ++i) {
    const device::ContainerDevice& d = a.devices[i];
    os << (i ? ", " : "") << d.uuid << " (" << d.mem_mib << " MiB, " << d.cores << " % cores)";
  }
  return os.str();
}

// The MIG devices a container was given, as the runtime is told them.
std::string MigUuidsOf(const ContainerAllocation& a) {
  auto it = a.envs.find("NVIDIA_VISIBLE_DEVICES");
  if (it != a.envs.end() && it->second.rfind("MIG-", 0) == 0) return it->second;
  std::string out;
  for (const std::string& d : a.cdi_devices) out += (out.empty() ? "" : ",") + d;
  return out;
}

}  // namespace

PodView PodViewOf(const k8s::Object& pod) {
  PodView v;
  v.ns = k8s::Namespace(pod);
  v.name = k8s::Name(pod);
  v.uid = k8s::Uid(pod);
  if (auto m = pod.find("metadata"); m != pod.end() && m->is_object()) {
    if (auto a = m->find("annotations"); a != m->end() && a->is_object()) {
      for (auto it = a->begin(); it != a->end(); ++it) {
        if (it->is_string()) v.annotations[it.key()] = it->get<std::string>();
      }
    }
  }
  auto spec = pod.find("spec");
  if (spec == pod.end() || !spec->is_object()) return v;
  for (const char* list : {"initContainers", "containers"}) {
    auto cs = spec->find(list);
    if (cs == spec->end() || !cs->is_array()) continue;
    for (const k8s::Object& c : *cs) {
      if (!c.is_object()) continue;
      ContainerView cv;
      cv.name = c.value("name", "");
      if (auto env = c.find("env"); env != c.end() && env->is_array()) {
        for (const k8s::Object& e : *env) {
          if (!e.is_object()) continue;
          auto name = e.find("name");
          auto value = e.find("value");
          if (name != e.end() && name->is_string() && value != e.end() && value->is_string()) {
            cv.env[name->get<std::string>()] = value->get<std::string>();
          }
        }
      }
      v.containers.push_back(std::move(cv));
    }
  }
  return v;
}

struct Allocator::PendingPod {
  PodView view;
  std::string resource_version;
  k8s::ObjectPtr object;
  k8s::Object node;  // as read to find the pod: the lock release starts from it
};

Allocator::Allocator(k8s::RestClient& client, AllocatorOptions options,
                     std::function<ReplicaMap()> replicas, hami::Clock& clock)
    : client_(client),
      options_(std::move(options)),
      replicas_(std::move(replicas)),
      locker_(client_, clock, {.expire_seconds = options_.node_lock_expire_seconds}) {}

Allocator::Stats Allocator::stats() const {
  MutexLock l(stats_mu_);
  return stats_;
}

Result<Allocator::PendingPod> Allocator::FindPendingPod() {
  const std::string& node = options_.node_name;
  auto eligible = [&](const k8s::Object& pod) {
    return k8s::GetString(pod, "/spec/nodeName") == node &&
           k8s::GetAnnotation(pod, kVgpuNodeAnnotation) == node &&
           k8s::GetAnnotation(pod, device::kBindPhaseAnnotation) == device::kBindPhaseAllocating &&
           k8s::HasAnnotation(pod, options_.allocation.to_allocate_key);
  };
  Result<k8s::Object> n = k8s::GetNode(client_, node);
  auto pending = [&](k8s::Object pod) {
    PendingPod p;
    p.view = PodViewOf(pod);
    p.resource_version = k8s::ResourceVersion(pod);
    p.object = std::make_shared<const k8s::Object>(std::move(pod));
    p.node = *n;
    return p;
  };
  if (!n.ok()) {
    return Status(StatusCode::kUnavailable,
                  "cannot read node " + node + " to find the pod: " + n.status().message());
  }
  std::string lock = device::NodeLockOf(*n);
  if (!lock.empty()) {
    Result<device::NodeLockValue> v = device::DecodeNodeLock(lock);
    if (v.ok() && !v->IsLegacy()) {
      Result<k8s::Object> pod = k8s::GetPod(client_, v->pod_namespace, v->pod_name);
      if (pod.ok() && eligible(*pod)) return pending(std::move(*pod));
      if (!pod.ok() && !k8s::IsNotFound(pod.status())) {
        return Status(StatusCode::kUnavailable, "cannot read pod " + v->pod_namespace + "/" +
                                                    v->pod_name + ": " + pod.status().message());
      }
    }
  }
  k8s::ListOptions opts;
  opts.field_selector = "spec.nodeName=" + node;
  Result<k8s::Object> list = k8s::ListPods(client_, "", opts);
  if (!list.ok()) {
    return Status(StatusCode::kUnavailable,
                  "cannot list the pods of node " + node + ": " + list.status().message());
  }
  const k8s::Object* best = nullptr;
  int64_t best_time = 0;
  if (auto items = list->find("items"); items != list->end() && items->is_array()) {
    for (const k8s::Object& pod : *items) {
      if (k8s::GetString(pod, "/status/phase") != "Pending" || !eligible(pod)) continue;
      std::string t = k8s::GetAnnotation(pod, device::kBindTimeAnnotation);
      if (t.empty()) continue;
      int64_t when = std::strtoll(t.c_str(), nullptr, 10);
      if (best == nullptr || when < best_time) {
        best = &pod;
        best_time = when;
      }
    }
  }
  if (best == nullptr) {
    return Status(StatusCode::kNotFound,
                  "no pod bound to node " + node + " is waiting for GPUs (bind phase allocating)");
  }
  return pending(*best);
}

bool MigPodFinished(k8s::RestClient& client, const MigInstance& inst) {
  const size_t slash = inst.pod.find('/');
  if (slash == std::string::npos) return false;
  Result<k8s::Object> pod =
      k8s::GetPod(client, inst.pod.substr(0, slash), inst.pod.substr(slash + 1));
  if (!pod.ok()) return k8s::IsNotFound(pod.status());  // unreachable: assume it still runs
  const std::string phase = k8s::GetString(*pod, "/status/phase");
  return k8s::Uid(*pod) != inst.owner.pod_uid || phase == "Succeeded" || phase == "Failed" ||
         !k8s::GetString(*pod, "/metadata/deletionTimestamp").empty();
}

Status Allocator::MarkFailed(const PendingPod& p, const std::string& reason) {
  const PodView& v = p.view;
  HAMI_LOG(Warning) << "pod " << v.Key() << ": allocation on node " << options_.node_name
                    << " failed: " << reason;
  Status s = k8s::PatchPodAnnotations(client_, v.ns, v.name,
                                      {{std::string(device::kBindPhaseAnnotation),
                                        std::string(device::kBindPhaseFailed)}})
                 .status();
  k8s::EventSpec ev;
  ev.involved = p.object;
  ev.type = "Warning";
  ev.reason = "AllocationFailed";
  ev.message = "hami-device-plugin on " + options_.node_name + ": " + reason;
  ev.component = "hami-device-plugin";
  ev.host = options_.node_name;
  if (Result<k8s::WriteAck> e = k8s::CreateEvent(client_, ev); !e.ok()) {
    HAMI_LOG(Warning) << "pod " << v.Key() << ": cannot post event: " << e.status().message();
  }
  if (Status r = locker_.Release(options_.node_name, v.ns, v.name, &p.node); !r.ok()) {
    HAMI_LOG(Warning) << "pod " << v.Key() << ": cannot release the node lock: " << r.message();
  }
  {
    MutexLock l(stats_mu_);
    ++stats_.allocation_failures;
  }
  return s;
}

std::vector<std::vector<std::string>> Allocator::PreferredAllocation(
    const std::vector<PreferredRequest>& requests) {
  MutexLock serial(mu_);
  std::vector<std::vector<std::string>> out(requests.size());
  Result<PendingPod> p = FindPendingPod();
  if (!p.ok()) {
    HAMI_VLOG(2) << "preferred allocation: " << p.status().message() << "; no preference";
    return out;
  }
  const ReplicaMap replicas = replicas_();
  for (size_t i = 0; i < requests.size(); ++i) {
    out[i] =
        PreferredDevices(p->view, options_.allocation.to_allocate_key, i, requests[i], replicas);
  }
  return out;
}

Result<std::vector<ContainerAllocation>> Allocator::Allocate(
    const std::vector<std::vector<std::string>>& requests) {
  MutexLock serial(mu_);
  constexpr int kAttempts = 4;
  for (int attempt = 1;; ++attempt) {
    HAMI_ASSIGN_OR_RETURN(PendingPod p, FindPendingPod());
    Result<std::vector<ContainerAllocation>> r = AllocateFor(p, requests, attempt == kAttempts);
    if (!r.ok() && r.status().code() == StatusCode::kAborted) {
      HAMI_VLOG(2) << "pod " << p.view.Key() << " changed while allocating; reading it again";
      continue;
    }
    return r;
  }
}

Result<std::vector<ContainerAllocation>> Allocator::AllocateFor(
    const PendingPod& p, const std::vector<std::vector<std::string>>& requests, bool last_try) {
  Result<AllocationPlan> plan =
      PlanAllocation(p.view, requests, replicas_(), options_.allocation, RandomCacheName);
  if (!plan.ok()) {
    (void)MarkFailed(p, plan.status().message());
    return plan.status();
  }
  std::optional<std::string> mig;  // the MIG reservations with their runtime identity
  if (options_.allocation.operating_mode == device::OperatingMode::kMig) {
    Result<std::string> r =
        options_.mig_instances == nullptr
            ? Result<std::string>(FailedPreconditionError("no MIG driver to make MIG devices"))
            : RealiseMigReservations(
                  p.view, &plan->containers, options_.allocation, *options_.mig_instances,
                  [this](const MigInstance& i) { return MigPodFinished(client_, i); });
    if (!r.ok()) {
      (void)MarkFailed(p, r.status().message());
      return r.status();
    }
    mig = std::move(*r);
  }
  for (const ContainerAllocation& a : plan->containers) {
    if (a.host_dir.empty()) continue;
    if (Status s = RecreateContainerDir(a.host_dir); !s.ok()) {
      (void)MarkFailed(p, s.message());
      return s;
    }
  }
  nlohmann::json patch;
  patch["metadata"]["resourceVersion"] = p.resource_version;
  patch["metadata"]["annotations"][options_.allocation.to_allocate_key] = plan->to_allocate;
  if (mig) patch["metadata"]["annotations"][std::string(device::kMigAllocationsAnnotation)] = *mig;
  if (plan->complete) {
    patch["metadata"]["annotations"][std::string(device::kBindPhaseAnnotation)] =
        std::string(device::kBindPhaseSuccess);
  }
  Result<k8s::WriteAck> ack =
      client_.PatchAck(k8s::kPods, p.view.ns, p.view.name, k8s::PatchType::kMerge, patch.dump());
  if (!ack.ok() && k8s::IsConflict(ack.status()) && !last_try) {
    return Status(StatusCode::kAborted, "conflict: " + ack.status().message());
  }
  if (!ack.ok()) {
    std::string why = "recording the allocation on the pod failed: " + ack.status().message();
    (void)MarkFailed(p, why);
    return Status(StatusCode::kUnavailable, "pod " + p.view.Key() + ": " + why);
  }
  for (const ContainerAllocation& a : plan->containers) {
    HAMI_LOG(Info) << "pod " << p.view.Key() << " container " << a.container_name << ": allocated "
                   << Describe(a) << " on node " << options_.node_name
                   << (mig ? " as MIG device(s) (" + MigUuidsOf(a) + ")" : "");
  }
  if (plan->complete) {
    if (Status r = locker_.Release(options_.node_name, p.view.ns, p.view.name, &p.node); !r.ok()) {
      HAMI_LOG(Warning) << "pod " << p.view.Key()
                        << ": allocation done but the node lock could not be released ("
                        << r.message() << "); the scheduler will take it over";
    }
    HAMI_LOG(Info) << "pod " << p.view.Key() << ": bind phase success, node lock released";
  }
  MutexLock l(stats_mu_);
  stats_.allocations += plan->containers.size();
  return std::move(plan->containers);
}

}  // namespace hami::deviceplugin
