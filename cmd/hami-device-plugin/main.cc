// hami-device-plugin: the kubelet device plugin for NVIDIA GPUs, a drop-in for the
// `device-plugin` container of HAMi's chart. Flags and environment follow upstream's plugin:
//
//   NODE_NAME=node-a HOOK_PATH=/usr/local hami-device-plugin --config-file=/device-config.yaml
//       --mig-strategy=none --disable-core-limit=false -v=4
//
// Reads device-config.yaml (`nvidia:` section) and, when present, the per-node entry of
// /config/config.json; discovers the GPUs through NVML (libnvidia-ml.so.1, loaded at run time)
// and, in operating mode mig, makes and destroys the MIG devices pods were given through it;
// installs libvgpu.so and ld.so.preload into $HOOK_PATH/vgpu; publishes the node registration;
// serves the device plugin API on <device-plugin-path>/nvidia-gpu.sock (and, with
// --mig-strategy=mixed, one nvidia-mig-<profile>.sock per MIG profile) and registers each with
// kubelet, again whenever kubelet restarts or on SIGHUP. SIGTERM/SIGINT stop it.
// Prints "serving <socket>" per socket once all are registered with kubelet the first time,
// and writes the --ready-file then (common/ready_file.h).
#include <malloc.h>
#include <signal.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "common/go_flags.h"
#include "common/log.h"
#include "common/ready_file.h"
#include "common/stop_signals.h"
#include "device/node_registration.h"
#include "device/topology_score.h"
#include "device/volcano_vgpu.h"
#include "deviceplugin/discovery.h"
#include "deviceplugin/flags.h"
#include "deviceplugin/hook_install.h"
#include "deviceplugin/kubelet_plugins.h"
#include "deviceplugin/nvml_driver.h"
#include "deviceplugin/plugin_service.h"
#include "deviceplugin/volcano_devices.h"
#include "k8s/config.h"
#include "k8s/rest_client.h"

namespace {

using hami::Result;
using hami::Status;
namespace dp = hami::deviceplugin;

int Die(const std::string& what) {
  HAMI_LOG(Error) << what;
  return 1;
}

// NVML, loaded at run time; with --fail-on-init-error=false a missing driver is waited for.
Result<std::unique_ptr<dp::NvmlDriver>> OpenDriver(const dp::PluginConfig& c) {
  for (;;) {
    Result<std::unique_ptr<dp::NvmlDriver>> d = dp::NvmlDriver::Open({.library = c.nvml_library});
    if (d.ok() || c.fail_on_init_error) return d;
    HAMI_LOG(Warning) << d.status().message() << "; retrying in 30 s";
    std::this_thread::sleep_for(std::chrono::seconds(30));
  }
}

// --print-registration: the node registration and pair scores as the plugin would publish them.
int PrintRegistration(dp::NvmlDriver& driver, const dp::PluginConfig& c) {
  Result<dp::Inventory> inv = driver.Discover();
  if (!inv.ok()) return Die("GPU discovery: " + inv.status().message());
  dp::Registration reg = dp::BuildRegistration(*inv, c.options.settings, {});
  for (const std::string& w : reg.warnings) HAMI_LOG(Warning) << w;
  if (c.options.volcano && c.options.volcano->share) {  // what Volcano's scheduler reads
    const dp::VolcanoSettings& v = *c.options.volcano;
    std::vector<dp::PluginDevice> devices = dp::VolcanoShareDevices(reg.devices, v, false);
    auto [resource, quantity] = dp::VolcanoShareCapacity(reg.devices, v);
    std::printf("%s: %zu\n%s: %s\n%s: \"%s\"\n", c.options.resource_name.c_str(),
                devices.size(), resource.c_str(), quantity.c_str(),
                std::string(hami::device::kVolcanoGpuUnhealthyIdsAnnotation).c_str(),
                dp::VolcanoUnhealthyIndices(reg.devices).c_str());
    return 0;
  }
  if (c.options.volcano) {  // Volcano's register value instead of HAMi's annotations
    std::vector<hami::device::DeviceInfo> records =
        dp::VolcanoRegisterDevices(reg.devices, *c.options.volcano);
    Result<std::string> text = hami::device::EncodeVolcanoNodeDevices(records);
    if (!text.ok()) return Die(text.status().message());
    std::printf("%s\n", text->c_str());
    return 0;
  }
  std::vector<std::string> warnings;
  std::printf(
      "%s\n%s\n", hami::device::EncodeNodeDevicesJson(reg.devices).c_str(),
      hami::device::EncodePairScores(dp::BuildPairScores(*inv, reg.devices, &warnings)).c_str());
  for (const std::string& w : warnings) HAMI_LOG(Warning) << w;
  return 0;
}

Result<std::unique_ptr<hami::k8s::RestClient>> ApiClient(const dp::PluginConfig& c) {
  Result<hami::k8s::RestConfig> rest = hami::k8s::LoadRestConfig(c.kubeconfig, c.context);
  if (!rest.ok()) return rest.status().WithContext("API server config");
  rest->user_agent = "hami-device-plugin";
  rest->timeout = std::chrono::seconds(10);
  rest->qps = c.kube_qps;  // an allocation costs four requests
  rest->burst = c.kube_burst;
  Result<std::unique_ptr<hami::k8s::RestClient>> client = hami::k8s::RestClient::Create(*rest);
  if (!client.ok()) return client.status().WithContext("API client");
  return client;
}

// The first registration of every socket: the ready file (the vGPU socket, and all of them)
// and one "serving" line per socket.
void AnnounceReady(const std::string& ready_file, const std::vector<std::string>& sockets) {
  std::string all;
  for (const std::string& s : sockets) all += (all.empty() ? "" : ",") + s;
  if (Status s = hami::WriteReadyFile(ready_file, {{"socket", sockets.front()}, {"sockets", all}});
      !s.ok()) {
    HAMI_LOG(Error) << s.message();
  }
  for (const std::string& s : sockets) std::printf("serving %s\n", s.c_str());
  std::fflush(stdout);
}

}  // namespace

