// The hami-scheduler's `/metrics` page (port 9395): the scheduler's allocation view rendered as
// Prometheus text exposition (format 0.0.4). Every family is a gauge but the service's counters
// (hami_scheduler_*_total); every series carries the constant label zone="vGPU".
//
// Families and labels (label values escaped; memory reported in bytes = MiB x 1048576):
//   per registered device   node, device_uuid, device_index, device_type
//     hami_gpu_memory_limit_bytes, hami_gpu_core_limit_ratio (registered cores, percent),
//     hami_gpu_memory_allocated_bytes (+device_cores = allocated cores), hami_gpu_shared_count
//     (slots in use), hami_gpu_core_allocated_ratio (allocated cores, percent),
//     hami_node_gpu_overview (allocated bytes; +device_cores, device_memory_limit in MiB),
//     hami_node_gpu_memory_allocated_ratio (allocated / registered memory, 0..1; 0 without memory)
//   per MIG instance held   node, device_uuid, device_index, mig_uuid, profile, gpu_instance_id,
//     compute_instance_id, placement_start, placement_size: hami_node_gpu_mig_instance_info = 1.
//     The ledger knows profile and placement only; mig_uuid and the instance ids are "".
//   per quota               hami_resource_quota_used{namespace, quota_name, limit},
//                           hami_resource_quota_limit{namespace, quota_name}
//   per pod and device      namespace, node, pod, container_index, device_uuid:
//     hami_vgpu_memory_allocated_bytes, hami_vgpu_core_allocated_ratio. A pod's charge is the
//     collapse of all its containers, so container_index is always "0" (as upstream's).
//   per namespace           hami_scheduler_pending_pods{namespace}: pods waiting for a node
//   the service's counters  hami_scheduler_*_total (CounterMetric; type counter, one optional
//                           label), e.g. hami_scheduler_filter_requests_total
//   hami_build_info{version, revision, build_date, compiler, platform} = 1
// With MetricsOptions::legacy the pre-rename families follow as well, with their own label names:
// GPUDeviceMemoryLimit, GPUDeviceCoreLimit, GPUDeviceMemoryAllocated, GPUDeviceSharedNum,
// GPUDeviceCoreAllocated, nodeGPUOverview, nodeGPUMemoryPercentage, nodeGPUMigInstance, QuotaUsed,
// vGPUMemoryAllocated, vGPUCoreAllocated.
//
// Output is deterministic: nodes by name, devices by index, pods by namespace/name; families with
// no series are left out. Cost is linear in devices + pods; everything is appended to one string.
//
//   std::string page = RenderSchedulerMetrics(ledger, quotas, build, MetricsOptions{});
//
// Thread safety: pure function; the caller holds the ledger's (shared) lock while it runs.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "scheduler/ledger.h"

namespace hami::extender {

// One ResourceQuota limit on a HAMi resource with the namespace's current use of it.
struct QuotaMetric {
  std::string ns;          // namespace label
  std::string quota_name;  // the ResourceQuota object; not a label (see below)
  // The quota key, e.g. "limits.nvidia.com/gpumem". As upstream, the quota_name label is the
  // resource ("nvidia.com/gpumem") and the limit label the limit's value; rows of one namespace
  // and resource from several ResourceQuota objects become one series with the smallest limit,
  // the one that binds.
  std::string resource;
  double used = 0;  // same unit as limit (MiB for memory, percent for cores)
  double limit = 0;
};

struct BuildInfo {
  std::string version, revision, build_date, compiler, platform;
};

struct MetricsOptions {
  bool legacy = false;  // --legacy-metrics: also emit the legacy family names
};

// Pods waiting for this scheduler (its schedulerName, no node yet), by namespace; namespaces
// with none are left out. Exported as hami_scheduler_pending_pods{namespace}.
using PendingPods = std::map<std::string, int64_t>;

// One series of a counter (or, with type "gauge", a current value) the service keeps. Series of
// one family come one after another; `label_key` empty means none.
struct CounterMetric {
  std::string_view family;  // a counter's ends in _total
  std::string_view help;
  std::string_view label_key, label_value;
  uint64_t value = 0;
  std::string_view type = "counter";
};

std::string RenderSchedulerMetrics(const scheduler::Ledger& ledger,
                                   const std::vector<QuotaMetric>& quotas,
                                   const BuildInfo& build, const MetricsOptions& options,
                                   const PendingPods& pending = {},
                                   const std::vector<CounterMetric>& counters = {});

}  // namespace hami::extender
