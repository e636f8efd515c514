#include "sim/world/demo.h"

#include <unistd.h>

#include <algorithm>
#include <condition_variable>
#include <cstdio>
#include <sstream>
#include <thread>

#include "common/file_util.h"
#include "common/thread_annotations.h"
#include "device/node_registration.h"
#include "device/pod_devices.h"
#include "k8s/informer.h"
#include "k8s/object.h"
#include "k8s/rest_client.h"
#include "k8s/socket_transport.h"
#include "k8s/typed.h"
#include "sim/world/demo_internal.h"
#include "sim/world/manifests.h"

namespace hami::sim {

using SteadyClock = std::chrono::steady_clock;

namespace demo_internal {

std::string Lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s;
}

std::string ShortType(const std::string& type) {
  std::string t = type;
  if (t.rfind("NVIDIA-", 0) == 0) t = t.substr(7);
  return t;
}

const std::vector<Scenario>& Scenarios() {
  static const std::vector<Scenario> kScenarios = {
      {"01", "Two pods share one GPU", "01-two-pods-share-one-gpu.yaml"},
      {"02", "Memory isolation only (no SM limit)", "02-memory-only.yaml"},
      {"03", "A whole GPU for one pod", "03-exclusive.yaml"},
      {"04", "30 % of a GPU's memory, on each model", "04-memory-percentage.yaml"},
      {"05", "Policy override: node spread, GPU binpack", "05-policy-override.yaml"},
      {"06", "GPU type selection", "06-gpu-type-selection.yaml"},
      {"07", "GPU UUID pinning", "07-gpu-uuid.yaml"},
      {"08", "Two GPUs on one NUMA node", "08-numa-aware.yaml"},
  };
  return kScenarios;
}

}  // namespace demo_internal

using demo_internal::Lower;
using demo_internal::Scenario;
using demo_internal::Scenarios;

namespace {

// One [device] section of the simulated driver's config.
std::string Device(const std::string& name, const std::string& uuid, const std::string& memory,
                   int sm, const std::string& cc, int numa, const std::string& nvlink,
                   int pcie_switch = -1) {
  std::string s = "[device]\nname = " + name + "\nuuid = " + uuid + "\nmemory = " + memory +
                  "\nsm_count = " + std::to_string(sm) + "\ncompute_capability = " + cc +
                  "\nnuma_node = " + std::to_string(numa) + "\n";
  if (!nvlink.empty()) s += "nvlink = " + nvlink + "\n";
  if (pcie_switch >= 0) s += "pcie_switch = " + std::to_string(pcie_switch) + "\n";
  return s;
}

std::string Uuid(char prefix, int i) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "GPU-%c1000000-0000-4000-8000-%012d", prefix, i);
  return buf;
}

std::string ReadFile(const std::string& path) { return ReadFileToString(path).value_or(""); }

// The number after `key` in `text` ("memory total=8192MiB" -> 8192), or -1.
int64_t NumberAfter(const std::string& text, const std::string& key) {
  size_t at = text.find(key);
  if (at == std::string::npos) return -1;
  return std::strtoll(text.c_str() + at + key.size(), nullptr, 10);
}

std::string WordAfter(const std::string& text, const std::string& key) {
  size_t at = text.find(key);
  if (at == std::string::npos) return "";
  at += key.size();
  size_t end = text.find_first_of(" \n", at);
  return text.substr(at, end == std::string::npos ? std::string::npos : end - at);
}

}  // namespace

std::vector<WorldNode> DemoNodes() {
  WorldNode a100;
  a100.name = "dgx-a100";
  for (int i = 0; i < 8; ++i) {
    // NVSwitch: every GPU reaches every other one with 2 links.
    std::string links;
    for (int j = 0; j < 8; ++j) {
      if (j == i) continue;
      links += (links.empty() ? "" : ",") + std::to_string(j) + ":2";
    }
    a100.gpu_config += Device("NVIDIA A100-SXM4-80GB", i == 7 ? kDemoPinnedUuid : Uuid('a', i),
                              "80Gi", 108, "8.0", i / 4, links);
  }
  WorldNode v100;
  v100.name = "v100-node";
  const char* v100_links[] = {"1:2,2:1", "0:2,3:1", "3:2,0:1", "2:2,1:1"};
  for (int i = 0; i < 4; ++i) {
    v100.gpu_config +=
        Device("Tesla V100-SXM2-32GB", Uuid('b', i), "32Gi", 80, "7.0", i / 2, v100_links[i]);
  }
  WorldNode t4;
  t4.name = "t4-node";
  for (int i = 0; i < 2; ++i) {
    // A real T4 has 15,360 MiB: seed example 1's two 8 GiB pods do not both fit on one.
    t4.gpu_config += Device("Tesla T4", Uuid('c', i), "15360Mi", 40, "7.5", 0, "", 0);
  }
  return {a100, v100, t4};
}

