// FakeMigDriver: an in-memory MigDriver for unit tests. Each GPU has a MIG mode, a profile
// table and the instances made on it; creation refuses overlapping placements as the driver
// does (ResourceExhausted), destruction refuses instances marked busy ("in use"). Counters say
// what was asked of it.
//
// Thread safety: all methods may be called from any thread.
#pragma once

#include <map>
#include <set>
#include <string>
#include <vector>

#include "common/thread_annotations.h"
#include "deviceplugin/gpu_driver.h"
#include "deviceplugin/mig_driver.h"

namespace hami::deviceplugin {

class FakeMigDriver final : public MigDriver {
 public:
  struct Made {
    uint32_t profile_id = 0;
    device::MigPlacement placement;
    CreatedMigDevice device;
  };

  void AddGpu(const std::string& gpu, std::vector<MigProfileSpec> profiles, bool enabled = true) {
    MutexLock l(mu_);
    gpus_[gpu].profiles = std::move(profiles);
    gpus_[gpu].mode = {enabled, enabled};
  }
  void SetBusy(const std::string& mig_uuid, bool busy) {
    MutexLock l(mu_);
    if (busy) {
      busy_.insert(mig_uuid);
    } else {
      busy_.erase(mig_uuid);
    }
  }
  // Instances on `gpu`, in creation order.
  std::vector<Made> Instances(const std::string& gpu) const {
    MutexLock l(mu_);
    auto it = gpus_.find(gpu);
    return it == gpus_.end() ? std::vector<Made>{} : it->second.made;
  }
  // Discovery's view of the GPUs: each MIG-enabled, with the MIG devices made on it (UUID and
  // instance ids, placement and profile id).
  Inventory Discovered() const {
    MutexLock l(mu_);
    Inventory inv;
    for (const auto& [uuid, gpu] : gpus_) {
      GpuInfo g;
      g.uuid = uuid;
      g.mig_enabled = gpu.mode.current;
      for (const Made& m : gpu.made) {
        MigDeviceInfo d;
        d.uuid = m.device.uuid;
        d.gi_id = m.device.gi_id;
        d.ci_id = m.device.ci_id;
        d.gi_profile_id = m.profile_id;
        d.gi_placement = m.placement;
        g.mig_devices.push_back(d);
      }
      inv.gpus.push_back(std::move(g));
    }
    return inv;
  }
  int creates() const {
    MutexLock l(mu_);
    return creates_;
  }

  Result<MigModeState> GetMigMode(const std::string& gpu) override {
    MutexLock l(mu_);
    auto it = gpus_.find(gpu);
    if (it == gpus_.end()) return NotFoundError("no GPU " + gpu);
    return it->second.mode;
  }
  Status EnableMig(const std::string& gpu) override {
    MutexLock l(mu_);
    auto it = gpus_.find(gpu);
    if (it == gpus_.end()) return NotFoundError("no GPU " + gpu);
    it->second.mode = {true, true};
    return OkStatus();
  }
  Result<std::vector<MigProfileSpec>> MigProfiles(const std::string& gpu) override {
    MutexLock l(mu_);
    auto it = gpus_.find(gpu);
    if (it == gpus_.end()) return NotFoundError("no GPU " + gpu);
    return it->second.profiles;
  }
  Result<CreatedMigDevice> CreateMigDevice(const std::string& gpu, uint32_t profile_id,
                                           device::MigPlacement placement) override {
    MutexLock l(mu_);
    ++creates_;
    auto it = gpus_.find(gpu);
    if (it == gpus_.end()) return NotFoundError("no GPU " + gpu);
    for (const Made& m : it->second.made) {
      if (m.placement.Overlaps(placement)) {
        return Status(StatusCode::kResourceExhausted, "insufficient resources");
      }
    }
    ++next_id_;
    Made m{profile_id, placement,
           {"MIG-fake-" + std::to_string(next_id_), next_id_, 0}};
    it->second.made.push_back(m);
    return m.device;
  }
  Status DestroyMigDevice(const std::string& gpu, uint32_t gi_id, uint32_t ci_id) override {
    MutexLock l(mu_);
    auto it = gpus_.find(gpu);
    if (it == gpus_.end()) return NotFoundError("no GPU " + gpu);
    std::vector<Made>& made = it->second.made;
    for (auto m = made.begin(); m != made.end(); ++m) {
      if (m->device.gi_id != gi_id || m->device.ci_id != ci_id) continue;
      if (busy_.count(m->device.uuid)) {
        return FailedPreconditionError("GPU instance " + std::to_string(gi_id) + " is in use");
      }
      made.erase(m);
      return OkStatus();
    }
    return NotFoundError("no GPU instance " + std::to_string(gi_id));
  }

 private:
  struct Gpu {
    MigModeState mode;
    std::vector<MigProfileSpec> profiles;
    std::vector<Made> made;
  };
  mutable Mutex mu_;
  std::map<std::string, Gpu> gpus_ GUARDED_BY(mu_);
  std::set<std::string> busy_ GUARDED_BY(mu_);
  uint32_t next_id_ GUARDED_BY(mu_) = 0;
  int creates_ GUARDED_BY(mu_) = 0;
};

}  // namespace hami::deviceplugin
