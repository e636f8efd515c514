// PluginService: the NVIDIA device plugin without its transport. It owns what the plugin knows
// (the node's GPUs, their health, the registration it last published) and answers kubelet's
// questions; grpc_plugin.h puts it on kubelet's gRPC socket.
//
//  - Start(): discovers the GPUs (an error if the driver cannot be read or no GPU is left to
//    serve), starts XID health monitoring and the refresh loop, which publishes
//    `hami.io/node-nvidia-register` (and `hami.io/node-nvidia-score` with topology scores on)
//    on the node every `register_interval`, patching only when the text changed, retrying after
//    `retry_interval` on errors. A GPU turning unhealthy is published at once.
//  - Devices(): the ListAndWatch list; blocks until it changes.
//  - Allocate(): finds the pod the call is for (the node lock's holder, or the oldest bound pod
//    of this node in bind phase allocating), applies the allocation plan, writes the consumed
//    to-allocate annotation (and bind-phase success once nothing is left, in the same write,
//    guarded by the pod's resourceVersion) and releases the node lock (owner-checked). Any
//    failure after the pod is known marks it bind-phase failed, posts a Warning event and
//    releases the lock; a failure before (API server unreachable, no pending pod) writes nothing
//    and returns an error for kubelet.
//
// Thread safety: every public method may be called from any thread after Start(); Allocate and
// PreferredAllocation calls are serialised among themselves.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "common/clock.h"
#include "common/status.h"
#include "device/node_config.h"
#include "deviceplugin/allocation.h"
#include "deviceplugin/discovery.h"
#include "deviceplugin/gpu_driver.h"
#include "deviceplugin/health.h"
#include "extender/node_locker.h"
#include "k8s/object_fwd.h"
#include "k8s/rest_client.h"

namespace hami::deviceplugin {

struct PluginOptions {
  std::string node_name;
  std::string resource_name = "nvidia.com/gpu";
  device::NodeDeviceSettings settings;
  AllocationSettings allocation;
  bool topology_score = false;  // ENABLE_TOPOLOGY_SCORE: publish hami.io/node-nvidia-score
  XidPolicy xid_policy;
  std::chrono::milliseconds register_interval{std::chrono::seconds(30)};
  std::chrono::milliseconds retry_interval{std::chrono::seconds(5)};
  std::chrono::milliseconds health_wait_slice{500};
  int64_t node_lock_expire_seconds = 300;
};

// What Allocate found out of a pod object (exposed for tests).
PodView PodViewOf(const k8s::Object& pod);

class PluginService {
 public:
  // `client`, `driver` and `clock` must outlive the service. The clock times the refresh loop
  // (register_interval, retry_interval) and the node lock; null means the real one.
  PluginService(k8s::RestClient& client, GpuDriver& driver, PluginOptions options,
                hami::Clock* clock = nullptr);
  ~PluginService();
  PluginService(const PluginService&) = delete;
  PluginService& operator=(const PluginService&) = delete;

  Status Start();
  void Stop();

  const PluginOptions& options() const { return options_; }

  // The replica list and its generation. Returns at once when the current generation differs
  // from `known`, else waits up to `timeout` for a change (or Stop).
  uint64_t Devices(uint64_t known, std::chrono::milliseconds timeout,
                   std::vector<PluginDevice>* out);

  std::vector<std::vector<std::string>> PreferredAllocation(
      const std::vector<PreferredRequest>& requests);
  Result<std::vector<ContainerAllocation>> Allocate(
      const std::vector<std::vector<std::string>>& requests);

  // Marks GPUs unhealthy (the health monitor's callback; public for tests).
  void MarkUnhealthy(const std::vector<std::string>& uuids, const std::string& reason);

  // Counters, for metrics and tests.
  struct Stats {
    uint64_t refreshes = 0;  // passes of the refresh loop, published or not
    uint64_t registrations_published = 0;
    uint64_t allocations = 0;
    uint64_t allocation_failures = 0;
  };
  Stats stats() const;

 private:
  struct PendingPod;
  void RefreshLoop();
  // Rediscovers (when `rediscover`), rebuilds and publishes when changed.
  Status Refresh(bool rediscover);
  void RebuildLocked();  // registration and device list from inventory_ and unhealthy_
  Result<PendingPod> FindPendingPod();
  Status MarkFailed(const PendingPod& p, const std::string& reason);

  k8s::RestClient& client_;
  GpuDriver& driver_;
  const PluginOptions options_;
  hami::RealClock real_clock_;
  hami::Clock& clock_;
  scheduler::NodeLocker locker_;  // releases the node lock after an allocation (owner-checked)
  std::unique_ptr<HealthMonitor> health_;

  mutable std::mutex mu_;
  std::condition_variable changed_;    // device list changes, Stop
  std::condition_variable wake_;       // the refresh loop: publish now
  bool stopping_ = false;              // guarded by mu_
  bool publish_now_ = false;           // guarded by mu_
  Inventory inventory_;                // guarded by mu_
  std::set<std::string> unhealthy_;    // guarded by mu_
  Registration registration_;          // guarded by mu_
  device::DevicePairScores scores_;    // guarded by mu_
  std::vector<PluginDevice> devices_;  // guarded by mu_
  ReplicaMap replicas_;                // guarded by mu_
  uint64_t generation_ = 0;            // guarded by mu_
  std::string published_register_;     // guarded by mu_: last text the node accepted
  std::string published_score_;        // guarded by mu_
  Stats stats_;                        // guarded by mu_
  std::thread refresher_;

  std::mutex allocate_mu_;  // serialises Allocate/PreferredAllocation
};

}  // namespace hami::deviceplugin
