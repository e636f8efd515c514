#include "sim/world/demo.h"

#include <unistd.h>

#include <algorithm>
#include <condition_variable>
#include <cstdio>
#include <sstream>
#include <thread>

#include "common/file_util.h"
#include "common/thread_annotations.h"
#include "device/mig_allocation.h"
#include "device/node_registration.h"
#include "device/pod_devices.h"
#include "device/volcano_vgpu.h"
#include "k8s/informer.h"
#include "k8s/object.h"
#include "k8s/rest_client.h"
#include "k8s/socket_transport.h"
#include "k8s/typed.h"
#include "sim/world/demo_internal.h"
#include "sim/world/manifests.h"
#include "sim/world/namespace_changes.h"
#include "sim/world/waits.h"

namespace hami::sim {

using SteadyClock = std::chrono::steady_clock;


using demo_internal::Lower;
using demo_internal::NumberAfter;
using demo_internal::Scenario;
using demo_internal::Scenarios;
using demo_internal::kMigScenario;

namespace {

std::string ReadFile(const std::string& path) { return ReadFileToString(path).value_or(""); }

std::string WordAfter(const std::string& text, const std::string& key) {
  size_t at = text.find(key);
  if (at == std::string::npos) return "";
  at += key.size();
  size_t end = text.find_first_of(" \n", at);
  return text.substr(at, end == std::string::npos ? std::string::npos : end - at);
}


class DemoRun {
 public:
  DemoRun(const DemoOptions& o, std::ostream& out) : o_(o), out_(out) {}

  Result<DemoReport> Run() {
    auto t0 = SteadyClock::now();
    bool real = o_.control_plane == ControlPlaneKind::kReal;
    out_ << (real ? "hami-cpp on a real Kubernetes control plane (etcd, kube-apiserver,\n"
                    "kube-controller-manager, kube-scheduler) with hami-scheduler (extender +\n"
                    "webhook), and simulated GPU nodes: per node hami-sim-kubelet,\n"
                    "hami-device-plugin, hami-monitor on simulated GPUs:\n"
                  : "hami-cpp on a simulated cluster: API server, hami-scheduler (extender + "
                    "webhook),\nkube-scheduler stand-in, and per node hami-sim-kubelet, "
                    "hami-device-plugin,\nhami-monitor on simulated GPUs:\n")
         << "  dgx-a100   8 x A100-SXM4-80GB  NUMA 0: GPU 0-3, NUMA 1: GPU 4-7, NVLink all-to-all\n"
            "  v100-node  4 x V100-SXM2-32GB  NUMA 0: GPU 0-1, NUMA 1: GPU 2-3, NVLink pairs\n"
            "  t4-node    2 x T4 15360 MiB    NUMA 0, PCIe\n"
            "  mig-a100   1 x A100-SXM4-80GB  operating mode mig, joins after the seed\n\n"
            "Starting:"
         << std::flush;
    WorldOptions wo;
    wo.build_dir = o_.build_dir;
    wo.dir = o_.dir;
    wo.control_plane = o_.control_plane;
    wo.kube_bin_dir = o_.kube_bin_dir;
    wo.chart_dir = o_.chart_dir;
    wo.nodes = DemoNodes();
    wo.monitors = true;
    wo.stand_in_for_gpu_containers = true;
    // As in a real cluster, container PIDs are not the host's (when this runs as root): the SM
    // limits hold only because the monitors map them.
    wo.pid_namespaces = geteuid() == 0;
    wo.monitor_interval = "1s";
    // As seed example 5 describes the cluster: pods spread over nodes by default, and packed
    // onto GPUs (example 1's two pods share one card, on a node where they both fit).
    wo.scheduler_args = {"--node-scheduler-policy=spread", "--gpu-scheduler-policy=binpack"};
    // The MIG node joins later (scenario 09); its entry is read when its plugin starts.
    wo.node_config_json = DemoNodeConfigJson();
    wo.on_start = [this](const std::string& process) { out_ << " " << process << std::flush; };
    HAMI_ASSIGN_OR_RETURN(world_, World::Start(wo));
    changes_ = std::make_unique<NamespaceChanges>(world_->client(), "default");
    report_.startup_seconds = Seconds(t0);
    report_.kubeconfig = world_->kubeconfig();
    char line[96];
    std::snprintf(line, sizeof(line), "\nAll up in %.1f s. Applying the eight seed scenarios:\n",
                  report_.startup_seconds);
    out_ << line << std::flush;
    HAMI_RETURN_IF_ERROR(CollectGpus());
    for (const Scenario& s : Scenarios()) {
      out_ << "  [" << s.id << "] " << s.title << " ..." << std::flush;
      HAMI_RETURN_IF_ERROR(ApplyScenario(s));
      out_ << " settled\n" << std::flush;
    }
    out_ << "Reading what each container uses from the monitors ..." << std::flush;
    WaitForUsage();
    out_ << " done\n";
    for (const WorldNode& n : world_->options().nodes)
      report_.monitor_urls[n.name] = world_->MonitorMetricsUrl(n.name);
    report_.scheduler_metrics_url = world_->SchedulerMetricsUrl();
    CollectPods();
    out_ << "  [09] Dynamic MIG: a node of one A100-SXM4-80GB in MIG mode joins ..." << std::flush;
    HAMI_RETURN_IF_ERROR(RunMigScenario());
    out_ << " settled\n" << std::flush;
    if (!o_.volcano_bin_dir.empty()) {
      out_ << "  [10] Volcano: its scheduler starts, a node in Volcano vGPU mode joins, the vGPU "
              "Job runs ..."
           << std::flush;
      HAMI_RETURN_IF_ERROR(RunVolcanoScenario());
      out_ << " settled\n" << std::flush;
    }
    report_.checks = EvaluateSeedExpectations(report_);
    report_.total_seconds = Seconds(t0);
    out_ << RenderDemoReport(report_) << std::flush;
    if (o_.before_stop) o_.before_stop(*world_, report_);
    return report_;
  }

