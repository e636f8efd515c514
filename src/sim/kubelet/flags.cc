#include "sim/kubelet/flags.h"

#include <unistd.h>

#include <CLI/CLI.hpp>
#include <map>
#include <sstream>

#include "common/duration.h"

namespace hami::sim {

KubeletFlags DefaultKubeletFlags(const std::filesystem::path& bin_dir) {
  KubeletFlags f;
  f.sim_lib_dir = (bin_dir.parent_path() / "sim").string();
  return f;
}

void AddKubeletFlags(CLI::App& app, KubeletFlags* f) {
  app.add_option("--node-name", f->node_name, "the node to register")->required();
  app.add_option("--kubeconfig", f->kubeconfig, "kubeconfig file (default $KUBECONFIG)");
  app.add_option("--root-dir", f->root_dir,
                 "node directory (default /tmp/hami-sim-kubelet/<node>)");
  app.add_option("--label", f->labels, "node label k=v (repeatable)");
  app.add_option("--capacity", f->capacity, "node capacity k=v, e.g. cpu=64 (repeatable)");
  app.add_option("--env", f->env, "environment of every container K=V (repeatable)");
  app.add_option("--sim-config", f->sim_config, "simulated GPUs of this node (HAMI_SIM_CONFIG)");
  app.add_option("--sim-state", f->sim_state, "simulated GPU state file (HAMI_SIM_STATE)");
  app.add_option("--sim-lib-dir", f->sim_lib_dir, "directory of the simulated driver libraries")
      ->capture_default_str();
  app.add_option("--stand-in", f->stand_in,
                 "command line of the stand-in GPU workload (default: vgpu_probe workload)");
  app.add_flag("--stand-in-for-gpu-containers", f->stand_in_for_gpu,
               "run the stand-in workload in every container given a GPU, whatever its command");
  app.add_option("--cdi-spec-dir", f->cdi_spec_dirs,
                 "a CDI spec directory of the container runtime (repeatable); with one, a CDI "
                 "device no spec there defines fails the container, as containerd does");
  app.add_flag("--pid-namespaces", f->pid_namespaces,
               "run each container in a PID namespace of its own (needs root)");
  // A callback rather than a variable, to tell `--nvidia-smi ""` (none) from no flag.
  app.add_option_function<std::string>(
      "--nvidia-smi",
      [f](const std::string& v) {
        f->nvidia_smi = v;
        f->nvidia_smi_given = true;
      },
      "program GPU containers run as nvidia-smi (default: hamictl next to this binary; \"\" "
      "for none)");
  app.add_option("--address", f->address, "node address")->capture_default_str();
  app.add_option("--heartbeat", f->heartbeat, "node status and lease period")
      ->capture_default_str();
  app.add_option("--ready-file", f->ready_file,
                 "once the node is registered, write its port and PID to this file as JSON");
  app.add_option("-v,--v", f->verbosity, "log verbosity")->capture_default_str();
}

void MakeKubeletPathsAbsolute(KubeletFlags* f) {
  for (std::string* p : {&f->root_dir, &f->sim_config, &f->sim_state, &f->sim_lib_dir}) {
    if (!p->empty()) *p = std::filesystem::absolute(*p).lexically_normal().string();
  }
  for (std::string& p : f->cdi_spec_dirs) {
    if (!p.empty()) p = std::filesystem::absolute(p).lexically_normal().string();
  }
}

namespace {

bool SplitKeyValue(const std::string& kv, std::string* k, std::string* v) {
  size_t eq = kv.find('=');
  if (eq == std::string::npos || eq == 0) return false;
  *k = kv.substr(0, eq);
  *v = kv.substr(eq + 1);
  return true;
}

// Adds each k=v of a repeatable flag to `out`, a later key replacing an earlier one.
Status ParseKeyValues(const std::string& flag, const std::vector<std::string>& given,
                      std::map<std::string, std::string>* out) {
  for (const std::string& kv : given) {
    std::string k, v;
    if (!SplitKeyValue(kv, &k, &v)) {
      return InvalidArgumentError(flag + " \"" + kv + "\": expected k=v");
    }
    (*out)[k] = v;
  }
  return OkStatus();
}

Status AddNodeEnv(const KubeletFlags& f, const KubeletHost& host, KubeletOptions* o) {
  o->node_env.push_back("PATH=" + host.path.value_or("/usr/local/bin:/usr/bin:/bin"));
  o->node_env.push_back("HOME=/tmp");
  o->node_env.push_back("LD_LIBRARY_PATH=" + f.sim_lib_dir);
  if (!f.sim_config.empty()) o->node_env.push_back("HAMI_SIM_CONFIG=" + f.sim_config);
  if (!f.sim_state.empty()) o->node_env.push_back("HAMI_SIM_STATE=" + f.sim_state);
  if (!host.sanitizer_preload.empty()) {
    // A sanitized build's libvgpu.so needs its sanitizer runtime loaded ahead of it, so the
    // containers of a node built that way preload the runtime first (the plugin's library is
    // appended after it); their leaks are the workloads' business, not this build's.
    o->node_env.push_back("LD_PRELOAD=" + host.sanitizer_preload);
    o->node_env.push_back("ASAN_OPTIONS=detect_leaks=0:verify_asan_link_order=0");
  }
  for (const std::string& e : f.env) {
    std::string k, v;
    if (!SplitKeyValue(e, &k, &v)) return InvalidArgumentError("--env \"" + e + "\": expected K=V");
    o->node_env.push_back(e);
  }
  return OkStatus();
}

// The nvidia-smi of GPU containers and the stand-in workload, defaulting to hamictl and
// vgpu_probe next to the binary when they are there.
Status AddPrograms(const KubeletFlags& f, const KubeletHost& host, KubeletOptions* o) {
  std::string nvidia_smi = f.nvidia_smi;
  if (!f.nvidia_smi_given) {
    std::filesystem::path hamictl = host.bin_dir / "hamictl";
    if (access(hamictl.c_str(), X_OK) == 0) nvidia_smi = hamictl.string();
  }
  if (!nvidia_smi.empty() && access(nvidia_smi.c_str(), X_OK) != 0) {
    return InvalidArgumentError("--nvidia-smi " + nvidia_smi +
                                ": not an executable (give \"\" for none)");
  }
  if (!nvidia_smi.empty()) o->nvidia_smi = std::filesystem::absolute(nvidia_smi).string();
  if (f.stand_in.empty()) {
    std::filesystem::path probe = host.bin_dir / "vgpu_probe";
    if (std::filesystem::exists(probe)) o->stand_in = {probe.string(), "workload"};
  } else {
    std::istringstream words(f.stand_in);
    for (std::string w; words >> w;) o->stand_in.push_back(w);
  }
  return OkStatus();
}

}  // namespace

Result<KubeletOptions> KubeletOptionsFromFlags(const KubeletFlags& f, const KubeletHost& host) {
  KubeletOptions o;
  o.stand_in_for_gpu_containers = f.stand_in_for_gpu;
  o.pid_namespaces = f.pid_namespaces;
  o.cdi_spec_dirs = f.cdi_spec_dirs;
  o.node_name = f.node_name;
  o.root_dir = f.root_dir.empty() ? "/tmp/hami-sim-kubelet/" + f.node_name : f.root_dir;
  o.address = f.address;
  Result<std::chrono::milliseconds> hb = ParseGoDuration(f.heartbeat);
  if (!hb.ok() || hb->count() <= 0) {
    return InvalidArgumentError("--heartbeat \"" + f.heartbeat + "\": not a duration");
  }
  o.heartbeat = *hb;
  HAMI_RETURN_IF_ERROR(ParseKeyValues("--label", f.labels, &o.labels));
  HAMI_RETURN_IF_ERROR(ParseKeyValues("--capacity", f.capacity, &o.capacity));
  HAMI_RETURN_IF_ERROR(AddNodeEnv(f, host, &o));
  HAMI_RETURN_IF_ERROR(AddPrograms(f, host, &o));
  return o;
}

}  // namespace hami::sim
