// hami-sim-kube-scheduler: the simulated kube-scheduler. Reads a KubeSchedulerConfiguration and
// schedules pending pods of its profile through the configured HTTP extenders until SIGINT or
// SIGTERM, as kube-scheduler would next to hami-scheduler:
//
//   hami-sim-kube-scheduler --config=/config/config.yaml [--kubeconfig=F] [--workers=N] [-v=4]
//
// The API server comes from --kubeconfig, else $KUBECONFIG, else the configuration's
// clientConnection.kubeconfig, else the in-cluster service account. Exit codes: 0 after a signal,
// 2 for unusable flags, configuration or kubeconfig, 1 when the scheduler cannot start.

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdlib>
#include <optional>
#include <string>
#include <vector>

#include "common/go_flags.h"
#include "common/log.h"
#include "common/stop_signals.h"
#include "k8s/config.h"
#include "k8s/rest_client.h"
#include "sim/kubescheduler/config.h"
#include "sim/kubescheduler/kube_scheduler.h"

int main(int argc, char** argv) {
  hami::StopSignals signals;  // before any thread starts: every thread inherits the mask
  CLI::App app{"hami-sim-kube-scheduler: kube-scheduler simulation driving HTTP extenders",
               "hami-sim-kube-scheduler"};
  std::string config_file, kubeconfig;
  int workers = 1;
  int bind_workers = 16;
  int verbosity = 0;
  app.add_option("--config", config_file, "KubeSchedulerConfiguration file")->required();
  app.add_option("--kubeconfig", kubeconfig,
                 "kubeconfig file (default: $KUBECONFIG, clientConnection.kubeconfig, "
                 "in-cluster)");
  app.add_option("--workers", workers, "parallel scheduling cycles (kube-scheduler: 1)")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  app.add_option("--bind-workers", bind_workers, "concurrent bindings")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  app.add_option("-v,--v", verbosity, "log verbosity")->capture_default_str();
  if (std::optional<int> exit = hami::ParseGoStyleFlags(app, argc, argv)) {
    return *exit == 0 ? 0 : 2;
  }
  hami::log::SetVerbosity(verbosity);

  hami::Result<hami::sim::KubeSchedulerConfig> config =
      hami::sim::LoadKubeSchedulerConfigFile(config_file);
  if (!config.ok()) {
    HAMI_LOG(Error) << "--config: " << config.status().ToString();
    return 2;
  }
  if (kubeconfig.empty()) {
    const char* env = std::getenv("KUBECONFIG");
    kubeconfig = env != nullptr ? env : config->kubeconfig;
  }
  hami::Result<hami::k8s::RestConfig> rest = hami::k8s::LoadRestConfig(kubeconfig);
  if (!rest.ok()) {
    HAMI_LOG(Error) << "kubeconfig: " << rest.status().ToString();
    return 2;
  }
  rest->qps = config->qps;
  rest->burst = static_cast<int>(config->burst);
  rest->user_agent = "hami-sim-kube-scheduler";
  hami::Result<std::unique_ptr<hami::k8s::RestClient>> client =
      hami::k8s::RestClient::Create(*rest);
  if (!client.ok()) {
    HAMI_LOG(Error) << "API client: " << client.status().ToString();
    return 2;
  }

  signal(SIGPIPE, SIG_IGN);

  hami::sim::KubeSchedulerOptions options;
  options.workers = workers;
  options.bind_workers = bind_workers;
  hami::sim::KubeScheduler scheduler(**client, *config, options);
  if (hami::Status s = scheduler.Start(); !s.ok()) {
    HAMI_LOG(Error) << "start: " << s.ToString();
    return 1;
  }
  int sig = signals.Wait();
  HAMI_LOG(Info) << "signal " << sig << ": stopping";
  scheduler.Stop();
  hami::sim::KubeSchedulerStats st = scheduler.Stats();
  HAMI_LOG(Info) << "scheduled " << st.scheduled << " pod(s) in " << st.cycles << " cycle(s); "
                 << st.unschedulable << " unschedulable, " << st.errors << " error(s)";
  return 0;
}
