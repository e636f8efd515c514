// MigController: dynamic MIG's housekeeping beside the plugin's two halves.
//
//  - Prepare() (before the registrar starts): the table of MIG devices made for pods is read
//    from its state file and completed from the pods' annotations (MigInstances::Adopt: devices
//    an earlier plugin made and recorded on the pod, upstream's plugin included). A pod whose
//    annotation cannot be read is skipped with a warning, never a reason to stop.
//  - Then, every `interval` on a WorkQueue (and at once on Poke()): the node's pods are listed and
//    the MIG devices of pods that are gone, finished or terminating are destroyed
//    (MigInstances::Reconcile; one whose processes still run is tried again next pass). A pass
//    whose pod list fails destroys nothing.
//
// Thread safety: Prepare, Start, Stop and Step from the owning thread; Poke from any thread.
#pragma once

#include <chrono>
#include <cstdint>
#include <set>
#include <string>
#include <thread>

#include "common/clock.h"
#include "common/status.h"
#include "common/thread_annotations.h"
#include "deviceplugin/gpu_driver.h"
#include "deviceplugin/mig_instances.h"
#include "k8s/rest_client.h"
#include "k8s/work_queue.h"

namespace hami::deviceplugin {

struct MigControllerOptions {
  std::string node_name;
  std::chrono::milliseconds interval{std::chrono::seconds(5)};
};

class MigController {
 public:
  enum class Drive { kWorker, kSteps };

  // Everything passed must outlive the controller.
  MigController(k8s::RestClient& client, GpuDriver& driver, MigInstances& instances,
                MigControllerOptions options, hami::Clock& clock);
  ~MigController();
  MigController(const MigController&) = delete;
  MigController& operator=(const MigController&) = delete;

  // Loads the state file and adopts. An error only when the GPUs cannot be read; a broken
  // state file or an unreachable API server is logged and the plugin goes on with what it has.
  Status Prepare();
  void Start(Drive drive = Drive::kWorker);
  void Stop();
  bool Step();  // Drive::kSteps: runs one due pass; false when none is due
  void Poke();

  struct Stats {
    uint64_t passes = 0;     // reconcile passes that listed the pods
    uint64_t destroyed = 0;  // MIG devices destroyed by them
    uint64_t failed_lists = 0;
  };
  Stats stats() const;

 private:
  void Pass();
  // The UIDs of the pods on the node that still need their MIG devices, and the devices their
  // annotations name (for adoption).
  Result<std::set<std::string>> ActivePods(std::vector<MigInstance>* named);

  k8s::RestClient& client_;
  GpuDriver& driver_;
  MigInstances& instances_;
  const MigControllerOptions options_;
  k8s::WorkQueue queue_;
  std::thread worker_;
  mutable Mutex mu_;
  Stats stats_ GUARDED_BY(mu_);
};

}  // namespace hami::deviceplugin
