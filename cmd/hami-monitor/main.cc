// hami-monitor: the node's vGPU monitor, a drop-in for the `vgpu-monitor` container of HAMi's
// device-plugin DaemonSet. Environment and flags as upstream's:
//
//   HOOK_PATH=/usr/local/vgpu NODE_NAME=node-a hami-monitor --metrics-bind-address=:9394
//
// Follows <HOOK_PATH>/containers/<podUID>_<container>/ (libvgpu's shared regions), matches them
// to the node's pods (pod informer on spec.nodeName), writes host PIDs into the regions so the
// SM limiter works in ordinary containers, runs the priority / utilisation-switch feedback, and
// serves /metrics (HAMi's names), /healthz and /readyz. Runs in the host PID namespace
// (hostPID: true), as upstream's. Prints "metrics on <host>:<port>" when serving and writes
// the --ready-file then (common/ready_file.h). SIGTERM/SIGINT stop it.
#include <malloc.h>
#include <time.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <filesystem>
#include <optional>
#include <string>

#include "common/go_flags.h"
#include "common/log.h"
#include "common/ready_file.h"
#include "common/stop_signals.h"
#include "k8s/config.h"
#include "k8s/rest_client.h"
#include "monitor/exporter.h"
#include "monitor/flags.h"
#include "monitor/monitor.h"
#include "monitor/nvml_stats.h"
#include "monitor/pod_directory.h"
#include "monitor/runner.h"
#include "net/http_server.h"

namespace {

using hami::Result;
using hami::Status;

namespace monitor = hami::monitor;

int Die(const std::string& what) {
  HAMI_LOG(Error) << what;
  return 1;
}

monitor::MonitorOptions MonitorOptionsOf(const monitor::MonitorConfig& c) {
  monitor::MonitorOptions mo;
  mo.containers_dir = c.hook_path + "/containers";
  mo.resync_delay = c.resync_delay;
  mo.feedback = c.feedback;
  return mo;
}

// /metrics renders the monitor's latest snapshot; /readyz waits for the pod informer's sync.
void ServeMetrics(hami::net::HttpServer& server, monitor::Monitor& m,
                  monitor::InformerPodDirectory& pods, const monitor::MonitorConfig& c) {
  monitor::ExporterOptions eo;
  eo.node = c.node_name;
  eo.legacy = c.legacy;
  eo.version = HAMI_VERSION;
  eo.compiler = "g++";
  eo.platform = "linux";
  server.SetMetricsHandler([&m, eo]() mutable {
    eo.now_s = static_cast<uint64_t>(time(nullptr));
    return monitor::RenderMonitorMetrics(m.Snapshot(), eo);
  });
  server.AddReadinessCheck("pods-synced", [&pods] { return pods.Synced(); });
}

// A missing containers directory is normal on a fresh node, and a hint when HOOK_PATH is wrong.
void WarnIfNoContainersDir(const std::string& containers_dir) {
  std::error_code ec;
  if (!std::filesystem::is_directory(containers_dir, ec)) {
    HAMI_LOG(Warning) << containers_dir
                      << " does not exist yet: no container with libvgpu has run on this node, "
                         "or HOOK_PATH is not the device plugin's; it is read once it appears";
  }
}

}  // namespace

int main(int argc, char** argv) {
  mallopt(M_ARENA_MAX, 2);  // a few threads, each allocating little
  CLI::App app{"hami-monitor: HAMi-compatible vGPU monitor and metrics exporter"};
  monitor::MonitorFlags flags = monitor::DefaultMonitorFlags();
  monitor::AddMonitorFlags(app, &flags);
  if (std::optional<int> exit = hami::ParseGoStyleFlags(app, argc, argv)) return *exit;
  hami::log::SetVerbosity(flags.verbosity);
  Result<monitor::MonitorConfig> config = monitor::MonitorConfigFromFlags(flags);
  if (!config.ok()) return Die(config.status().message());
  hami::RealClock clock;
  if (Status s = monitor::AwaitHookPath(config->hook_path, config->hook_wait, clock); !s.ok()) {
    return Die(s.message());
  }
  // After the wait (a signal during it ends the process at once), before any thread starts:
  // every thread inherits the mask.
  hami::StopSignals signals;

  Result<hami::k8s::RestConfig> rest = hami::k8s::LoadRestConfig(config->kubeconfig,
                                                                  config->context);
  if (!rest.ok()) return Die("API server config: " + rest.status().ToString());
  rest->user_agent = "hami-monitor";
  rest->timeout = std::chrono::seconds(10);
  Result<std::unique_ptr<hami::k8s::RestClient>> client = hami::k8s::RestClient::Create(*rest);
  if (!client.ok()) return Die("API client: " + client.status().ToString());

  // Without NVML the monitor still serves the regions' figures (and retries NVML each update).
  monitor::LateNvmlStats gpus(config->nvml_library);
  gpus.TryOpen();
  monitor::InformerPodDirectory pods(**client, config->node_name);
  const monitor::MonitorOptions mo = MonitorOptionsOf(*config);
  monitor::Monitor mon(mo, &gpus, &pods);
  monitor::Runner runner(mon, clock,
                         {.interval = config->update_interval,
                          .before_update = [&gpus] { gpus.TryOpen(); }});

  // Idle or stalled clients cost the server no worker (net/http_server.h), so a few workers
  // serve scrapes and probes however many connections are open.
  hami::net::HttpServerOptions http = config->http;
  http.worker_threads = 4;
  Result<std::unique_ptr<hami::net::HttpServer>> server = hami::net::HttpServer::Create(http);
  if (!server.ok()) return Die("metrics server: " + server.status().ToString());
  ServeMetrics(**server, mon, pods, *config);

  pods.Start();
  // The port first: a monitor that cannot serve exits with the reason before any update runs.
  Result<int> port = (*server)->Start();
  if (!port.ok()) {
    pods.Stop();
    return Die("metrics server: " + port.status().ToString());
  }
  runner.Start();
  const std::string metrics_addr = http.host + ":" + std::to_string(*port);
  if (Status s = hami::WriteReadyFile(config->ready_file, {{"metrics", metrics_addr}}); !s.ok()) {
    runner.Stop();
    (*server)->Stop();
    pods.Stop();
    return Die(s.message());
  }
  std::printf("metrics on %s:%d\n", http.host.c_str(), *port);
  std::fflush(stdout);
  WarnIfNoContainersDir(mo.containers_dir);
  HAMI_LOG(Info) << "monitoring " << mo.containers_dir << " for node " << config->node_name
                 << "; metrics on " << http.host << ":" << *port;

  int sig = signals.Wait();
  HAMI_LOG(Info) << "signal " << sig << ": shutting down";
  runner.Stop();
  (*server)->Stop();
  pods.Stop();
  return 0;
}
