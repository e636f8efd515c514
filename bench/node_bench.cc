// node_bench: the node side end to end, every component its own process (src/sim/world): the
// simulated API server, hami-scheduler, the kube-scheduler stand-in, and one node with 8
// simulated GPUs, its hami-sim-kubelet and hami-device-plugin.
//
//   build/bin/node_bench [--pods N] [--latency-pods M]
//
// Prints (1) the time from creating a pod to its container process running under its quota,
// one pod at a time (M pods); (2) how many pods per second go into the one node when N are
// created at once: every bind takes the node lock, which the plugin releases when kubelet's
// Allocate is done, so this is the node's allocation throughput; (3) the resident memory of the
// device plugin and the kubelet afterwards.
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

  // When each pod was created, allocated (bind phase success) and first seen Running, from a pod
  // informer.
  std::mutex mu;
  std::map<std::string, SteadyClock::time_point> created, allocated, running;
  k8s::Informer informer(world.client(), k8s::kPods, {});
  auto seen = [&](const k8s::ObjectPtr& p) {
    std::lock_guard<std::mutex> l(mu);
    if (k8s::GetString(*p, "/metadata/annotations/hami.io~1bind-phase") == "success") {
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
    if (!world.Apply(Pod(name), "default").ok() ||
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
  // stopped, so what is timed is placement and allocation alone.
  if (!world.Signal("kube-scheduler", SIGSTOP).ok()) return 1;
  for (int i = 0; i < pods; ++i) {
    if (!world.Apply(Pod("burst-" + std::to_string(i)), "default").ok()) return 1;
  }
  auto t0 = SteadyClock::now();
  if (!world.Signal("kube-scheduler", SIGCONT).ok()) return 1;
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
