// hami-device-plugin: the kubelet device plugin for NVIDIA GPUs, a drop-in for the
// `device-plugin` container of HAMi's chart. Flags and environment follow upstream's plugin:
//
//   NODE_NAME=node-a HOOK_PATH=/usr/local hami-device-plugin --config-file=/device-config.yaml
//       --mig-strategy=none --disable-core-limit=false -v=4
//
// Reads device-config.yaml (`nvidia:` section) and, when present, the per-node entry of
// /config/config.json; discovers the GPUs through NVML (libnvidia-ml.so.1, loaded at run time);
// installs libvgpu.so and ld.so.preload into $HOOK_PATH/vgpu; publishes the node registration;
// serves the device plugin API on <device-plugin-path>/nvidia-gpu.sock and registers with
// kubelet, again whenever kubelet restarts or on SIGHUP. SIGTERM/SIGINT stop it.
// Prints "serving <socket>" once registered with kubelet the first time, and writes the
// --ready-file then (common/ready_file.h).
#include <limits.h>
#include <malloc.h>
#include <signal.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <optional>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "common/duration.h"
#include "common/file_util.h"
#include "common/go_flags.h"
#include "common/log.h"
#include "common/quantity.h"
#include "common/ready_file.h"
#include "common/stop_signals.h"
#include "device/config.h"
#include "device/node_config.h"
#include "device/node_registration.h"
#include "device/topology_score.h"
#include "device/vendor.h"
#include "deviceplugin/discovery.h"
#include "deviceplugin/grpc_plugin.h"
#include "deviceplugin/hook_install.h"
#include "deviceplugin/nvml_driver.h"
#include "deviceplugin/plugin_service.h"
#include "deviceplugin/runner.h"
#include "k8s/config.h"
#include "k8s/rest_client.h"

namespace {

using hami::Result;
using hami::Status;

// The libvgpu.so shipped next to this binary (build tree: bin/ and lib/), else the image's.
std::string DefaultLibvgpu() {
  char self[PATH_MAX] = {};
  ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
  if (n > 0) {
    std::filesystem::path p = std::filesystem::path(std::string(self, static_cast<size_t>(n)))
                                  .parent_path()
                                  .parent_path() /
                              "lib" / "libvgpu.so";
    if (std::filesystem::exists(p)) return p.string();
  }
  return "/k8s-vgpu/lib/nvidia/libvgpu.so";
}

}  // namespace

