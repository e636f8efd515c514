// MigInstances: the MIG devices this plugin made for pods (dynamic MIG, operating mode "mig"),
// keyed by who owns them: pod UID, container index (init containers first) and device index,
// as the scheduler's reservation (`hami.io/vgpu-mig-allocations`) names them.
//
//  - Ensure() makes the owner's instance at the reserved GPU, profile and placement, or returns
//    the one it already has (kubelet retries Allocate; a retry never makes a second instance).
//    The profile is resolved by the driver's own name (mig_driver.h), and the placement must be
//    one the driver lists for it.
//  - Reconcile() destroys the instances of pods that are gone or finished. An instance whose
//    processes still run (a terminating pod) stays and is tried again at the next pass; that is
//    never an error for anyone else's Allocate (upstream's B2, B3).
//  - What was made is recorded in a state file (written atomically after every change), so a
//    restarted plugin still knows its instances, including those of pods deleted while it was
//    down. Adopt() also takes over instances that pods' annotations name with their runtime
//    identity (made by an earlier plugin without the file, upstream's included) when the driver
//    still has them; incomplete entries are skipped, never a reason to stop (B4).
//  - Foreign() lists the MIG devices on the GPUs that no owner holds (an operator's, or left by
//    a pod nobody knows): they are reported and their placements kept out of the registration,
//    never reused or destroyed.
//
// Thread safety: every method may be called from any thread; calls are serialised (driver calls
// included, which take milliseconds).
#pragma once

#include <compare>
#include <functional>
#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "common/status.h"
#include "common/thread_annotations.h"
#include "device/device.h"
#include "deviceplugin/gpu_driver.h"
#include "deviceplugin/mig_driver.h"

namespace hami::deviceplugin {

struct MigOwner {
  std::string pod_uid;
  int32_t container_index = 0;
  int32_t device_index = 0;
  auto operator<=>(const MigOwner&) const = default;
  bool operator==(const MigOwner&) const = default;
};

struct MigInstance {
  MigOwner owner;
  std::string pod;  // "namespace/name", for logs
  std::string gpu_uuid;
  std::string profile;  // the scheduler's name, e.g. "1g.10gb"
  device::MigPlacement placement;
  CreatedMigDevice device;  // MIG UUID, GPU and compute instance ids
  friend bool operator==(const MigInstance&, const MigInstance&) = default;
};

// One MIG device present on a GPU that no owner holds.
struct ForeignMig {
  std::string gpu_uuid;
  MigDeviceInfo device;
};

class MigInstances {
 public:
  // `driver` must outlive this. `state_file` "" keeps the table in memory only.
  MigInstances(MigDriver& driver, std::string state_file);

  // Reads the state file (a missing file is an empty table) and keeps the entries whose MIG
  // device `inventory` still shows; the others are dropped with a log line. InvalidArgument
  // naming the file when it cannot be parsed (the table is then empty and the file is kept).
  Status Load(const Inventory& inventory);

  // Takes over `wanted` instances not in the table whose MIG device `inventory` shows with the
  // same GPU, UUID and GPU/compute instance ids; returns how many. Others are skipped (logged).
  int Adopt(const std::vector<MigInstance>& wanted, const Inventory& inventory);

  // The owner's instance: the one it holds, or a new one. FailedPrecondition when the owner
  // holds an instance of another reservation, when another owner's instance overlaps the
  // placement (naming that pod: its processes may still run), when MIG is not enabled on the GPU
  // or the placement is not one the profile may take; NotFound for a profile the GPU does not
  // have; the driver's error otherwise (ResourceExhausted: a MIG device nobody here owns is in
  // the way).
  // `created` (may be null) tells whether this call made it. `finished` (may be empty) is asked
  // about another owner's instance in the way: when its pod is gone or finished (the scheduler
  // already gave its placement away, and the periodic reclaim has not run yet), it is destroyed
  // here first.
  using FinishedPod = std::function<bool(const MigInstance&)>;
  Result<MigInstance> Ensure(const MigOwner& owner, const std::string& pod,
                             const std::string& gpu_uuid, const std::string& profile,
                             device::MigPlacement placement, bool* created = nullptr,
                             const FinishedPod& finished = {});
  // Destroys the owner's instance now (an Allocate rolled back); OK when it has none.
  Status Release(const MigOwner& owner);

  struct ReconcileResult {
    int destroyed = 0;
    std::vector<std::string> in_use;  // MIG UUIDs kept because processes still run on them
    std::vector<std::string> failed;  // "<MIG UUID>: <error>", kept and tried again
  };
  // Destroys the instances whose pod UID is not in `active_pod_uids`, among those that existed
  // at `as_of` (a Generation() read before the pods were listed: an instance made for a pod the
  // list could not know yet is left alone).
  ReconcileResult Reconcile(const std::set<std::string>& active_pod_uids, uint64_t as_of);
  // Counts the instances made so far.
  uint64_t Generation() const;

  // Called with every instance held after each change to the table, and once by Load() (under
  // the table's lock, so it sees the changes in order; it must not call back into this object).
  // Set before any other call.
  using ChangeListener = std::function<void(const std::vector<MigInstance>&)>;
  void SetChangeListener(ChangeListener listener);

  std::vector<MigInstance> Snapshot() const;
  // The GPU's MIG profiles as its driver lists them, read once per GPU and kept (the table a
  // GPU supports does not change while it is in MIG mode).
  Result<std::vector<MigProfileSpec>> Profiles(const std::string& gpu_uuid) EXCLUDES(mu_);
  // MIG devices of `inventory` that no owner holds.
  std::vector<ForeignMig> Foreign(const Inventory& inventory) const;

 private:
  Result<const std::vector<MigProfileSpec>*> CachedProfiles(const std::string& gpu_uuid)
      REQUIRES(mu_);
  Result<uint32_t> ProfileId(const std::string& gpu_uuid, const std::string& profile,
                             device::MigPlacement placement) REQUIRES(mu_);
  Status Destroy(const MigInstance& inst) REQUIRES(mu_);
  void Save() REQUIRES(mu_);

  MigDriver& driver_;
  const std::string state_file_;
  ChangeListener on_change_;
  mutable Mutex mu_;
  std::map<MigOwner, MigInstance> table_ GUARDED_BY(mu_);
  std::map<MigOwner, uint64_t> made_at_ GUARDED_BY(mu_);  // Generation() when made (0: earlier)
  uint64_t generation_ GUARDED_BY(mu_) = 0;
  std::map<std::string, std::vector<MigProfileSpec>> profiles_ GUARDED_BY(mu_);  // by GPU
  std::set<std::string> reported_ GUARDED_BY(mu_);  // in-use instances already logged
  // MIG UUIDs this process destroyed (a UUID is never reused): an inventory read just before a
  // destruction must not make the device look foreign. Bounded; cleared when it grows large.
  std::set<std::string> destroyed_ GUARDED_BY(mu_);
};

// The state file's text for `instances`, and back (exposed for tests and fuzzing).
std::string EncodeMigInstances(const std::vector<MigInstance>& instances);
Result<std::vector<MigInstance>> DecodeMigInstances(const std::string& text);

}  // namespace hami::deviceplugin
