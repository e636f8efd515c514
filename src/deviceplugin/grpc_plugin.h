// GrpcPlugin: puts a DevicePluginBackend (plugin_backend.h) on kubelet's device plugin gRPC API
// (v1beta1), on a socket of its own.
//
//   GrpcPlugin plugin(service, {.plugin_dir = "/var/lib/kubelet/device-plugins"});
//   plugin.Serve();     // DevicePlugin on <plugin_dir>/nvidia-gpu.sock
//   plugin.Register();  // Registration.Register on <plugin_dir>/kubelet.sock
//   ...                 // kubelet restarted: Restart() serves a fresh socket and registers again
//
// ListAndWatch streams stay open until kubelet closes them or the server stops; each sends the
// whole device list again whenever it changes (health). Allocate and GetPreferredAllocation
// errors carry gRPC codes kubelet logs with the pod: UNAVAILABLE (the API server could not be
// reached; nothing was written), NOT_FOUND (no pod waits for GPUs), INVALID_ARGUMENT (device IDs
// that are not ours), FAILED_PRECONDITION (the pod's annotations do not fit the request).
//
// Thread safety: Serve/Register/Restart/Stop from one thread (the plugin's runner); RPCs run
// on gRPC's threads.
#pragma once

#include <atomic>
#include <chrono>
#include <memory>
#include <string>

#include "common/status.h"
#include "deviceplugin/plugin_backend.h"

namespace hami::deviceplugin {

struct GrpcPluginOptions {
  std::string plugin_dir = "/var/lib/kubelet/device-plugins";
  std::string socket_name = "nvidia-gpu.sock";
  std::string kubelet_socket = "kubelet.sock";  // in plugin_dir
  bool preferred_allocation = false;            // offered in Register's options
  std::chrono::milliseconds register_timeout{std::chrono::seconds(5)};
};

class GrpcPlugin {
 public:
  // `service` must outlive the plugin.
  GrpcPlugin(DevicePluginBackend& service, GrpcPluginOptions options);
  ~GrpcPlugin();
  GrpcPlugin(const GrpcPlugin&) = delete;
  GrpcPlugin& operator=(const GrpcPlugin&) = delete;

  // Serves on the socket (a stale file of that name is removed first) and checks that it
  // answers.
  Status Serve();
  // Registers with kubelet; Unavailable when kubelet's socket does not answer.
  Status Register();
  // Stops serving (open ListAndWatch streams end) and removes the socket.
  void Stop();

  std::string socket_path() const { return options_.plugin_dir + "/" + options_.socket_name; }
  const GrpcPluginOptions& options() const { return options_; }

  class Impl;

 private:
  DevicePluginBackend& service_;
  const GrpcPluginOptions options_;
  std::unique_ptr<Impl> impl_;
};

}  // namespace hami::deviceplugin