int main(int argc, char** argv) {
  hami::StopSignals signals({SIGHUP});  // before any thread starts: every thread inherits the mask
  // gRPC and the API client run a dozen threads that allocate a little each; glibc would give
  // each its own arena (and its own high-water mark of resident memory). Two are plenty here.
  mallopt(M_ARENA_MAX, 2);
  CLI::App app{"hami-device-plugin: HAMi-compatible kubelet device plugin for NVIDIA GPUs"};
  dp::PluginFlags flags = dp::DefaultPluginFlags();
  dp::AddPluginFlags(app, &flags);
  if (std::optional<int> exit = hami::ParseGoStyleFlags(app, argc, argv)) return *exit;
  hami::log::SetVerbosity(flags.verbosity);
  Result<dp::PluginConfig> config = dp::PluginConfigFromFlags(flags);
  if (!config.ok()) return Die(config.status().message());
  for (const std::string& w : config->warnings) HAMI_LOG(Warning) << w;
  dp::PluginOptions& opts = config->options;
  // The scheduler learns of the node's devices only once the kubelet can allocate them.
  opts.publish_after_kubelet = true;

  Result<std::unique_ptr<dp::NvmlDriver>> driver = OpenDriver(*config);
  if (!driver.ok()) return Die(driver.status().message());
  if (config->print_registration) return PrintRegistration(**driver, *config);
  if (opts.allocation.operating_mode == hami::device::OperatingMode::kHamiCore) {
    const std::string& hook_path = opts.allocation.hook_path;
    Result<dp::InstalledHook> hook = dp::InstallHook(hook_path, config->libvgpu, HAMI_VERSION);
    if (!hook.ok()) return Die("installing libvgpu: " + hook.status().message());
    opts.allocation.libvgpu_file = hook->libvgpu_file;
    HAMI_LOG(Info) << (hook->changed ? "installed " : "kept ") << hook_path << "/vgpu/"
                   << hook->libvgpu_file << " and ld.so.preload";
  } else if (Status s = dp::PrepareHookDirectory(opts.allocation.hook_path); !s.ok()) {
    // No libvgpu.so for these containers, but hami-monitor still reads the folder.
    return Die(s.message());
  }
  Result<std::unique_ptr<hami::k8s::RestClient>> client = ApiClient(*config);
  if (!client.ok()) return Die(client.status().ToString());

  // Operating mode mig: the same NVML driver makes the MIG devices.
  dp::MigDriver* mig = opts.settings.operating_mode == hami::device::OperatingMode::kMig
                           ? static_cast<dp::MigDriver*>(driver->get())
                           : nullptr;
  dp::PluginService service(**client, **driver, opts, nullptr, mig);
  if (Status s = service.Start(); !s.ok()) return Die(s.message());
  dp::KubeletPlugins plugins(service, {.plugin_dir = config->plugin_dir,
                                       .on_ready = [&](const std::vector<std::string>& sockets) {
                                         service.PublishRegistration();
                                         AnnounceReady(config->ready_file, sockets);
                                       }});
  if (Status s = plugins.Start(); !s.ok()) return Die(s.message());

  for (;;) {
    int sig = signals.Wait();
    if (sig == SIGHUP) {
      HAMI_LOG(Info) << "SIGHUP: serving and registering again";
      plugins.RequestRestart();
      continue;
    }
    HAMI_LOG(Info) << "signal " << sig << ": shutting down";
    break;
  }
  plugins.Stop();
  service.Stop();
  return 0;
}
