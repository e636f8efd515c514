// The API calls both of Volcano's node-side protocols (vGPU, GPU sharing/number) make besides
// their pod annotations: reading the node's pods, releasing the scheduler's node lock and
// telling a pod's owner, by a Warning event, why its allocation went wrong. The two writes log
// their outcome; their failures are logged, not returned (the allocation's own result is what
// kubelet hears).
//
// Thread safety: free functions; `client` must be safe to use from the calling thread.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "common/thread_annotations.h"
#include "device/volcano_pod_select.h"
#include "deviceplugin/allocation.h"
#include "k8s/object_fwd.h"
#include "k8s/rest_client.h"

namespace hami::deviceplugin {

// The pod as the selection rules read it.
device::VolcanoPod VolcanoPodOf(const k8s::Object& pod);

// The Pending pods bound to `node` (one list call, fieldSelector spec.nodeName and
// status.phase), as listed and as read.
struct VolcanoNodePods {
  k8s::ObjectPtr list;                   // the API server's answer (never null)
  std::vector<device::VolcanoPod> pods;  // pods[i] is list["items"][i]
  const k8s::Object& item(size_t i) const;
};
// Unavailable, naming the node, when the list cannot be read.
Result<VolcanoNodePods> ListVolcanoNodePods(k8s::RestClient& client, const std::string& node);

// Removes the node annotation `key` (Volcano's lock: "hamivgpu" for vGPU, "gpu" for GPU
// sharing) with one JSON Patch. The scheduler sets the lock only when it is absent or expired,
// so whatever is there is the lock the pod being allocated was placed under (or an expired
// one). A node without the key answers 422, which means there was no lock. `why` goes into
// the log line.
void ReleaseVolcanoNodeLock(k8s::RestClient& client, const std::string& node,
                            std::string_view key, const std::string& why);

// Posts a Warning event on `pod` from hami-device-plugin on `node`.
void WarnPod(k8s::RestClient& client, const std::string& node, const k8s::ObjectPtr& pod,
             const std::string& reason, const std::string& message);

// Kubelet's Allocate one container at a time, as both protocols serve it: `one(ids)` for each
// request in order; the first failure is the call's.
// These two helpers call their callback in the caller's context, locks included: the analysis
// cannot carry a capability through a template's parameter, so it checks the callback's body
// (annotated REQUIRES at its definition) and not these calls.
template <typename One>
Result<std::vector<ContainerAllocation>> AllocateEachContainer(
    const std::vector<std::vector<std::string>>& requests, One&& one) NO_THREAD_SAFETY_ANALYSIS {
  std::vector<ContainerAllocation> out;
  out.reserve(requests.size());
  for (const std::vector<std::string>& ids : requests) {
    Result<ContainerAllocation> a = one(ids);
    if (!a.ok()) return a.status();
    out.push_back(std::move(*a));
  }
  return out;
}

// How many times a container's allocation reads the pods again after its guarded write met a
// newer pod (a conflict); the last try records the failure instead.
inline constexpr int kVolcanoWriteAttempts = 4;

// Runs `attempt(last_try)` until it answers other than Aborted (the pod changed under it: read
// again), at most kVolcanoWriteAttempts times (the last with last_try true, which must not
// answer Aborted).
template <typename Attempt>
Result<ContainerAllocation> RetryWhilePodChanges(Attempt&& attempt) NO_THREAD_SAFETY_ANALYSIS {
  for (int n = 1;; ++n) {
    Result<ContainerAllocation> r = attempt(n >= kVolcanoWriteAttempts);
    if (r.ok() || r.status().code() != StatusCode::kAborted || n >= kVolcanoWriteAttempts) {
      return r;
    }
  }
}

// The containers a backend answered and refused.
// Thread safety: every method may be called from any thread.
class AllocationCounter {
 public:
  struct Stats {
    uint64_t allocations = 0;  // containers
    uint64_t allocation_failures = 0;
  };
  void Count(bool ok, uint64_t n = 1) EXCLUDES(mu_) {
    MutexLock l(mu_);
    (ok ? stats_.allocations : stats_.allocation_failures) += n;
  }
  Stats stats() const EXCLUDES(mu_) {
    MutexLock l(mu_);
    return stats_;
  }

 private:
  mutable Mutex mu_;
  Stats stats_ GUARDED_BY(mu_);
};

}  // namespace hami::deviceplugin
