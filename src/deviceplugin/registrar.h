// Registrar: the half of the device plugin that says what the node has. It owns the node's GPUs
// as the driver reports them, their health, the registration it last published and the replica
// list kubelet sees.
//
//  - Start(): discovers the GPUs (an error if the driver cannot be read, if the MIG strategy
//    refuses the node, or if nothing is left to serve), starts XID health monitoring and
//    publishes `hami.io/node-nvidia-register` (and
//    `hami.io/node-nvidia-score` with topology scores on).
//  - Static MIG (mig_resources.h): with the strategy single, the MIG devices are registered as
//    whole devices (discovery.h) and served as the replicas of `resource_name`; with mixed, the
//    MIG devices of each profile are a device list of their own (MigDevices), for one plugin
//    socket per profile. Which resources exist is fixed at Start (kubelet sockets are per
//    resource); devices that come and go within them later are followed, and a profile that
//    appears later is named in a warning (restart the plugin to offer it). An XID charged to a
//    MIG instance makes that instance unhealthy; one charged to its GPU, every instance on it.
//  - Dynamic MIG (operating mode mig, mig_registration.h): at Start each served GPU gets MIG
//    turned on if it is off (a change that stays pending registers the GPU unhealthy, naming
//    why) and its profiles read once; every pass re-reads the MIG mode and leaves out of the
//    published placements those of MIG devices no owner holds (MigInstances::Foreign).
//  - Volcano's vGPU protocol (`volcano` set, volcano_devices.h): the registration goes into
//    `volcano.sh/node-vgpu-register` instead of HAMi's annotations (healthy GPUs only, memory in
//    gpuMemoryFactor units), the memory and cores resources get device lists of their own
//    (ResourceDevices), and `volcano.sh/node-vgpu-handshake` is written for schedulers up to
//    Volcano v1.15.0: once, and again on a full pass that finds it stamped by such a scheduler
//    ("Requesting_..."/"Deleted_..."), so an old scheduler sees a live node while a new one
//    never causes a write.
//  - Volcano's GPU sharing and GPU number (`volcano->share` set): no registration annotation;
//    the one resource's list (ResourceDevices), the node status quantity Volcano's scheduler
//    needs besides it (VolcanoShareCapacity) and `volcano.sh/gpu-unhealthy-ids`. Both are
//    checked on every full pass (a kubelet restart can reset the status) and written only when
//    they differ; a health change writes the annotation at once.
//  - Periodic work runs as keys on a WorkQueue: "refresh" rediscovers and publishes every
//    `register_interval` (after `retry_interval` when a pass failed); "publish" publishes at once
//    (a GPU turned unhealthy). A publication patches the node only when the text changed.
//  - Devices(): the ListAndWatch list; blocks until it changes.
//
//   Registrar r(client, driver, options, clock);
//   r.Start();                       // a worker thread drives the queue
//   r.Start(Registrar::Drive::kSteps);  // tests: nothing runs until Step()
//
// Thread safety: every public method may be called from any thread after Start; Start, Stop and
// Step from the owning thread.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "common/clock.h"
#include "common/status.h"
#include "common/thread_annotations.h"
#include "device/node_config.h"
#include "deviceplugin/allocation.h"
#include "deviceplugin/discovery.h"
#include "deviceplugin/gpu_driver.h"
#include "deviceplugin/health.h"
#include "deviceplugin/mig_driver.h"
#include "deviceplugin/mig_instances.h"
#include "deviceplugin/mig_registration.h"
#include "deviceplugin/mig_resources.h"
#include "deviceplugin/volcano_devices.h"
#include "k8s/rest_client.h"
#include "k8s/work_queue.h"

namespace hami::deviceplugin {

struct RegistrarOptions {
  std::string node_name;
  std::string resource_name = "nvidia.com/gpu";  // for the log only: kubelet's name for them
  device::NodeDeviceSettings settings;
  bool topology_score = false;  // ENABLE_TOPOLOGY_SCORE: publish hami.io/node-nvidia-score
  MigStrategy mig_strategy = MigStrategy::kNone;
  // Operating mode mig: the allowlist, the driver that makes MIG devices and the table of those
  // made (both must outlive the registrar; required in that mode).
  std::vector<device::MigAllowlistEntry> mig_allowlist;
  MigDriver* mig_driver = nullptr;
  MigInstances* mig_instances = nullptr;
  XidPolicy xid_policy;
  std::chrono::milliseconds register_interval{std::chrono::seconds(30)};
  std::chrono::milliseconds retry_interval{std::chrono::seconds(5)};
  std::chrono::milliseconds health_wait_slice{500};
  // false: nothing is published until Publish(). The plugin holds its registration until the
  // kubelet has taken its sockets, so that the scheduler never places a pod on a node whose
  // kubelet cannot yet allocate it (a restarted plugin, or one switched to another operating
  // mode, would otherwise see such a pod rejected with UnexpectedAdmissionError).
  bool publish_at_start = true;
  // Volcano's vGPU protocol instead of HAMi's registration (see above).
  std::optional<VolcanoSettings> volcano;
};

class Registrar {
 public:
  enum class Drive { kWorker, kSteps };

  // `client`, `driver` and `clock` must outlive the registrar. `stats_changed` (may be empty) is
  // called after stats() may have changed, on the thread that changed them (Start's or the
  // worker's) with no lock of the registrar held; it must not call back into the registrar's
  // Start, Stop or Step.
  Registrar(k8s::RestClient& client, GpuDriver& driver, RegistrarOptions options,
            hami::Clock& clock, std::function<void()> stats_changed = {});
  ~Registrar();
  Registrar(const Registrar&) = delete;
  Registrar& operator=(const Registrar&) = delete;

