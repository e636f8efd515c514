// Extender throughput and latency through HTTP, and the scheduler's resident memory.
//
// Runs the real `hami-scheduler` binary (a separate process, so its RSS is its own) against the
// in-process simulated API server holding N nodes (8 GPUs each) and P pending pods, with a fake
// device plugin acknowledging allocations (bind-phase success + node lock release). C client
// threads then do what kube-scheduler does per pod: POST /filter with every node name
// (nodeCacheCapable), then POST /bind to the chosen node. Reported: pods/s over the measured
// pods, p50/p99 of filter, bind and filter+bind, and VmRSS/VmHWM of the scheduler, and how
// much of the fake device plugin's work and of the scheduler's events was left at the end.
//
//   extender_bench --nodes 5000 --pods 3000 --clients 4 --policy spread [--scheduler-bin PATH]
//                  [--all-vendors on]
//
// Everything runs on this machine: the API server's work (patches, bindings, watch fan-out) and
// the client's share the CPUs with the scheduler. The device plugins' and kubelets' requests are
// served in process by default (--plugin-api inprocess: same server code, no socket; their pod
// watch too), since in a cluster they come from the nodes; --plugin-api http sends them over
// loopback HTTP too.
#include <httplib.h>
#include <malloc.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "common/go_flags.h"
#include "common/subprocess.h"
#include "device/node_registration.h"
#include "k8s/object.h"
#include "k8s/rest_client.h"
#include "k8s/socket_transport.h"
#include "bench_gpus.h"
#include "proc_status.h"
#include "sim/apiserver/api_server.h"
#include "sim/cluster/fake_device_plugin.h"
#include "sim/cluster/in_process_transport.h"

namespace {

using Json = nlohmann::json;
using SteadyClock = std::chrono::steady_clock;

struct Args {
  int nodes = 1000;
  int pods = 2000;
  int clients = 4;
  int warmup = 50;
  std::string policy = "spread";
  // "on": every vendor module hami-cpp schedules is enabled (a device config with all their
  // sections, --enable-ascend, --enable-iluvatar); the nodes and pods stay NVIDIA's.
  std::string all_vendors = "off";
  // Node names per filter call; 0 = all. kube-scheduler's default percentageOfNodesToScore offers
  // the extender max(100, N * (50 - N/125) %) feasible nodes, e.g. 500 of 5,000, rotating.
  int offer = 0;
  // How the device plugins and kubelets reach the API server: "inprocess" (default; their API
  // requests are served by the same server code without a socket: in a cluster that traffic
  // comes from the nodes and is served by kube-apiserver, off the scheduler's machine) or "http"
  // (loopback HTTP like the scheduler's, so the 2 cores also carry its transport costs).
  std::string plugin_api = "inprocess";
  // The clients' HTTP implementation: "socket" (the project's HTTP/1.1 client: one write per
  // request, as Go's) or "httplib".
  std::string client = "socket";
  // The scheduler binary (default: this build's), e.g. an older build for a same-run comparison.
  std::string scheduler_bin = HAMI_SCHEDULER_BIN;
};

double Pct(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  size_t i = static_cast<size_t>(p * static_cast<double>(v.size() - 1));
  return v[i];
}

}  // namespace

// The scheduler's flags for --all-vendors on: a device config enabling every scheduled vendor.
std::string VendorFlags(const Args& a, const std::string& dir) {
  if (a.all_vendors != "on") return "";
  std::string path = dir + "/device-config.yaml";
  std::ofstream(path)
      << "nvidia: {}\nhygon: {}\ncambricon: {}\nenflame: {}\nkunlun: {}\n"
         "mthreads: {}\nbiren: {}\nvastai: {}\nmetax: {}\namd: {}\nawsneuron: {}\nvnpus: {}\n"
         "iluvatars: ~\n";
  return " --device-config-file=" + path + " --enable-ascend=true --enable-iluvatar=true";
}

