// The hami-sim-kubelet command line: the flags as typed (KubeletFlags), checked once into
// KubeletOptions, so main only wires.
//
//   KubeletFlags flags = DefaultKubeletFlags(bin_dir);
//   AddKubeletFlags(app, &flags);
//   ... parse ...
//   MakeKubeletPathsAbsolute(&flags);
//   Result<KubeletOptions> o = KubeletOptionsFromFlags(flags, host);  // every mistake named
//
// The --sim-config file itself and the API server connection are main's business: they belong
// to other components (the simulated driver, the API client).
//
// Thread safety: plain data and functions without shared state.
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "common/status.h"
#include "sim/kubelet/kubelet.h"

namespace CLI {
class App;
}

namespace hami::sim {

struct KubeletFlags {
  std::string node_name;
  std::string kubeconfig;   // empty: $KUBECONFIG
  std::string root_dir;     // empty: /tmp/hami-sim-kubelet/<node>
  std::string sim_config;   // the containers' HAMI_SIM_CONFIG; empty: not set
  std::string sim_state;    // the containers' HAMI_SIM_STATE; empty: not set
  std::string sim_lib_dir;  // the containers' LD_LIBRARY_PATH
  std::string address = "127.0.0.1";
  std::string heartbeat = "10s";
  std::string stand_in;  // a command line, split at white space; empty: vgpu_probe workload
  std::string nvidia_smi;
  // Whether --nvidia-smi was given at all: "" then means none, while without the flag hamictl
  // next to the binary is used if there is one.
  bool nvidia_smi_given = false;
  std::string ready_file;
  std::vector<std::string> labels, capacity;  // k=v each
  std::vector<std::string> env;               // K=V each
  std::vector<std::string> cdi_spec_dirs;     // the runtime's CDI spec directories
  bool stand_in_for_gpu = false;
  bool pid_namespaces = false;
  int verbosity = 0;
};

// The defaults; the simulated driver libraries are looked for in <bin_dir>/../sim (build/sim
// beside build/bin).
KubeletFlags DefaultKubeletFlags(const std::filesystem::path& bin_dir);
void AddKubeletFlags(CLI::App& app, KubeletFlags* flags);

// Makes the path flags (root dir, sim config, sim state, sim lib dir, CDI spec dirs) absolute,
// relative ones taken from the working directory: containers run in directories of their own,
// so every path they are handed must be absolute. Empty ones stay empty.
void MakeKubeletPathsAbsolute(KubeletFlags* flags);

// What the options depend on besides the flags.
struct KubeletHost {
  std::filesystem::path bin_dir;    // hami-sim-kubelet's directory: hamictl, vgpu_probe
  std::optional<std::string> path;  // $PATH; nullopt: unset
  // The sanitizer runtime a sanitized build's libvgpu.so needs loaded ahead of it; empty: none.
  std::string sanitizer_preload;
};

// InvalidArgument naming the flag for the first thing wrong; its message is the whole reason.
// The containers' environment (KubeletOptions::node_env) is PATH, HOME, LD_LIBRARY_PATH, the
// simulated driver's two variables when given, the sanitizer's, then every --env in order.
Result<KubeletOptions> KubeletOptionsFromFlags(const KubeletFlags& flags, const KubeletHost& host);

}  // namespace hami::sim
