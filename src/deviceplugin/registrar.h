// Registrar: the half of the device plugin that says what the node has. It owns the node's GPUs
// as the driver reports them, their health, the registration it last published and the replica
// list kubelet sees.
//
//  - Start(): discovers the GPUs (an error if the driver cannot be read, if the operating mode is
//    MIG, or if no GPU is left to serve), starts XID health monitoring and publishes
//    `hami.io/node-nvidia-register` (and `hami.io/node-nvidia-score` with topology scores on).
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
#include "k8s/rest_client.h"
#include "k8s/work_queue.h"

namespace hami::deviceplugin {

struct RegistrarOptions {
  std::string node_name;
  std::string resource_name = "nvidia.com/gpu";  // for the log only: kubelet's name for them
  device::NodeDeviceSettings settings;
  bool topology_score = false;  // ENABLE_TOPOLOGY_SCORE: publish hami.io/node-nvidia-score
  XidPolicy xid_policy;
  std::chrono::milliseconds register_interval{std::chrono::seconds(30)};
  std::chrono::milliseconds retry_interval{std::chrono::seconds(5)};
  std::chrono::milliseconds health_wait_slice{500};
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
  void Rebuild() REQUIRES(mu_);  // registration and device list from inventory_ and unhealthy_
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
  Inventory inventory_ GUARDED_BY(mu_);
  std::set<std::string> unhealthy_ GUARDED_BY(mu_);
  Registration registration_ GUARDED_BY(mu_);
  device::DevicePairScores scores_ GUARDED_BY(mu_);
  std::vector<PluginDevice> devices_ GUARDED_BY(mu_);
  ReplicaMap replicas_ GUARDED_BY(mu_);
  uint64_t generation_ GUARDED_BY(mu_) = 0;
  std::string published_register_ GUARDED_BY(mu_);  // last text the node accepted
  std::string published_score_ GUARDED_BY(mu_);
  Stats stats_ GUARDED_BY(mu_);
};

}  // namespace hami::deviceplugin
