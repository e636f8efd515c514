// VolcanoAllocator: kubelet's Allocate for Volcano's vGPU count resource
// (`volcano.sh/vgpu-number`), the node side of ../shared/reference/volcano-deviceshare.md 4.10
// done the safe way.
//
// Per container request (kubelet sends one per call):
//  1. lists the Pending pods bound to this node and picks the pod and container with
//     SelectVolcanoPod (device/volcano_pod_select.h: Volcano's assignment to this node, bind-phase
//     allocating, the next requesting container asking for as many devices as kubelet does,
//     the oldest vgpu-time; ties and defects refuse);
//  2. answers with the same contract as HAMi's mode (allocation.h: NVIDIA_VISIBLE_DEVICES with
//     the reserved GPUs' UUIDs, CUDA_DEVICE_MEMORY_LIMIT_<i> = reserved units x gpuMemoryFactor
//     MiB, CUDA_DEVICE_SM_LIMIT, the container's libvgpu.so and region directory; MPS under
//     operating mode mps); kubelet's device IDs only count (they must be this plugin's);
//  3. writes, guarded by the pod's resourceVersion (a conflict reads again, up to 4 times),
//     `volcano.sh/devices-to-allocate` with the container's entry emptied, and once no
//     container with a count limit waits, `volcano.sh/bind-phase: success` and
//     `volcano.sh/vgpu-time: 18446744073709551615` in the same write;
//  4. releases Volcano's node lock (the node annotation `hamivgpu`, when present: one JSON
//     Patch `remove`) once the pod is done or has failed.
// A pod that was picked but cannot be served gets bind-phase failed, a Warning event naming why,
// and the lock released; a call that finds no pod, or a tie, releases the lock too (the pod the
// scheduler locked the node for cannot be served by this call, and a held lock would stop every
// vGPU pod on the node for 5 minutes) unless the API server could not be read. Containers with a
// memory limit but no count limit are never asked for by kubelet; the pod gets a Warning event
// saying they run without a GPU.
//
// Thread safety: Allocate may be called from any thread; calls are serialised.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "common/clock.h"
#include "common/status.h"
#include "common/thread_annotations.h"
#include "device/volcano_pod_select.h"
#include "deviceplugin/allocation.h"
#include "deviceplugin/volcano_api.h"
#include "deviceplugin/volcano_devices.h"
#include "deviceplugin/volcano_mig_allocate.h"
#include "k8s/object_fwd.h"
#include "k8s/rest_client.h"

namespace hami::deviceplugin {

struct VolcanoAllocatorOptions {
  std::string node_name;
  AllocationSettings allocation;  // hook path, device list strategies, operating mode, ...
  VolcanoSettings volcano;
  // Set in operating mode mig: Volcano assigns MIG slots (volcano_mig_allocate.h), which become
  // MIG devices, with neither libvgpu.so nor its quotas.
  std::optional<VolcanoMigSource> mig;
};

class VolcanoAllocator {
 public:
  // `client` must outlive the allocator; `replicas` (the count resource's IDs) is called once
  // per call.
  VolcanoAllocator(k8s::RestClient& client, VolcanoAllocatorOptions options,
                   std::function<ReplicaMap()> replicas);

  Result<std::vector<ContainerAllocation>> Allocate(
      const std::vector<std::vector<std::string>>& requests) EXCLUDES(mu_);

  using Stats = AllocationCounter::Stats;
  Stats stats() const { return counter_.stats(); }

 private:
  struct Picked;
  Result<ContainerAllocation> AllocateOne(const std::vector<std::string>& ids) REQUIRES(mu_);
  // One attempt; kAborted when the pod changed under it.
  Result<ContainerAllocation> Serve(const Picked& p, size_t request_size, bool last_try)
      REQUIRES(mu_);
  // What a dynamic-MIG answer leaves for the pod's write.
  struct MigAnswer {
    std::vector<MigOwner> made;  // MIG devices this attempt made (destroyed if it gives up)
    std::string annotation;      // hami.io/vgpu-mig-allocations with this container's devices
    std::string uuids;           // the container's MIG devices, for the log
  };
  // The answer to kubelet under HAMi-core and MPS (libvgpu.so quotas), and under dynamic MIG.
  // A failure marks the pod failed.
  Result<ContainerAllocation> Answer(const Picked& p, size_t request_size) REQUIRES(mu_);
  Result<ContainerAllocation> AnswerMig(const Picked& p, size_t request_size, MigAnswer* mig)
      REQUIRES(mu_);
  void ReleaseMig(const std::vector<MigOwner>& made) REQUIRES(mu_);
  // The pod's last container is served: the lock goes, and a word on memory-only containers.
  void Done(const Picked& p) REQUIRES(mu_);
  void MarkFailed(const Picked& p, const std::string& reason) REQUIRES(mu_);
  void ReleaseLock(const std::string& why) REQUIRES(mu_);
  void Warn(const k8s::ObjectPtr& pod, const std::string& reason, const std::string& message);

  k8s::RestClient& client_;
  const VolcanoAllocatorOptions options_;
  const std::function<ReplicaMap()> replicas_;
  Mutex mu_;  // held for a whole Allocate call
  AllocationCounter counter_;
};

}  // namespace hami::deviceplugin
