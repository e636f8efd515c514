// KubeletPlugins: every kubelet plugin socket one hami-device-plugin process serves, each kept
// registered by its own PluginRunner (runner.h): HAMi's shared vGPUs ("nvidia.com/gpu" on
// nvidia-gpu.sock, from the PluginService) and, with the mixed MIG strategy, one socket per MIG
// profile ("nvidia.com/mig-1g.10gb" on nvidia-mig-1g.10gb.sock, a WholeDeviceBackend each). The
// vGPU socket is served even when every GPU is a MIG GPU, so kubelet reports the resource at 0
// rather than dropping it. Under Volcano's vGPU protocol (PluginOptions::volcano) the sockets
// are Volcano's three resources instead, named as Volcano's agent names them
// (nvidia-vgpu-number.sock, nvidia-vgpu-memory.sock, nvidia-vgpu-cores.sock); under its GPU
// sharing or GPU number mode, the one resource on volcano.sock; for Volcano's whole-GPU Jobs
// (`--volcano=whole`), "nvidia.com/gpu" as whole GPUs on nvidia-gpu.sock (a WholeDeviceBackend).
//
//   KubeletPlugins plugins(service, {.plugin_dir = dir, .on_ready = [](auto& sockets) {...}});
//   plugins.Start();           // after service.Start(): the MIG resources are known then
//   plugins.RequestRestart();  // SIGHUP: every socket served and registered again
//   plugins.Stop();
//
// Thread safety: Start/Stop from the owning thread; RequestRestart from any thread.
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "common/status.h"
#include "deviceplugin/grpc_plugin.h"
#include "deviceplugin/whole_device_backend.h"
#include "deviceplugin/plugin_service.h"
#include "deviceplugin/runner.h"

namespace hami::deviceplugin {

// "nvidia-<resource name after its '/'>.sock".
std::string VolcanoSocketName(const std::string& resource);

struct KubeletPluginsOptions {
  std::string plugin_dir = "/var/lib/kubelet/device-plugins";
  std::chrono::milliseconds retry{std::chrono::seconds(5)};
  // Runs once, on a runner's thread, when every socket has registered with kubelet once; with
  // sockets().
  std::function<void(const std::vector<std::string>& sockets)> on_ready;
};

class KubeletPlugins {
 public:
  // `service` must be started, and outlive this.
  KubeletPlugins(PluginService& service, KubeletPluginsOptions options);
  ~KubeletPlugins();
  KubeletPlugins(const KubeletPlugins&) = delete;
  KubeletPlugins& operator=(const KubeletPlugins&) = delete;

  Status Start();
  void RequestRestart();
  void Stop();

  // The socket paths, the vGPU socket first.
  std::vector<std::string> sockets() const;

 private:
  struct Served {
    std::unique_ptr<DevicePluginBackend> owned;  // null for the service's own socket
    std::unique_ptr<GrpcPlugin> plugin;
    std::unique_ptr<PluginRunner> runner;
    std::atomic<bool> registered{false};
  };
  void Add(DevicePluginBackend& backend, const std::string& socket, bool preferred,
           std::unique_ptr<DevicePluginBackend> owned);
  // `resource`'s devices, as the service lists them, handed out whole on `socket`.
  void AddWholeDevices(const std::string& resource, const std::string& socket);
  void Registered(Served& s);

  PluginService& service_;
  const KubeletPluginsOptions options_;
  std::vector<std::unique_ptr<Served>> served_;
  std::atomic<size_t> ready_{0};
};

}  // namespace hami::deviceplugin
