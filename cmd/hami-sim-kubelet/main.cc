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
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "common/duration.h"
#include "common/go_flags.h"
#include "common/log.h"
#include "common/ready_file.h"
#include "common/stop_signals.h"
#include "k8s/config.h"
#include "k8s/rest_client.h"
#include "sim/gpu/config.h"
#include "sim/kubelet/kubelet.h"

namespace {

std::filesystem::path SelfDir() {
  char self[PATH_MAX] = {};
  ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
  return n > 0 ? std::filesystem::path(std::string(self, static_cast<size_t>(n))).parent_path()
               : std::filesystem::path(".");
}

bool SplitKeyValue(const std::string& kv, std::string* k, std::string* v) {
  size_t eq = kv.find('=');
  if (eq == std::string::npos || eq == 0) return false;
  *k = kv.substr(0, eq);
  *v = kv.substr(eq + 1);
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  hami::StopSignals signals;  // before any thread starts: every thread inherits the mask
  CLI::App app{"hami-sim-kubelet: a simulated kubelet that runs pods as local processes"};
  std::string node_name, kubeconfig, root_dir, sim_config, sim_state, address = "127.0.0.1";
  std::string heartbeat = "10s", stand_in;
  bool stand_in_for_gpu = false, pid_namespaces = false;
  std::string sim_lib_dir = (SelfDir().parent_path() / "sim").string();
  std::vector<std::string> labels, capacity, env;
  int verbosity = 0;
  app.add_option("--node-name", node_name, "the node to register")->required();
  app.add_option("--kubeconfig", kubeconfig, "kubeconfig file (default $KUBECONFIG)");
  app.add_option("--root-dir", root_dir, "node directory (default /tmp/hami-sim-kubelet/<node>)");
  app.add_option("--label", labels, "node label k=v (repeatable)");
  app.add_option("--capacity", capacity, "node capacity k=v, e.g. cpu=64 (repeatable)");
  app.add_option("--env", env, "environment of every container K=V (repeatable)");
  app.add_option("--sim-config", sim_config, "simulated GPUs of this node (HAMI_SIM_CONFIG)");
  app.add_option("--sim-state", sim_state, "simulated GPU state file (HAMI_SIM_STATE)");
  app.add_option("--sim-lib-dir", sim_lib_dir, "directory of the simulated driver libraries")
      ->capture_default_str();
  app.add_option("--stand-in", stand_in,
                 "command line of the stand-in GPU workload (default: vgpu_probe workload)");
  app.add_flag("--stand-in-for-gpu-containers", stand_in_for_gpu,
               "run the stand-in workload in every container given a GPU, whatever its command");
  app.add_flag("--pid-namespaces", pid_namespaces,
               "run each container in a PID namespace of its own (needs root)");
  std::string nvidia_smi;
  CLI::Option* smi_flag = app.add_option(
      "--nvidia-smi", nvidia_smi,
      "program GPU containers run as nvidia-smi (default: hamictl next to this binary; \"\" "
      "for none)");
  app.add_option("--address", address, "node address")->capture_default_str();
  app.add_option("--heartbeat", heartbeat, "node status and lease period")->capture_default_str();
  std::string ready_file;
  app.add_option("--ready-file", ready_file,
                 "once the node is registered, write its port and PID to this file as JSON");
  app.add_option("-v,--v", verbosity, "log verbosity")->capture_default_str();
  if (std::optional<int> exit = hami::ParseGoStyleFlags(app, argc, argv)) return *exit;
  hami::log::SetVerbosity(verbosity);
  auto die = [](const std::string& what) {
    HAMI_LOG(Error) << what;
    return 1;
  };

  // Containers run in directories of their own: every path they are handed must be absolute.
  auto absolute = [](std::string& p) {
    if (!p.empty()) p = std::filesystem::absolute(p).lexically_normal().string();
  };
  for (std::string* p : {&root_dir, &sim_config, &sim_state, &sim_lib_dir}) absolute(*p);
  if (!sim_config.empty()) {
    hami::sim::SimConfig cfg;
    std::string error;
    if (!hami::sim::LoadConfigFile(sim_config, &cfg, &error)) {
      return die("--sim-config: " + error + " (format: src/sim/gpu/README.md)");
    }
    if (cfg.node.empty()) {
      HAMI_LOG(Warning) << "--sim-config " << sim_config
                        << " names no node: its derived GPU UUIDs are the same on every node "
                           "using it; add `node = "
                        << node_name << "` (or a uuid per device)";
    } else if (cfg.node != node_name) {
      HAMI_LOG(Warning) << "--sim-config " << sim_config << " describes node " << cfg.node
                        << ", not " << node_name;
    }
    HAMI_LOG(Info) << "simulated GPUs: " << cfg.devices.size() << " from " << sim_config
                   << ", state " << (sim_state.empty() ? "/tmp/hami-sim/state" : sim_state);
  }

  hami::sim::KubeletOptions o;
  o.stand_in_for_gpu_containers = stand_in_for_gpu;
  o.pid_namespaces = pid_namespaces;
  o.node_name = node_name;
  o.root_dir = root_dir.empty() ? "/tmp/hami-sim-kubelet/" + node_name : root_dir;
  o.address = address;
  hami::Result<std::chrono::milliseconds> hb = hami::ParseGoDuration(heartbeat);
  if (!hb.ok() || hb->count() <= 0) return die("--heartbeat \"" + heartbeat + "\": not a duration");
  o.heartbeat = *hb;
  for (const std::string& l : labels) {
    std::string k, v;
    if (!SplitKeyValue(l, &k, &v)) return die("--label \"" + l + "\": expected k=v");
    o.labels[k] = v;
  }
  for (const std::string& c : capacity) {
    std::string k, v;
    if (!SplitKeyValue(c, &k, &v)) return die("--capacity \"" + c + "\": expected k=v");
    o.capacity[k] = v;
  }
  const char* path = std::getenv("PATH");
  o.node_env.push_back(std::string("PATH=") + (path ? path : "/usr/local/bin:/usr/bin:/bin"));
  o.node_env.push_back("HOME=/tmp");
  o.node_env.push_back("LD_LIBRARY_PATH=" + sim_lib_dir);
  if (!sim_config.empty()) o.node_env.push_back("HAMI_SIM_CONFIG=" + sim_config);
  if (!sim_state.empty()) o.node_env.push_back("HAMI_SIM_STATE=" + sim_state);
  if (std::string runtime = HAMI_SANITIZER_PRELOAD; !runtime.empty()) {
    // A sanitized build's libvgpu.so needs its sanitizer runtime loaded ahead of it, so the
    // containers of a node built that way preload the runtime first (the plugin's library is
    // appended after it); their leaks are the workloads' business, not this build's.
    o.node_env.push_back("LD_PRELOAD=" + runtime);
    o.node_env.push_back("ASAN_OPTIONS=detect_leaks=0:verify_asan_link_order=0");
  }
  for (const std::string& e : env) {
    std::string k, v;
    if (!SplitKeyValue(e, &k, &v)) return die("--env \"" + e + "\": expected K=V");
    o.node_env.push_back(e);
  }
  if (smi_flag->count() == 0) {
    std::filesystem::path hamictl = SelfDir() / "hamictl";
    if (access(hamictl.c_str(), X_OK) == 0) nvidia_smi = hamictl.string();
  }
  if (!nvidia_smi.empty() && access(nvidia_smi.c_str(), X_OK) != 0) {
    return die("--nvidia-smi " + nvidia_smi + ": not an executable (give \"\" for none)");
  }
  if (!nvidia_smi.empty()) o.nvidia_smi = std::filesystem::absolute(nvidia_smi).string();
  if (stand_in.empty()) {
    std::filesystem::path probe = SelfDir() / "vgpu_probe";
    if (std::filesystem::exists(probe)) o.stand_in = {probe.string(), "workload"};
  } else {
    std::istringstream words(stand_in);
    for (std::string w; words >> w;) o.stand_in.push_back(w);
  }

  if (kubeconfig.empty()) {
    if (const char* kc = std::getenv("KUBECONFIG")) kubeconfig = kc;
  }
  if (kubeconfig.empty()) return die("--kubeconfig (or $KUBECONFIG) is required");
  hami::Result<hami::k8s::RestConfig> rest = hami::k8s::LoadKubeconfigFile(kubeconfig);
  if (!rest.ok()) return die("kubeconfig: " + rest.status().ToString());
  rest->user_agent = "hami-sim-kubelet/" + node_name;
  hami::Result<std::unique_ptr<hami::k8s::RestClient>> client =
      hami::k8s::RestClient::Create(*rest);
  if (!client.ok()) return die("API client: " + client.status().ToString());

  hami::Result<std::unique_ptr<hami::sim::Kubelet>> kubelet =
      hami::sim::Kubelet::Start(**client, o);
  if (!kubelet.ok()) return die(kubelet.status().ToString());
  const std::string port = std::to_string((*kubelet)->port());
  if (hami::Status s = hami::WriteReadyFile(ready_file, {{"port", port}}); !s.ok()) {
    return die(s.message());
  }
  std::printf("ready %s\n", port.c_str());
  std::fflush(stdout);
  int sig = signals.Wait();
  HAMI_LOG(Info) << "signal " << sig << ": stopping the node's containers";
  (*kubelet)->Stop();
  return 0;
}