 private:
  static double Seconds(SteadyClock::time_point since) {
    return std::chrono::duration<double>(SteadyClock::now() - since).count();
  }

  Status CollectGpus() {
    for (const WorldNode& n : world_->options().nodes) {
      HAMI_ASSIGN_OR_RETURN(k8s::Object node, k8s::GetNode(world_->client(), n.name));
      std::string reg = k8s::GetString(node, "/metadata/annotations/hami.io~1node-nvidia-register");
      HAMI_ASSIGN_OR_RETURN(std::vector<device::DeviceInfo> devs, device::DecodeNodeDevices(reg));
      for (const device::DeviceInfo& d : devs) {
        report_.gpus.push_back({n.name, d.id, d.type, static_cast<int>(d.index), d.numa, d.devmem});
      }
    }
    return OkStatus();
  }

  Status Create(const std::string& scenario, k8s::Object pod) {
    std::string name = k8s::Name(pod);
    HAMI_ASSIGN_OR_RETURN(k8s::Object created, world_->client().Create(k8s::kPods, "default", pod));
    applied_.push_back({scenario, name});
    return OkStatus();
  }

  // Running, or unschedulable with the scheduler's reason. Judged again whenever a pod or an event
  // in the namespace changes.
  Status Settle(const std::string& scenario) {
    auto end = SteadyClock::now() + o_.scenario_timeout;
    for (;;) {
      const uint64_t seen = changes_->Generation();
      bool all = true;
      for (const auto& [sc, name] : applied_) {
        if (sc != scenario) continue;
        Result<k8s::Object> pod = k8s::GetPod(world_->client(), "default", name);
        if (!pod.ok()) return pod.status();
        if (PodPhase(*pod) == "Running") continue;
        if (k8s::GetString(*pod, "/spec/nodeName").empty() &&
            !LatestEvent(name, "FilteringFailed").empty()) {
          continue;
        }
        all = false;
      }
      if (all) return OkStatus();
      if (SteadyClock::now() > end) {
        return Status(StatusCode::kDeadlineExceeded,
                      "scenario " + scenario + " did not settle within " +
                          std::to_string(o_.scenario_timeout.count()) +
                          " s; the processes' logs are in " + world_->dir());
      }
      changes_->WaitForChange(seen, end);
    }
  }

  std::string LatestEvent(const std::string& pod, const std::string& reason) {
    k8s::ListOptions lo;
    lo.field_selector = "involvedObject.name=" + pod;
    Result<k8s::Object> list = world_->client().List(k8s::kEvents, "default", lo);
    std::string message, newest;
    if (!list.ok()) return message;
    for (const k8s::Object& e : (*list)["items"]) {
      if (k8s::GetString(e, "/reason") != reason) continue;
      std::string t = k8s::GetString(e, "/lastTimestamp");
      if (t.empty()) t = k8s::GetString(e, "/eventTime");
      if (message.empty() || t >= newest) {
        message = k8s::GetString(e, "/message");
        newest = t;
      }
    }
    return message;
  }

