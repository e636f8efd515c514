#include "deviceplugin/volcano_share_backend.h"

#include <algorithm>
#include <limits>
#include <memory>
#include <set>

#include "common/log.h"
#include "common/uuid.h"
#include "device/volcano_vgpu.h"
#include "deviceplugin/allocator.h"
#include "deviceplugin/hook_install.h"
#include "deviceplugin/volcano_api.h"
#include "k8s/api_error.h"
#include "k8s/object.h"
#include "k8s/typed.h"

namespace hami::deviceplugin {

namespace {

const char* ModeName(device::VolcanoShareMode mode) {
  return mode == device::VolcanoShareMode::kMemory ? "GPU sharing" : "GPU number";
}

}  // namespace

struct VolcanoShareBackend::Picked {
  k8s::ObjectPtr object;
  device::VolcanoPod pod;
  device::VolcanoSharePick pick;
};

VolcanoShareBackend::VolcanoShareBackend(k8s::RestClient& client, VolcanoShareOptions options,
                                         DeviceSource devices, GpuSource gpus)
    : client_(client),
      options_(std::move(options)),
      devices_(std::move(devices)),
      gpus_(std::move(gpus)) {}

Result<std::vector<ContainerAllocation>> VolcanoShareBackend::Allocate(
    const std::vector<std::vector<std::string>>& requests) {
  MutexLock serial(mu_);
  return AllocateEachContainer(requests, [&](const std::vector<std::string>& ids)
                                             REQUIRES(mu_) { return AllocateOne(ids); });
}

Result<ContainerAllocation> VolcanoShareBackend::AllocateOne(const std::vector<std::string>& ids) {
  const std::string& node = options_.node_name;
  const std::string resource = ResourceName();
  std::vector<PluginDevice> offered;
  devices_(0, std::chrono::milliseconds(0), &offered);
  std::set<std::string> known;
  for (const PluginDevice& d : offered) known.insert(d.id);
  for (const std::string& id : ids) {
    if (!known.count(id)) {
      counter_.Count(false);
      return InvalidArgumentError("device ID \"" + id + "\" is not one of this plugin's " +
                                  resource + " devices");
    }
  }
  return RetryWhilePodChanges([&](bool last_try) REQUIRES(mu_) -> Result<ContainerAllocation> {
    Result<VolcanoNodePods> listed = ListVolcanoNodePods(client_, node);
    if (!listed.ok()) {
      counter_.Count(false);
      return listed.status();
    }
    const std::vector<device::VolcanoPod>& pods = listed->pods;
    size_t defective = std::numeric_limits<size_t>::max();
    Result<device::VolcanoSharePick> pick =
        device::SelectVolcanoSharePod(pods, node, options_.mode, ids.size(), &defective);
    auto picked = [&](size_t i) {
      Picked p;
      p.object = std::make_shared<const k8s::Object>(listed->item(i));
      p.pod = pods[i];
      return p;
    };
    if (!pick.ok()) {
      if (defective < pods.size()) {
        MarkFailed(picked(defective), pick.status().message());
      } else {
        HAMI_LOG(Warning) << "Allocate " << resource << " on node " << node
                          << " refused: " << pick.status().message();
        ReleaseLock("no pod could be served");
        counter_.Count(false);
      }
      return pick.status();
    }
    Picked p = picked(pick->pod);
    p.pick = std::move(*pick);
    return Serve(p, last_try);
  });
}

Result<std::vector<device::DeviceInfo>> VolcanoShareBackend::Gpus(
    const Picked& p, const std::vector<device::DeviceInfo>& node_gpus) {
  std::vector<device::DeviceInfo> out;
  std::string why;
  for (uint32_t index : p.pick.gpus) {
    auto found = std::find_if(node_gpus.begin(), node_gpus.end(),
                              [&](const device::DeviceInfo& d) { return d.index == index; });
    if (found == node_gpus.end()) {
      why = "GPU " + std::to_string(index) + " of " +
            std::string(device::kVolcanoGpuIndexAnnotation) + " is not served on this node";
    } else if (!found->health) {
      why = "GPU " + std::to_string(index) + " (" + found->id + ") is unhealthy";
    }
    if (!why.empty()) break;
    out.push_back(*found);
  }
  const int64_t request_mib = p.pick.request * options_.memory_factor;
  if (why.empty() && options_.mode == device::VolcanoShareMode::kMemory &&
      request_mib > out.front().devmem) {
    why = "it asks for " + std::to_string(request_mib) + " MiB but GPU " +
          std::to_string(out.front().index) + " has " + std::to_string(out.front().devmem) +
          " MiB";
  }
  if (why.empty()) return out;
  MarkFailed(p, why);
  return Status(StatusCode::kFailedPrecondition, "pod " + p.pod.Key() + ": " + why);
}

Result<ContainerAllocation> VolcanoShareBackend::Answer(
    const Picked& p, const std::vector<device::DeviceInfo>& gpus,
    const std::vector<device::DeviceInfo>& node_gpus) {
  const bool sharing = options_.mode == device::VolcanoShareMode::kMemory;
  const int64_t request_mib = p.pick.request * options_.memory_factor;
  const PodView view = PodViewOf(*p.object);
  const size_t index =
      p.pick.init ? p.pick.container : p.pod.resources.init_containers.size() + p.pick.container;
  Result<ContainerAllocation> a = ContainerAllocation{};
  if (sharing && options_.enforce_memory) {
    std::set<std::string> uuids;
    for (const device::DeviceInfo& d : node_gpus) uuids.insert(d.id);
    device::ContainerDevices reserved = {{.uuid = gpus.front().id,
                                          .type = "NVIDIA",
                                          .mem_mib = static_cast<int32_t>(request_mib),
                                          .cores = 0}};
    a = AllocateContainer(view, index, reserved, 1, uuids, options_.allocation,
                          [] { return NewRandomUuid() + ".cache"; });
    if (a.ok() && !a->host_dir.empty()) {
      if (Status s = RecreateContainerDir(a->host_dir); !s.ok()) a = s;
    }
    if (!a.ok()) {
      MarkFailed(p, a.status().message());
      return a.status();
    }
  } else {
    a->container_index = index;
    a->container_name = index < view.containers.size() ? view.containers[index].name : "";
    std::vector<std::string> uuids;
    for (const device::DeviceInfo& g : gpus) uuids.push_back(g.id);
    RuntimeDeviceList(uuids, p.pod.uid, options_.allocation, &*a);
  }
  int64_t gpus_mib = 0;
  for (const device::DeviceInfo& g : gpus) gpus_mib += g.devmem;
  a->envs["VOLCANO_GPU_ALLOCATED"] = std::to_string(sharing ? request_mib : gpus_mib);
  a->envs["VOLCANO_GPU_MEMORY_TOTAL"] = std::to_string(gpus.front().devmem);
  return a;
}

Result<ContainerAllocation> VolcanoShareBackend::Serve(const Picked& p, bool last_try) {
  const device::VolcanoSharePick& pick = p.pick;
  const std::vector<device::DeviceInfo> node_gpus = gpus_();
  HAMI_ASSIGN_OR_RETURN(std::vector<device::DeviceInfo> gpus, Gpus(p, node_gpus));
  HAMI_ASSIGN_OR_RETURN(ContainerAllocation a, Answer(p, gpus, node_gpus));
  nlohmann::json patch;
  patch["metadata"]["resourceVersion"] = k8s::ResourceVersion(*p.object);
  nlohmann::json& anns = patch["metadata"]["annotations"];
  anns[std::string(device::kVolcanoGpuContainersServedAnnotation)] =
      std::to_string(pick.served + 1);
  if (pick.last) anns[std::string(device::kVolcanoGpuAssignedAnnotation)] = "true";
  Result<k8s::WriteAck> ack =
      client_.PatchAck(k8s::kPods, p.pod.ns, p.pod.name, k8s::PatchType::kMerge, patch.dump());
  if (!ack.ok() && k8s::IsConflict(ack.status()) && !last_try) {
    HAMI_VLOG(2) << "pod " << p.pod.Key() << " changed while allocating; reading it again";
    return Status(StatusCode::kAborted, "conflict: " + ack.status().message());
  }
  if (!ack.ok()) {
    std::string why = "recording the allocation on the pod failed: " + ack.status().message();
    MarkFailed(p, why);
    return Status(StatusCode::kUnavailable, "pod " + p.pod.Key() + ": " + why);
  }
  std::string described;
  for (const device::DeviceInfo& g : gpus) {
    described += (described.empty() ? "GPU " : ", GPU ") + std::to_string(g.index) + " (" +
                 g.id + ")";
  }
  const bool sharing = options_.mode == device::VolcanoShareMode::kMemory;
  HAMI_LOG(Info) << "pod " << p.pod.Key() << " container " << a.container_name
                 << ": allocated " << described
                 << (sharing ? ", " + std::to_string(pick.request * options_.memory_factor) +
                                   " MiB" +
                                   (options_.enforce_memory ? " enforced" : " (not enforced)")
                             : "")
                 << " on node " << options_.node_name << " (Volcano " << ModeName(options_.mode)
                 << ")";
  if (pick.last) {
    HAMI_LOG(Info) << "pod " << p.pod.Key() << ": " << device::kVolcanoGpuAssignedAnnotation
                   << " true";
    ReleaseLock("pod " + p.pod.Key() + " is served");
  }
  counter_.Count(true);
  return a;
}

void VolcanoShareBackend::MarkFailed(const Picked& p, const std::string& reason) {
  HAMI_LOG(Warning) << "pod " << p.pod.Key() << ": Volcano " << ModeName(options_.mode)
                    << " allocation on node " << options_.node_name << " failed: " << reason;
  Result<k8s::WriteAck> w = k8s::PatchPodAnnotations(
      client_, p.pod.ns, p.pod.name,
      {{std::string(device::kVolcanoGpuAllocationFailedAnnotation), reason}});
  if (!w.ok()) {
    HAMI_LOG(Warning) << "pod " << p.pod.Key() << ": cannot record the failure: "
                      << w.status().message();
  }
  WarnPod(client_, options_.node_name, p.object, "AllocationFailed", reason);
  ReleaseLock("the allocation of pod " + p.pod.Key() + " failed");
  counter_.Count(false);
}

void VolcanoShareBackend::ReleaseLock(const std::string& why) {
  // Volcano locks the node only for GPU sharing.
  if (options_.mode != device::VolcanoShareMode::kMemory) return;
  ReleaseVolcanoNodeLock(client_, options_.node_name, device::kVolcanoGpuShareNodeLockAnnotation,
                         why);
}

}  // namespace hami::deviceplugin
