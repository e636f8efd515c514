// Operations hamictl performs on a live shared region: attach, suspend/resume the container's
// launches and allocations, reclaim dead processes' slots, change quotas.
//
// Everything here goes through the region's own atomics or lock (region.h), so it is safe while
// the container's processes run; quota changes take effect on their next allocation or launch.
//
// Thread safety: functions may be called from any thread; a Region is shared by design.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "ctl/region_view.h"
#include "ctl/run_spec.h"
#include "vgpu/region.h"

namespace hami::ctl {

struct RegionCloser {
  void operator()(vgpu::Region* r) const { vgpu::Region::Free(r); }
};
using RegionPtr = std::unique_ptr<vgpu::Region, RegionCloser>;

// Maps an existing region; nullptr and a one-line reason if `path` is not one.
RegionPtr AttachRegion(const std::string& path, std::string* error);

struct SuspendOutcome {
  int live = 0;                    // live processes in the region
  std::vector<int> not_suspended;  // pids of live processes not (yet) reporting "suspended"
};

// Sets suspend_request. With wait_ms > 0, then waits until every live process reports
// "suspended" or wait_ms passes. A process reports it when it next tries to launch or allocate;
// an idle process stays "running" (and is listed in not_suspended) although it cannot proceed.
SuspendOutcome Suspend(vgpu::Region& r, int wait_ms, const LivenessFn& alive = ProcessAlive);

// Clears suspend_request; waiting processes continue within a few milliseconds.
void Resume(vgpu::Region& r);

// Reclaims the slots of exited processes; returns their pids.
std::vector<int> Sweep(vgpu::Region& r);

// Applies quota changes (device -1: every device). A device index beyond the recorded devices is
// an error once devices are recorded. `notes` receives one line per consequence worth telling
// (e.g. usage already above a lowered limit).
bool SetQuotas(vgpu::Region& r, const std::vector<MemQuota>& mem,
               const std::vector<CoreQuota>& cores, std::vector<std::string>* notes,
               std::string* error);

}  // namespace hami::ctl
