// The Kubernetes objects the scheduling core reads, reduced to what it needs. The scheduler
// service (issue 4) fills these from its informers; tests and benchmarks build them directly.
//
// Thread safety: plain values.
#pragma once

#include <cstddef>
#include <string>

#include "device/device.h"

namespace hami::scheduler {

// Pod annotations the scheduler writes at Filter time.
inline constexpr std::string_view kAssignedNodeAnnotation = "hami.io/vgpu-node";
inline constexpr std::string_view kAssignedTimeAnnotation = "hami.io/vgpu-time";

struct NodeObject {
  std::string name;
  // Registration (`hami.io/node-<vendor>-register`), `hami.io/device-cordon`,
  // `hami.io/node-nvidia-score`, and the policy annotations.
  device::Annotations annotations;
  // Integer status.capacity entries: the devices of vendors that register no annotation.
  device::NodeCapacity capacity;
  // The labels vendor modules read (device::kInstanceTypeLabel), not the whole set.
  device::Annotations labels;
};

enum class PodPhase : uint8_t { kPending, kRunning, kSucceeded, kFailed, kUnknown };

struct PodObject {
  std::string uid;
  std::string name_space;
  std::string name;
  // spec.nodeName: empty until the pod is bound.
  std::string node_name;
  // `hami.io/vgpu-node`, `hami.io/vgpu-time`, the vendors' `*-devices-allocated` lists and
  // `hami.io/vgpu-mig-allocations`.
  device::Annotations annotations;
  PodPhase phase = PodPhase::kPending;
  // deletionTimestamp set: the pod still holds its devices until it is gone.
  bool deleting = false;
  // Number of init containers in the spec (they come first in the device lists).
  size_t init_container_count = 0;
  // Every init container terminated with exit code 0: only the app containers hold devices.
  bool init_containers_done = false;
};

}  // namespace hami::scheduler
