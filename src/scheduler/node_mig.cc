// The dynamic-MIG part of fitting a node (placement_internal.h): what a request asks of a GPU in
// MIG mode, and the profile and placement that serve it. Called only for MIG-mode devices, so the
// per-device hot path of other devices never crosses into this file.
#include <algorithm>
#include <cstdint>
#include <vector>

#include "scheduler/placement_internal.h"

namespace hami::scheduler::placement_internal {
namespace {

// The memory slices one placement of `p` spans (all its placements span the same); 0 when none
// is registered (every one blocked by instances the scheduler does not own).
uint32_t Span(const device::MigProfile& p) {
  return p.placements.empty() ? 0 : p.placements.front().size;
}

// The memory a percentage `pct` asks of a GPU with `profiles` (memory ascending): that of the
// smallest profile spanning at least pct % of the memory slices the widest profile spans. Memory
// slices rather than MiB because NVML gives every instance a little less than its share (A100-40GB:
// 3g.20gb 19968 MiB, 7g.40gb 40192), so 50 % in MiB would ask for more than the half-GPU profile
// has. Clamped: 100 % is the largest profile.
int64_t PercentMem(const std::vector<device::MigProfile>& profiles, int64_t pct) {
  uint32_t widest = 0;
  for (const device::MigProfile& p : profiles) widest = std::max(widest, Span(p));
  if (widest == 0) return profiles.back().memory_mib;
  for (const device::MigProfile& p : profiles) {
    if (Span(p) != 0 && int64_t{Span(p)} * 100 >= pct * widest) return p.memory_mib;
  }
  return profiles.back().memory_mib;
}

// The memory slices a placement spans, as bits. No GPU has more than 8; a placement reaching
// past 64 (only a corrupt registration) counts as spanning every slice, so it is never handed
// out and, reserved, blocks the whole GPU rather than risking an overlap.
uint64_t Slices(const device::MigPlacement& pl) {
  if (pl.size == 0) return 0;
  if (pl.start >= 64 || pl.size > 64 - pl.start) return ~uint64_t{0};
  const uint64_t span = pl.size == 64 ? ~uint64_t{0} : (uint64_t{1} << pl.size) - 1;
  return span << pl.start;
}

}  // namespace

void MigRequest(const LedgerNode& node, uint16_t dev, const ContainerRequest& r,
                int64_t* memreq, int64_t* cores) {
  if (!node.mig || node.mig->profiles[dev].empty()) return;
  const std::vector<device::MigProfile>& profiles = node.mig->profiles[dev];
  if (r.mem_mib <= 0 && r.mem_percent != device::kMemPercentUnset) {
    *memreq = PercentMem(profiles, std::clamp<int64_t>(r.mem_percent, 0, 100));
  }
  int64_t top = 0;
  for (const device::MigProfile& p : profiles) top = std::max<int64_t>(top, p.core);
  *cores = std::min(*cores, top);
}

bool FindMigSlot(const LedgerNode& node, uint16_t dev, int64_t memreq, int64_t cores,
                 const Scratch& s, int32_t* profile_out, device::MigPlacement* placement_out) {
  if (!node.mig) return false;
  const std::vector<device::MigProfile>& profiles = node.mig->profiles[dev];
  uint64_t used = 0;  // the device's reserved memory slices
  for (const MigOcc& o : s.occ) {
    if (o.device == dev) used |= Slices(o.placement);
  }
  for (size_t pi = 0; pi < profiles.size(); ++pi) {
    const device::MigProfile& p = profiles[pi];
    if (p.memory_mib < memreq || (cores > 0 && p.core < cores)) continue;
    // Look-ahead: of the free placements, the one that leaves the most placements of every
    // registered profile free, so that later requests of any size still find room (a 2g on an
    // empty A100 goes to slices 4-5, keeping the 4g at 0-3). Ties keep upstream's balanced
    // packing order: 1g and 3g fill from the top, the others from slice 0.
    const bool descending = p.name.starts_with("1g.") || p.name.starts_with("3g.");
    const size_t n = p.placements.size();
    int best_left = -1;
    for (size_t k = 0; k < n; ++k) {
      const device::MigPlacement& pl = p.placements[descending ? n - 1 - k : k];
      const uint64_t mine = Slices(pl);
      if ((mine & used) != 0) continue;
      int left = 0;
      for (const device::MigProfile& q : profiles) {
        for (const device::MigPlacement& other : q.placements) {
          left += (Slices(other) & (used | mine)) == 0 ? 1 : 0;
        }
      }
      if (left > best_left) {
        best_left = left;
        *placement_out = pl;
      }
    }
    if (best_left >= 0) {
      *profile_out = static_cast<int32_t>(pi);
      return true;
    }
  }
  return false;
}

}  // namespace hami::scheduler::placement_internal
