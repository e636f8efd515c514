// hami-sim-kubelet: the simulated kubelet of one node (src/sim/kubelet). Registers the node,
// serves the device plugin Registration socket in <root-dir>/device-plugins, and runs the pods
// bound to the node as local processes until SIGINT/SIGTERM.
//
//   hami-sim-kubelet --kubeconfig kc --node-name node-a --root-dir /tmp/world/node-a
//       --label gpu=on --sim-config node-a.conf --sim-state /tmp/world/node-a/gpu-state
//
// --sim-config/--sim-state choose the node's simulated GPUs: containers (and the node's device
// plugin, started with the same two variables) see them through build/sim. Relative paths are
// taken from the working directory at start (containers are handed absolute ones). Prints
// "ready <kubelet port>" once the node is registered.
#include <limits.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>

#include "common/go_flags.h"
#include "common/log.h"
#include "common/ready_file.h"
#include "common/stop_signals.h"
#include "k8s/config.h"
#include "k8s/rest_client.h"
#include "sim/gpu/config.h"
#include "sim/kubelet/flags.h"
#include "sim/kubelet/kubelet.h"

namespace {

using hami::Result;
using hami::Status;
namespace sim = hami::sim;

int Die(const std::string& what) {
  HAMI_LOG(Error) << what;
  return 1;
}

std::filesystem::path SelfDir() {
  char self[PATH_MAX] = {};
  ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
  return n > 0 ? std::filesystem::path(std::string(self, static_cast<size_t>(n))).parent_path()
               : std::filesystem::path(".");
}

// Loads --sim-config (when given) to refuse a bad file before any container could trip on it,
// and warns when it does not describe this node.
Status CheckSimConfig(const sim::KubeletFlags& f) {
  if (f.sim_config.empty()) return hami::OkStatus();
  sim::SimConfig cfg;
  std::string error;
  if (!sim::LoadConfigFile(f.sim_config, &cfg, &error)) {
    return hami::InvalidArgumentError("--sim-config: " + error +
                                      " (format: src/sim/gpu/README.md)");
  }
  if (cfg.node.empty()) {
    HAMI_LOG(Warning) << "--sim-config " << f.sim_config
                      << " names no node: its derived GPU UUIDs are the same on every node "
                         "using it; add `node = "
                      << f.node_name << "` (or a uuid per device)";
  } else if (cfg.node != f.node_name) {
    HAMI_LOG(Warning) << "--sim-config " << f.sim_config << " describes node " << cfg.node
                      << ", not " << f.node_name;
  }
  HAMI_LOG(Info) << "simulated GPUs: " << cfg.devices.size() << " from " << f.sim_config
                 << ", state " << (f.sim_state.empty() ? "/tmp/hami-sim/state" : f.sim_state);
  return hami::OkStatus();
}

// The API client for --kubeconfig, else $KUBECONFIG; a failure's message is the whole reason.
Result<std::unique_ptr<hami::k8s::RestClient>> ApiClient(const sim::KubeletFlags& f) {
  std::string kubeconfig = f.kubeconfig;
  if (kubeconfig.empty()) {
    if (const char* kc = std::getenv("KUBECONFIG")) kubeconfig = kc;
  }
  if (kubeconfig.empty()) {
    return hami::InvalidArgumentError("--kubeconfig (or $KUBECONFIG) is required");
  }
  Result<hami::k8s::RestConfig> rest = hami::k8s::LoadKubeconfigFile(kubeconfig);
  if (!rest.ok()) return Status(rest.status().code(), "kubeconfig: " + rest.status().ToString());
  rest->user_agent = "hami-sim-kubelet/" + f.node_name;
  Result<std::unique_ptr<hami::k8s::RestClient>> client = hami::k8s::RestClient::Create(*rest);
  if (!client.ok()) {
    return Status(client.status().code(), "API client: " + client.status().ToString());
  }
  return client;
}

}  // namespace

int main(int argc, char** argv) {
  hami::StopSignals signals;  // before any thread starts: every thread inherits the mask
  CLI::App app{"hami-sim-kubelet: a simulated kubelet that runs pods as local processes"};
  const std::filesystem::path bin_dir = SelfDir();
  sim::KubeletFlags flags = sim::DefaultKubeletFlags(bin_dir);
  sim::AddKubeletFlags(app, &flags);
  if (std::optional<int> exit = hami::ParseGoStyleFlags(app, argc, argv)) return *exit;
  hami::log::SetVerbosity(flags.verbosity);

  sim::MakeKubeletPathsAbsolute(&flags);
  if (Status s = CheckSimConfig(flags); !s.ok()) return Die(s.message());
  const char* path = std::getenv("PATH");
  Result<sim::KubeletOptions> options = sim::KubeletOptionsFromFlags(
      flags, {.bin_dir = bin_dir,
              .path = path != nullptr ? std::optional<std::string>(path) : std::nullopt,
              .sanitizer_preload = HAMI_SANITIZER_PRELOAD});
  if (!options.ok()) return Die(options.status().message());
  Result<std::unique_ptr<hami::k8s::RestClient>> client = ApiClient(flags);
  if (!client.ok()) return Die(client.status().message());

  Result<std::unique_ptr<sim::Kubelet>> kubelet = sim::Kubelet::Start(**client, *options);
  if (!kubelet.ok()) return Die(kubelet.status().ToString());
  const std::string port = std::to_string((*kubelet)->port());
  if (Status s = hami::WriteReadyFile(flags.ready_file, {{"port", port}}); !s.ok()) {
    return Die(s.message());
  }
  std::printf("ready %s\n", port.c_str());
  std::fflush(stdout);
  int sig = signals.Wait();
  HAMI_LOG(Info) << "signal " << sig << ": stopping the node's containers";
  (*kubelet)->Stop();
  return 0;
}
