// scheduler_bench: the scheduling core's three recorded figures (bench/RESULTS.md, "Scheduling
// core"):
//   1. one pod's filter + score over 5,000 nodes x 8 GPUs at 50% memory/core usage (median, p90);
//   2. ledger memory for those nodes and 100,000 pods (RSS delta and counted bytes);
//   3. full rebuild time of that ledger from the node and pod objects.
// With --mig (bench/RESULTS.md, "MIG placement"): every GPU an A100-80GB in dynamic MIG mode with
// the allowlist's profiles, each holding two 1g.10gb and one 3g.40gb reservation (one 1g
// placement left), and the timed pod asks 9000 MiB: a 1g.10gb at the one free placement.
// Single-threaded; pin it to one core with `taskset -c 0`.
//
//   scheduler_bench [--nodes N] [--gpus G] [--pods P] [--iterations I] [--mig]
#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <optional>
#include <string>
#include <vector>

#include "common/go_flags.h"
#include "device/pod_devices.h"
#include "scheduler/placement.h"
#include "scheduler/test_util.h"

namespace {

using hami::scheduler::Decision;
using hami::scheduler::Ledger;
using hami::scheduler::NodeObject;
using hami::scheduler::PodObject;
using hami::scheduler::PodPhase;
using hami::scheduler::PodSpec;
using SteadyClock = std::chrono::steady_clock;

long RssKiB() {
  std::ifstream f("/proc/self/status");
  std::string line;
  while (std::getline(f, line)) {
    if (line.rfind("VmRSS:", 0) == 0) return std::atol(line.c_str() + 6);
  }
  return -1;
}

double Ms(SteadyClock::duration d) { return std::chrono::duration<double, std::milli>(d).count(); }

// GPU `g` of node `n`: a V100 32 GiB with 10 slots, or (mig) an A100-80GB in MIG mode.
hami::device::DeviceInfo BenchGpu(int n, int g, int gpus, bool mig) {
  namespace t = hami::scheduler::testing;
  char uuid[64];
  std::snprintf(uuid, sizeof(uuid), "GPU-%08x-%04x-4000-8000-%012x", n, g, n * 31 + g);
  const int32_t numa = g < gpus / 2 ? 0 : 1;
  if (!mig) {
    return t::Gpu(uuid, static_cast<uint32_t>(g), 32768, "NVIDIA-Tesla V100-PCIE-32GB", numa);
  }
  using hami::device::MigProfile;
  hami::device::DeviceInfo d =
      t::Gpu(uuid, static_cast<uint32_t>(g), 81920, "NVIDIA A100-SXM4-80GB", numa, 7, 100);
  d.mode = "mig";
  d.mig_profiles = {
      MigProfile{"1g.10gb", 9728, 15, 1, {{0, 1}, {1, 1}, {2, 1}, {3, 1}, {4, 1}, {5, 1}, {6, 1}}},
      MigProfile{"2g.20gb", 19968, 29, 2, {{0, 2}, {2, 2}, {4, 2}}},
      MigProfile{"3g.40gb", 40192, 43, 3, {{0, 4}, {4, 4}}},
      MigProfile{"7g.80gb", 80384, 100, 7, {{0, 8}}}};
  return d;
}

// The annotations of the `k`-th pod on a MIG GPU: two 1g.10gb (slices 6, 5) and one 3g.40gb.
void MigPodAnnotations(const std::string& uuid, int k, hami::device::Annotations* a) {
  static const char* kProfile[] = {"1g.10gb", "1g.10gb", "3g.40gb"};
  static const char* kPlacement[] = {"{\"start\":6,\"size\":1}", "{\"start\":5,\"size\":1}",
                                     "{\"start\":0,\"size\":4}"};
  static const int kMem[] = {9728, 9728, 40192}, kCores[] = {15, 15, 43};
  (*a)["hami.io/vgpu-devices-allocated"] = uuid + ",NVIDIA," + std::to_string(kMem[k % 3]) + "," +
                                           std::to_string(kCores[k % 3]) + ":;";
  (*a)["hami.io/vgpu-mig-allocations"] =
      "[{\"containerIndex\":0,\"deviceIndex\":0,\"gpuUUID\":\"" + uuid + "\",\"profile\":\"" +
      kProfile[k % 3] + "\",\"placement\":" + kPlacement[k % 3] + "}]";
}

double Percentile(std::vector<double> v, double p) {
  std::sort(v.begin(), v.end());
  return v[static_cast<size_t>(p * static_cast<double>(v.size() - 1))];
}

}  // namespace

