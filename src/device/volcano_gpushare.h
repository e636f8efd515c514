// Volcano's older NVIDIA modes, GPU sharing (`volcano.sh/gpu-memory`) and GPU number
// (`volcano.sh/gpu-number`), as `deviceshare.GPUSharingEnable` / `GPUNumberEnable` schedule them:
// the wire names and a pure rule for which pod and container a kubelet Allocate call serves.
// Wire facts: ../shared/reference/volcano-deviceshare.md, section 3.
//
// What Volcano's scheduler needs of the node (written by the device plugin):
//   status.capacity volcano.sh/gpu-memory   memory units (MiB / memory factor) of all GPUs
//   status.capacity volcano.sh/gpu-number   the number of GPUs
//   (the one the plugin serves comes from kubelet; the other is patched into the status)
//   annotation volcano.sh/gpu-unhealthy-ids "1,3": indices of unhealthy GPUs; absent when none
// What it writes on a pod it places (before bind up to v1.15, on the Binding from v1.16):
//   volcano.sh/gpu-index        "0" / "1,3": the GPUs of the whole pod, by index on the node
//   volcano.sh/predicate-time   nanoseconds since 1970 when it decided, decimal
// and, with deviceshare.NodeLockEnable in GPU sharing mode, the node annotation `gpu` as lock.
// The device plugin marks a served pod `volcano.sh/gpu-assigned: "true"` and releases the lock.
//
// How a pod's GPUs are shared among its containers (Volcano's agent gave every container all of
// them, and served only the first container of a pod, kubelet's later calls failing):
//   - GPU sharing: gpu-index names one GPU; every container with a gpu-memory limit gets it.
//   - GPU number: gpu-index names as many GPUs as the pod asks for; the app containers get
//     consecutive slices of the list in spec order, an init container the start of the list
//     (it has finished before the app containers start, as kubelet's own device reuse assumes).
// Containers are served in kubelet's order (init containers, then app containers) and counted
// in the pod annotation hami.io/volcano-gpu-containers-served, so a call knows which container
// it is for; the pod is assigned once its last requesting container is served.
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
#include "device/volcano_pod_select.h"

namespace hami::device {

inline constexpr std::string_view kVolcanoGpuMemoryResource = "volcano.sh/gpu-memory";
inline constexpr std::string_view kVolcanoGpuNumberResource = "volcano.sh/gpu-number";
inline constexpr std::string_view kVolcanoGpuIndexAnnotation = "volcano.sh/gpu-index";
inline constexpr std::string_view kVolcanoPredicateTimeAnnotation = "volcano.sh/predicate-time";
inline constexpr std::string_view kVolcanoGpuAssignedAnnotation = "volcano.sh/gpu-assigned";
inline constexpr std::string_view kVolcanoGpuUnhealthyIdsAnnotation =
    "volcano.sh/gpu-unhealthy-ids";
// hami-cpp's own: how many of the pod's requesting containers have been served, decimal.
inline constexpr std::string_view kVolcanoGpuContainersServedAnnotation =
    "hami.io/volcano-gpu-containers-served";
// hami-cpp's own: why the device plugin could not serve the pod; such a pod is not picked again.
inline constexpr std::string_view kVolcanoGpuAllocationFailedAnnotation =
    "hami.io/volcano-gpu-allocation-failed";

enum class VolcanoShareMode {
  kMemory,  // GPU sharing: volcano.sh/gpu-memory, one GPU per pod
  kNumber,  // GPU number: volcano.sh/gpu-number, whole GPUs
};

// The kubelet resource a mode serves.
std::string_view VolcanoShareResource(VolcanoShareMode mode);

// "0", "1,3": decimal GPU indices separated by commas, no spaces, at least one, no repeats.
Result<std::vector<uint32_t>> ParseVolcanoGpuIndices(std::string_view text);
std::string EncodeVolcanoGpuIndices(const std::vector<uint32_t>& indices);

// The container an Allocate call serves.
struct VolcanoSharePick {
  size_t pod = 0;           // index into the pods passed to SelectVolcanoSharePod
  bool init = false;        // an init container (index into init_containers), else an app one
  size_t container = 0;
  int64_t request = 0;      // the container's limit of the resource
  std::vector<uint32_t> gpus;  // the GPU indices it gets
  size_t served = 0;        // requesting containers served before it
  bool last = false;        // no requesting container of the pod comes after it
};

// The rule for one Allocate call of `mode`'s resource on node `node` asking for `request_count`
// device IDs (GPU sharing: memory units; GPU number: GPUs):
//  1. candidates: pods bound to `node`, Pending, not being deleted, with a limit of the resource,
//     not yet assigned (gpu-assigned other than "true") and not given up on (no
//     hami.io/volcano-gpu-allocation-failed);
//  2. a candidate's next container is its requesting container number `served`; a candidate
//     whose next container asks for another count than kubelet's drops out;
//  3. the oldest predicate-time wins (absent or unreadable times sort last); a tie is an error.
// A candidate without gpu-index, or whose gpu-index or limits cannot be read or do not fit the
// mode (GPU sharing: one GPU; GPU number: at least the pod's count), takes part in step 3 and,
// as the oldest, fails the call with its defect (InvalidArgument; `defective` set to its index
// when not null). NotFound names why the nearest pods were passed over.
Result<VolcanoSharePick> SelectVolcanoSharePod(std::span<const VolcanoPod> pods,
                                               std::string_view node, VolcanoShareMode mode,
                                               size_t request_count,
                                               size_t* defective = nullptr);

}  // namespace hami::device
