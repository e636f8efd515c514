// The main job's Volcano scenario (scenario 10, DemoVolcano in demo.h): what it starts, what it
// applies (document 004's scheduler configuration, queue and vGPU Job) and what it reads back.

#include "device/pod_devices.h"
#include "device/volcano_vgpu.h"
#include "k8s/object.h"
#include "k8s/typed.h"
#include "sim/world/demo.h"
#include "sim/world/demo_internal.h"
#include "sim/world/manifests.h"
#include "sim/world/volcano_examples.h"

namespace hami::sim::demo_internal {

Status StartVolcanoScenario(World& w, const std::string& volcano_bin_dir, DemoVolcano* v) {
  KubeControlPlane* cp = w.real_control_plane();
  if (cp == nullptr) return FailedPreconditionError("Volcano needs the real control plane");
  HAMI_RETURN_IF_ERROR(cp->StartVolcano(volcano_bin_dir, volcano_examples::kVgpuSchedulerConf));
  WorldNode node = DemoVolcanoNode();
  v->node = node.name;
  HAMI_RETURN_IF_ERROR(w.AddNode(node));
  const k8s::Resource queues{"scheduling.volcano.sh/v1beta1", "queues", false};
  const k8s::Resource jobs{"batch.volcano.sh/v1alpha1", "jobs", true};
  HAMI_ASSIGN_OR_RETURN(k8s::Object queue, YamlToJson(volcano_examples::kTrainingQueue));
  HAMI_ASSIGN_OR_RETURN(k8s::Object made_queue, w.client().Create(queues, "", queue));
  HAMI_ASSIGN_OR_RETURN(k8s::Object job, YamlToJson(volcano_examples::VgpuJob()));
  HAMI_ASSIGN_OR_RETURN(k8s::Object made_job, w.client().Create(jobs, "default", job));
  v->pod = "vgpu-training-trainer-0";  // the Job's one pod: <job>-<task>-<index>
  return OkStatus();
}

void CollectVolcano(World& w, const std::vector<MetricSample>& metrics, DemoVolcano* out) {
  DemoVolcano& v = *out;
  Result<k8s::Object> pod = k8s::GetPod(w.client(), "default", v.pod);
  if (!pod.ok()) return;
  v.phase = PodPhase(*pod);
  v.pod_node = k8s::GetString(*pod, "/spec/nodeName");
  v.bind_phase = k8s::GetAnnotation(*pod, device::kVolcanoBindPhaseAnnotation);
  Result<device::PodSingleDevice> ids = device::DecodeVolcanoPodDevices(
      k8s::GetAnnotation(*pod, device::kVolcanoVgpuIdsAnnotation));
  if (ids.ok() && !ids->empty() && !ids->front().empty()) {
    v.gpu = ids->front().front().uuid;
    v.quota_mib = ids->front().front().mem_mib;  // gpuMemoryFactor 1 here
  }
  if (Result<std::string> log = w.Logs("default", v.pod, "trainer"); log.ok()) {
    v.sees_mib = NumberAfter(*log, "memory total=");
  }
  for (const MetricSample& s : metrics) {
    auto label = [&](const char* k) {
      auto it = s.labels.find(k);
      return it == s.labels.end() ? std::string() : it->second;
    };
    if (label("pod") != v.pod || label("vdevice_index") != "0") continue;
    if (s.name == "hami_vgpu_memory_used_bytes") v.used_bytes = s.value;
    if (s.name == "hami_vgpu_memory_limit_bytes") v.limit_bytes = s.value;
  }
}

}  // namespace hami::sim::demo_internal