int main(int argc, char** argv) {
  int nodes = 5000, gpus = 8, pods = 100000, iterations = 200;
  bool mig = false;
  CLI::App app{
      "scheduler_bench: the placement engine and ledger alone: placement latency and ledger "
      "memory"};
  app.name("scheduler_bench");
  app.add_option("--nodes", nodes, "nodes in the ledger")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("--gpus", gpus, "GPUs per node")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("--pods", pods, "pods recorded before timing")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("--iterations", iterations, "placements timed")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_flag("--mig", mig,
               "dynamic MIG: A100-80GB in MIG mode, three reservations per GPU (--pods is then "
               "3 x nodes x gpus)");
  if (std::optional<int> exit = hami::ParseGoStyleFlags(app, argc, argv)) return *exit;
  namespace t = hami::scheduler::testing;
  t::SchedulerWorld world;

  // Objects: V100 32 GiB, 10 slots. Each pod takes one GPU with 20% memory and 20% cores;
  // 100,000 pods on 40,000 GPUs = 2.5 per GPU = 50% of memory and cores on average.
  constexpr int32_t kMem = 32768;
  const int32_t pod_mem = kMem / 5;
  if (mig) pods = 3 * nodes * gpus;
  std::vector<NodeObject> node_objects;
  node_objects.reserve(nodes);
  for (int n = 0; n < nodes; ++n) {
    std::vector<hami::device::DeviceInfo> list;
    for (int g = 0; g < gpus; ++g) list.push_back(BenchGpu(n, g, gpus, mig));
    node_objects.push_back(t::MakeNode("node-" + std::to_string(n), list));
  }
  std::vector<PodObject> pod_objects;
  pod_objects.reserve(pods);
  for (int p = 0; p < pods; ++p) {
    int n = p % nodes, g = (p / nodes) % gpus;
    char uuid[64];
    std::snprintf(uuid, sizeof(uuid), "GPU-%08x-%04x-4000-8000-%012x", n, g, n * 31 + g);
    PodObject o;
    char uid[48];
    std::snprintf(uid, sizeof(uid), "%08x-1111-4222-8333-%012x", p, p * 7);
    o.uid = uid;
    o.name_space = "team-" + std::to_string(p % 50);
    o.name = "worker-" + std::to_string(p);
    o.node_name = "node-" + std::to_string(n);
    o.phase = PodPhase::kRunning;
    o.annotations["hami.io/vgpu-node"] = o.node_name;
    o.annotations["hami.io/vgpu-time"] = "1700000000";
    o.annotations["hami.io/vgpu-devices-allocated"] =
        std::string(uuid) + ",NVIDIA," + std::to_string(pod_mem) + ",20:;";
    if (mig) MigPodAnnotations(uuid, p / (nodes * gpus), &o.annotations);
    pod_objects.push_back(std::move(o));
  }

  // 2 + 3: rebuild time and memory.
  long rss_before = RssKiB();
  SteadyClock::time_point t0 = SteadyClock::now();
  Ledger& ledger = world.ledger();
  for (const NodeObject& n : node_objects) {
    if (!ledger.UpsertNode(n).ok()) return 1;
  }
  SteadyClock::time_point t1 = SteadyClock::now();
  for (const PodObject& p : pod_objects) {
    if (!ledger.UpsertPod(p).ok()) return 1;
  }
  SteadyClock::time_point t2 = SteadyClock::now();
  long rss_after = RssKiB();
  if (mig) {
    std::printf("cluster: %d nodes x %d MIG GPUs (A100-80GB), %d MIG reservations (7 of 8 "
                "memory slices held per GPU)\n",
                nodes, gpus, pods);
  } else {
    std::printf("cluster: %d nodes x %d GPUs, %d pods (%.0f%% memory, %.0f%% cores in use)\n",
                nodes, gpus, pods, 100.0 * pods * pod_mem / (double(nodes) * gpus * kMem),
                100.0 * pods * 20 / (double(nodes) * gpus * 100));
  }
  std::printf("rebuild: nodes %.1f ms + pods %.1f ms = %.1f ms\n", Ms(t1 - t0), Ms(t2 - t1),
              Ms(t2 - t0));
  std::printf("ledger memory: RSS delta %.1f MiB, counted %.1f MiB\n",
              (rss_after - rss_before) / 1024.0, ledger.MemoryBytes() / 1048576.0);
  if (!ledger.CheckConsistency().ok()) return 1;

  // 1: filter + score of one pod over every node.
  PodSpec pod = world.Pod(
      "bench", {mig ? t::Limits({{"nvidia.com/gpu", "1"}, {"nvidia.com/gpumem", "9000"}})
                    : t::Limits({{"nvidia.com/gpu", "1"},
                                 {"nvidia.com/gpumem", "4096"},
                                 {"nvidia.com/gpucores", "10"}})});
  std::vector<std::string> names;
  for (int n = 0; n < nodes; ++n) names.push_back("node-" + std::to_string(n));
  std::vector<std::string_view> views(names.begin(), names.end());
  struct Variant {
    const char* what;
    hami::device::Annotations annotations;
    bool by_name;
  } variants[] = {
      {"by node name (extender nodenames), spread", {}, true},
      {"all registered nodes, spread", {}, false},
      {"by node name, binpack + numa-bind",
       {{"hami.io/gpu-scheduler-policy", "binpack"}, {"nvidia.com/numa-bind", "true"}},
       true},
  };
  // Cold: a new engine each time, so every node is evaluated. Warm: the service's case, one
  // long-lived engine whose verdict cache has seen the previous filter, and between two filters
  // another pod of the same shape was placed and reserved (its node's verdict is recomputed).
  int warm_pods = 0;
  for (bool warm : {false, true}) {
    for (Variant& v : variants) {
      pod.annotations = v.annotations;
      std::vector<double> samples;
      size_t fit = 0;
      for (int i = 0; i < iterations; ++i) {
        hami::scheduler::PlacementEngine cold(world.engine().options());
        const hami::scheduler::PlacementEngine& engine = warm ? world.engine() : cold;
        if (warm) {
          PodSpec other = pod;
          other.uid = "warm-" + std::to_string(warm_pods);
          other.name = "warm-" + std::to_string(warm_pods++);
          hami::Result<Decision> r = PlaceAndReserve(ledger, engine, other, views);
          if (!r.ok() || !r->fit()) return 1;
        }
        SteadyClock::time_point a = SteadyClock::now();
        hami::Result<Decision> d =
            v.by_name ? engine.Place(ledger, pod, views) : engine.PlaceOnAllNodes(ledger, pod);
        SteadyClock::time_point b = SteadyClock::now();
        if (!d.ok() || !d->fit()) return 1;
        fit = d->verdicts.size();
        samples.push_back(Ms(b - a));
      }
      std::printf(
          "filter+score %s (%s): median %.3f ms, p90 %.3f ms, min %.3f ms over %d runs, %zu "
          "nodes\n",
          warm ? "warm" : "cold", v.what, Percentile(samples, 0.5), Percentile(samples, 0.9),
          Percentile(samples, 0.0), iterations, fit);
    }
  }
  return 0;
}
