// PluginService: the NVIDIA device plugin without its transport, as two owned halves wired
// together: a Registrar (registrar.h: the node's GPUs, their health, the registration it
// publishes, the replica list kubelet sees) and an Allocator (allocator.h: kubelet's Allocate and
// GetPreferredAllocation, on the registrar's replica map). grpc_plugin.h puts it on kubelet's
// gRPC socket.
//
// Thread safety: every public method may be called from any thread after Start(); Allocate and
// PreferredAllocation calls are serialised among themselves.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/change_signal.h"
#include "common/clock.h"
#include "common/status.h"
#include "device/node_config.h"
#include "deviceplugin/allocation.h"
#include "deviceplugin/allocator.h"
#include "deviceplugin/gpu_driver.h"
#include "deviceplugin/health.h"
#include "deviceplugin/mig_cdi.h"
#include "deviceplugin/mig_controller.h"
#include "deviceplugin/mig_driver.h"
#include "deviceplugin/mig_instances.h"
#include "deviceplugin/plugin_backend.h"
#include "deviceplugin/registrar.h"
#include "deviceplugin/volcano_allocator.h"
#include "deviceplugin/volcano_devices.h"
#include "deviceplugin/volcano_share_backend.h"
#include "k8s/rest_client.h"

namespace hami::deviceplugin {

struct PluginOptions {
  std::string node_name;
  std::string resource_name = "nvidia.com/gpu";
  device::NodeDeviceSettings settings;
  AllocationSettings allocation;
  bool topology_score = false;  // ENABLE_TOPOLOGY_SCORE: publish hami.io/node-nvidia-score
  MigStrategy mig_strategy = MigStrategy::kNone;  // static MIG (mig_resources.h)
  // Dynamic MIG (settings.operating_mode mig): the allowlist, where the MIG devices made for
  // pods are recorded (mig_instances.h; "" = memory only) and how often finished pods' devices
  // are reclaimed.
  std::vector<device::MigAllowlistEntry> mig_allowlist;
  std::string mig_state_file;
  std::chrono::milliseconds mig_reconcile_interval{std::chrono::seconds(5)};
  // With a CDI device list strategy: where the MIG devices' CDI specs go (mig_cdi.h).
  std::optional<MigCdiOptions> mig_cdi;
  XidPolicy xid_policy;
  std::chrono::milliseconds register_interval{std::chrono::seconds(30)};
  std::chrono::milliseconds retry_interval{std::chrono::seconds(5)};
  std::chrono::milliseconds health_wait_slice{500};
  int64_t node_lock_expire_seconds = 300;
  // The node registration is published only once PublishRegistration() is called (the plugin
  // calls it when the kubelet has registered all its sockets; see RegistrarOptions).
  bool publish_after_kubelet = false;
  // Volcano's vGPU protocol (volcano_devices.h, volcano_allocator.h) instead of HAMi's:
  // `resource_name` is then the count resource, the registration is Volcano's and Allocate
  // follows Volcano's pod annotations. Not with operating mode mig or a MIG strategy. With
  // `volcano->share` the service serves Volcano's GPU sharing or GPU number resource instead
  // (volcano_share_backend.h; `resource_name` is that resource).
  std::optional<VolcanoSettings> volcano;
};

class PluginService final : public DevicePluginBackend {
 public:
  // `client`, `driver`, `mig_driver` and `clock` must outlive the service. The clock times the
  // registration (register_interval, retry_interval), the node lock and the MIG reclaim; null
  // means the real one. `mig_driver` is required in operating mode mig (null otherwise).
  PluginService(k8s::RestClient& client, GpuDriver& driver, PluginOptions options,
                hami::Clock* clock = nullptr, MigDriver* mig_driver = nullptr);
  ~PluginService();
  PluginService(const PluginService&) = delete;
  PluginService& operator=(const PluginService&) = delete;

  // Operating mode mig: the MIG devices of pods are loaded and adopted first, and their reclaim
  // starts after the registration.
  Status Start();
  void Stop();
  // With publish_after_kubelet: publishes the node registration from now on (any thread).
  void PublishRegistration() { registrar_.Publish(); }

  const PluginOptions& options() const { return options_; }

  std::string ResourceName() const override { return options_.resource_name; }
  // See Registrar::Devices.
  uint64_t Devices(uint64_t known, std::chrono::milliseconds timeout,
                   std::vector<PluginDevice>* out) override {
    if (volcano_share_) return volcano_share_->Devices(known, timeout, out);
    return registrar_.Devices(known, timeout, out);
  }
  // Volcano: no preference (the pod's GPUs do not depend on kubelet's IDs).
  std::vector<std::vector<std::string>> PreferredAllocation(
      const std::vector<PreferredRequest>& requests) override {
    if (volcano_allocator_ || volcano_share_) {
      return std::vector<std::vector<std::string>>(requests.size());
    }
    return allocator_.PreferredAllocation(requests);
  }
  Result<std::vector<ContainerAllocation>> Allocate(
      const std::vector<std::vector<std::string>>& requests) override;
  // The mixed MIG strategy's resources (Registrar::MigResourceNames), and the device lists of
  // the resources besides the main one (Registrar::ResourceDevices): one WholeDeviceBackend or
  // VolcanoUnitsBackend each.
  std::vector<std::string> MigResourceNames() const { return registrar_.MigResourceNames(); }
  uint64_t ResourceDevices(const std::string& resource, uint64_t known,
                           std::chrono::milliseconds timeout, std::vector<PluginDevice>* out) {
    return registrar_.ResourceDevices(resource, known, timeout, out);
  }
  // Marks GPUs unhealthy (the health monitor's callback; public for tests).
  void MarkUnhealthy(const std::vector<std::string>& uuids, const std::string& reason) {
    registrar_.MarkUnhealthy(uuids, reason);
  }

  // Counters of both halves, for metrics and tests.
  struct Stats {
    uint64_t refreshes = 0;  // registrar keys run, published or not
    uint64_t registrations_published = 0;
    uint64_t allocations = 0;
    uint64_t allocation_failures = 0;
  };
  Stats stats() const;
  // Waits until `pred(stats())` holds: true then, false once `timeout` of real time has passed
  // without it. The predicate is checked again after each change of either half's counters, so
  // the wait ends with the change that satisfies it; `timeout` only bounds a wait for one that
  // never comes. Changes in quick succession may be seen together: prefer `>=` to `==` unless
  // the count can stop only at that value. `pred` runs with no lock of the service held.
  bool WaitForStats(const std::function<bool(const Stats&)>& pred, Duration timeout) const;

 private:
  void StatsChanged();

  const PluginOptions options_;
  hami::RealClock real_clock_;
  hami::Clock& clock_;
  // WaitForStats's wake-ups, told after either half's counters changed. Declared before the
  // halves, which notify through it.
  mutable ChangeSignal changes_;
  // Dynamic MIG (null otherwise), declared before the halves that use them; the CDI specs
  // (with a CDI device list strategy) before the instances that tell them of every change.
  std::unique_ptr<MigCdiSpecs> mig_cdi_;
  std::unique_ptr<MigInstances> mig_instances_;
  std::unique_ptr<MigController> mig_controller_;
  // Declared before the registrar, whose replica map they read only during calls.
  Allocator allocator_;
  std::unique_ptr<VolcanoAllocator> volcano_allocator_;  // with options_.volcano, vGPU
  std::unique_ptr<VolcanoShareBackend> volcano_share_;   // with options_.volcano->share
  Registrar registrar_;  // stopped first on destruction (declared last)
};

}  // namespace hami::deviceplugin
