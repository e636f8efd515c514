// DeviceManager: the simulated kubelet's device manager, the kubelet side of the device plugin
// API v1beta1 over real gRPC on unix sockets, so plugins run against it exactly as against
// kubelet:
//  - serves Registration on <plugin_dir>/kubelet.sock (removing the other sockets there first,
//    as kubelet does when it starts, which is how plugins notice a kubelet restart);
//  - on Register, dials the plugin's endpoint and keeps ListAndWatch open: the resource's
//    devices and their health follow the stream (a re-registration replaces the stream);
//  - AllocatePod picks device IDs per container as kubelet does (healthy, not held by another
//    pod; devices of init containers are reused by later containers of the pod; the plugin's
//    GetPreferredAllocation when it offers one, with the reused IDs as must-include; kubelet's
//    own pick when the preference is unusable), then calls Allocate once per container, init
//    containers first.
//
// Thread safety: every method may be called from any thread; AllocatePod calls are serialised.
// The change callback runs on a ListAndWatch reader thread.
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "common/status.h"

namespace hami::sim {

struct KubeletDevice {
  std::string id;
  bool healthy = false;
  int numa_node = -1;
  friend bool operator==(const KubeletDevice&, const KubeletDevice&) = default;
};

struct ResourceState {
  std::string endpoint;    // socket file name in the plugin directory
  bool connected = false;  // ListAndWatch stream open
  bool preferred_allocation = false;
  uint64_t registrations = 0;
  uint64_t updates = 0;  // ListAndWatch responses received
  std::vector<KubeletDevice> devices;

  int64_t Capacity() const { return static_cast<int64_t>(devices.size()); }
  int64_t Allocatable() const;
};

// What one container of a pod needs of one resource.
struct ContainerNeed {
  std::string name;
  bool init = false;
  int64_t count = 0;
};

struct KubeletMount {
  std::string container_path, host_path;
  bool read_only = true;
};

// The plugin's answer for one container.
struct ContainerDevices {
  std::string name;
  std::vector<std::string> device_ids;
  std::map<std::string, std::string> envs;
  std::vector<KubeletMount> mounts;
  std::map<std::string, std::string> annotations;
  std::vector<std::string> cdi_devices;  // fully qualified CDI names ("nvidia.com/gpu=<uuid>")
};

class DeviceManager {
 public:
  static Result<std::unique_ptr<DeviceManager>> Start(const std::string& plugin_dir);
  ~DeviceManager();
  DeviceManager(const DeviceManager&) = delete;
  DeviceManager& operator=(const DeviceManager&) = delete;

  // Stops serving kubelet.sock and closes every plugin stream. Idempotent.
  void Stop();

  std::map<std::string, ResourceState> Resources() const;
  // Waits until `cond` holds for the resources (re-checked on every change) or `timeout`.
  bool WaitFor(const std::function<bool(const std::map<std::string, ResourceState>&)>& cond,
               std::chrono::milliseconds timeout) const;
  // Called after every registration and ListAndWatch update.
  void SetOnChange(std::function<void()> on_change);

  // Allocates `resource` for the containers of pod `pod_uid` (init containers first, in spec
  // order; containers with count 0 are skipped). On error nothing stays held for the pod's
  // resource and the error carries the plugin's message (or kubelet's own reason).
  Result<std::vector<ContainerDevices>> AllocatePod(const std::string& pod_uid,
                                                    const std::string& resource,
                                                    const std::vector<ContainerNeed>& containers);
  // Releases everything the pod holds.
  void FreePod(const std::string& pod_uid);
  // Device IDs the pod holds for `resource`.
  std::vector<std::string> Held(const std::string& pod_uid, const std::string& resource) const;

  class Impl;

 private:
  explicit DeviceManager(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace hami::sim
