// The extender driven by the real kube-scheduler: scheduling throughput and latency with N nodes
// registered in a real kube-apiserver.
//
// Starts etcd and kube-apiserver (KubeControlPlane, no controller manager: nothing here renews
// node leases, and its node lifecycle controller would taint every node), registers N untainted
// nodes of 8
// simulated V100s each (HAMi's registration annotation, as the device plugin writes it), creates
// P pending GPU pods for hami-scheduler, starts the real `hami-scheduler` binary and a fake
// device plugin acknowledging allocations, then starts kube-scheduler with the extender
// configuration the chart uses (filter and bind verbs, nodeCacheCapable, managed resources) and
// measures until every pod is bound:
//  - pods/s over the whole run (from kube-scheduler's start to the last pod bound);
//  - kube-scheduler's own histograms: scheduling attempt duration (result "scheduled": the
//    filter call to the extender included) and the pod scheduling SLI duration (first attempt to
//    bound, the extender's bind included), p50 and p99 read from their buckets;
//  - hami-scheduler's CPU time per pod and its resident memory, and the CPU time per pod of
//    kube-scheduler, kube-apiserver and etcd over the same window.
//
//   real_scheduler_bench --kube-bin "$(bash scripts/kube-tools.sh)" --nodes 1000 --pods 2000
//
// Everything runs on this machine: etcd, the API server, kube-scheduler, hami-scheduler and the
// fake plugin share its CPUs.
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "common/subprocess.h"
#include "device/node_registration.h"
#include "k8s/config.h"
#include "k8s/object.h"
#include "k8s/rest_client.h"
#include "k8s/typed.h"
#include "bench_gpus.h"
#include "histogram.h"
#include "proc_status.h"
#include "sim/cluster/fake_device_plugin.h"
#include "sim/world/demo.h"
#include "sim/world/kube_control_plane.h"
#include "sim/world/manifests.h"

namespace {

using Json = nlohmann::json;
using SteadyClock = std::chrono::steady_clock;
using hami::bench::Buckets;
using hami::bench::Quantile;

struct Args {
  std::string kube_bin;
  std::string scheduler_bin;
  std::string dir;
  int nodes = 1000;
  int pods = 2000;
  int creators = 8;
  std::string policy = "spread";
  int timeout_s = 1200;
  bool audit = true;
};

double Since(SteadyClock::time_point t0) {
  return std::chrono::duration<double>(SteadyClock::now() - t0).count();
}

Json MakeNode(int n) {
  std::vector<hami::device::DeviceInfo> gpus = hami::bench::V100Node(n);
  char name[32];
  std::snprintf(name, sizeof name, "node-%05d", n);
  Json node;
  node["apiVersion"] = "v1";
  node["kind"] = "Node";
  node["metadata"]["name"] = name;
  node["metadata"]["labels"] = {{"kubernetes.io/hostname", name}, {"gpu", "on"}};
  node["metadata"]["annotations"]["hami.io/node-nvidia-register"] =
      hami::device::EncodeNodeDevicesJson(gpus);
  Json resources = {{"cpu", "64"}, {"memory", "512Gi"}, {"pods", "110"}, {"nvidia.com/gpu", "80"}};
  node["status"]["capacity"] = resources;
  node["status"]["allocatable"] = resources;
  node["status"]["conditions"] = Json::array({{{"type", "Ready"},
                                               {"status", "True"},
                                               {"reason", "KubeletReady"},
                                               {"lastHeartbeatTime", "2026-01-01T00:00:00Z"},
                                               {"lastTransitionTime", "2026-01-01T00:00:00Z"}}});
  return node;
}

// Runs `make(i)` for i in [0, n) on `threads` threads; false if any creation failed.
bool CreateAll(hami::k8s::RestClient& client, const hami::k8s::Resource& r, const char* ns, int n,
               int threads, Json (*make)(int)) {
  std::atomic<int> next{0};
  std::atomic<bool> ok{true};
  std::vector<std::thread> workers;
  for (int t = 0; t < threads; ++t) {
    workers.emplace_back([&] {
      for (int i; (i = next++) < n && ok;) {
        auto created = client.Create(r, ns, make(i));
        if (!created.ok()) {
          std::fprintf(stderr, "create: %s\n", created.status().ToString().c_str());
          ok = false;
        } else if (r.plural == "nodes") {
          // The API server taints a new node not-ready (TaintNodesByCondition); the controller
          // manager's node lifecycle controller, which is not running, would lift it.
          auto lifted = client.Patch(r, "", hami::k8s::Name(*created),
                                     hami::k8s::PatchType::kMerge, R"({"spec":{"taints":null}})");
          if (!lifted.ok()) {
            std::fprintf(stderr, "untaint: %s\n", lifted.status().ToString().c_str());
            ok = false;
          }
        }
      }
    });
  }
  for (std::thread& w : workers) w.join();
  return ok;
}

// Pods of `ns` that have a node.
int BoundPods(hami::k8s::RestClient& client) {
  hami::k8s::ListOptions o;
  o.field_selector = "spec.nodeName!=";
  auto list = client.ListAll(hami::k8s::kPods, "default", o);
  return list.ok() ? static_cast<int>((*list)["items"].size()) : -1;
}

}  // namespace

