// Monitor: the node monitor's core, without Kubernetes. It follows the container directories the
// device plugin creates (<containers_dir>/<podUID>_<container>/, each holding one region file
// libvgpu maps; HAMi-core's 1.x files are read too, see region_access.h), and on every Update
// (every 5 s in hami-monitor):
//   * opens new regions, forgets vanished directories, and removes the directories of pods that
//     are gone from the node (never while the pod list is not synced, never a pod the list still
//     has, only once the directory is older than the resync delay, and never while a process of
//     the region still runs);
//   * gives every GPU process of a container its host PID: NVML reports host PIDs, libvgpu knows
//     its PID inside the container. For each compute process the host's /proc says which file
//     it maps (the region's device and inode), its PID in its own namespace (NSpid) and its start
//     time; the slot with that PID and start time gets the host PID, which the SM limiter then
//     finds in NVML's samples;
//   * runs the priority / utilisation-switch feedback (feedback.h) over the regions;
//   * measures each container's SM utilisation per GPU from NVML's per-process samples;
//   * reads the MIG instances the node's pods hold from their hami.io/vgpu-mig-allocations.
// Snapshot() returns what the metrics page shows (exporter.h).
//
// Thread safety: Update from one thread; Snapshot from any thread (a mutex guards the container
// table and the regions' copies; regions are read and written through their files, never
// mapped, see region_access.h).
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "common/thread_annotations.h"
#include "monitor/gpu_stats.h"
#include "monitor/procfs.h"
#include "monitor/region_access.h"

namespace hami::monitor {

// "<podUID>_<container>" split; nullopt when it is not such a name.
struct ContainerDirName {
  std::string pod_uid, container;
};
std::optional<ContainerDirName> ParseContainerDirName(const std::string& name);

// The pod a container directory belongs to, as the API server says.
struct PodRef {
  std::string ns, name;
  std::vector<std::string> containers;  // regular containers (not init containers)
  // The fields below default (`= {}`) so that initialisers naming only the above stay valid.
  std::vector<std::string> init_containers = {};  // in spec order
  // The annotation hami.io/vgpu-mig-allocations as written (untrusted); "" when absent.
  std::string mig_allocations = {};
};

// The pods of this node: the service backs it with an informer.
class PodDirectory {
 public:
  virtual ~PodDirectory() = default;
  // False until the first full list arrived: nothing is removed before.
  virtual bool Synced() const = 0;
  virtual std::optional<PodRef> Find(const std::string& uid) const = 0;
  // The pods whose mig_allocations is not empty, by UID.
  virtual std::map<std::string, PodRef> MigPods() const = 0;
};

// One MIG instance a container of the node holds: a realised entry of its pod's
// hami.io/vgpu-mig-allocations (device/mig_allocation.h), with the container named.
struct MigReservation {
  std::string ns, pod, container;
  int vdevice_index = 0;  // the container's device index (deviceIndex)
  std::string gpu_uuid, mig_uuid, profile;
  uint32_t gpu_instance_id = 0, compute_instance_id = 0;
};

struct MonitorOptions {
  std::string containers_dir;  // <HOOK_PATH>/containers
  // A gone pod's directory is removed once it has not been modified for this long
  // (HAMI_RESYNC_INTERVAL, 5 minutes by default as upstream).
  std::chrono::seconds resync_delay{300};
  bool feedback = true;  // run the priority / utilisation-switch loop
};

// The region's figures for one container device (uuid, limit, used, breakdown, SM limit), and:
struct ContainerDeviceUsage : RegionDeviceFigures {
  int index = 0;       // the container's device index (vdevice_index)
  double sm_util = 0;  // percent, NVML samples of the container's processes
};

struct ContainerUsage {
  std::string pod_uid, container;
  std::optional<PodRef> pod;      // nullopt: the pod is not (or no longer) on this node
  uint64_t last_kernel_time = 0;  // epoch seconds; 0 = never
  int32_t priority = 0, utilization_switch = 0, recent_kernel = 0;
  int processes = 0;        // non-free slots
  int host_pids_known = 0;  // of those, with a host PID
  std::vector<ContainerDeviceUsage> devices;
};

struct MonitorSnapshot {
  std::vector<HostGpu> gpus;               // empty when NVML could not be read
  std::vector<ContainerUsage> containers;  // by directory name
  // As of the last update; by pod UID, each pod's in its annotation's order.
  std::vector<MigReservation> mig_reservations = {};
};

enum class LogLevel { kInfo, kWarning, kVerbose };

// What one Update did, for logs and tests.
struct UpdateResult {
  int containers = 0;
  int mapped_now = 0;                 // regions mapped by this update
  int removed = 0;                    // directories of gone pods removed
  int host_pids_written = 0;          // slots given their host PID by this update
  std::vector<std::string> problems;  // things a user should know (also logged)
  // The decisions Update logged (after releasing its lock), in order.
  std::vector<std::pair<LogLevel, std::string>> logs;
};

class Monitor {
 public:
  Monitor(MonitorOptions options, GpuStats* gpus, const PodDirectory* pods,
          ProcFs procfs = ProcFs());
  ~Monitor();
  Monitor(const Monitor&) = delete;
  Monitor& operator=(const Monitor&) = delete;

  // `now` is the wall clock (directory ages and sample windows are wall-clock times).
  UpdateResult Update(std::chrono::system_clock::time_point now);
  MonitorSnapshot Snapshot() const;

  struct Tracked;

 private:
  void Rescan(std::chrono::system_clock::time_point now, UpdateResult* result) REQUIRES(mu_);
  void MapHostPids(const std::vector<HostGpu>& gpus, UpdateResult* result) REQUIRES(mu_);
  void MeasureSm(const std::vector<HostGpu>& gpus, std::chrono::system_clock::time_point now)
      REQUIRES(mu_);
  void Feedback(UpdateResult* result) REQUIRES(mu_);
  // The node's realised MIG reservations; a pod whose annotation is unusable is left out, and
  // logged (verbose) once per annotation text.
  std::vector<MigReservation> ReadMigReservations(UpdateResult* result);
  bool AnyProcessAlive(const Tracked& t) const;

  const MonitorOptions options_;
  GpuStats* gpus_;
  const PodDirectory* pods_;
  const ProcFs procfs_;

  mutable Mutex mu_;
  std::map<std::string, std::unique_ptr<Tracked>> tracked_ GUARDED_BY(mu_);  // by dir name
  std::vector<HostGpu> last_gpus_ GUARDED_BY(mu_);
  std::vector<MigReservation> mig_reservations_ GUARDED_BY(mu_);

  // Update thread only.
  struct Resolved {
    uint64_t start_time = 0;
    std::string dir;  // "" = not a process of any region (checked once)
    int slot = -1;
    int inner = 0;  // its PID in its own namespace
  };
  std::map<int, Resolved> host_pids_;               // by host PID
  std::map<std::string, uint64_t> last_sample_us_;  // by GPU UUID
  std::map<std::string, std::string> bad_mig_annotations_;  // by pod UID: the text last logged
};

}  // namespace hami::monitor