int main(int argc, char** argv) {
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
  // The simulated world (API server, plugins, clients) runs in this process. Its store copies an
  // object on every write and keeps 10,000 events of history, so memory is freed and allocated
  // again at a high rate; glibc would hand the freed top of each heap back to the kernel and
  // fault it in again (page faults are expensive on this VM: about 6 % of the world's CPU). Keep
  // it instead. kube-apiserver, which the world stands for, is a Go process with its own
  // allocator; the scheduler under test keeps glibc's defaults (tuning it changed nothing).
  mallopt(M_TRIM_THRESHOLD, 512 << 20);
  mallopt(M_TOP_PAD, 64 << 20);
  mallopt(M_MMAP_THRESHOLD, 1 << 20);
  Args a;
  CLI::App app{
      "extender_bench: extender throughput, latency and scheduler memory: the real hami-scheduler "
      "against the in-process simulated API server, clients filtering and binding as "
      "kube-scheduler does"};
  app.name("extender_bench");
  app.add_option("--nodes", a.nodes, "nodes, 8 GPUs each")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("--pods", a.pods, "pods to place")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("--clients", a.clients, "client threads (filter then bind each)")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("--warmup", a.warmup, "pods placed before measuring")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  app.add_option("--policy", a.policy, "node scheduler policy")
      ->check(CLI::IsMember({"binpack", "spread"}))
      ->capture_default_str();
  app.add_option("--offer", a.offer, "node names per filter call, rotating; 0 = all")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  app.add_option("--plugin-api", a.plugin_api,
                 "how device plugins and kubelets reach the API server")
      ->check(CLI::IsMember({"inprocess", "http"}))
      ->capture_default_str();
  app.add_option("--client", a.client, "the clients' HTTP transport")->capture_default_str();
  app.add_option("--scheduler-bin", a.scheduler_bin, "the hami-scheduler binary to measure")
      ->capture_default_str();
  app.add_option("--all-vendors", a.all_vendors,
                 "on: every vendor module enabled (nodes and pods stay NVIDIA's)")
      ->check(CLI::IsMember({"on", "off"}))
      ->capture_default_str();
  if (std::optional<int> exit = hami::ParseGoStyleFlags(app, argc, argv)) return *exit;
  hami::sim::ApiServerOptions api;
  api.worker_threads = 512;
  auto server = hami::sim::ApiServer::Start(api).value();
  std::string dir = "/tmp/hami-extender-bench-" + std::to_string(getpid());
  std::system(("mkdir -p " + dir).c_str());
  std::string kubeconfig = dir + "/kubeconfig";
  if (!server->WriteKubeconfig(kubeconfig).ok()) return 1;
  hami::k8s::RestConfig cfg;
  cfg.server = server->url();
  cfg.qps = 0;
  auto client = hami::k8s::RestClient::Create(cfg).value();

  // Cluster: N nodes x 8 V100 (10 slots each), P pods of 1 GPU / 1024 MiB / 10 % cores.
  auto t0 = SteadyClock::now();
  std::vector<std::string> names;
  for (int n = 0; n < a.nodes; ++n) {
    std::vector<hami::device::DeviceInfo> gpus = hami::bench::V100Node(n);
    Json node;
    node["apiVersion"] = "v1";
    node["kind"] = "Node";
    node["metadata"]["name"] = "node-" + std::to_string(n);
    node["metadata"]["annotations"]["hami.io/node-nvidia-register"] =
        hami::device::EncodeNodeDevicesJson(gpus);
    node["status"]["allocatable"]["nvidia.com/gpu"] = "80";
    if (!client->Create(hami::k8s::kNodes, "", node).ok()) return 1;
    names.push_back("node-" + std::to_string(n));
  }
  std::vector<Json> pods;
  for (int p = 0; p < a.pods + a.warmup; ++p) {
    Json pod = hami::bench::GpuPod(p);
    auto created = client->Create(hami::k8s::kPods, "default", pod);
    if (!created.ok()) return 1;
    pods.push_back(*created);
  }
  double setup_s = std::chrono::duration<double>(SteadyClock::now() - t0).count();
  // Four acknowledging workers keep up with the binds, so the measured window carries the
  // plugins' API load too (a cluster has one plugin per node, working in parallel).
  std::unique_ptr<hami::k8s::RestClient> plugin_client;
  if (a.plugin_api == "inprocess") {
    static hami::RealClock clock;
    plugin_client = std::make_unique<hami::k8s::RestClient>(
        cfg, std::make_unique<hami::sim::InProcessTransport>(*server), clock);
  }
  hami::sim::FakeDevicePlugin plugin(plugin_client ? *plugin_client : *client, 4);

  // The scheduler logs one line per decision: to a file, so a full pipe never stalls it.
  std::string cmd = "exec " + a.scheduler_bin + " --kubeconfig=" + kubeconfig +
                    " --http_bind=127.0.0.1:0 --metrics-bind-address=127.0.0.1:0" +
                    " --node-scheduler-policy=" + a.policy + " --kube-qps=0" + VendorFlags(a, dir) +
                    " 2>" + dir + "/scheduler.log";
  hami::Subprocess sched({"/bin/sh", "-c", cmd}, {"PATH=/usr/bin:/bin"});
  std::string out = sched.ReadUntil("\n");
  size_t colon = out.rfind(':', out.find(" (metrics"));
  int port = std::atoi(out.c_str() + colon + 1);
  if (port <= 0) {
    std::fprintf(stderr, "scheduler did not start: %s\n", out.c_str());
    return 1;
  }
  long rss_idle = 0;  // NOLINT(runtime/int)
  {
    httplib::Client probe("127.0.0.1", port);
    for (int i = 0; i < 600; ++i) {
      auto r = probe.Get("/readyz");
      if (r && r->status == 200) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    rss_idle = hami::bench::ProcStatusKb(sched.pid(), "VmRSS:");
  }

  // Pre-built name lists: all nodes, or `offer` consecutive nodes from a rotating start. They and
  // the pods are serialised once, before the clock starts: what kube-scheduler spends building
  // its requests is not the extender's cost.
  std::vector<std::string> offers;
  if (a.offer <= 0 || a.offer >= a.nodes) {
    offers.push_back(Json(names).dump());
  } else {
    for (int start = 0; start < a.nodes; start += a.offer) {
      Json part = Json::array();
      for (int k = 0; k < a.offer; ++k)
        part.push_back(names[static_cast<size_t>((start + k) % a.nodes)]);
      offers.push_back(part.dump());
    }
  }
  std::vector<std::string> pod_texts;
  for (const Json& pod : pods) pod_texts.push_back(pod.dump());
  std::atomic<int> next{0};
  std::mutex mu;
  std::vector<double> filter_ms, bind_ms, total_ms;
  std::atomic<int> unfit{0}, errors{0};
  auto work = [&](int first, int last, bool record) {
    // One keep-alive connection per client thread, TCP_NODELAY, the request written with one
    // system call: as Go's HTTP client (kube-scheduler's) does.
    // (--client httplib: cpp-httplib's client, which polls before every read and write.)
    auto transport = hami::k8s::SocketTransport::Create({}).value();
    httplib::Client hc("127.0.0.1", port);
    hc.set_keep_alive(true);
    hc.set_tcp_nodelay(true);
    hc.set_read_timeout(60, 0);
    const std::string base = "http://127.0.0.1:" + std::to_string(port);
    auto post = [&](const char* path, std::string body) -> hami::Result<hami::k8s::HttpResponse> {
      if (a.client == "httplib") {
        auto r = hc.Post(path, body, "application/json");
        if (!r) return hami::UnavailableError("httplib: " + httplib::to_string(r.error()));
        hami::k8s::HttpResponse resp;
        resp.status = r->status;
        resp.body = std::move(r->body);
        return resp;
      }
      hami::k8s::HttpRequest r;
      r.method = "POST";
      r.url = base + path;
      r.headers = {{"Content-Type", "application/json"}};
      r.body = std::move(body);
      r.timeout = std::chrono::seconds(60);
      return transport->Do(r);
    };
    for (;;) {
      int i = next.fetch_add(1);
      if (i >= last) return;
      i += first;
      const Json& pod = pods[static_cast<size_t>(i)];
      std::string body = "{\"pod\":" + pod_texts[static_cast<size_t>(i)] +
                         ",\"nodenames\":" + offers[static_cast<size_t>(i) % offers.size()] + "}";
      auto s0 = SteadyClock::now();
      auto fr = post("/filter", std::move(body));
      auto s1 = SteadyClock::now();
      if (!fr.ok() || fr->status != 200) {
        ++errors;
        continue;
      }
      Json res = Json::parse(fr->body, nullptr, false);
      if (!res.is_object() || !res.contains("nodenames") || res["nodenames"].empty()) {
        ++unfit;
        continue;
      }
      Json bind;
      bind["podName"] = pod["metadata"]["name"];
      bind["podNamespace"] = "default";
      bind["podUID"] = pod["metadata"]["uid"];
      bind["node"] = res["nodenames"][0];
      auto br = post("/bind", bind.dump());
      auto s2 = SteadyClock::now();
      if (!br.ok() || br->status != 200 || br->body != "{}") ++errors;
      if (record) {
        std::lock_guard<std::mutex> l(mu);
        filter_ms.push_back(std::chrono::duration<double, std::milli>(s1 - s0).count());
        bind_ms.push_back(std::chrono::duration<double, std::milli>(s2 - s1).count());
        total_ms.push_back(std::chrono::duration<double, std::milli>(s2 - s0).count());
      }
    }
  };
  work(0, a.warmup, false);
  next = 0;
  std::map<std::string, uint64_t> requests0 = server->RequestCounts();
  double cpu0 = hami::bench::ProcCpuSeconds(sched.pid());
  double self0 = hami::bench::ProcCpuSeconds(getpid());
  auto m0 = SteadyClock::now();
  std::vector<std::thread> threads;
  for (int t = 0; t < a.clients; ++t) threads.emplace_back(work, a.warmup, a.pods, true);
  for (std::thread& t : threads) t.join();
  double secs = std::chrono::duration<double>(SteadyClock::now() - m0).count();
  double sched_cpu = hami::bench::ProcCpuSeconds(sched.pid()) - cpu0;
  double other_cpu = hami::bench::ProcCpuSeconds(getpid()) - self0;
  std::map<std::string, uint64_t> requests1 = server->RequestCounts();
  // The device plugin's backlog at the end of the window, and how long it took to clear.
  const uint64_t expected = static_cast<uint64_t>(a.warmup + a.pods - unfit.load() - errors.load());
  const uint64_t backlog = expected - std::min(expected, plugin.acknowledged());
  auto d0 = SteadyClock::now();
  while (plugin.acknowledged() < expected && SteadyClock::now() - d0 < std::chrono::seconds(60)) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  double drain_s = std::chrono::duration<double>(SteadyClock::now() - d0).count();
  // The scheduler posts two events per placed pod (FilteringSucceed, BindingSucceed) from a
  // background queue: how many were still queued when the window closed, and how long they took.
  auto events_posted = [&] {
    std::map<std::string, uint64_t> now = server->RequestCounts();
    auto it = now.find("POST events");
    return it == now.end() ? uint64_t{0} : it->second;
  };
  const uint64_t events_expected = 2 * expected;
  const uint64_t events_at_end = [&] {
    auto it = requests1.find("POST events");
    return it == requests1.end() ? uint64_t{0} : it->second;
  }();
  auto e0 = SteadyClock::now();
  while (events_posted() < events_expected && SteadyClock::now() - e0 < std::chrono::seconds(60)) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  double events_drain_s = std::chrono::duration<double>(SteadyClock::now() - e0).count();
  long rss = hami::bench::ProcStatusKb(sched.pid(), "VmRSS:");  // NOLINT(runtime/int)
  long hwm = hami::bench::ProcStatusKb(sched.pid(), "VmHWM:");  // NOLINT(runtime/int)
  std::printf(
      "nodes %d (%d offered per filter), pods %d, clients %d, policy %s, plugin API %s"
      " (setup %.1f s)\n"
      "  throughput   %.0f pods/s (filter+bind, %.2f s)\n"
      "  filter       p50 %.2f ms  p99 %.2f ms\n"
      "  bind         p50 %.2f ms  p99 %.2f ms\n"
      "  filter+bind  p50 %.2f ms  p99 %.2f ms\n"
      "  unfit %d, errors %d\n"
      "  scheduler RSS: %.1f MiB after sync, %.1f MiB after the run (peak %.1f MiB)\n"
      "  CPU during the run: scheduler %.2f cores (%.2f ms per pod), API server + device plugin"
      " + clients %.2f cores\n",
      a.nodes, a.offer > 0 && a.offer < a.nodes ? a.offer : a.nodes, a.pods, a.clients,
      a.policy.c_str(), a.plugin_api.c_str(), setup_s, static_cast<double>(total_ms.size()) / secs,
      secs, Pct(filter_ms, 0.5), Pct(filter_ms, 0.99), Pct(bind_ms, 0.5), Pct(bind_ms, 0.99),
      Pct(total_ms, 0.5), Pct(total_ms, 0.99), unfit.load(), errors.load(),
      static_cast<double>(rss_idle) / 1024, static_cast<double>(rss) / 1024,
      static_cast<double>(hwm) / 1024, sched_cpu / secs,
      1000 * sched_cpu / static_cast<double>(std::max<size_t>(1, total_ms.size())),
      other_cpu / secs);
  // What each pod cost the API server, by request kind (the fake device plugin's included).
  std::string per_pod;
  double total_requests = 0;
  for (const auto& [kind, count] : requests1) {
    if (kind.rfind("WATCH", 0) == 0) continue;
    auto before = requests0.find(kind);
    double n = static_cast<double>(count - (before == requests0.end() ? 0 : before->second)) /
               static_cast<double>(std::max<size_t>(1, total_ms.size()));
    if (n < 0.005) continue;
    total_requests += n;
    char buf[96];
    std::snprintf(buf, sizeof buf, "%s%s %.2f", per_pod.empty() ? "" : ", ", kind.c_str(), n);
    per_pod += buf;
  }
  std::printf("  API requests per pod: %.2f (%s)\n", total_requests, per_pod.c_str());
  std::printf("  device plugin backlog at the end: %llu pods, cleared %.2f s later\n",
              static_cast<unsigned long long>(backlog), drain_s);  // NOLINT(runtime/int)
  std::printf("  scheduler events queued at the end: %llu, posted %.2f s later\n",
              static_cast<unsigned long long>(  // NOLINT(runtime/int)
                  events_expected - std::min(events_expected, events_at_end)),
              events_drain_s);
  std::fflush(stdout);
  sched.Signal(SIGKILL);
  sched.Wait();
  server->Stop();
  std::system(("rm -rf " + dir).c_str());
  return errors.load() == 0 ? 0 : 1;
}
