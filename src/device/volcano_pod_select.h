// Which pod and container a kubelet Allocate call of the Volcano vGPU count resource
// (`volcano.sh/vgpu-number`) is for: a pure rule over the pods of one node and their Volcano
// annotations (volcano_vgpu.h), with no Kubernetes client.
//
// Kubelet's Allocate names neither the pod nor the container, only device IDs whose count is the
// container's limit of the resource. Kubelet admits one pod at a time and calls the count
// plugin once per container that has the count resource in its limits, in spec order. So:
//
//  1. The candidates are the pods bound to this node (spec.nodeName) that Volcano assigned to it
//     (`volcano.sh/vgpu-node`), Pending, not being deleted, with bind-phase `allocating`.
//     Upstream's agent looked at every pod in the cluster by count and vgpu-time alone, and gave
//     devices to pods bound elsewhere, already running, or whose annotation disagreed with the
//     binding (Volcano #5532, agent #52, #159).
//  2. A candidate's next container is its first app container with a count limit whose entry in
//     `volcano.sh/devices-to-allocate` still lists devices. Entries belong to the *requesting*
//     app containers (a count or memory limit) in spec order, so entry k is the k-th requesting
//     container, not container k (upstream mapped it to container k and compared the kubelet's
//     count with the pod's total: multi-container pods failed, Volcano #4505, agent #77).
//  3. Candidates whose next container asks for a different number of devices than kubelet's
//     request are not the pod being admitted, so they drop out (pods of different sizes on one
//     node no longer take each other's turn, agent #93); so do candidates with nothing left.
//  4. The oldest vgpu-time wins (absent or unreadable times sort last). Two winners at the same
//     time are an error: guessing could hand one pod's GPUs to the other.
//
// A candidate whose annotations or limits cannot be read (or that Volcano could not have
// served, such as an init container asking for the count resource) still takes part in step 4:
// when it is the oldest the call fails with its defect instead of serving a younger pod kubelet
// may not be asking for.
//
// Errors carry messages fit for a pod event: NotFound when no pod matches (with the reasons the
// nearest pods were passed over), FailedPrecondition for a tie, InvalidArgument for a defective
// winner; all name the pods as namespace/name.
//
// Kubelet sends one container per Allocate call; a call with several is the caller's to split.
// Containers with only a memory limit get an entry from Volcano but are never served here: the
// count plugin is not called for them. They do not hold the pod back (VolcanoPick::last) and
// are named in VolcanoPick::memory_only.
//
// Thread safety: pure functions.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "device/device.h"
#include "device/volcano_vgpu.h"

namespace hami::device {

// The resource names of the Volcano device config (`resourceCountName`, `resourceMemoryName`).
struct VolcanoResourceNames {
  std::string count = "volcano.sh/vgpu-number";
  std::string memory = "volcano.sh/vgpu-memory";
};

// A pod of the node as the rule reads it.
struct VolcanoPod {
  std::string uid;
  std::string name;
  std::string ns;
  std::string node_name;  // spec.nodeName; empty when not bound
  std::string phase;      // status.phase, e.g. "Pending"
  bool deleting = false;  // metadata.deletionTimestamp is set
  Annotations annotations;
  PodResources resources;  // limits as written in the spec

  std::string Key() const { return ns + "/" + name; }
};

// The container an Allocate call serves.
struct VolcanoPick {
  size_t pod = 0;        // index into the pods passed to SelectVolcanoPod
  size_t container = 0;  // index into the pod's resources.containers (app containers)
  size_t entry = 0;      // index into to_allocate
  ContainerDevices devices;      // to_allocate[entry]: what the scheduler reserved
  PodSingleDevice to_allocate;   // the pod's decoded devices-to-allocate, as read
  // No entry of another container with a count limit still lists devices: once this one is
  // served the pod is done.
  bool last = false;
  // App containers (indices into resources.containers) with a memory limit but no count limit
  // whose entries still list devices. Kubelet never calls the count plugin for them, so their
  // reservation is never handed over: worth a warning to the pod's owner.
  std::vector<size_t> memory_only;
};

// Steps 2 and 3 for one pod, without the node and phase checks of step 1: the container the
// next count-plugin call serves (`pod` of the result is 0). `request_count` is the number of
// device IDs in kubelet's call; 0 skips step 3. NotFound when nothing is left to serve or the
// next container asks for a different count; InvalidArgument (naming the pod) when the
// annotations or limits are defective or disagree with each other.
Result<VolcanoPick> NextVolcanoContainer(const VolcanoPod& pod, size_t request_count,
                                         const VolcanoResourceNames& names = {});

// The whole rule for one Allocate call on node `node` asking for `request_count` devices. When
// the error is the oldest candidate's defect (InvalidArgument), `defective` (may be null) is set
// to its index.
Result<VolcanoPick> SelectVolcanoPod(std::span<const VolcanoPod> pods, std::string_view node,
                                     size_t request_count,
                                     const VolcanoResourceNames& names = {},
                                     size_t* defective = nullptr);

// The devices-to-allocate value to write back once `pick` is served: its entry emptied, the
// other entries unchanged.
std::string VolcanoToAllocateAfter(const VolcanoPick& pick);

}  // namespace hami::device