  Status ApplyScenario(const Scenario& s) {
    std::string text = ReadFile(o_.examples_dir + "/" + s.file);
    if (text.empty()) return NotFoundError(o_.examples_dir + "/" + s.file + " is missing or empty");
    std::vector<k8s::Object> pods;
    for (const std::string& doc : SplitYamlDocuments(text)) {
      HAMI_ASSIGN_OR_RETURN(k8s::Object obj, YamlToJson(doc));
      if (!obj.is_object()) continue;
      pods.push_back(obj);
      HAMI_RETURN_IF_ERROR(Create(s.id, obj));
    }
    HAMI_RETURN_IF_ERROR(Settle(s.id));
    if (s.id == "04" && !pods.empty()) {
      // The same pod on the models the original did not land on.
      Result<k8s::Object> placed = k8s::GetPod(world_->client(), "default", k8s::Name(pods[0]));
      std::string node = placed.ok() ? k8s::GetString(*placed, "/spec/nodeName") : "";
      const std::pair<const char*, const char*> models[] = {
          {"dgx-a100", "A100"}, {"v100-node", "V100"}, {"t4-node", "T4"}};
      for (const auto& [n, model] : models) {
        if (n == node) continue;
        k8s::Object copy = pods[0];
        copy["metadata"]["name"] = k8s::Name(pods[0]) + "-" + Lower(model);
        copy["metadata"]["annotations"]["nvidia.com/use-gputype"] = model;
        HAMI_RETURN_IF_ERROR(Create(s.id, copy));
      }
      HAMI_RETURN_IF_ERROR(Settle(s.id));
    }
    if (s.id == "06") {
      HAMI_ASSIGN_OR_RETURN(k8s::Object h100, YamlToJson(R"(
apiVersion: v1
kind: Pod
metadata:
  name: h100-only-task
  annotations:
    nvidia.com/use-gputype: "H100"
spec:
  containers:
  - name: training
    image: nvcr.io/nvidia/pytorch:23.04-py3
    resources:
      limits:
        nvidia.com/gpu: 1
        nvidia.com/gpumem: 40960
)"));
      HAMI_RETURN_IF_ERROR(Create(s.id, h100));
      HAMI_RETURN_IF_ERROR(Settle(s.id));
    }
    return OkStatus();
  }

  // A pod asking one GPU of `mem_mib` in MIG mode; the webhook hands it to hami-scheduler.
  static Result<k8s::Object> MigPod(const std::string& name, int mem_mib) {
    return YamlToJson("apiVersion: v1\nkind: Pod\nmetadata:\n  name: " + name +
                      "\n  annotations:\n    nvidia.com/vgpu-mode: mig\nspec:\n  containers:\n"
                      "  - name: main\n    image: nvcr.io/nvidia/pytorch:23.04-py3\n"
                      "    resources:\n      limits:\n        nvidia.com/gpu: 1\n"
                      "        nvidia.com/gpumem: " + std::to_string(mem_mib) + "\n");
  }

  Status ApplyMigPod(const std::string& name, int mem_mib) {
    HAMI_ASSIGN_OR_RETURN(k8s::Object pod, MigPod(name, mem_mib));
    HAMI_RETURN_IF_ERROR(Create(kMigScenario, pod));
    return Settle(kMigScenario);
  }

  // The MIG devices `hami-simctl mig` lists on the MIG node (every "MIG-..." word).
  Result<std::vector<std::string>> DriverMigDevices() {
    HAMI_ASSIGN_OR_RETURN(std::string listing, world_->SimCtl(report_.mig.node, {"mig"}));
    std::vector<std::string> uuids;
    for (size_t at = listing.find("MIG-"); at != std::string::npos;
         at = listing.find("MIG-", at + 4)) {
      if (at > 0 && !std::isspace(static_cast<unsigned char>(listing[at - 1]))) continue;
      size_t end = listing.find_first_of(" \n", at);
      uuids.push_back(listing.substr(at, end == std::string::npos ? end : end - at));
    }
    std::sort(uuids.begin(), uuids.end());
    return uuids;
  }

  // What the API server and the container say about one MIG pod.
  DemoMigPod CollectMigPod(const std::string& name) {
    DemoMigPod p;
    p.name = name;
    Result<k8s::Object> pod = k8s::GetPod(world_->client(), "default", name);
    if (!pod.ok()) {
      p.phase = "Unknown";
      return p;
    }
    p.phase = PodPhase(*pod);
    p.node = k8s::GetString(*pod, "/spec/nodeName");
    p.why = LatestEvent(name, p.node.empty() ? "FilteringFailed" : "FilteringSucceed");
    Result<std::vector<device::MigAllocation>> mig = device::DecodeMigAllocations(
        k8s::GetString(*pod, "/metadata/annotations/hami.io~1vgpu-mig-allocations"));
    if (mig.ok() && !mig->empty()) {
      p.profile = mig->front().profile;
      p.placement = static_cast<int>(mig->front().placement.start);
      if (mig->front().runtime) p.mig_uuid = mig->front().runtime->mig_uuid;
    }
    if (p.phase == "Running") {
      // The workload prints what it sees first thing; its log file is followed, not polled.
      Result<std::string> log = world_->WaitForLog("default", name, "main", "memory total=",
                                                   std::chrono::seconds(30));
      if (log.ok()) p.sees_mib = NumberAfter(*log, "memory total=");
    }
    return p;
  }

  // Scenario 09 (DemoMig). Pods go one at a time, each once the previous one has settled, so
  // that the placements (and so the overflow) do not depend on the order the scheduler sees
  // them in.
  Status RunMigScenario() {
    DemoMig& mig = report_.mig;
    WorldNode node = DemoMigNode();
    mig.node = node.name;
    HAMI_RETURN_IF_ERROR(world_->AddNode(node));
    report_.monitor_urls[mig.node] = world_->MonitorMetricsUrl(mig.node);
    HAMI_ASSIGN_OR_RETURN(k8s::Object joined, k8s::GetNode(world_->client(), mig.node));
    HAMI_ASSIGN_OR_RETURN(std::vector<device::DeviceInfo> devs,
                          device::DecodeNodeDevices(k8s::GetString(
                              joined, "/metadata/annotations/hami.io~1node-nvidia-register")));
    for (const device::DeviceInfo& d : devs) {
      report_.gpus.push_back(
          {mig.node, d.id, d.type, static_cast<int>(d.index), d.numa, d.devmem});
      if (mig.gpu_uuid.empty()) mig.gpu_uuid = d.id;
    }
    // 1g.10gb, 1g.10gb, 3g.40gb: the smallest profiles that hold 9000 and 30000 MiB. Then a
    // 2g.20gb request finds no free placement of two slices.
    for (auto [name, mem] : {std::pair{"mig-small-1", 9000}, std::pair{"mig-small-2", 9000},
                             std::pair{"mig-medium", 30000}, std::pair{"mig-overflow", 15000}}) {
      HAMI_RETURN_IF_ERROR(ApplyMigPod(name, mem));
    }
    for (const char* name : {"mig-small-1", "mig-small-2", "mig-medium", "mig-overflow"}) {
      mig.pods.push_back(CollectMigPod(name));
    }
    // The first small pod goes: its plugin destroys the instance once the container has exited,
    // and the next small pod is given the same placement.
    mig.deleted = "mig-small-1";
    mig.deleted_mig_uuid = mig.pods.front().mig_uuid;
    if (!mig.deleted_mig_uuid.empty()) {
      HAMI_RETURN_IF_ERROR(world_->client().Delete(k8s::kPods, "default", mig.deleted));
      Result<std::string> said =
          WaitForFileText(world_->LogFile(mig.node + "-plugin"),
                          "destroyed MIG device " + mig.deleted_mig_uuid,
                          SteadyClock::now() + o_.scenario_timeout);
      mig.destroyed = said.ok();
      std::erase_if(applied_, [&](const auto& a) { return a.second == mig.deleted; });
    }
    HAMI_RETURN_IF_ERROR(ApplyMigPod("mig-replacement", 9000));
    mig.pods.push_back(CollectMigPod("mig-replacement"));
    if (Result<std::vector<std::string>> d = DriverMigDevices(); d.ok()) {
      mig.driver_devices = *d;
    }
    mig.monitor_devices = WaitForMonitorMigDevices(mig.driver_devices);
    return OkStatus();
  }

  // Scenario 10 (DemoVolcano): Volcano's scheduler with document 004's vGPU configuration, a
  // node in Volcano vGPU mode, the document's vGPU Job; then what the trainer got and uses.
  Status RunVolcanoScenario() {
    DemoVolcano& v = report_.volcano;
    HAMI_RETURN_IF_ERROR(demo_internal::StartVolcanoScenario(*world_, o_.volcano_bin_dir, &v));
    report_.monitor_urls[v.node] = world_->MonitorMetricsUrl(v.node);
    HAMI_RETURN_IF_ERROR(WaitForVolcanoPod());
    demo_internal::CollectVolcano(*world_, ScrapeMonitors()[v.node], &v);
    return OkStatus();
  }

  // Until the trainer runs and its monitor shows memory in use, at most the scenario timeout
  // (the pod's changes wake the wait; the monitor is scraped as WaitForUsage does).
  Status WaitForVolcanoPod() {
    const DemoVolcano& v = report_.volcano;
    auto end = SteadyClock::now() + o_.scenario_timeout;
    for (;;) {
      const uint64_t seen = changes_->Generation();
      Result<k8s::Object> pod = k8s::GetPod(world_->client(), "default", v.pod);
      if (pod.ok() && PodPhase(*pod) == "Running") break;
      if (SteadyClock::now() > end) {
        return Status(StatusCode::kDeadlineExceeded,
                      "the Volcano Job's pod " + v.pod + " did not run within " +
                          std::to_string(o_.scenario_timeout.count()) +
                          " s; the processes' logs (vc-scheduler's too) are in " + world_->dir());
      }
      changes_->WaitForChange(seen, std::min(end, SteadyClock::now() + std::chrono::seconds(1)));
    }
    for (auto stop = SteadyClock::now() + std::chrono::seconds(30); SteadyClock::now() < stop;) {
      // Kept in a variable: a range-for over a member of a temporary map would dangle.
      const std::vector<MetricSample> node = ScrapeMonitors()[v.node];
      for (const MetricSample& s : node) {
        if (s.name == "hami_vgpu_memory_used_bytes" && s.labels.count("pod") &&
            s.labels.at("pod") == v.pod && s.value > 0) {
          return OkStatus();
        }
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(250));  // see WaitForUsage
    }
    return OkStatus();  // the checks say what is missing
  }

  // The MIG UUIDs of the MIG node monitor's hami_mig_device_info, once they are `want` (the
  // monitor reads the pods' reservations on its own timer), or as they are after 10 s. Scraped
  // every kScrapeInterval, for the reason WaitForUsage gives.
  std::vector<std::string> WaitForMonitorMigDevices(const std::vector<std::string>& want) {
    constexpr auto kScrapeInterval = std::chrono::milliseconds(250);
    const auto end = SteadyClock::now() + std::chrono::seconds(10);
    for (;;) {
      std::vector<std::string> seen;
      // Kept in a variable: a range-for over a member of a temporary map would dangle.
      std::map<std::string, std::vector<MetricSample>> scraped = ScrapeMonitors();
      for (const MetricSample& s : scraped[report_.mig.node]) {
        auto uuid = s.labels.find("mig_uuid");
        if (s.name == "hami_mig_device_info" && uuid != s.labels.end()) {
          seen.push_back(uuid->second);
        }
      }
      std::sort(seen.begin(), seen.end());
      if (seen == want || SteadyClock::now() > end) return seen;
      std::this_thread::sleep_for(kScrapeInterval);
    }
  }

  std::map<std::string, std::vector<MetricSample>> ScrapeMonitors() {
    std::map<std::string, std::vector<MetricSample>> by_node;
    if (!transport_) {
      Result<std::unique_ptr<k8s::SocketTransport>> t = k8s::SocketTransport::Create({});
      if (!t.ok()) return by_node;
      transport_ = std::move(*t);
    }
    for (const WorldNode& n : world_->options().nodes) {
      k8s::HttpRequest req;
      req.url = world_->MonitorMetricsUrl(n.name);
      req.timeout = std::chrono::seconds(5);
      Result<k8s::HttpResponse> resp = transport_->Do(req);
      if (resp.ok() && resp->status == 200) by_node[n.name] = ParseExposition(resp->body);
    }
    return by_node;
  }

  // Until every running container shows memory in use and an SM measurement (the monitors
  // update every second), at most 30 s; then 2.5 s more.
  //
  // This wait looks again every kScrapeInterval: a monitor's figures change on its own timer and
  // are published only when scraped (no watch, no file to follow), so there is no event to wake
  // on; a quarter of the monitors' update interval keeps the delay small, the 30 s bound the wait.
  void WaitForUsage() {
    constexpr auto kScrapeInterval = std::chrono::milliseconds(250);
    auto end = SteadyClock::now() + std::chrono::seconds(30);
    SteadyClock::time_point settled{};
    for (;;) {
      std::map<std::string, std::vector<MetricSample>> m = ScrapeMonitors();
      bool all = true;
      for (const auto& [scenario, name] : applied_) {
        Result<k8s::Object> pod = k8s::GetPod(world_->client(), "default", name);
        if (!pod.ok() || PodPhase(*pod) != "Running") continue;
        std::string node = k8s::GetString(*pod, "/spec/nodeName");
        bool used = false, util = false;
        for (const MetricSample& s : m[node]) {
          if (s.labels.count("pod") == 0 || s.labels.at("pod") != name) continue;
          used |= s.name == "hami_vgpu_memory_used_bytes" && s.value > 0;
          util |= s.name == "hami_container_device_utilization_ratio" && s.value > 0;
        }
        all &= used && util;
      }
      // Then two more monitor updates, so that SM figures cover whole sampling windows.
      if (all && settled == SteadyClock::time_point{}) settled = SteadyClock::now();
      if ((all && SteadyClock::now() - settled >= std::chrono::milliseconds(2500)) ||
          SteadyClock::now() > end) {
        return;
      }
      std::this_thread::sleep_for(kScrapeInterval);
    }
  }

  void CollectPods() {
    std::map<std::string, std::vector<MetricSample>> metrics = ScrapeMonitors();
    for (const auto& [scenario, name] : applied_) {
      DemoPod p;
      p.scenario = scenario;
      p.name = name;
      Result<k8s::Object> pod = k8s::GetPod(world_->client(), "default", name);
      if (!pod.ok()) {
        p.phase = "Unknown";
        report_.pods.push_back(p);
        continue;
      }
      p.phase = PodPhase(*pod);
      p.node = k8s::GetString(*pod, "/spec/nodeName");
      p.why = LatestEvent(name, p.node.empty() ? "FilteringFailed" : "FilteringSucceed");
      Result<device::PodSingleDevice> alloc = device::DecodePodSingleDevice(
          k8s::GetString(*pod, "/metadata/annotations/hami.io~1vgpu-devices-allocated"));
      const k8s::Object& containers = (*pod)["spec"]["containers"];
      for (size_t i = 0; i < containers.size(); ++i) {
        DemoContainer c;
        c.name = containers[i].value("name", "");
        if (alloc.ok() && i < alloc->size()) {
          for (const device::ContainerDevice& d : (*alloc)[i]) {
            c.gpus.push_back(d.uuid);
            c.quota_mib.push_back(d.mem_mib);
            c.quota_cores.push_back(d.cores);
          }
        }
        if (p.phase == "Running") {
          Result<std::string> log = world_->Logs("default", name, c.name);
          if (log.ok()) {
            c.sees_mib = NumberAfter(*log, "memory total=");
            c.sm_limit_env = WordAfter(*log, "CUDA_DEVICE_SM_LIMIT=");
          }
          for (const MetricSample& s : metrics[p.node]) {
            auto label = [&](const char* k) {
              auto it = s.labels.find(k);
              return it == s.labels.end() ? std::string() : it->second;
            };
            if (label("pod") != name || label("container") != c.name ||
                label("vdevice_index") != "0") {
              continue;
            }
            if (s.name == "hami_vgpu_memory_used_bytes") c.used_bytes = s.value;
            if (s.name == "hami_vgpu_memory_limit_bytes") c.limit_bytes = s.value;
            if (s.name == "hami_container_device_utilization_ratio") c.sm_util = s.value;
          }
        }
        p.containers.push_back(std::move(c));
      }
      report_.pods.push_back(std::move(p));
    }
  }

  const DemoOptions& o_;
  std::ostream& out_;
  std::unique_ptr<World> world_;
  std::unique_ptr<NamespaceChanges> changes_;  // in "default"; before world_ goes
  std::unique_ptr<k8s::SocketTransport> transport_;
  std::vector<std::pair<std::string, std::string>> applied_;  // (scenario, pod) in order
  DemoReport report_;
};

}  // namespace

Result<DemoReport> RunDemo(const DemoOptions& options, std::ostream& out) {
  DemoRun run(options, out);
  return run.Run();
}

}  // namespace hami::sim
