// Connection flood against hami-scheduler's extender and webhook port, served over TLS as the
// chart deploys it. The real binary runs against the in-process simulated API server (20 nodes
// with GPUs); this process then holds `--idle` plain TCP connections that never send a byte and
// `--stalled` TLS handshakes that stop after the first bytes of a record, and measures, from a
// fresh client (a new TLS connection per request, as a probe or a new API server connection
// would be), the latency of GET /healthz, POST /filter and POST /webhook: p50, p99 and max.
// Then it opens `--large` idle connections and reports the scheduler's resident memory per idle
// connection and that /healthz still answers.
//
//   flood_bench [--idle 500] [--stalled 20] [--requests 200] [--large 10000]
//               [--scheduler-bin PATH]
//
// The file descriptor limit is raised to its hard limit (the scheduler inherits it).
#include <arpa/inet.h>
#include <httplib.h>
#include <netinet/in.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "bench_gpus.h"
#include "common/file_util.h"
#include "common/go_flags.h"
#include "common/subprocess.h"
#include "device/node_registration.h"
#include "k8s/rest_client.h"
#include "net/tls.h"
#include "proc_status.h"
#include "sim/apiserver/api_server.h"

namespace {

using Json = nlohmann::json;
using SteadyClock = std::chrono::steady_clock;

size_t OpenFds(int pid) {
  size_t n = 0;
  std::error_code ec;
  for (auto it = std::filesystem::directory_iterator("/proc/" + std::to_string(pid) + "/fd", ec);
       !ec && it != std::filesystem::directory_iterator(); it.increment(ec)) {
    ++n;
  }
  return n;
}

int Connect(int port) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (fd < 0 || ::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    if (fd >= 0) ::close(fd);
    return -1;
  }
  return fd;
}

struct Stats {
  std::vector<double> ms;
  int failed = 0;
};

void Report(const char* what, Stats s) {
  std::sort(s.ms.begin(), s.ms.end());
  auto at = [&](double p) {
    return s.ms.empty() ? 0.0 : s.ms[static_cast<size_t>(p * static_cast<double>(s.ms.size() - 1))];
  };
  std::printf("  %-16s n=%zu failed=%d  p50 %.2f ms  p99 %.2f ms  max %.2f ms\n", what, s.ms.size(),
              s.failed, at(0.5), at(0.99), s.ms.empty() ? 0.0 : s.ms.back());
}