  // The first publication's failure is not an error: it is retried after retry_interval.
  Status Start(Drive drive = Drive::kWorker);
  void Stop();
  // Runs one key that is due on the clock now; false when none is (Drive::kSteps only).
  bool Step();

  // The replica list and its generation. Returns at once when the current generation differs
  // from `known`, else waits up to `timeout` of real time for a change (or Stop).
  uint64_t Devices(uint64_t known, std::chrono::milliseconds timeout,
                   std::vector<PluginDevice>* out);
  // Which GPU each replica ID stands for, now.
  ReplicaMap Replicas() const;
  // The registered GPUs, now (health included).
  std::vector<device::DeviceInfo> RegisteredDevices() const;
  // Mixed MIG strategy: the resources offered (fixed at Start, sorted).
  std::vector<std::string> MigResourceNames() const;
  // The device list of one resource besides the main one (a mixed MIG profile, whose IDs are
  // MIG UUIDs, or Volcano's memory and cores resources), waited for as Devices() does; an
  // unknown resource has none.
  uint64_t ResourceDevices(const std::string& resource, uint64_t known,
                           std::chrono::milliseconds timeout, std::vector<PluginDevice>* out);
  // With publish_at_start false: ends the hold and queues the first publication (any thread;
  // later calls do nothing).
  void Publish();
  // Marks GPUs unhealthy and queues a publication (the health monitor's callback).
  void MarkUnhealthy(const std::vector<std::string>& uuids, const std::string& reason);

  struct Stats {
    // Keys run, published or not. A key is counted once the pass after it is scheduled, so a
    // caller that sees the count and then advances a fake clock makes that pass due.
    uint64_t refreshes = 0;
    uint64_t registrations_published = 0;
  };
  Stats stats() const;

 private:
  void Run(const std::string& key);
  // Rediscovers (when `rediscover`), rebuilds and publishes when the text changed.
  Status Refresh(bool rediscover);
  // Refresh's publication in Volcano's format.
  Status PublishVolcano(bool full_pass);
  // Refresh's publication for Volcano's GPU sharing and GPU number.
  Status PublishVolcanoShare(bool full_pass);
  void Rebuild() REQUIRES(mu_);  // registration and device list from inventory_ and unhealthy_
  // The MIG plan of the served (unfiltered) GPUs and the mixed strategy's device lists.
  Result<MigPlan> PlanMig() const REQUIRES(mu_);
  bool RebuildMig(const MigPlan& plan) REQUIRES(mu_);  // true when a list changed
  // Operating mode mig: MIG turned on where it is off, the profiles read (once per GPU), the
  // mode and the blocked placements read again.
  void RefreshMigFacts(bool first) REQUIRES(mu_);
  bool DynamicMig() const {
    return options_.settings.operating_mode == device::OperatingMode::kMig;
  }
  // Logs what Start serves; an error when nothing.
  Status DescribeServed() REQUIRES(mu_);
  // The GPUs whose XIDs matter: registered whole GPUs and the GPUs of served MIG devices.
  std::vector<std::string> WatchedGpus() const REQUIRES(mu_);
  void StartHealth(const std::vector<std::string>& uuids);

  k8s::RestClient& client_;
  GpuDriver& driver_;
  const RegistrarOptions options_;
  hami::Clock& clock_;
  const std::function<void()> stats_changed_;
  k8s::WorkQueue queue_;
  std::unique_ptr<HealthMonitor> health_;
  std::thread worker_;

  mutable Mutex mu_;
  std::condition_variable changed_;  // device list changes, Stop
  bool stopping_ GUARDED_BY(mu_) = false;
  bool held_ GUARDED_BY(mu_);  // publication held until Publish() (publish_at_start false)
  Inventory inventory_ GUARDED_BY(mu_);
  std::set<std::string> unhealthy_ GUARDED_BY(mu_);
  Registration registration_ GUARDED_BY(mu_);
  device::DevicePairScores scores_ GUARDED_BY(mu_);
  std::vector<PluginDevice> devices_ GUARDED_BY(mu_);
  ReplicaMap replicas_ GUARDED_BY(mu_);
  std::vector<std::string> mig_resources_ GUARDED_BY(mu_);  // mixed: offered, fixed at Start
  std::map<std::string, std::vector<PluginDevice>> mig_devices_ GUARDED_BY(mu_);
  // Volcano: the memory and cores resources' lists.
  std::map<std::string, std::vector<PluginDevice>> volcano_devices_ GUARDED_BY(mu_);
  std::set<std::string> mig_warned_ GUARDED_BY(mu_);  // plan warnings already logged
  // Operating mode mig: "<gpu>/<start>+<size>" of the GPU instances without a compute instance
  // the last pass saw (RefreshMigFacts).
  std::set<std::string> empty_seen_ GUARDED_BY(mu_);
  std::map<std::string, MigGpuFacts> mig_facts_ GUARDED_BY(mu_);  // dynamic MIG, by GPU
  uint64_t generation_ GUARDED_BY(mu_) = 0;
  std::string published_register_ GUARDED_BY(mu_);  // last text the node accepted
  std::string published_score_ GUARDED_BY(mu_);
  bool handshake_written_ GUARDED_BY(mu_) = false;  // Volcano: by this process
  // Volcano GPU sharing/number: the unhealthy-ids value last written (nullopt: none yet).
  std::optional<std::string> published_unhealthy_ GUARDED_BY(mu_);
  Stats stats_ GUARDED_BY(mu_);
};

}  // namespace hami::deviceplugin
