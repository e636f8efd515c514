// hami-monitor: the node's vGPU monitor, a drop-in for the `vgpu-monitor` container of HAMi's
// device-plugin DaemonSet. Environment and flags as upstream's:
//
//   HOOK_PATH=/usr/local/vgpu NODE_NAME=node-a hami-monitor --metrics-bind-address=:9394
//
// Follows <HOOK_PATH>/containers/<podUID>_<container>/ (libvgpu's shared regions), matches them
// to the node's pods (pod informer on spec.nodeName), writes host PIDs into the regions so the
// SM limiter works in ordinary containers, runs the priority / utilisation-switch feedback, and
// serves /metrics (HAMi's names), /healthz and /readyz. Runs in the host PID namespace
// (hostPID: true), as upstream's. Prints "metrics on <host>:<port>" when serving (scripts wait
// for it). SIGTERM/SIGINT stop it.
#include <malloc.h>
#include <signal.h>
#include <time.h>

#include <CLI/CLI.hpp>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "common/duration.h"
#include "common/go_flags.h"
#include "common/log.h"
#include "k8s/config.h"
#include "k8s/rest_client.h"
#include "monitor/exporter.h"
#include "monitor/monitor.h"
#include "monitor/nvml_stats.h"
#include "monitor/pod_directory.h"
#include "net/http_server.h"
#include "net/server_flags.h"

namespace {

using hami::Result;
using hami::Status;

}  // namespace

