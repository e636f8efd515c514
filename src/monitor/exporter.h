// The node monitor's `/metrics` page (port 9394), Prometheus text format 0.0.4, with HAMi's
// metric names and labels so its dashboards work unchanged. Every series carries zone="vGPU".
//
//   per GPU (NVML)  node, device_index, device_uuid, device_type ("NVIDIA-<model>"):
//     hami_host_gpu_memory_used_bytes, hami_host_gpu_utilization_ratio (percent);
//     hami_host_gpu_memory_controller_utilization_ratio (percent; upstream has no node label)
//   per container device  namespace, pod, container, vdevice_index, device_uuid:
//     hami_vgpu_memory_used_bytes, hami_vgpu_memory_limit_bytes, hami_container_device_memory_bytes
//     (= used), hami_container_device_utilization_ratio (SM percent of the container's processes,
//     from NVML's per-process samples), hami_container_last_kernel_elapsed_seconds (only after a
//     launch), hami_vgpu_memory_context_bytes, hami_vgpu_memory_module_bytes (always 0: module
//     loads are not accounted separately), hami_vgpu_memory_buffer_bytes (every other kind)
//   per MIG device on the node's GPUs (NVML, static and dynamic MIG alike)  node, device_index
//   and device_uuid (its GPU's), mig_uuid, profile (its GPU instance's, "1g.10gb"),
//   gpu_instance_id, compute_instance_id:
//     hami_mig_device_memory_used_bytes, hami_mig_device_memory_total_bytes (of its GPU
//     instance, which the GI's compute instances share)
//   per realised MIG reservation of the node's pods (hami.io/vgpu-mig-allocations)  namespace,
//   pod, container, vdevice_index, device_uuid (the GPU's), mig_uuid, profile, gpu_instance_id,
//   compute_instance_id:  hami_mig_device_info = 1
//   hami_build_info{version, revision, build_date, compiler, platform} = 1
// Containers whose pod is not on the node, or whose name is not a regular container of it, are
// left out. With `legacy` the pre-rename names follow: HostGPUMemoryUsage, HostCoreUtilization
// (nodeid, deviceidx, deviceuuid, devicetype), vGPU_device_memory_usage_in_bytes,
// vGPU_device_memory_limit_in_bytes, Device_utilization_desc_of_container,
// Device_last_kernel_of_container (podnamespace, podname, ctrname, vdeviceid, deviceuuid) and
// Device_memory_desc_of_container (+context, module, data, offset).
//
// Thread safety: pure.
#pragma once

#include <cstdint>
#include <string>

#include "monitor/monitor.h"

namespace hami::monitor {

struct ExporterOptions {
  std::string node;
  bool legacy = false;
  uint64_t now_s = 0;  // epoch seconds, for the last-kernel age
  std::string version, revision, build_date, compiler, platform;
};

std::string RenderMonitorMetrics(const MonitorSnapshot& snap, const ExporterOptions& options);

}  // namespace hami::monitor
