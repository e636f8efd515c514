// The API calls both of Volcano's node-side protocols (vGPU, GPU sharing/number) make besides
// their pod annotations: reading the node's pods, releasing the scheduler's node lock and
// telling a pod's owner, by a Warning event, why its allocation went wrong. The two writes log
// their outcome; their failures are logged, not returned (the allocation's own result is what
// kubelet hears).
//
// Thread safety: free functions; `client` must be safe to use from the calling thread.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "device/volcano_pod_select.h"
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

}  // namespace hami::deviceplugin
