// The README's main job: the whole system on a simulated cluster of three GPU nodes, the user's
// eight seed scenarios (examples/seed000) applied to it, then a ninth of dynamic MIG on a node
// that joins afterwards, and a report a person reads at a glance.
//
//   DemoOptions o;
//   o.build_dir = "build";
//   o.examples_dir = "examples/seed000";
//   Result<DemoReport> r = RunDemo(o, std::cout);   // prints progress and the report
//
// The cluster (DemoNodes): a DGX-style node of eight NVLinked A100-SXM4-80GB on two NUMA nodes,
// one of four V100-SXM2-32GB on two NUMA nodes (NVLink pairs), one of two T4 16 GB on PCIe; each
// runs hami-sim-kubelet, hami-device-plugin and hami-monitor. hami-scheduler runs with node
// binpack (the chart's default) and GPU binpack, so that pods share cards visibly.
//
// Scenarios are applied in order into the default namespace, each once the previous one has
// settled (running, or pending with the scheduler's reason). Besides the files themselves the
// demo adds copies of 04 pinned to the models the original did not land on (30 % of each model)
// and, in 06, a pod asking for a model the cluster lacks (it stays Pending and says why).
// Containers run the stand-in GPU workload (vgpu_probe workload: allocates half of what it
// sees, launches kernels); their memory and SM use come from the monitors' /metrics.
//
// Then (scenario 09) a fourth node joins, one A100-SXM4-80GB in operating mode mig (DemoMigNode):
// it joins only now so that the seed's pods, which name no mode, keep the cluster the seed
// describes. Pods annotated `nvidia.com/vgpu-mode: mig` get MIG instances made for them.
//
// With Volcano's binaries at hand (DemoOptions::volcano_bin_dir, real control plane only),
// scenario 10 adds a node in Volcano vGPU mode and runs the Volcano document's vGPU Job through
// Volcano's own scheduler (DemoVolcano).
//
// Everything the checks and the report use is collected into DemoReport (facts), so a test can
// assert on the facts directly; EvaluateSeedExpectations turns them into the seed's checks.
//
// Thread safety: one thread.
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <ostream>
#include <string>
#include <vector>

#include "common/status.h"
#include "sim/world/world.h"