int main(int argc, char** argv) {
  Args a;
  char self[4096] = {};
  ssize_t len = readlink("/proc/self/exe", self, sizeof self - 1);
  a.scheduler_bin =
      std::filesystem::path(std::string(self, len > 0 ? static_cast<size_t>(len) : 0))
          .parent_path() /
      "hami-scheduler";
  CLI::App app{"The extender driven by the real kube-scheduler against a real kube-apiserver"};
  app.add_option("--kube-bin", a.kube_bin, "what `bash scripts/kube-tools.sh` prints")
      ->required();
  app.add_option("--scheduler-bin", a.scheduler_bin, "hami-scheduler")->capture_default_str();
  app.add_option("--dir", a.dir, "working directory (default: a fresh temporary one, removed)");
  app.add_option("--nodes", a.nodes, "nodes (8 GPUs each)")->capture_default_str()->check(
      CLI::PositiveNumber);
  app.add_option("--pods", a.pods, "pods to schedule")->capture_default_str()->check(
      CLI::PositiveNumber);
  app.add_option("--creators", a.creators, "client threads creating nodes and pods")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  app.add_option("--policy", a.policy, "hami-scheduler's --node-scheduler-policy")
      ->capture_default_str()
      ->check(CLI::IsMember({"spread", "binpack"}));
  app.add_option("--timeout", a.timeout_s, "seconds to wait for every pod to be bound")
      ->capture_default_str();
  app.add_option("--audit", a.audit,
                 "kube-apiserver writes its audit log (blocking, every request), as in the tests")
      ->capture_default_str();
  CLI11_PARSE(app, argc, argv);

  bool own_dir = a.dir.empty();
  if (own_dir) {
    char tmpl[] = "/tmp/hami-real-bench-XXXXXX";
    if (mkdtemp(tmpl) == nullptr) return 1;
    a.dir = tmpl;
  }
  std::filesystem::create_directories(a.dir);
  auto t0 = SteadyClock::now();
  hami::sim::KubeControlPlaneOptions cpo;
  cpo.bin_dir = a.kube_bin;
  cpo.dir = a.dir + "/kube";
  cpo.controller_manager = false;
  cpo.audit = a.audit;
  std::filesystem::create_directories(cpo.dir);
  auto cp = hami::sim::KubeControlPlane::Start(cpo);
  if (!cp.ok()) {
    std::fprintf(stderr, "control plane: %s\n", cp.status().ToString().c_str());
    return 1;
  }
  hami::k8s::RestConfig rest = hami::k8s::LoadKubeconfigFile((*cp)->admin_kubeconfig()).value();
  rest.qps = 0;
  auto client = hami::k8s::RestClient::Create(rest).value();
  // No controller manager: the default ServiceAccount pods are admitted with is made here.
  (void)client->Create(hami::k8s::Resource{"v1", "serviceaccounts", true}, "default",
                       Json{{"metadata", {{"name", "default"}}}});
  if (!CreateAll(*client, hami::k8s::kNodes, "", a.nodes, a.creators, MakeNode)) return 1;
  double nodes_s = Since(t0);
  if (!CreateAll(*client, hami::k8s::kPods, "default", a.pods, a.creators,
                 hami::bench::GpuPod)) {
    return 1;
  }
  double setup_s = Since(t0);

  hami::sim::FakeDevicePlugin plugin(*client, 4);
  std::string cmd = "exec " + a.scheduler_bin + " --kubeconfig=" + (*cp)->admin_kubeconfig() +
                    " --http_bind=127.0.0.1:0 --metrics-bind-address=127.0.0.1:0" +
                    " --node-scheduler-policy=" + a.policy + " --kube-qps=0 2>" + a.dir +
                    "/hami-scheduler.log";
  hami::Subprocess sched({"/bin/sh", "-c", cmd}, {"PATH=/usr/bin:/bin"});
  std::string out = sched.ReadUntil("\n");
  size_t colon = out.rfind(':', out.find(" (metrics"));
  int port = colon == std::string::npos ? 0 : std::atoi(out.c_str() + colon + 1);
  if (port <= 0) {
    std::fprintf(stderr, "hami-scheduler did not start: %s\n", out.c_str());
    return 1;
  }
  std::string url = out.substr(out.find("http"), out.find(' ', out.find("http")) -
                                                     out.find("http"));
  // Until hami-scheduler has taken every node's registration.
  for (auto end = SteadyClock::now() + std::chrono::seconds(120);;) {
    std::ifstream log(a.dir + "/hami-scheduler.log");
    std::string text((std::istreambuf_iterator<char>(log)), std::istreambuf_iterator<char>());
    size_t registered = 0;
    for (size_t at = 0; (at = text.find("registered for scheduling", at)) != std::string::npos;
         ++at) {
      ++registered;
    }
    if (registered >= static_cast<size_t>(a.nodes)) break;
    if (SteadyClock::now() > end) {
      std::fprintf(stderr, "hami-scheduler registered %zu of %d nodes\n", registered, a.nodes);
      return 1;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  double cpu0 = hami::bench::ProcCpuSeconds(sched.pid());
  auto cpu_of = [&](const char* name) {
    hami::sim::LoggedProcess* p = (*cp)->Process(name);
    return p == nullptr ? 0.0 : hami::bench::ProcCpuSeconds(p->pid());
  };
  double apiserver0 = cpu_of("kube-apiserver"), etcd0 = cpu_of("etcd");

  auto start = SteadyClock::now();
  hami::Status s = (*cp)->StartScheduler(hami::sim::KubeSchedulerConfigYaml(url));
  if (!s.ok()) {
    std::fprintf(stderr, "kube-scheduler: %s\n", s.ToString().c_str());
    return 1;
  }
  int bound = 0;
  while ((bound = BoundPods(*client)) < a.pods) {
    if (Since(start) > a.timeout_s) {
      std::fprintf(stderr, "only %d of %d pods bound after %d s\n", bound, a.pods, a.timeout_s);
      return 1;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  double run_s = Since(start);
  double cpu = hami::bench::ProcCpuSeconds(sched.pid()) - cpu0;
  // kube-scheduler started with the clock: all its CPU is the run's.
  double kube_scheduler = cpu_of("kube-scheduler");
  double apiserver = cpu_of("kube-apiserver") - apiserver0, etcd = cpu_of("etcd") - etcd0;
  long rss = hami::bench::ProcStatusKb(sched.pid(), "VmRSS:");  // NOLINT(runtime/int)

  hami::k8s::RestConfig metrics_rest;
  metrics_rest.server = (*cp)->scheduler_metrics_url().substr(
      0, (*cp)->scheduler_metrics_url().size() - std::string("/metrics").size());
  metrics_rest.tls.insecure_skip_verify = true;
  metrics_rest.qps = 0;
  auto metrics_client = hami::k8s::RestClient::Create(metrics_rest).value();
  auto page = metrics_client->Send("GET", "/metrics");
  std::string text = page.ok() ? page->body : "";
  std::ofstream(a.dir + "/kube-scheduler-metrics.txt") << text;
  std::vector<hami::sim::MetricSample> samples = hami::sim::ParseExposition(text);
  auto attempt = Buckets(samples, "scheduler_scheduling_attempt_duration_seconds",
                         {{"profile", "hami-scheduler"}, {"result", "scheduled"}});
  auto sli = Buckets(samples, "scheduler_pod_scheduling_sli_duration_seconds", {});

  std::printf(
      "real kube-scheduler + hami-scheduler (%s), %d nodes x 8 GPUs, %d pods, audit log %s\n"
      "  setup: %d nodes in %.1f s, %d pods in %.1f s\n"
      "  all bound in %.1f s: %.0f pods/s\n"
      "  kube-scheduler scheduling attempt (scheduled): p50 %.1f ms  p99 %.1f ms (%0.f attempts)\n"
      "  kube-scheduler pod scheduling SLI (to bound):  p50 %.1f ms  p99 %.1f ms\n"
      "  hami-scheduler: %.2f ms CPU per pod, VmRSS %ld MiB\n"
      "  CPU per pod: kube-scheduler %.2f ms, kube-apiserver %.2f ms, etcd %.2f ms\n",
      a.policy.c_str(), a.nodes, a.pods, a.audit ? "on" : "off", a.nodes, nodes_s, a.pods,
      setup_s - nodes_s, run_s,
      a.pods / run_s, Quantile(attempt, 0.5) * 1e3, Quantile(attempt, 0.99) * 1e3,
      attempt.empty() ? 0.0 : attempt.rbegin()->second, Quantile(sli, 0.5) * 1e3,
      Quantile(sli, 0.99) * 1e3, cpu * 1e3 / a.pods, rss / 1024, kube_scheduler * 1e3 / a.pods,
      apiserver * 1e3 / a.pods, etcd * 1e3 / a.pods);
  sched.Signal(SIGTERM);
  sched.Wait();
  (*cp).reset();  // stops kube-scheduler, kube-apiserver and etcd
  if (own_dir) std::filesystem::remove_all(a.dir);
  return 0;
}