const DemoPod* DemoReport::Pod(const std::string& name) const {
  for (const DemoPod& p : pods) {
    if (p.name == name) return &p;
  }
  return nullptr;
}

const DemoGpu* DemoReport::Gpu(const std::string& node, const std::string& uuid) const {
  for (const DemoGpu& g : gpus) {
    if (g.node == node && g.uuid == uuid) return &g;
  }
  return nullptr;
}

bool DemoReport::AllOk() const {
  return !checks.empty() &&
         std::all_of(checks.begin(), checks.end(), [](const DemoCheck& c) { return c.ok; });
}

std::vector<MetricSample> ParseExposition(const std::string& text) {
  std::vector<MetricSample> out;
  std::stringstream ss(text);
  for (std::string line; std::getline(ss, line);) {
    if (line.empty() || line[0] == '#') continue;
    MetricSample s;
    size_t brace = line.find('{');
    size_t space = line.rfind(' ');
    if (space == std::string::npos) continue;
    if (brace != std::string::npos && brace < space) {
      s.name = line.substr(0, brace);
      size_t i = brace + 1;
      while (i < line.size() && line[i] != '}') {
        size_t eq = line.find('=', i);
        if (eq == std::string::npos || eq + 1 >= line.size() || line[eq + 1] != '"') break;
        std::string key = line.substr(i, eq - i), value;
        size_t j = eq + 2;
        for (; j < line.size() && line[j] != '"'; ++j) {
          if (line[j] == '\\' && j + 1 < line.size()) ++j;
          value.push_back(line[j]);
        }
        s.labels[key] = value;
        i = j + 1;
        if (i < line.size() && line[i] == ',') ++i;
      }
    } else {
      s.name = line.substr(0, space);
    }
    s.value = std::strtod(line.c_str() + space + 1, nullptr);
    out.push_back(std::move(s));
  }
  return out;
}

namespace {

// Wakes whoever waits when a pod or an event in one namespace is added, changed or deleted, as the
// API server's watches report them (one k8s::Informer each, kept running). Waiters judge their
// condition through the API again on each wake. Events are followed besides pods because
// hami-scheduler records its FilteringFailed events on a thread of its own, after the pod changes
// they explain: following the pods alone could miss the last one.
//
// Thread safety: the informers' threads Bump; Generation and WaitForChange from any thread.
class NamespaceChanges {
 public:
  NamespaceChanges(k8s::RestClient& client, const std::string& ns)
      : pods_(client, k8s::kPods, {.ns = ns}), events_(client, k8s::kEvents, {.ns = ns}) {
    for (k8s::Informer* informer : {&pods_, &events_}) {
      informer->AddEventHandler(
          {.on_add = [this](const k8s::ObjectPtr&) { Bump(); },
           .on_update = [this](const k8s::ObjectPtr&, const k8s::ObjectPtr&) { Bump(); },
           .on_delete = [this](const k8s::ObjectPtr&) { Bump(); }});
      informer->Start();
    }
  }
  // Stops both informers at once: each waits for its watch's read to see the cancellation.
  ~NamespaceChanges() {
    std::thread events([this] { events_.Stop(); });
    pods_.Stop();
    events.join();
  }
  NamespaceChanges(const NamespaceChanges&) = delete;
  NamespaceChanges& operator=(const NamespaceChanges&) = delete;

  // Counts the changes seen so far. Read it before judging a condition, then WaitForChange: a
  // change the judgement's reads missed has not been counted yet, so it ends the wait.
  uint64_t Generation() {
    MutexLock l(mu_);
    return generation_;
  }
  // Until more than `seen` changes were counted, or `deadline`.
  void WaitForChange(uint64_t seen, SteadyClock::time_point deadline) {
    UniqueLock l(mu_);
    changed_.wait_until(l.native(), deadline, [&]() REQUIRES(mu_) {
      return generation_ != seen;
    });
  }

 private:
  void Bump() {
    {
      MutexLock l(mu_);
      ++generation_;
    }
    changed_.notify_all();
  }

  Mutex mu_;
  std::condition_variable changed_;
  uint64_t generation_ GUARDED_BY(mu_) = 0;
  // Constructed last, so that their handlers find the members above in place.
  k8s::Informer pods_;
  k8s::Informer events_;
};

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
            "  t4-node    2 x T4 15360 MiB    NUMA 0, PCIe\n\n"
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
