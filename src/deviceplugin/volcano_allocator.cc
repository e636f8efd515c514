#include "deviceplugin/volcano_allocator.h"

#include <limits>
#include <memory>
#include <optional>
#include <set>
#include <sstream>

#include "common/log.h"
#include "common/uuid.h"
#include "device/mig_allocation.h"
#include "device/volcano_vgpu.h"
#include "deviceplugin/allocator.h"
#include "deviceplugin/hook_install.h"
#include "deviceplugin/volcano_api.h"
#include "deviceplugin/volcano_mig_allocate.h"
#include "k8s/api_error.h"
#include "k8s/object.h"
#include "k8s/typed.h"

namespace hami::deviceplugin {

namespace {

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

struct VolcanoAllocator::Picked {
  k8s::ObjectPtr object;
  device::VolcanoPod pod;
  PodView view;  // init containers first
  std::optional<device::VolcanoPick> pick;
};

VolcanoAllocator::VolcanoAllocator(k8s::RestClient& client, VolcanoAllocatorOptions options,
                                   std::function<ReplicaMap()> replicas)
    : client_(client), options_(std::move(options)), replicas_(std::move(replicas)) {}

Result<std::vector<ContainerAllocation>> VolcanoAllocator::Allocate(
    const std::vector<std::vector<std::string>>& requests) {
  MutexLock serial(mu_);
  return AllocateEachContainer(requests, [&](const std::vector<std::string>& ids)
                                             REQUIRES(mu_) { return AllocateOne(ids); });
}

Result<ContainerAllocation> VolcanoAllocator::AllocateOne(const std::vector<std::string>& ids) {
  const std::string& node = options_.node_name;
  const ReplicaMap replicas = replicas_();
  for (const std::string& id : ids) {
    if (!replicas.count(id)) {
      counter_.Count(false);
      return InvalidArgumentError("device ID \"" + id + "\" is not one of this plugin's " +
                                  options_.volcano.count_resource + " devices");
    }
  }
  device::VolcanoResourceNames names{.count = options_.volcano.count_resource,
                                     .memory = options_.volcano.memory_resource};
  return RetryWhilePodChanges([&](bool last_try) REQUIRES(mu_) -> Result<ContainerAllocation> {
    Result<VolcanoNodePods> listed = ListVolcanoNodePods(client_, node);
    if (!listed.ok()) {
      counter_.Count(false);
      return listed.status();
    }
    const std::vector<device::VolcanoPod>& pods = listed->pods;
    size_t defective = std::numeric_limits<size_t>::max();
    Result<device::VolcanoPick> pick =
        device::SelectVolcanoPod(pods, node, ids.size(), names, &defective);
    auto picked = [&](size_t i) {
      Picked p;
      p.object = std::make_shared<const k8s::Object>(listed->item(i));
      p.pod = pods[i];
      p.view = PodViewOf(listed->item(i));
      return p;
    };
    if (!pick.ok()) {
      if (defective < pods.size()) {
        MarkFailed(picked(defective), pick.status().message());
      } else {
        HAMI_LOG(Warning) << "Allocate " << names.count << " on node " << node
                          << " refused: " << pick.status().message();
        ReleaseLock("no pod could be served");
        counter_.Count(false);
      }
      return pick.status();
    }
    Picked p = picked(pick->pod);
    p.pick = std::move(*pick);
    return Serve(p, ids.size(), last_try);
  });
}

Result<ContainerAllocation> VolcanoAllocator::Answer(const Picked& p, size_t request_size) {
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
  if (!a.ok()) MarkFailed(p, a.status().message());
  return a;
}

Result<ContainerAllocation> VolcanoAllocator::AnswerMig(const Picked& p, size_t request_size,
                                                        MigAnswer* mig) {
  const device::VolcanoPick& pick = *p.pick;
  const size_t index = p.pod.resources.init_containers.size() + pick.container;
  Result<std::vector<device::MigAllocation>> slots =
      pick.devices.size() != request_size
          ? Result<std::vector<device::MigAllocation>>(FailedPreconditionError(
                "kubelet asks for " + std::to_string(request_size) + " device(s), Volcano "
                "assigned " + std::to_string(pick.devices.size())))
          : RealiseVolcanoMigSlots(p.view, static_cast<int32_t>(index), pick.devices,
                                   options_.volcano.memory_factor, *options_.mig, &mig->made);
  if (!slots.ok()) {
    ReleaseMig(mig->made);
    MarkFailed(p, slots.status().message());
    return slots.status();
  }
  ContainerAllocation a;
  a.container_index = index;
  a.container_name = index < p.view.containers.size() ? p.view.containers[index].name : "";
  std::vector<std::string> uuids;
  for (const device::MigAllocation& m : *slots) {
    uuids.push_back(m.runtime->mig_uuid);
    mig->uuids += (mig->uuids.empty() ? "" : ", ") + m.runtime->mig_uuid;
  }
  RuntimeDeviceList(uuids, p.pod.uid, options_.allocation, &a);
  auto it = p.view.annotations.find(std::string(device::kMigAllocationsAnnotation));
  mig->annotation =
      MergeMigAllocations(it == p.view.annotations.end() ? "" : it->second, *slots);
  return a;
}

void VolcanoAllocator::ReleaseMig(const std::vector<MigOwner>& made) {
  for (const MigOwner& o : made) {
    if (Status s = options_.mig->instances->Release(o); !s.ok()) {
      HAMI_LOG(Warning) << "cannot destroy the MIG device made for pod UID " << o.pod_uid
                        << ": " << s.message() << " (the periodic reclaim tries again)";
    }
  }
}

Result<ContainerAllocation> VolcanoAllocator::Serve(const Picked& p, size_t request_size,
                                                    bool last_try) {
  const device::VolcanoPick& pick = *p.pick;
  MigAnswer mig;
  HAMI_ASSIGN_OR_RETURN(ContainerAllocation a, options_.mig ? AnswerMig(p, request_size, &mig)
                                                            : Answer(p, request_size));
  nlohmann::json patch;
  patch["metadata"]["resourceVersion"] = k8s::ResourceVersion(*p.object);
  nlohmann::json& anns = patch["metadata"]["annotations"];
  anns[std::string(device::kVolcanoDevicesToAllocateAnnotation)] =
      device::VolcanoToAllocateAfter(pick);
  if (options_.mig) anns[std::string(device::kMigAllocationsAnnotation)] = mig.annotation;
  if (pick.last) {
    anns[std::string(device::kVolcanoBindPhaseAnnotation)] =
        std::string(device::kVolcanoBindPhaseSuccess);
    anns[std::string(device::kVolcanoVgpuTimeAnnotation)] =
        device::FormatVolcanoTime(device::kVolcanoVgpuTimeDone);
  }
  Result<k8s::WriteAck> ack =
      client_.PatchAck(k8s::kPods, p.pod.ns, p.pod.name, k8s::PatchType::kMerge, patch.dump());
  if (!ack.ok() && k8s::IsConflict(ack.status()) && !last_try) {
    HAMI_VLOG(2) << "pod " << p.pod.Key() << " changed while allocating; reading it again";
    return Status(StatusCode::kAborted, "conflict: " + ack.status().message());
  }
  if (!ack.ok()) {
    std::string why = "recording the allocation on the pod failed: " + ack.status().message();
    if (options_.mig) ReleaseMig(mig.made);
    MarkFailed(p, why);
    return Status(StatusCode::kUnavailable, "pod " + p.pod.Key() + ": " + why);
  }
  HAMI_LOG(Info) << "pod " << p.pod.Key() << " container " << a.container_name
                 << ": allocated " << Describe(pick.devices, options_.volcano.memory_factor)
                 << (options_.mig ? " as MIG device(s) (" + mig.uuids + ")" : std::string())
                 << " on node " << options_.node_name << " (Volcano vGPU)";
  if (pick.last) Done(p);
  counter_.Count(true);
  return a;
}

void VolcanoAllocator::Done(const Picked& p) {
  const device::VolcanoPick& pick = *p.pick;
  ReleaseLock("pod " + p.pod.Key() + " is served");
  HAMI_LOG(Info) << "pod " << p.pod.Key() << ": bind phase success";
  if (pick.memory_only.empty()) return;
  std::string list;
  for (size_t c : pick.memory_only) {
    list += (list.empty() ? "" : ", ") + p.pod.resources.containers[c].name;
  }
  Warn(p.object, "VolcanoMemoryOnlyContainer",
       "container(s) " + list + " set " + options_.volcano.memory_resource + " without " +
           options_.volcano.count_resource +
           ": Volcano reserved a GPU for them, but kubelet asks the device plugin only for "
           "containers with a " + options_.volcano.count_resource +
           " limit, so they run without one; add " + options_.volcano.count_resource +
           ": 1 to their limits");
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
  counter_.Count(false);
}

void VolcanoAllocator::Warn(const k8s::ObjectPtr& pod, const std::string& reason,
                            const std::string& message) {
  WarnPod(client_, options_.node_name, pod, reason, message);
}

void VolcanoAllocator::ReleaseLock(const std::string& why) {
  ReleaseVolcanoNodeLock(client_, options_.node_name, device::kVolcanoNodeLockAnnotation, why);
}

}  // namespace hami::deviceplugin
