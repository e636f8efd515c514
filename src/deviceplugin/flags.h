// The hami-device-plugin command line: the flags as typed (PluginFlags, defaults from the
// environment as upstream's plugin reads it), checked once into PluginConfig together with the
// two configuration files they name, so main only wires.
//
//   PluginFlags flags = DefaultPluginFlags();
//   AddPluginFlags(app, &flags);
//   ... parse ...
//   Result<PluginConfig> config = PluginConfigFromFlags(flags);  // every mistake named
//   for (const std::string& w : config->warnings) HAMI_LOG(Warning) << w;
//
// Thread safety: plain data and functions without shared state.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "common/status.h"
#include "deviceplugin/plugin_service.h"

namespace CLI {
class App;
}

namespace hami::deviceplugin {

struct PluginFlags {
  std::string config_file;  // empty: the chart's built-in NVIDIA settings
  std::string node_config_file = "/config/config.json";
  std::string node_name;  // $NODE_NAME
  std::string mig_strategy = "none";
  std::string device_id_strategy = "uuid";
  std::string device_list_strategy = "envvar";  // $DEVICE_LIST_STRATEGY
  std::string plugin_dir = "/var/lib/kubelet/device-plugins";
  // Dynamic MIG with a CDI device list strategy: where the MIG devices' specs go ($CDI_SPEC_DIR).
  std::string cdi_spec_dir = "/var/run/cdi";
  std::string kubeconfig;  // $KUBECONFIG; empty: in-cluster
  std::string context;
  std::string ready_file;
  std::string hook_path = "/usr/local";  // $HOOK_PATH
  std::string libvgpu;                   // DefaultLibvgpuPath()
  std::string nvml_library = "libnvidia-ml.so.1";
  std::string mps_pipe = "/tmp/nvidia-mps";
  std::string register_interval = "30s";
  // "" (HAMi's scheduler), or Volcano's deviceshare plugin in one of its NVIDIA modes: "vgpu",
  // "share" (GPU sharing) or "number" (GPU number) ($VOLCANO_MODE).
  std::string volcano;
  // GPU sharing: hold containers to their volcano.sh/gpu-memory ($VOLCANO_ENFORCE_MEMORY).
  std::string volcano_enforce_memory = "false";
  std::string gdrcopy = "false";  // $GDRCOPY_ENABLED
  std::string gds = "false";      // $GDS_ENABLED
  std::string mofed = "false";    // $MOFED_ENABLED
  bool disable_core_limit = false;
  bool fail_on_init_error = true;
  bool print_registration = false;
  int verbosity = 0;
  int kube_burst = 200;
  float kube_qps = 100;
  // Accepted for upstream's command lines and ignored (a warning says where they belong).
  bool pass_device_specs = false;
  double split = 0, memory_scaling = 0, core_scaling = 0;
  std::string resource_name;
  // From the environment only: ENABLE_TOPOLOGY_SCORE, DP_DISABLE_HEALTHCHECKS,
  // DP_ENABLE_HEALTHCHECKS (nullopt: unset).
  std::string topology_score;
  std::optional<std::string> disable_healthchecks, enable_healthchecks;
};

// The libvgpu.so shipped next to this binary (<exe>/../lib/libvgpu.so, the build tree), else the
// image's /k8s-vgpu/lib/nvidia/libvgpu.so.
std::string DefaultLibvgpuPath();
// The defaults, with the environment's variables named above.
PluginFlags DefaultPluginFlags();
void AddPluginFlags(CLI::App& app, PluginFlags* flags);

struct PluginConfig {
  PluginOptions options;  // for PluginService (allocation settings included)
  std::string plugin_dir, kubeconfig, context, ready_file, libvgpu, nvml_library;
  bool fail_on_init_error = true;
  bool print_registration = false;
  int kube_burst = 200;
  float kube_qps = 100;
  // Things worth a warning that do not stop the plugin (ignored flags, config file notes).
  std::vector<std::string> warnings;
};

// Reads --config-file and --node-config-file (a missing node config file means no overrides).
// InvalidArgument naming the flag, the variable to set or the file for the first thing wrong.
Result<PluginConfig> PluginConfigFromFlags(const PluginFlags& flags);

}  // namespace hami::deviceplugin
