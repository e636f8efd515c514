// VolcanoShareBackend: the kubelet device plugin for Volcano's GPU sharing
// (`volcano.sh/gpu-memory`) or GPU number (`volcano.sh/gpu-number`) resource, the node side of
// ../shared/reference/volcano-deviceshare.md 3.3 done the safe way (device/volcano_gpushare.h
// has the wire names and the rule that picks the pod).
//
// Devices (from the registrar, volcano_devices.h): GPU sharing offers `<index>-<j>` per memory
// unit of each GPU, GPU number one device per GPU named by its UUID; an unhealthy GPU's devices
// are marked unhealthy.
//
// Per container request (kubelet sends one per call):
//  1. lists the Pending pods bound to this node and picks the pod and container with
//     SelectVolcanoSharePod (Pending, not yet assigned, the next requesting container asking for
//     as many devices as kubelet does, the oldest predicate-time; ties and defects refuse);
//  2. answers with the GPUs of `volcano.sh/gpu-index` by UUID, through the device list
//     strategies (NVIDIA_VISIBLE_DEVICES by default; Volcano's agent gave indices, which name
//     other GPUs when the runtime's order differs from NVML's), VOLCANO_GPU_ALLOCATED (GPU
//     sharing: the request in MiB; GPU number: the GPUs' memory in MiB) and
//     VOLCANO_GPU_MEMORY_TOTAL (the first GPU's memory in MiB). With `enforce_memory` in GPU
//     sharing mode the container gets the same contract as the vGPU modes instead, its request
//     as CUDA_DEVICE_MEMORY_LIMIT_0 enforced by libvgpu.so (no SM limit): Volcano's own agent
//     cannot hold a container to its share;
//  3. writes, guarded by the pod's resourceVersion (a conflict reads again, up to 4 times), the
//     count of served containers and, once the last requesting container is served,
//     `volcano.sh/gpu-assigned: "true"`;
//  4. in GPU sharing mode releases Volcano's node lock `gpu` once the pod is served or failed.
// A pod that was picked but cannot be served (a defective annotation, a GPU not on this node,
// unhealthy or too small) gets hami.io/volcano-gpu-allocation-failed with the reason, a Warning
// event, and the lock released; it is not picked again.
//
// Thread safety: every method may be called from any thread; Allocate calls are serialised.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "common/status.h"
#include "common/thread_annotations.h"
#include "device/device.h"
#include "device/volcano_gpushare.h"
#include "deviceplugin/allocation.h"
#include "deviceplugin/plugin_backend.h"
#include "deviceplugin/volcano_api.h"
#include "k8s/object_fwd.h"
#include "k8s/rest_client.h"

namespace hami::deviceplugin {

struct VolcanoShareOptions {
  std::string node_name;
  AllocationSettings allocation;  // device list strategies, hook path (enforce_memory)
  device::VolcanoShareMode mode = device::VolcanoShareMode::kMemory;
  int32_t memory_factor = 1;      // MiB per memory unit (gpuMemoryFactor)
  bool enforce_memory = false;    // GPU sharing: hold the container to its request (libvgpu.so)
};

class VolcanoShareBackend final : public DevicePluginBackend {
 public:
  // Registrar::ResourceDevices for the resource.
  using DeviceSource = std::function<uint64_t(uint64_t known, std::chrono::milliseconds timeout,
                                              std::vector<PluginDevice>* out)>;
  // The node's registered GPUs (index, UUID, memory in MiB, health).
  using GpuSource = std::function<std::vector<device::DeviceInfo>()>;

  // `client` must outlive the backend.
  VolcanoShareBackend(k8s::RestClient& client, VolcanoShareOptions options, DeviceSource devices,
                      GpuSource gpus);

  std::string ResourceName() const override {
    return std::string(device::VolcanoShareResource(options_.mode));
  }
  uint64_t Devices(uint64_t known, std::chrono::milliseconds timeout,
                   std::vector<PluginDevice>* out) override {
    return devices_(known, timeout, out);
  }
  // No preference: the pod's GPUs do not depend on kubelet's IDs.
  std::vector<std::vector<std::string>> PreferredAllocation(
      const std::vector<PreferredRequest>& requests) override {
    return std::vector<std::vector<std::string>>(requests.size());
  }
  Result<std::vector<ContainerAllocation>> Allocate(
      const std::vector<std::vector<std::string>>& requests) override EXCLUDES(mu_);

  using Stats = AllocationCounter::Stats;
  Stats stats() const { return counter_.stats(); }

 private:
  struct Picked;
  Result<ContainerAllocation> AllocateOne(const std::vector<std::string>& ids) REQUIRES(mu_);
  // One attempt; kAborted when the pod changed under it.
  Result<ContainerAllocation> Serve(const Picked& p, bool last_try) REQUIRES(mu_);
  // The pod's GPUs for this container among the node's; a failure (not on the node, unhealthy,
  // too small) marks the pod failed.
  Result<std::vector<device::DeviceInfo>> Gpus(const Picked& p,
                                               const std::vector<device::DeviceInfo>& node_gpus)
      REQUIRES(mu_);
  // The answer to kubelet (a failure marks the pod failed).
  Result<ContainerAllocation> Answer(const Picked& p, const std::vector<device::DeviceInfo>& gpus,
                                     const std::vector<device::DeviceInfo>& node_gpus)
      REQUIRES(mu_);
  void MarkFailed(const Picked& p, const std::string& reason) REQUIRES(mu_);
  void ReleaseLock(const std::string& why) REQUIRES(mu_);

  k8s::RestClient& client_;
  const VolcanoShareOptions options_;
  const DeviceSource devices_;
  const GpuSource gpus_;
  Mutex mu_;  // held for a whole Allocate call
  AllocationCounter counter_;
};

}  // namespace hami::deviceplugin