namespace hami::sim {

std::vector<WorldNode> DemoNodes();
// The node that joins for the MIG scenario (one A100-SXM4-80GB), and the node config
// (config.json) that puts it in operating mode mig.
WorldNode DemoMigNode();
std::string DemoNodeConfigJson();
// The node that joins for the Volcano scenario: two T4s, its plugin in Volcano vGPU mode.
WorldNode DemoVolcanoNode();
// The UUID 07-gpu-uuid.yaml pins; the demo gives it to the A100 node's GPU 7.
inline constexpr char kDemoPinnedUuid[] = "GPU-e3b5f6a0-1234-5678-abcd-ef1234567890";

struct DemoGpu {
  std::string node, uuid, type;  // type as registered ("NVIDIA-NVIDIA A100-SXM4-80GB")
  int index = 0, numa = 0;
  int64_t memory_mib = 0;
};

struct DemoContainer {
  std::string name;
  std::vector<std::string> gpus;   // UUIDs allocated, in order
  std::vector<int64_t> quota_mib;  // per GPU
  std::vector<int> quota_cores;    // per GPU
  int64_t sees_mib = -1;           // device memory the workload saw (its log); -1 = unknown
  std::string sm_limit_env;        // CUDA_DEVICE_SM_LIMIT as the workload saw it, "(unset)"
  double used_bytes = -1;          // monitor: hami_vgpu_memory_used_bytes (first GPU); -1 = none
  double limit_bytes = -1;         // monitor: hami_vgpu_memory_limit_bytes
  double sm_util = -1;             // monitor: hami_container_device_utilization_ratio
};

struct DemoPod {
  std::string scenario;  // "01".."08"
  std::string name;
  std::string phase;  // Running, Pending, ...
  std::string node;
  std::string why;  // the scheduler's FilteringSucceed / FilteringFailed message
  std::vector<DemoContainer> containers;
};

// Scenario 09, dynamic MIG: a pod asking `nvidia.com/vgpu-mode: mig` and what the node's
// plugin made for it (hami.io/vgpu-mig-allocations).
struct DemoMigPod {
  std::string name;
  std::string phase, node;
  std::string why;       // the scheduler's FilteringSucceed / FilteringFailed message
  std::string profile;   // "1g.10gb"; "" when none was reserved
  int placement = -1;    // first slice of the reservation
  std::string mig_uuid;  // the MIG device the plugin made ("" before Allocate)
  int64_t sees_mib = -1;  // device memory the workload saw (its log)
};

// The MIG scenario: a node of one A100-SXM4-80GB in operating mode mig joins the cluster after
// the seed scenarios; two small pods and a medium one get instances, an overflow pod stays
// Pending, a deleted pod's instance is destroyed and its placement given to the next pod.
struct DemoMig {
  std::string node;  // "" when the scenario did not run
  std::string gpu_uuid;
  std::vector<DemoMigPod> pods;  // in the order applied
  std::string deleted;           // the pod deleted
  std::string deleted_mig_uuid;  // its MIG device
  bool destroyed = false;        // the plugin logged the device's destruction
  std::vector<std::string> driver_devices;   // MIG UUIDs the driver lists at the end
  std::vector<std::string> monitor_devices;  // MIG UUIDs in the monitor's hami_mig_device_info
  const DemoMigPod* Pod(const std::string& name) const;
};

// Scenario 10, Volcano (only with DemoOptions::volcano_bin_dir): a node whose device plugin
// serves Volcano's vGPU protocol joins, Volcano's scheduler runs beside the control plane with
// document 004's deviceshare configuration, and document 004's vGPU Job (one trainer asking
// volcano.sh/vgpu-number 1, vgpu-memory 4096) runs there.
struct DemoVolcano {
  std::string node;  // "" when the scenario did not run
  std::string pod;   // the Job's pod
  std::string phase, pod_node;
  std::string bind_phase;   // volcano.sh/bind-phase
  std::string gpu;          // the GPU Volcano assigned (volcano.sh/vgpu-ids-new)
  int64_t quota_mib = -1;   // the memory Volcano assigned there
  int64_t sees_mib = -1;    // device memory the workload saw (its log)
  double used_bytes = -1;   // monitor: hami_vgpu_memory_used_bytes
  double limit_bytes = -1;  // monitor: hami_vgpu_memory_limit_bytes
};

struct DemoCheck {
  std::string scenario;
  bool ok = false;
  std::string text;
};

struct DemoReport {
  std::vector<DemoGpu> gpus;
  std::vector<DemoPod> pods;
  std::vector<DemoCheck> checks;
  DemoMig mig;
  DemoVolcano volcano;
  std::map<std::string, std::string> monitor_urls;  // by node
  std::string scheduler_metrics_url;
  std::string kubeconfig;
  double startup_seconds = 0, total_seconds = 0;

  const DemoPod* Pod(const std::string& name) const;
  const DemoGpu* Gpu(const std::string& node, const std::string& uuid) const;
  bool AllOk() const;
};

// The seed's expected behaviour, scenario by scenario, checked against the facts.
std::vector<DemoCheck> EvaluateSeedExpectations(const DemoReport& report);
// The human report (without the progress lines).
std::string RenderDemoReport(const DemoReport& report);
// The facts as JSON (for tests and tools).
std::string DemoReportJson(const DemoReport& report);

struct DemoOptions {
  std::string build_dir;
  std::string examples_dir;
  std::string dir;  // world directory; "" = a fresh temporary one
  ControlPlaneKind control_plane = ControlPlaneKind::kSimulated;
  std::string kube_bin_dir;  // with kReal: what scripts/kube-tools.sh prints
  std::string chart_dir;     // with kReal: kube-scheduler's configuration from this chart
  // With kReal and non-empty: what scripts/volcano-tools.sh prints; scenario 10 (DemoVolcano)
  // runs after the MIG scenario.
  std::string volcano_bin_dir;
  std::chrono::seconds scenario_timeout{60};
  // Called with the running world after the report, before it is torn down (--keep waits in
  // here); the world stops when it returns.
  std::function<void(World&, const DemoReport&)> before_stop;
};

// Starts the world, runs the scenarios, prints progress and the report to `out`.
Result<DemoReport> RunDemo(const DemoOptions& options, std::ostream& out);

// A Prometheus text exposition sample.
struct MetricSample {
  std::string name;
  std::map<std::string, std::string> labels;
  double value = 0;
};
std::vector<MetricSample> ParseExposition(const std::string& text);

}  // namespace hami::sim
