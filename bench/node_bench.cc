// node_bench: the node side end to end, every component its own process (src/sim/world): the
// simulated API server, hami-scheduler, the kube-scheduler stand-in, and one node with 8
// simulated GPUs, its hami-sim-kubelet and hami-device-plugin. With --kube-bin and --node-bin,
// the real ones instead: etcd, kube-apiserver, kube-scheduler and a real node (containerd, runc
// and the kubelet; scripts/kube-tools.sh and scripts/node-tools.sh, as root), whose containers
// run the node image.
//
//   build/bin/node_bench [--pods N] [--latency-pods M] [--volcano]
//   build/bin/node_bench --kube-bin "$(bash scripts/kube-tools.sh)" --node-bin DIR
//     (DIR: what `bash scripts/node-tools.sh` prints)
//
// Prints (1) the time from creating a pod to its container process running under its quota,
// one pod at a time (M pods); (2) how many pods per second go into the one node when N are
// created at once: every bind takes the node lock, which the plugin releases when kubelet's
// Allocate is done, so this is the node's allocation throughput; (3) the resident memory of the
// device plugin and the kubelet afterwards, and on the real node the kubelet's own histogram of
// its Allocate calls to the plugin.
//
// With --volcano the plugin serves Volcano's vGPU protocol (VOLCANO_MODE=vgpu, gpuMemoryFactor
// 64) and no scheduler takes part: each pod is created bound to the node, with the annotations
// Volcano's deviceshare plugin writes at bind (device, bind phase allocating, vgpu-time) and
// its `hamivgpu` node lock taken, so (1) and (2) time the kubelet and the plugin alone.
#include <signal.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "common/go_flags.h"
#include "k8s/informer.h"
#include "k8s/object.h"
#include "k8s/typed.h"
#include "histogram.h"
#include "proc_status.h"
#include "sim/world/world.h"

namespace {

using namespace hami;  // NOLINT(build/namespaces): a benchmark driver
using SteadyClock = std::chrono::steady_clock;

double Ms(SteadyClock::duration d) { return std::chrono::duration<double, std::milli>(d).count(); }

long RssKiB(int pid) {  // NOLINT(runtime/int)
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("VmRSS:", 0) == 0) return std::atol(line.c_str() + 6);
  }
  return -1;
}

// A GPU pod sleeping; on a real node, of the node image (imported, never pulled).
std::string Pod(const std::string& name, bool real) {
  const std::string image =
      real ? std::string(sim::kNodeTestImage) + "\n    imagePullPolicy: Never" : "busybox";
  return "apiVersion: v1\nkind: Pod\nmetadata:\n  name: " + name +
         "\nspec:\n  terminationGracePeriodSeconds: 1\n  containers:\n  - name: main\n"
         "    image: " + image + "\n"
         "    command: [\"sleep\", \"600\"]\n    resources:\n      limits:\n"
         "        nvidia.com/gpu: 1\n        nvidia.com/gpumem: 256\n"
         "        nvidia.com/gpucores: 1\n";
}

// A pod as Volcano's deviceshare plugin leaves it at bind: on `node`, one vGPU of 4 memory units
// (gpuMemoryFactor 64: 256 MiB) and 1 % of the SMs of `uuid`, created at `time` (its vgpu-time).
std::string VolcanoPod(const std::string& name, const std::string& uuid, long time) {  // NOLINT
  const std::string device = uuid + ",NVIDIA,4,1:";
  return "apiVersion: v1\nkind: Pod\nmetadata:\n  name: " + name +
         "\n  annotations:\n    volcano.sh/vgpu-node: node-a\n    volcano.sh/vgpu-time: \"" +
         std::to_string(time) + "\"\n    volcano.sh/vgpu-ids-new: \"" + device +
         "\"\n    volcano.sh/devices-to-allocate: \"" + device +
         "\"\n    volcano.sh/bind-phase: allocating\nspec:\n  nodeName: node-a\n"
         "  schedulerName: volcano\n  containers:\n  - name: main\n    image: busybox\n"
         "    command: [\"sleep\", \"600\"]\n    resources:\n      limits:\n"
         "        volcano.sh/vgpu-number: 1\n        volcano.sh/vgpu-memory: 4\n"
         "        volcano.sh/vgpu-cores: 1\n";
}