int main(int argc, char** argv) {
  hami::StopSignals signals({SIGHUP});  // before any thread starts: every thread inherits the mask
  // gRPC and the API client run a dozen threads that allocate a little each; glibc would give
  // each its own arena (and its own high-water mark of resident memory). Two are plenty here.
  mallopt(M_ARENA_MAX, 2);
  CLI::App app{"hami-device-plugin: HAMi-compatible kubelet device plugin for NVIDIA GPUs"};
  std::string config_file, node_config_file = "/config/config.json", node_name;
  std::string mig_strategy = "none", device_id_strategy = "uuid";
  std::string device_list_strategy = hami::EnvOr("DEVICE_LIST_STRATEGY", "envvar");
  std::string plugin_dir = "/var/lib/kubelet/device-plugins", kubeconfig, context, ready_file;
  std::string hook_path = hami::EnvOr("HOOK_PATH", "/usr/local"), libvgpu = DefaultLibvgpu();
  std::string nvml_library = "libnvidia-ml.so.1", mps_pipe = "/tmp/nvidia-mps";
  std::string register_interval = "30s", resource_name_flag;
  bool disable_core_limit = false, fail_on_init_error = true, pass_device_specs = false;
  bool print_registration = false;
  int verbosity = 0, kube_burst = 200;
  float kube_qps = 100;
  double split_flag = 0, mem_scaling_flag = 0, core_scaling_flag = 0;
  app.add_option("--config-file", config_file,
                 "device-config.yaml (default: the chart's built-in NVIDIA settings)");
  app.add_option("--node-config-file", node_config_file,
                 "per-node overrides (config.json); ignored when missing")
      ->capture_default_str();
  app.add_option("--node-name", node_name, "this node (default $NODE_NAME)");
  app.add_option("--device-plugin-path", plugin_dir, "kubelet's device plugin directory")
      ->capture_default_str();
  app.add_option("--hook-path", hook_path, "HOOK_PATH: libvgpu lives in <hook-path>/vgpu")
      ->capture_default_str();
  app.add_option("--libvgpu", libvgpu, "the libvgpu.so to install")->capture_default_str();
  app.add_option("--nvml-library", nvml_library, "NVML to load")->capture_default_str();
  app.add_option("--mps-pipe-directory", mps_pipe, "MPS daemon pipe directory (mode mps)")
      ->capture_default_str();
  app.add_option("--ready-file", ready_file,
                 "once registered with kubelet, write the plugin socket and the PID to this file "
                 "as JSON");
  app.add_option("--register-interval", register_interval,
                 "how often the node registration is refreshed")
      ->capture_default_str();
  app.add_option("--kubeconfig", kubeconfig, "kubeconfig file (default $KUBECONFIG, in-cluster)");
  app.add_option("--context", context, "kubeconfig context");
  app.add_option("--kube-qps", kube_qps, "API requests per second (<= 0: unlimited)")
      ->capture_default_str();
  app.add_option("--kube-burst", kube_burst, "API request burst")->capture_default_str();
  app.add_option("--disable-core-limit", disable_core_limit,
                 "turn SM limits off (also disableCoreLimit in device-config.yaml)")
      ->capture_default_str();
  app.add_option("--fail-on-init-error", fail_on_init_error,
                 "exit when the GPUs cannot be read (false: wait and retry)")
      ->capture_default_str();
  // GDRCopy, GPUDirect Storage, MOFED: asked of the NVIDIA container runtime for every container.
  std::string gdrcopy = hami::EnvOr("GDRCOPY_ENABLED", "false");
  std::string gds = hami::EnvOr("GDS_ENABLED", "false");
  std::string mofed = hami::EnvOr("MOFED_ENABLED", "false");
  app.add_option("--gdrcopy-enabled", gdrcopy,
                 "containers get NVIDIA_GDRCOPY=enabled (default $GDRCOPY_ENABLED, else false)");
  app.add_option("--gds-enabled", gds,
                 "containers get NVIDIA_GDS=enabled (default $GDS_ENABLED, else false)");
  app.add_option("--mofed-enabled", mofed,
                 "containers get NVIDIA_MOFED=enabled (default $MOFED_ENABLED, else false)");
  app.add_option("--mig-strategy", mig_strategy, "only none is supported")->capture_default_str();
  app.add_option("--device-list-strategy", device_list_strategy,
                 "how containers learn their GPUs: envvar, volume-mounts, cdi-annotations, "
                 "cdi-cri, comma-separated (default $DEVICE_LIST_STRATEGY, else envvar)")
      ->capture_default_str();
  app.add_option("--device-id-strategy", device_id_strategy, "only uuid is supported")
      ->capture_default_str();
  app.add_option("--pass-device-specs", pass_device_specs,
                 "accepted; device nodes come from the "
                 "NVIDIA container runtime");
  app.add_option("--device-split-count", split_flag, "accepted; use deviceSplitCount");
  app.add_option("--device-memory-scaling", mem_scaling_flag, "accepted; use deviceMemoryScaling");
  app.add_option("--device-cores-scaling", core_scaling_flag, "accepted; use deviceCoreScaling");
  app.add_option("--resource-name", resource_name_flag, "accepted; use resourceCountName");
  app.add_flag("--print-registration", print_registration,
               "discover the GPUs, print the node registration (and pair scores) and exit");
  app.add_option("-v,--v", verbosity, "log verbosity")->capture_default_str();
  if (std::optional<int> exit = hami::ParseGoStyleFlags(app, argc, argv)) return *exit;
  hami::log::SetVerbosity(verbosity);
  auto die = [](const std::string& what) {
    HAMI_LOG(Error) << what;
    return 1;
  };
  if (node_name.empty()) node_name = hami::EnvOr("NODE_NAME");
  if (node_name.empty()) return die("the node name is unknown: set NODE_NAME or --node-name");
  if (mig_strategy != "none") {
    HAMI_LOG(Warning) << "--mig-strategy=" << mig_strategy << ": only none is supported; ignored";
  }
  Result<hami::deviceplugin::DeviceListStrategies> device_list =
      hami::deviceplugin::ParseDeviceListStrategies(device_list_strategy);
  if (!device_list.ok()) return die("--device-list-strategy: " + device_list.status().message());
  bool gdrcopy_on = false, gds_on = false, mofed_on = false;
  for (auto [flag, text, on] : {std::tuple{"--gdrcopy-enabled", &gdrcopy, &gdrcopy_on},
                                std::tuple{"--gds-enabled", &gds, &gds_on},
                                std::tuple{"--mofed-enabled", &mofed, &mofed_on}}) {
    if (const char* bad = hami::ParseBool(text->c_str(), on)) {
      return die(std::string(flag) + " \"" + *text + "\": " + bad);
    }
  }
  if (device_id_strategy != "uuid") {
    HAMI_LOG(Warning) << "--device-id-strategy=" << device_id_strategy
                      << ": only uuid is supported; using it";
  }
  if (split_flag != 0 || mem_scaling_flag != 0 || core_scaling_flag != 0 ||
      !resource_name_flag.empty()) {
    HAMI_LOG(Warning) << "--device-split-count/--device-*-scaling/--resource-name are ignored, as "
                         "upstream ignores them: set them in device-config.yaml or config.json";
  }

  hami::device::DeviceConfig device_config = hami::device::DefaultDeviceConfig();
  if (!config_file.empty()) {
    Result<std::string> text = hami::ReadFileToString(config_file);
    if (!text.ok()) return die("--config-file: " + text.status().ToString());
    Result<hami::device::DeviceConfig> parsed = hami::device::ParseDeviceConfigYaml(*text);
    if (!parsed.ok()) return die(config_file + ": " + parsed.status().message());
    device_config = std::move(*parsed);
    for (const std::string& w : device_config.warnings)
      HAMI_LOG(Warning) << config_file << ": " << w;
  }
  if (!device_config.nvidia) return die(config_file + ": no nvidia: section, nothing to serve");
  const hami::device::NvidiaConfig& nvidia = *device_config.nvidia;
  hami::device::NodeConfigFile node_config;
  if (std::filesystem::exists(node_config_file)) {
    Result<std::string> text = hami::ReadFileToString(node_config_file);
    if (!text.ok()) return die("--node-config-file: " + text.status().ToString());
    Result<hami::device::NodeConfigFile> parsed = hami::device::ParseNodeConfigJson(*text);
    if (!parsed.ok()) return die(node_config_file + ": " + parsed.status().message());
    node_config = std::move(*parsed);
  } else {
    HAMI_VLOG(1) << node_config_file << " not found: no per-node overrides";
  }
  Result<std::chrono::milliseconds> interval = hami::ParseGoDuration(register_interval);
  if (!interval.ok() || interval->count() <= 0) {
    return die("--register-interval \"" + register_interval + "\": expected a duration like 30s");
  }

  hami::deviceplugin::PluginOptions opts;
  opts.node_name = node_name;
  opts.resource_name = nvidia.resource_count_name;
  opts.settings = hami::device::ResolveNodeSettings(nvidia, node_config, node_name);
  opts.register_interval = *interval;
  opts.topology_score = hami::EnvOr("ENABLE_TOPOLOGY_SCORE") == "true";
  std::vector<std::string> xid_warnings;
  opts.xid_policy = hami::deviceplugin::ParseXidPolicy(
      std::getenv("DP_DISABLE_HEALTHCHECKS"), std::getenv("DP_ENABLE_HEALTHCHECKS"), &xid_warnings);
  for (const std::string& w : xid_warnings) HAMI_LOG(Warning) << w;
  hami::deviceplugin::AllocationSettings& alloc = opts.allocation;
  alloc.hook_path = hook_path;
  alloc.operating_mode = opts.settings.operating_mode;
  alloc.device_memory_scaling = opts.settings.device_memory_scaling;
  alloc.lib_cuda_log_level = opts.settings.lib_cuda_log_level;
  alloc.disable_core_limit = disable_core_limit || nvidia.disable_core_limit;
  alloc.mps_pipe_directory = mps_pipe;
  alloc.device_list = *device_list;
  alloc.gdrcopy = gdrcopy_on;
  alloc.gds = gds_on;
  alloc.mofed = mofed_on;
  if (Result<hami::device::VendorRegistry> reg =
          hami::device::VendorRegistry::FromConfig(device_config);
      reg.ok()) {
    for (const auto& v : reg->vendors()) {
      if (v->Key() == "NVIDIA") {
        alloc.to_allocate_key = v->annotation_keys().to_allocate;
      } else if (!v->annotation_keys().to_allocate.empty()) {
        alloc.other_to_allocate_keys.push_back(v->annotation_keys().to_allocate);
      }
    }
  }

  std::unique_ptr<hami::deviceplugin::NvmlDriver> driver;
  for (;;) {
    Result<std::unique_ptr<hami::deviceplugin::NvmlDriver>> d =
        hami::deviceplugin::NvmlDriver::Open({.library = nvml_library});
    if (d.ok()) {
      driver = std::move(*d);
      break;
    }
    if (fail_on_init_error) return die(d.status().message());
    HAMI_LOG(Warning) << d.status().message() << "; retrying in 30 s";
    std::this_thread::sleep_for(std::chrono::seconds(30));
  }
  if (print_registration) {
    Result<hami::deviceplugin::Inventory> inv = driver->Discover();
    if (!inv.ok()) return die("GPU discovery: " + inv.status().message());
    hami::deviceplugin::Registration reg =
        hami::deviceplugin::BuildRegistration(*inv, opts.settings, {});
    for (const std::string& w : reg.warnings) HAMI_LOG(Warning) << w;
    std::vector<std::string> warnings;
    std::printf("%s\n%s\n", hami::device::EncodeNodeDevicesJson(reg.devices).c_str(),
                hami::device::EncodePairScores(
                    hami::deviceplugin::BuildPairScores(*inv, reg.devices, &warnings))
                    .c_str());
    for (const std::string& w : warnings) HAMI_LOG(Warning) << w;
    return 0;
  }
  if (alloc.operating_mode == hami::device::OperatingMode::kHamiCore) {
    Result<hami::deviceplugin::InstalledHook> hook =
        hami::deviceplugin::InstallHook(hook_path, libvgpu, HAMI_VERSION);
    if (!hook.ok()) return die("installing libvgpu: " + hook.status().message());
    alloc.libvgpu_file = hook->libvgpu_file;
    HAMI_LOG(Info) << (hook->changed ? "installed " : "kept ") << hook_path << "/vgpu/"
                   << hook->libvgpu_file << " and ld.so.preload";
  }

  if (kubeconfig.empty()) kubeconfig = hami::EnvOr("KUBECONFIG");
  Result<hami::k8s::RestConfig> rest = hami::k8s::LoadRestConfig(kubeconfig, context);
  if (!rest.ok()) return die("API server config: " + rest.status().ToString());
  rest->user_agent = "hami-device-plugin";
  rest->timeout = std::chrono::seconds(10);
  rest->qps = kube_qps;  // an allocation costs four requests
  rest->burst = kube_burst;
  Result<std::unique_ptr<hami::k8s::RestClient>> client = hami::k8s::RestClient::Create(*rest);
  if (!client.ok()) return die("API client: " + client.status().ToString());

  hami::deviceplugin::PluginService service(**client, *driver, opts);
  if (Status s = service.Start(); !s.ok()) return die(s.message());
  hami::deviceplugin::GrpcPlugin plugin(
      service, {.plugin_dir = plugin_dir,
                .socket_name = "nvidia-gpu.sock",
                .preferred_allocation = opts.settings.enable_get_preferred_allocation});
  const std::string socket = plugin.socket_path();
  hami::deviceplugin::PluginRunner runner(plugin, std::chrono::seconds(5), [&](uint64_t n) {
    if (n != 1) return;
    if (Status s = hami::WriteReadyFile(ready_file, {{"socket", socket}}); !s.ok()) {
      HAMI_LOG(Error) << s.message();
    }
    std::printf("serving %s\n", socket.c_str());
    std::fflush(stdout);
  });
  if (Status s = runner.Start(); !s.ok()) return die(s.message());

  for (;;) {
    int sig = signals.Wait();
    if (sig == SIGHUP) {
      HAMI_LOG(Info) << "SIGHUP: serving and registering again";
      runner.RequestRestart();
      continue;
    }
    HAMI_LOG(Info) << "signal " << sig << ": shutting down";
    break;
  }
  runner.Stop();
  service.Stop();
  return 0;
}
