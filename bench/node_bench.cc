// node_bench: the node side end to end, every component its own process (src/sim/world): the
// simulated API server, hami-scheduler, the kube-scheduler stand-in, and one node with 8
// simulated GPUs, its hami-sim-kubelet and hami-device-plugin.
//
//   build/bin/node_bench [--pods N] [--latency-pods M] [--volcano]
//
// Prints (1) the time from creating a pod to its container process running under its quota,
// one pod at a time (M pods); (2) how many pods per second go into the one node when N are
// created at once: every bind takes the node lock, which the plugin releases when kubelet's
// Allocate is done, so this is the node's allocation throughput; (3) the resident memory of the
// device plugin and the kubelet afterwards.
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

std::string Pod(const std::string& name) {
  return "apiVersion: v1\nkind: Pod\nmetadata:\n  name: " + name +
         "\nspec:\n  containers:\n  - name: main\n    image: busybox\n"
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
  if (std::optional<int> exit = hami::ParseGoStyleFlags(app, argc, argv)) return *exit;
  sim::WorldOptions o;
  o.build_dir = HAMI_BUILD_DIR;
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
    if (!volcano) return world.Apply(Pod(name), "default").ok();
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
  std::vector<double> latency;
  for (int i = 0; i < latency_pods; ++i) {
    std::string name = "single-" + std::to_string(i);
    {
      std::lock_guard<std::mutex> l(mu);
      created[name] = SteadyClock::now();
    }
    if (!create(name, i) ||
        !wait_running(static_cast<size_t>(i + 1), std::chrono::seconds(30))) {
      std::fprintf(stderr, "pod %s did not run\n", name.c_str());
      return 1;
    }
    std::lock_guard<std::mutex> l(mu);
    latency.push_back(Ms(running[name] - created[name]));
  }
  std::sort(latency.begin(), latency.end());
  std::printf("apply -> container running   n=%zu  p50=%.1f ms  p90=%.1f ms  max=%.1f ms\n",
              latency.size(), latency[latency.size() / 2], latency[latency.size() * 9 / 10],
              latency.back());

  // (2) A burst into the one node: the pods are created while the kube-scheduler stand-in is
  // stopped, so what is timed is placement and allocation alone. In Volcano mode the pods are
  // created bound (the kubelet starts on the first at once), so the clock starts before the
  // first create.
  auto t0 = SteadyClock::now();
  if (!volcano && !world.Signal("kube-scheduler", SIGSTOP).ok()) return 1;
  for (int i = 0; i < pods; ++i) {
    if (!create("burst-" + std::to_string(i), latency_pods + i)) return 1;
  }
  if (!volcano) {
    t0 = SteadyClock::now();
    if (!world.Signal("kube-scheduler", SIGCONT).ok()) return 1;
  }
  if (!wait_running(static_cast<size_t>(latency_pods + pods), std::chrono::seconds(120))) {
    std::fprintf(stderr, "the burst did not finish\n");
    return 1;
  }
  auto t1 = SteadyClock::now();
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

  // (3) Memory.
  std::printf("RSS: hami-device-plugin %ld KiB, hami-sim-kubelet %ld KiB (%d containers)\n",
              RssKiB(world.Pid("node-a-plugin")), RssKiB(world.Pid("node-a-kubelet")),
              latency_pods + pods);
  informer.Stop();
  return 0;
}
