// Allocator: the half of the device plugin that answers kubelet's Allocate and
// GetPreferredAllocation calls. It holds no device state of its own: the replica map comes from
// the registrar at each call.
//
//  - Allocate(): finds the pod the call is for (the node lock's holder, or the oldest bound pod
//    of this node in bind phase allocating), applies the allocation plan, writes the consumed
//    to-allocate annotation (and bind-phase success once nothing is left, in the same write,
//    guarded by the pod's resourceVersion; a conflict reads the pod again, up to 4 attempts) and
//    releases the node lock (owner-checked). Any failure after the pod is known marks it
//    bind-phase failed, posts a Warning event and releases the lock; a failure before (API server
//    unreachable, no pending pod) writes nothing and returns an error for kubelet.
//    In operating mode mig the containers' MIG devices are made first (mig_allocate.h) and
//    their runtime identity goes into `hami.io/vgpu-mig-allocations` in the same write.
//  - PreferredAllocation(): the reserved GPUs' replicas for each request; no preference (empty
//    lists) when no pod is found.
//
// Thread safety: all methods may be called from any thread; Allocate and PreferredAllocation
// calls are serialised among themselves.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "common/clock.h"
#include "common/status.h"
#include "common/thread_annotations.h"
#include "device/node_locker.h"
#include "deviceplugin/allocation.h"
#include "deviceplugin/mig_instances.h"
#include "k8s/object_fwd.h"
#include "k8s/rest_client.h"

namespace hami::deviceplugin {

struct AllocatorOptions {
  std::string node_name;
  AllocationSettings allocation;
  int64_t node_lock_expire_seconds = 300;
  // Operating mode mig: the MIG devices made for pods (mig_allocate.h); must outlive the
  // allocator. Null otherwise.
  MigInstances* mig_instances = nullptr;
};

// What Allocate found out of a pod object (exposed for tests).
PodView PodViewOf(const k8s::Object& pod);

class Allocator {
 public:
  // `client` and `clock` must outlive the allocator; `replicas` is called once per request.
  Allocator(k8s::RestClient& client, AllocatorOptions options, std::function<ReplicaMap()> replicas,
            hami::Clock& clock);

  std::vector<std::vector<std::string>> PreferredAllocation(
      const std::vector<PreferredRequest>& requests) EXCLUDES(mu_);
  Result<std::vector<ContainerAllocation>> Allocate(
      const std::vector<std::vector<std::string>>& requests) EXCLUDES(mu_);

  struct Stats {
    uint64_t allocations = 0;  // containers
    uint64_t allocation_failures = 0;
  };
  Stats stats() const;

 private:
  struct PendingPod;
  Result<PendingPod> FindPendingPod();
  Status MarkFailed(const PendingPod& p, const std::string& reason);
  // Allocates the containers of `p`; a kAborted status means its write lost a race and the pod
  // is to be read again.
  Result<std::vector<ContainerAllocation>> AllocateFor(
      const PendingPod& p, const std::vector<std::vector<std::string>>& requests, bool last_try);

  k8s::RestClient& client_;
  const AllocatorOptions options_;
  const std::function<ReplicaMap()> replicas_;
  device::NodeLocker locker_;  // releases the node lock after an allocation (owner-checked)

  Mutex mu_;  // held for a whole Allocate/PreferredAllocation call
  mutable Mutex stats_mu_;
  Stats stats_ GUARDED_BY(stats_mu_);
};

// Whether the pod that owns `inst` is gone, finished or being deleted (asked of the API server;
// false when it cannot be read): MigInstances::Ensure's `finished`.
bool MigPodFinished(k8s::RestClient& client, const MigInstance& inst);

}  // namespace hami::deviceplugin