// The GPUs' UUIDs from Volcano's register annotation, in its order.
std::vector<std::string> RegisteredUuids(const k8s::Object& node) {
  std::vector<std::string> out;
  std::string reg = k8s::GetAnnotation(node, "volcano.sh/node-vgpu-register");
  for (size_t at = 0; at < reg.size();) {
    size_t end = reg.find(':', at);
    if (end == std::string::npos) end = reg.size();
    std::string entry = reg.substr(at, end - at);
    if (!entry.empty()) out.push_back(entry.substr(0, entry.find(',')));
    at = end + 1;
  }
  return out;
}

// The machine's busy CPU time since boot, in seconds (/proc/stat: all but idle and iowait).
double MachineBusySeconds() {
  std::ifstream in("/proc/stat");
  std::string cpu;
  double user = 0, nice = 0, system = 0, idle = 0, iowait = 0, irq = 0, softirq = 0, steal = 0;
  in >> cpu >> user >> nice >> system >> idle >> iowait >> irq >> softirq >> steal;
  return (user + nice + system + irq + softirq + steal) / static_cast<double>(sysconf(_SC_CLK_TCK));
}

}  // namespace

int main(int argc, char** argv) {
  int pods = 150, latency_pods = 30;
  CLI::App app{
      "node_bench: pods through the whole simulated node (scheduler, kubelet, device plugin), "
      "throughput and latency"};
  app.name("node_bench");
  app.add_option("--pods", pods, "pods created at once for the throughput run")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("--latency-pods", latency_pods, "pods created one by one for the latency run")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  bool volcano = false;
  app.add_flag("--volcano", volcano,
               "serve Volcano's vGPU protocol; pods are created bound, as Volcano leaves them");
  std::string kube_bin, node_bin;
  app.add_option("--kube-bin", kube_bin,
                 "the real control plane's binaries (scripts/kube-tools.sh); needs --node-bin");
  app.add_option("--node-bin", node_bin,
                 "a real node's kubelet and tools (scripts/node-tools.sh); needs --kube-bin");
  if (std::optional<int> exit = hami::ParseGoStyleFlags(app, argc, argv)) return *exit;
  const bool real = !kube_bin.empty() || !node_bin.empty();
  if (real && (kube_bin.empty() || node_bin.empty() || volcano)) {
    std::fprintf(stderr, "a real node needs both --kube-bin and --node-bin, and no --volcano\n");
    return 2;
  }
  // The kubelet runs 110 pods at most.
  if (real && pods + latency_pods > 100) {
    std::fprintf(stderr, "a real node takes 100 pods here (--pods + --latency-pods)\n");
    return 2;
  }
  sim::WorldOptions o;
  o.build_dir = HAMI_BUILD_DIR;
  if (real) {
    o.control_plane = sim::ControlPlaneKind::kReal;
    o.kube_bin_dir = kube_bin;
    o.node_bin_dir = node_bin;
    o.chart_dir = HAMI_SOURCE_DIR "/deploy/helm/hami-cpp";
    o.start_timeout = std::chrono::seconds(180);
  }
  o.nodes.resize(1);
  o.nodes[0].name = "node-a";
  for (int i = 0; i < 8; ++i) {
    o.nodes[0].gpu_config += "[device]\nname = NVIDIA H100 80GB HBM3\nmemory = 80Gi\nnuma_node = " +
                             std::to_string(i / 4) + "\n";
  }
  // Slots for every pod of the run on the 8 GPUs.
  o.device_config_yaml =
      "nvidia:\n  deviceSplitCount: " + std::to_string((pods + latency_pods) / 8 + 1) + "\n";
  if (volcano) {
    // 8 x 80 GiB in 64 MiB units: 10,240 memory IDs (the kubelet takes fewer than 60,000).
    o.device_config_yaml += "  gpuMemoryFactor: 64\n";
    o.nodes[0].volcano = "vgpu";
  }
  // hami-scheduler's client budget (default 50 requests/s) would cap the run at about 8 pods/s
  // (6 requests a pod): give it room, as a cluster expecting bursts would.
  o.scheduler_args = {"--kube-qps=300", "--kube-burst=600"};
  // NODE_BENCH_PLUGIN_QPS: the plugin's client budget (default 100 requests/s, 4 per allocation).
  if (const char* q = std::getenv("NODE_BENCH_PLUGIN_QPS")) {
    o.plugin_args = {std::string("--kube-qps=") + q};
  }
  if (const char* d = std::getenv("NODE_BENCH_DIR")) o.dir = d;  // keep the logs
  auto w = sim::World::Start(o);
  if (!w.ok()) {
    std::fprintf(stderr, "%s\n", w.status().ToString().c_str());
    return 1;
  }
  sim::World& world = **w;
  std::vector<std::string> uuids;
  if (volcano) {
    auto node = world.WaitForNode(
        "node-a", [](const k8s::Object& n) { return RegisteredUuids(n).size() == 8; },
        std::chrono::seconds(30));
    if (!node.ok()) {
      std::fprintf(stderr, "no Volcano registration: %s\n", node.status().ToString().c_str());
      return 1;
    }
    uuids = RegisteredUuids(*node);
  }
  // Creates pod `name` (number i): through the scheduler, or as Volcano leaves it at bind, with
  // Volcano's node lock taken (the plugin releases it when the pod is served).
  auto create = [&](const std::string& name, int i) {
    if (!volcano) return world.Apply(Pod(name, real), "default").ok();
    return world.Apply(VolcanoPod(name, uuids[static_cast<size_t>(i) % 8], 1700000000L + i),
                       "default")
               .ok() &&
           k8s::PatchNodeAnnotations(world.client(), "node-a",
                                     {{"hamivgpu", "2026-12-02T10:00:00Z"}})
               .ok();
  };
  const std::string bind_phase =
      volcano ? "/metadata/annotations/volcano.sh~1bind-phase"
              : "/metadata/annotations/hami.io~1bind-phase";

  // When each pod was created, allocated (bind phase success) and first seen Running, from a pod
  // informer.
  std::mutex mu;
  std::map<std::string, SteadyClock::time_point> created, allocated, running;
  k8s::Informer informer(world.client(), k8s::kPods, {});
  auto seen = [&](const k8s::ObjectPtr& p) {
    std::lock_guard<std::mutex> l(mu);
    if (k8s::GetString(*p, bind_phase) == "success") {
      allocated.emplace(k8s::Name(*p), SteadyClock::now());
    }
    if (sim::PodPhase(*p) == "Running") running.emplace(k8s::Name(*p), SteadyClock::now());
  };
  informer.AddEventHandler(
      {.on_add = seen, .on_update = [&](const auto&, const auto& p) { seen(p); }});
  informer.Start();
  informer.WaitForSync(nullptr);
  auto wait_running = [&](size_t n, std::chrono::seconds timeout) {
    auto end = SteadyClock::now() + timeout;
    for (;;) {
      {
        std::lock_guard<std::mutex> l(mu);
        if (running.size() >= n) return true;
      }
      if (SteadyClock::now() > end) return false;
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  };

  // (1) One pod at a time.
  std::vector<double> latency, to_allocated;
  for (int i = 0; i < latency_pods; ++i) {
    std::string name = "single-" + std::to_string(i);
    {
      std::lock_guard<std::mutex> l(mu);
      created[name] = SteadyClock::now();
    }
    if (!create(name, i) ||
        !wait_running(static_cast<size_t>(i + 1), std::chrono::seconds(real ? 90 : 30))) {
      std::fprintf(stderr, "pod %s did not run\n", name.c_str());
      return 1;
    }
    std::lock_guard<std::mutex> l(mu);
    latency.push_back(Ms(running[name] - created[name]));
    if (allocated.count(name) != 0) to_allocated.push_back(Ms(allocated[name] - created[name]));
  }
  auto print = [](const char* what, std::vector<double>& v) {
    if (v.empty()) return;
    std::sort(v.begin(), v.end());
    std::printf("%s  n=%zu  p50=%.1f ms  p90=%.1f ms  p99=%.1f ms  max=%.1f ms\n", what,
                v.size(), v[v.size() / 2], v[v.size() * 9 / 10],
                v[std::min(v.size() - 1, v.size() * 99 / 100)], v.back());
  };
  print("apply -> container running  ", latency);
  print("apply -> devices allocated  ", to_allocated);

  // (2) A burst into the one node: the pods are created while the kube-scheduler stand-in is
  // stopped, so what is timed is placement and allocation alone. In Volcano mode the pods are
  // created bound (the kubelet starts on the first at once), so the clock starts before the
  // first create.
  auto t0 = SteadyClock::now();
  if (!volcano && !world.Signal("kube-scheduler", SIGSTOP).ok()) return 1;
  for (int i = 0; i < pods; ++i) {
    if (!create("burst-" + std::to_string(i), latency_pods + i)) return 1;
  }
  // Where the machine's CPU goes during the burst: each long-lived process's own CPU time, and
  // the machine's busy time (the rest is short-lived processes: runc, CNI plugins, ...).
  const std::vector<std::string> components = {
      "kube-apiserver", "etcd",         "kube-scheduler", "kube-controller-manager",
      "hami-scheduler", "node-a-plugin", "node-a-kubelet", "node-a-containerd"};
  std::map<std::string, double> cpu_before;
  for (const std::string& c : components) cpu_before[c] = bench::ProcCpuSeconds(world.Pid(c));
  const double busy_before = MachineBusySeconds();
  if (!volcano) {
    t0 = SteadyClock::now();
    if (!world.Signal("kube-scheduler", SIGCONT).ok()) return 1;
  }
  if (!wait_running(static_cast<size_t>(latency_pods + pods),
                    std::chrono::seconds(real ? 600 : 120))) {
    std::fprintf(stderr, "the burst did not finish\n");
    return 1;
  }
  auto t1 = SteadyClock::now();
  const double busy = MachineBusySeconds() - busy_before;
  double listed = 0;
  std::string cpu_line;
  for (const std::string& c : components) {
    if (world.Pid(c) <= 0) continue;
    const double used = bench::ProcCpuSeconds(world.Pid(c)) - cpu_before[c];
    listed += used;
    char item[96];
    std::snprintf(item, sizeof item, "%s %.1f s, ", c.c_str(), used);
    cpu_line += item;
  }
  std::printf("CPU during the burst (%.1f s of the machine's busy time): %sothers %.1f s\n", busy,
              cpu_line.c_str(), busy - listed);
  SteadyClock::time_point last_allocated = t0;
  {
    std::lock_guard<std::mutex> l(mu);
    for (const auto& [name, t] : allocated) {
      if (name.rfind("burst-", 0) == 0) last_allocated = std::max(last_allocated, t);
    }
  }
  std::printf(
      "burst of %d pods into one 8-GPU node: %.1f pods/s allocated (bind phase success, "
      "the last %.0f ms after the scheduler resumed), %.1f pods/s running (%.0f ms)\n",
      pods, pods / (Ms(last_allocated - t0) / 1000), Ms(last_allocated - t0),
      pods / (Ms(t1 - t0) / 1000), Ms(t1 - t0));

  // (3) Memory, and the real kubelet's view of its Allocate calls.
  std::printf("RSS: hami-device-plugin %ld KiB, %s %ld KiB (%d containers)\n",
              RssKiB(world.Pid("node-a-plugin")), real ? "kubelet" : "hami-sim-kubelet",
              RssKiB(world.Pid("node-a-kubelet")), latency_pods + pods);
  if (real) {
    // The kubelet's metrics through the API server's node proxy (its client certificate).
    Result<k8s::HttpResponse> page =
        world.client().Send("GET", "/api/v1/nodes/node-a/proxy/metrics");
    if (!page.ok() || page->status != 200) {
      std::fprintf(stderr, "no kubelet metrics: %s\n",
                   page.ok() ? page->body.c_str() : page.status().ToString().c_str());
      return 1;
    }
    std::map<double, double> alloc =
        bench::Buckets(sim::ParseExposition(page->body),
                       "kubelet_device_plugin_alloc_duration_seconds",
                       {{"resource_name", "nvidia.com/gpu"}});
    std::printf("kubelet -> hami-device-plugin Allocate (the kubelet's histogram): n=%.0f  "
                "p50=%.2f ms  p99=%.2f ms\n",
                alloc.empty() ? 0.0 : alloc.rbegin()->second, bench::Quantile(alloc, 0.5) * 1e3,
                bench::Quantile(alloc, 0.99) * 1e3);
    // What the plugin's four requests of an Allocate (two reads, two patches) cost on this API
    // server and etcd, from the API server's own histogram.
    Result<k8s::HttpResponse> api = world.client().Send("GET", "/metrics");
    if (api.ok() && api->status == 200) {
      std::vector<sim::MetricSample> samples = sim::ParseExposition(api->body);
      for (const char* verb : {"GET", "PATCH"}) {
        for (const char* resource : {"pods", "nodes"}) {
          std::map<double, double> b = bench::Buckets(
              samples, "apiserver_request_duration_seconds",
              {{"verb", verb}, {"resource", resource}, {"subresource", ""}});
          std::printf("kube-apiserver %s %s: n=%.0f  p50=%.2f ms  p99=%.2f ms\n", verb,
                      resource, b.empty() ? 0.0 : b.rbegin()->second,
                      bench::Quantile(b, 0.5) * 1e3, bench::Quantile(b, 0.99) * 1e3);
        }
      }
    }
    std::printf("RSS: containerd %ld KiB\n", RssKiB(world.Pid("node-a-containerd")));
  }
  informer.Stop();
  return 0;
}
