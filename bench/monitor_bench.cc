// hami-monitor with 100 containers on one node (bench/RESULTS.md, "Node monitor"): the real
// binary against the simulated API server and driver, 100 pods bound to the node, each with a
// container directory holding a live region (memory charged on its device) as libvgpu leaves it.
// Reports the monitor's resident memory and the latency of GET /metrics.
//
//   build/bin/monitor_bench [--containers 100] [--scrapes 300]
#include <signal.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "common/go_flags.h"
#include "common/subprocess.h"
#include "k8s/config.h"
#include "k8s/object.h"
#include "k8s/rest_client.h"
#include "k8s/socket_transport.h"
#include "vgpu/region.h"

namespace {

namespace fs = std::filesystem;
using SteadyClock = std::chrono::steady_clock;

long RssKiB(int pid) {  // NOLINT(runtime/int)
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("VmRSS:", 0) == 0) return std::atol(line.c_str() + 6);
  }
  return -1;
}

// Reads the child's stdout until `marker`, returning the line.
std::string WaitLine(hami::Subprocess& p, const std::string& marker) {
  const std::string& out = p.ReadUntil(marker);
  size_t at = out.find(marker);
  if (at == std::string::npos) {
    std::fprintf(stderr, "no \"%s\" from the child:\n%s\n", marker.c_str(), out.c_str());
    std::exit(1);
  }
  size_t end = out.find('\n', at);
  return out.substr(at, end == std::string::npos ? std::string::npos : end - at);
}

}  // namespace

int main(int argc, char** argv) {
  int containers = 100, scrapes = 300;
  CLI::App app{
      "monitor_bench: hami-monitor resident memory and /metrics latency with many containers"};
  app.name("monitor_bench");
  app.add_option("--containers", containers, "containers with a region file")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("--scrapes", scrapes, "/metrics scrapes timed")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  if (std::optional<int> exit = hami::ParseGoStyleFlags(app, argc, argv)) return *exit;
  char tmpl[] = "/tmp/hami-monitor-bench-XXXXXX";
  if (mkdtemp(tmpl) == nullptr) return 1;
  const std::string dir = tmpl, bin = HAMI_BUILD_DIR "/bin/";
  std::string gpus;
  for (int i = 0; i < 8; ++i) gpus += "[device]\nname = NVIDIA A100-SXM4-80GB\nnuma_node = 0\n";
  std::ofstream(dir + "/gpu.conf") << gpus;

  hami::Subprocess api({bin + "hami-sim-apiserver", "--write-kubeconfig", dir + "/kubeconfig"},
                       {"PATH=/usr/bin:/bin"});
  WaitLine(api, "listening on");
  auto rest = hami::k8s::LoadKubeconfigFile(dir + "/kubeconfig");
  rest->qps = 0;
  auto client = hami::k8s::RestClient::Create(*rest);
  if (!client.ok()) return 1;

  // 100 pods on the node, and their containers' regions.
  std::vector<hami::vgpu::Region*> regions;
  for (int i = 0; i < containers; ++i) {
    std::string name = "p" + std::to_string(i);
    auto pod = (*client)->Create(
        hami::k8s::kPods, "default",
        hami::k8s::Object::parse(R"({"apiVersion":"v1","kind":"Pod","metadata":{"name":")" + name +
                                 R"("},"spec":{"nodeName":"node-a","containers":[{"name":"main",
                                 "image":"x"}]}})"));
    if (!pod.ok()) {
      std::fprintf(stderr, "%s\n", pod.status().ToString().c_str());
      return 1;
    }
    std::string cdir = dir + "/hook/containers/" + hami::k8s::Uid(*pod) + "_main";
    fs::create_directories(cdir);
    hami::vgpu::RegionInit init;
    init.device_count = 1;
    init.mem_limit[0] = 8ull << 30;
    init.sm_limit[0] = 50;
    char err[256];
    hami::vgpu::Region* r =
        hami::vgpu::Region::Open((cdir + "/r.cache").c_str(), init, err, sizeof(err));
    if (r == nullptr) {
      std::fprintf(stderr, "%s\n", err);
      return 1;
    }
    char uuids[1][hami::vgpu::kUuidLen] = {};
    std::snprintf(uuids[0], sizeof(uuids[0]), "GPU-00000000-0000-4000-8000-%012d", i % 8);
    r->SetDevices(1, uuids);
    int slot = r->RegisterSelf();
    r->Reserve(slot, 0, (512ull + static_cast<uint64_t>(i)) << 20, hami::vgpu::MemKind::kData);
    regions.push_back(r);
  }

  // The monitor's log goes to a file: a pipe nobody drains would fill with its lines (one per
  // container) and block it.
  hami::Subprocess monitor(
      {"/bin/sh", "-c",
       "exec " + bin + "hami-monitor --metrics-bind-address=127.0.0.1:0 --update-interval=1s 2>" +
           dir + "/monitor.log"},
      {"PATH=/usr/bin:/bin", "NODE_NAME=node-a", "KUBECONFIG=" + dir + "/kubeconfig",
       "HOOK_PATH=" + dir + "/hook", "LD_LIBRARY_PATH=" HAMI_BUILD_DIR "/sim",
       "HAMI_SIM_CONFIG=" + dir + "/gpu.conf", "HAMI_SIM_STATE=" + dir + "/gpu-state"});
  std::string line = WaitLine(monitor, "metrics on ");
  std::string url = "http://" + line.substr(11) + "/metrics";
  auto transport = hami::k8s::SocketTransport::Create({});
  if (!transport.ok()) return 1;
  // Until every container is on the page (pods synced, regions mapped).
  std::string page;
  for (auto end = SteadyClock::now() + std::chrono::seconds(30); SteadyClock::now() < end;) {
    hami::k8s::HttpRequest req;
    req.url = url;
    auto r = (*transport)->Do(req);
    page = r.ok() ? r->body : "";
    size_t n = 0;
    for (size_t at = 0; (at = page.find("\nhami_vgpu_memory_used_bytes{", at)) != std::string::npos;
         ++at) {
      ++n;
    }
    if (static_cast<int>(n) == containers) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  std::this_thread::sleep_for(std::chrono::seconds(3));  // a few update cycles
  std::vector<double> ms;
  for (int i = 0; i < scrapes; ++i) {
    hami::k8s::HttpRequest req;
    req.url = url;
    auto t0 = SteadyClock::now();
    auto r = (*transport)->Do(req);
    ms.push_back(std::chrono::duration<double, std::milli>(SteadyClock::now() - t0).count());
    if (!r.ok() || r->status != 200) return 1;
    page = r->body;
  }
  std::sort(ms.begin(), ms.end());
  std::printf(
      "containers=%d page_bytes=%zu scrape_ms p50=%.2f p90=%.2f p99=%.2f max=%.2f "
      "monitor_rss_mib=%.1f\n",
      containers, page.size(), ms[ms.size() / 2], ms[ms.size() * 9 / 10], ms[ms.size() * 99 / 100],
      ms.back(), RssKiB(monitor.pid()) / 1024.0);
  monitor.Signal(SIGTERM);
  monitor.Wait();
  api.Signal(SIGTERM);
  api.Wait();
  for (hami::vgpu::Region* r : regions) hami::vgpu::Region::Free(r);
  fs::remove_all(dir);
  return 0;
}