int main(int argc, char** argv) {
  mallopt(M_ARENA_MAX, 2);  // a few threads, each allocating little
  CLI::App app{"hami-monitor: HAMi-compatible vGPU monitor and metrics exporter"};
  std::string metrics_bind = ":9394", hook_path = hami::EnvOr("HOOK_PATH"),
              node_name = hami::EnvOr("NODE_NAME");
  std::string kubeconfig = hami::EnvOr("KUBECONFIG"), context, nvml_library = "libnvidia-ml.so.1";
  std::string update_interval = "5s", resync = hami::EnvOr("HAMI_RESYNC_INTERVAL", "5m");
  std::string hook_wait = "30s";
  bool legacy = false, no_feedback = false;
  int verbosity = 0;
  app.add_option("--metrics-bind-address", metrics_bind, "metrics listen address")
      ->capture_default_str();
  app.add_flag("--legacy-metrics", legacy, "also export the pre-rename metric names");
  app.add_option("--hook-path", hook_path, "HOOK_PATH: the regions are in <hook-path>/containers");
  app.add_option("--node-name", node_name, "this node (default $NODE_NAME)");
  app.add_option("--kubeconfig", kubeconfig, "kubeconfig file (default $KUBECONFIG, in-cluster)");
  app.add_option("--context", context, "kubeconfig context");
  app.add_option("--nvml-library", nvml_library, "NVML to load")->capture_default_str();
  app.add_option("--hook-path-wait", hook_wait,
                 "how long to wait at start for the hook path to appear (the device plugin, "
                 "started beside the monitor, creates it)")
      ->capture_default_str();
  app.add_option("--update-interval", update_interval,
                 "how often regions, host PIDs and the feedback are updated")
      ->capture_default_str();
  app.add_option("--resync-interval", resync,
                 "a gone pod's directory is removed this long after its last change "
                 "(default $HAMI_RESYNC_INTERVAL or 5m)");
  app.add_flag("--no-feedback", no_feedback,
               "do not run the priority / utilisation-switch feedback loop");
  hami::net::ServerLimitFlags limits;
  hami::net::AddServerLimitFlags(app, &limits);
  app.add_option("-v,--v", verbosity, "log verbosity")->capture_default_str();
  if (std::optional<int> exit = hami::ParseGoStyleFlags(app, argc, argv)) return *exit;
  hami::log::SetVerbosity(verbosity);
  auto die = [](const std::string& what) {
    HAMI_LOG(Error) << what;
    return 1;
  };
  {
    hami::net::HttpServerOptions probe;  // the limits are checked before anything starts
    if (Status s = hami::net::ApplyServerLimitFlags(limits, &probe); !s.ok())
      return die(s.message());
  }
  if (hook_path.empty()) return die("the hook path is unknown: set HOOK_PATH or --hook-path");
  if (node_name.empty()) return die("the node name is unknown: set NODE_NAME or --node-name");
  {
    Result<std::chrono::milliseconds> wait = hami::ParseGoDuration(hook_wait);
    if (!wait.ok() || wait->count() < 0) {
      return die("--hook-path-wait \"" + hook_wait + "\": expected a duration like 30s");
    }
    auto is_dir = [&] {
      std::error_code ec;
      return std::filesystem::is_directory(hook_path, ec);
    };
    if (!is_dir() && wait->count() > 0) {
      HAMI_LOG(Warning) << "hook path " << hook_path << " does not exist yet; waiting up to "
                        << hook_wait << " for the device plugin to create it";
      auto until = std::chrono::steady_clock::now() + *wait;
      while (!is_dir() && std::chrono::steady_clock::now() < until) {
        std::this_thread::sleep_for(std::chrono::milliseconds(200));
      }
    }
    if (!is_dir()) {
      return die("the hook path " + hook_path +
                 " is not a directory: it must be the device plugin's HOOK_PATH (the chart's "
                 "/usr/local/vgpu), whose containers/ folder holds the containers' regions");
    }
  }
  Result<std::chrono::milliseconds> interval = hami::ParseGoDuration(update_interval);
  if (!interval.ok() || interval->count() <= 0) {
    return die("--update-interval \"" + update_interval + "\": expected a duration like 5s");
  }
  Result<std::chrono::milliseconds> resync_delay = hami::ParseGoDuration(resync);
  if (!resync_delay.ok() || resync_delay->count() < 0) {
    return die("resync interval \"" + resync + "\": expected a duration like 5m");
  }

  hami::net::HttpServerOptions http;
  if (Status s = hami::net::SplitHostPort(metrics_bind, &http.host, &http.port); !s.ok()) {
    return die("--metrics-bind-address: " + s.message());
  }
  if (Status s = hami::net::ApplyServerLimitFlags(limits, &http); !s.ok()) {
    return die(s.message());
  }

  Result<hami::k8s::RestConfig> rest = hami::k8s::LoadRestConfig(kubeconfig, context);
  if (!rest.ok()) return die("API server config: " + rest.status().ToString());
  rest->user_agent = "hami-monitor";
  rest->timeout = std::chrono::seconds(10);
  Result<std::unique_ptr<hami::k8s::RestClient>> client = hami::k8s::RestClient::Create(*rest);
  if (!client.ok()) return die("API client: " + client.status().ToString());

  // Without NVML the monitor still serves the regions' figures (and retries NVML each update).
  std::unique_ptr<hami::monitor::NvmlStats> nvml;
  std::string nvml_error;
  auto open_nvml = [&] {
    Result<std::unique_ptr<hami::monitor::NvmlStats>> n =
        hami::monitor::NvmlStats::Open(nvml_library);
    if (n.ok()) {
      nvml = std::move(*n);
      HAMI_LOG(Info) << "NVML loaded from " << nvml_library;
    } else if (n.status().message() != nvml_error) {
      nvml_error = n.status().message();
      HAMI_LOG(Warning) << nvml_error << "; host GPU metrics and host PIDs are unavailable";
    }
  };
  open_nvml();

  hami::monitor::InformerPodDirectory pods(**client, node_name);
  hami::monitor::MonitorOptions mo;
  mo.containers_dir = hook_path + "/containers";
  mo.resync_delay = std::chrono::duration_cast<std::chrono::seconds>(*resync_delay);
  mo.feedback = !no_feedback;
  // The monitor reads GPUs through this forwarder so that NVML may appear after start-up.
  struct LateGpuStats : hami::monitor::GpuStats {
    std::unique_ptr<hami::monitor::NvmlStats>* nvml;
    Result<std::vector<hami::monitor::HostGpu>> Gpus() override {
      if (*nvml == nullptr) return std::vector<hami::monitor::HostGpu>{};
      return (*nvml)->Gpus();
    }
    Result<std::vector<hami::monitor::GpuProcess>> Processes(const std::string& uuid) override {
      if (*nvml == nullptr) return std::vector<hami::monitor::GpuProcess>{};
      return (*nvml)->Processes(uuid);
    }
    Result<std::vector<hami::monitor::ProcessSample>> Samples(const std::string& uuid,
                                                              uint64_t since) override {
      if (*nvml == nullptr) return std::vector<hami::monitor::ProcessSample>{};
      return (*nvml)->Samples(uuid, since);
    }
  } gpus;
  gpus.nvml = &nvml;
  hami::monitor::Monitor monitor(mo, &gpus, &pods);

  // Idle or stalled clients cost the server no worker (net/http_server.h), so a few workers
  // serve scrapes and probes however many connections are open.
  http.worker_threads = 4;
  Result<std::unique_ptr<hami::net::HttpServer>> server = hami::net::HttpServer::Create(http);
  if (!server.ok()) return die("metrics server: " + server.status().ToString());
  hami::monitor::ExporterOptions eo;
  eo.node = node_name;
  eo.legacy = legacy;
  eo.version = HAMI_VERSION;
  eo.compiler = "g++";
  eo.platform = "linux";
  (*server)->SetMetricsHandler([&monitor, eo]() mutable {
    eo.now_s = static_cast<uint64_t>(time(nullptr));
    return hami::monitor::RenderMonitorMetrics(monitor.Snapshot(), eo);
  });
  (*server)->AddReadinessCheck("pods-synced", [&pods] { return pods.Synced(); });

  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);

  pods.Start();
  // The port first: a monitor that cannot serve exits with the reason before any thread runs.
  Result<int> port = (*server)->Start();
  if (!port.ok()) {
    pods.Stop();
    return die("metrics server: " + port.status().ToString());
  }
  std::mutex mu;
  std::condition_variable cv;
  bool stop = false;
  std::thread updater([&] {
    std::unique_lock<std::mutex> lock(mu);
    while (!stop) {
      lock.unlock();
      if (nvml == nullptr) open_nvml();
      hami::monitor::UpdateResult r = monitor.Update(std::chrono::system_clock::now());
      for (const std::string& p : r.problems) HAMI_VLOG(1) << p;
      lock.lock();
      cv.wait_for(lock, *interval, [&] { return stop; });
    }
  });
  std::printf("metrics on %s:%d\n", http.host.c_str(), *port);
  std::fflush(stdout);
  {
    std::error_code ec;
    if (!std::filesystem::is_directory(mo.containers_dir, ec)) {
      HAMI_LOG(Warning) << mo.containers_dir
                        << " does not exist yet: no container with libvgpu has run on this node, "
                           "or HOOK_PATH is not the device plugin's; it is read once it appears";
    }
  }
  HAMI_LOG(Info) << "monitoring " << mo.containers_dir << " for node " << node_name
                 << "; metrics on " << http.host << ":" << *port;

  int sig = 0;
  sigwait(&set, &sig);
  HAMI_LOG(Info) << "signal " << sig << ": shutting down";
  {
    std::lock_guard<std::mutex> lock(mu);
    stop = true;
  }
  cv.notify_all();
  updater.join();
  (*server)->Stop();
  pods.Stop();
  return 0;
}