// One request on a new TLS connection (no verification: the point is the server's latency).
bool Once(int port, const std::string& method, const std::string& path, const std::string& body,
          Stats* stats) {
  auto t0 = SteadyClock::now();
  httplib::SSLClient cli("127.0.0.1", port);
  cli.enable_server_certificate_verification(false);
  cli.set_keep_alive(false);
  cli.set_tcp_nodelay(true);  // as Go clients (kube-apiserver, probes) do
  cli.set_connection_timeout(30);
  cli.set_read_timeout(30);
  httplib::Result r = method == "GET" ? cli.Get(path) : cli.Post(path, body, "application/json");
  double ms = std::chrono::duration<double, std::milli>(SteadyClock::now() - t0).count();
  if (!r || r->status != 200) {
    ++stats->failed;
    return false;
  }
  stats->ms.push_back(ms);
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
  int idle = 500, stalled = 20, requests = 200, large = 10000;
  std::string scheduler_bin = HAMI_SCHEDULER_BIN;
  CLI::App app{
      "flood_bench: hami-scheduler's TLS port under a connection flood: request latency with idle "
      "and stalled connections open, then memory per idle connection"};
  app.name("flood_bench");
  app.add_option("--idle", idle, "plain TCP connections that never send a byte")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  app.add_option("--stalled", stalled, "TLS handshakes that stop after the first bytes of a record")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  app.add_option(
         "--requests", requests,
         "requests timed per endpoint (/healthz, /filter, /webhook), each on a new TLS connection")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("--large", large,
                 "idle connections opened afterwards to measure memory per connection (0 = skip)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  app.add_option("--scheduler-bin", scheduler_bin, "the hami-scheduler binary to measure")
      ->capture_default_str();
  if (std::optional<int> exit = hami::ParseGoStyleFlags(app, argc, argv)) return *exit;
  rlimit nofile{};
  ::getrlimit(RLIMIT_NOFILE, &nofile);
  nofile.rlim_cur = nofile.rlim_max;
  ::setrlimit(RLIMIT_NOFILE, &nofile);

  hami::sim::ApiServerOptions api;
  api.worker_threads = 64;
  auto server = hami::sim::ApiServer::Start(api).value();
  std::string dir = "/tmp/hami-flood-bench-" + std::to_string(getpid());
  std::filesystem::create_directories(dir);
  if (!server->WriteKubeconfig(dir + "/kubeconfig").ok()) return 1;
  hami::k8s::RestConfig cfg;
  cfg.server = server->url();
  cfg.qps = 0;
  auto client = hami::k8s::RestClient::Create(cfg).value();
  std::vector<std::string> names;
  for (int n = 0; n < 20; ++n) {
    std::vector<hami::device::DeviceInfo> gpus = hami::bench::V100Node(n);
    Json node;
    node["metadata"]["name"] = "node-" + std::to_string(n);
    node["metadata"]["annotations"]["hami.io/node-nvidia-register"] =
        hami::device::EncodeNodeDevicesJson(gpus);
    node["status"]["allocatable"]["nvidia.com/gpu"] = "80";
    if (!client->Create(hami::k8s::kNodes, "", node).ok()) return 1;
    names.push_back("node-" + std::to_string(n));
  }
  Json pod;
  pod["apiVersion"] = "v1";
  pod["kind"] = "Pod";
  pod["metadata"] = {{"name", "probe"}, {"namespace", "default"}, {"uid", "uid-probe"}};
  pod["spec"]["schedulerName"] = "hami-scheduler";
  pod["spec"]["containers"] = Json::array({Json{
      {"name", "main"},
      {"image", "x"},
      {"resources", {{"limits", {{"nvidia.com/gpu", "1"}, {"nvidia.com/gpumem", "1024"}}}}}}});
  pod = client->Create(hami::k8s::kPods, "default", pod).value();
  std::string filter_body = Json{{"pod", pod}, {"nodenames", names}}.dump();
  Json review = {{"apiVersion", "admission.k8s.io/v1"},
                 {"kind", "AdmissionReview"},
                 {"request",
                  {{"uid", "review-1"},
                   {"kind", {{"group", ""}, {"version", "v1"}, {"kind", "Pod"}}},
                   {"resource", {{"group", ""}, {"version", "v1"}, {"resource", "pods"}}},
                   {"namespace", "default"},
                   {"operation", "CREATE"},
                   {"object", pod}}}};
  std::string webhook_body = review.dump();

  auto pem =
      hami::net::GenerateSelfSignedCertificate("hami-scheduler", {"localhost"}, {"127.0.0.1"})
          .value();
  if (!hami::WriteFileAtomically(dir + "/tls.crt", pem.cert_pem).ok() ||
      !hami::WriteFileAtomically(dir + "/tls.key", pem.key_pem).ok()) {
    return 1;
  }
  std::string cmd =
      "exec " + scheduler_bin + " --kubeconfig=" + dir + "/kubeconfig" +
      " --http_bind=127.0.0.1:0 --metrics-bind-address=127.0.0.1:0 --cert_file=" + dir +
      "/tls.crt --key_file=" + dir + "/tls.key --kube-qps=0 2>" + dir + "/scheduler.log";
  hami::Subprocess sched({"/bin/sh", "-c", cmd}, {"PATH=/usr/bin:/bin"});
  std::string out = sched.ReadUntil("\n");
  // "listening on <url> (metrics on <host>:<port>)": the line every hami-scheduler prints, older
  // builds compared with --scheduler-bin included (the ready file is newer than some of them).
  size_t colon = out.rfind(':', out.find(" (metrics"));
  int port = std::atoi(out.c_str() + colon + 1);
  size_t mcolon = out.rfind(':', out.rfind(')'));
  int mport = out.find("(metrics on ") == std::string::npos || mcolon == std::string::npos
                  ? 0
                  : std::atoi(out.c_str() + mcolon + 1);
  if (port <= 0 || mport <= 0) {
    std::fprintf(stderr, "scheduler did not start: %s\n", out.c_str());
    return 1;
  }
  httplib::Client metrics("127.0.0.1", mport);
  for (int i = 0; i < 600; ++i) {
    auto r = metrics.Get("/readyz");
    if (r && r->status == 200) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  std::printf("hami-scheduler %s (TLS on :%d), %d nodes\n", scheduler_bin.c_str(), port, 20);

  auto measure = [&](const char* title) {
    std::printf("%s\n", title);
    Stats h, f, w;
    for (int i = 0; i < requests; ++i) {
      Once(port, "GET", "/healthz", "", &h);
      Once(port, "POST", "/filter", filter_body, &f);
      Once(port, "POST", "/webhook", webhook_body, &w);
    }
    Report("GET /healthz", h);
    Report("POST /filter", f);
    Report("POST /webhook", w);
  };
  measure("no other connections:");

  std::vector<int> held;
  for (int i = 0; i < idle; ++i) held.push_back(Connect(port));
  for (int i = 0; i < stalled; ++i) {
    int fd = Connect(port);
    if (fd >= 0) (void)::send(fd, "\x16\x03\x01\x02\x00\x01", 6, MSG_NOSIGNAL);
    held.push_back(fd);
  }
  size_t ok =
      static_cast<size_t>(std::count_if(held.begin(), held.end(), [](int fd) { return fd >= 0; }));
  char title[160];
  std::snprintf(title, sizeof title,
                "with %d idle TCP connections and %d stalled TLS handshakes open (%zu connected):",
                idle, stalled, ok);
  measure(title);
  for (int fd : held) {
    if (fd >= 0) ::close(fd);
  }
  held.clear();

  if (large > 0) {
    std::this_thread::sleep_for(std::chrono::seconds(1));  // let the closes above settle
    size_t fds_before = OpenFds(sched.pid());
    long rss_before = hami::bench::ProcStatusKb(sched.pid(), "VmRSS:");  // NOLINT(runtime/int)
    for (int i = 0; i < large; ++i) {
      int fd = Connect(port);
      if (fd < 0) break;
      held.push_back(fd);
    }
    // Until the scheduler has accepted them all (or 30 s).
    for (int i = 0; i < 300 && OpenFds(sched.pid()) < fds_before + held.size(); ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    size_t accepted = OpenFds(sched.pid()) - fds_before;
    long rss_after = hami::bench::ProcStatusKb(sched.pid(), "VmRSS:");  // NOLINT(runtime/int)
    Stats h;
    for (int i = 0; i < 20; ++i) Once(port, "GET", "/healthz", "", &h);
    std::printf("with %zu idle connections open (%zu accepted by the scheduler):\n", held.size(),
                accepted);
    std::printf(
        "  scheduler VmRSS %ld -> %ld KiB: %.0f bytes per idle connection\n", rss_before, rss_after,
        accepted
            ? static_cast<double>(rss_after - rss_before) * 1024.0 / static_cast<double>(accepted)
            : 0.0);
    Report("GET /healthz", h);
    for (int fd : held) ::close(fd);
  }
  std::filesystem::remove_all(dir);
  return 0;
}
