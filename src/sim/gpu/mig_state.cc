#include "sim/gpu/mig_state.h"

#include <stdio.h>
#include <string.h>

#include <algorithm>

namespace hami::sim {
namespace {

uint64_t Mix(uint64_t x) {  // splitmix64 finaliser
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

void MakeUuid(uint64_t seed, uint64_t serial, char out[kMigUuidSize]) {
  const uint64_t a = Mix(seed ^ Mix(serial));
  const uint64_t b = Mix(a ^ 0x4d49472d55554944ull);
  snprintf(out, kMigUuidSize, "MIG-%08x-%04x-%04x-%04x-%012llx", static_cast<unsigned>(a >> 32),
           static_cast<unsigned>((a >> 16) & 0xffff), static_cast<unsigned>(a & 0xffff),
           static_cast<unsigned>(b >> 48), static_cast<unsigned long long>(b & 0xffffffffffffull));
}

bool Overlaps(uint32_t a_start, uint32_t a_size, uint32_t b_start, uint32_t b_size) {
  return a_start < b_start + b_size && b_start < a_start + a_size;
}

MigGpuInstanceRecord* FindGiMut(MigDeviceState* s, uint32_t gi_id) {
  return const_cast<MigGpuInstanceRecord*>(MigFindGi(*s, gi_id));
}

MigComputeInstanceRecord* FindCiMut(MigGpuInstanceRecord* gi, uint32_t ci_id) {
  return const_cast<MigComputeInstanceRecord*>(MigFindCi(*gi, ci_id));
}

bool GiSlotFree(const MigDeviceState& s, uint32_t start, uint32_t size) {
  for (const MigGpuInstanceRecord& gi : s.gis) {
    if (gi.live && Overlaps(gi.start, gi.size, start, size)) return false;
  }
  return true;
}

bool CiSlotFree(const MigGpuInstanceRecord& gi, uint32_t start, uint32_t size) {
  for (const MigComputeInstanceRecord& ci : gi.cis) {
    if (ci.live && Overlaps(ci.start, ci.size, start, size)) return false;
  }
  return true;
}

uint32_t LiveGis(const MigDeviceState& s, uint32_t profile_id) {
  uint32_t n = 0;
  for (const MigGpuInstanceRecord& gi : s.gis) n += gi.live && gi.profile_id == profile_id;
  return n;
}

uint32_t LiveCis(const MigGpuInstanceRecord& gi, uint32_t profile_id) {
  uint32_t n = 0;
  for (const MigComputeInstanceRecord& ci : gi.cis) n += ci.live && ci.profile_id == profile_id;
  return n;
}

bool CiHasLiveProcess(const MigComputeInstanceRecord& ci, MigAliveFn alive) {
  for (const MigAttachedProcess& p : ci.procs) {
    if (p.pid != 0 && alive(p.pid, p.start_time)) return true;
  }
  return false;
}

}  // namespace

nvmlReturn_t MigSetMode(MigDeviceState* s, uint32_t mode, nvmlReturn_t blocker,
                        nvmlReturn_t* activation) {
  if (mode != NVML_DEVICE_MIG_DISABLE && mode != NVML_DEVICE_MIG_ENABLE) {
    return NVML_ERROR_INVALID_ARGUMENT;
  }
  s->pending_mode = mode;
  if (mode == s->current_mode) {  // nothing to activate (this also cancels a pending change)
    *activation = NVML_SUCCESS;
    return NVML_SUCCESS;
  }
  if (blocker == NVML_SUCCESS && mode == NVML_DEVICE_MIG_DISABLE) {
    for (const MigGpuInstanceRecord& gi : s->gis) {
      if (gi.live) blocker = NVML_ERROR_IN_USE;
    }
  }
  *activation = blocker;
  if (blocker == NVML_SUCCESS) s->current_mode = mode;
  return NVML_SUCCESS;
}

bool MigHasLiveProcesses(const MigDeviceState& s, MigAliveFn alive) {
  for (const MigGpuInstanceRecord& gi : s.gis) {
    if (!gi.live) continue;
    for (const MigComputeInstanceRecord& ci : gi.cis) {
      if (ci.live && CiHasLiveProcess(ci, alive)) return true;
    }
  }
  return false;
}

const MigGpuInstanceRecord* MigFindGi(const MigDeviceState& s, uint32_t gi_id) {
  for (const MigGpuInstanceRecord& gi : s.gis) {
    if (gi.live && gi.id == gi_id) return &gi;
  }
  return nullptr;
}

const MigComputeInstanceRecord* MigFindCi(const MigGpuInstanceRecord& gi, uint32_t ci_id) {
  for (const MigComputeInstanceRecord& ci : gi.cis) {
    if (ci.live && ci.id == ci_id) return &ci;
  }
  return nullptr;
}

nvmlReturn_t MigCreateGpuInstance(MigDeviceState* s, const MigModel& model, uint32_t profile_id,
                                  const nvmlGpuInstancePlacement_t* placement, uint32_t* gi_id) {
  if (s->current_mode != NVML_DEVICE_MIG_ENABLE) return NVML_ERROR_NOT_SUPPORTED;
  const MigGiProfile* p = MigGiProfileById(model, profile_id);
  if (p == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  const std::vector<uint32_t> starts = MigGiPlacementStarts(*p);
  uint32_t start;
  if (placement != nullptr) {
    if (placement->size != p->memory_slices ||
        std::find(starts.begin(), starts.end(), placement->start) == starts.end()) {
      return NVML_ERROR_INVALID_ARGUMENT;
    }
    start = placement->start;
    if (!GiSlotFree(*s, start, p->memory_slices)) return NVML_ERROR_INSUFFICIENT_RESOURCES;
  } else {
    auto it = std::find_if(starts.rbegin(), starts.rend(),
                           [&](uint32_t st) { return GiSlotFree(*s, st, p->memory_slices); });
    if (it == starts.rend()) return NVML_ERROR_INSUFFICIENT_RESOURCES;
    start = *it;
  }
  if (LiveGis(*s, p->id) >= p->instance_count) return NVML_ERROR_INSUFFICIENT_RESOURCES;
  MigGpuInstanceRecord* slot = nullptr;
  for (MigGpuInstanceRecord& gi : s->gis) {
    if (!gi.live) {
      slot = &gi;
      break;
    }
  }
  // Non-overlapping GIs number at most 7, fewer than the slots.
  if (slot == nullptr) return NVML_ERROR_INSUFFICIENT_RESOURCES;
  memset(slot, 0, sizeof(*slot));
  slot->id = MigGiId(start, p->memory_slices);
  slot->profile_id = p->id;
  slot->start = start;
  slot->size = p->memory_slices;
  slot->live = 1;
  *gi_id = slot->id;
  return NVML_SUCCESS;
}

uint32_t MigGpuInstanceRemaining(const MigDeviceState& s, const MigGiProfile& profile) {
  if (s.current_mode != NVML_DEVICE_MIG_ENABLE) return 0;
  const uint32_t live = LiveGis(s, profile.id);
  if (live >= profile.instance_count) return 0;
  // A profile's placements never overlap each other, so every free one can be used at once.
  uint32_t free = 0;
  for (uint32_t start : MigGiPlacementStarts(profile)) {
    free += GiSlotFree(s, start, profile.memory_slices);
  }
  return std::min(free, profile.instance_count - live);
}

nvmlReturn_t MigDestroyGpuInstance(MigDeviceState* s, uint32_t gi_id) {
  MigGpuInstanceRecord* gi = FindGiMut(s, gi_id);
  if (gi == nullptr) return NVML_ERROR_NOT_FOUND;
  for (const MigComputeInstanceRecord& ci : gi->cis) {
    if (ci.live) return NVML_ERROR_IN_USE;
  }
  gi->live = 0;
  return NVML_SUCCESS;
}

nvmlReturn_t MigCreateComputeInstance(MigDeviceState* s, const MigModel& model, uint32_t gi_id,
                                      uint32_t ci_profile,
                                      const nvmlComputeInstancePlacement_t* placement,
                                      uint64_t uuid_seed, uint32_t* ci_id) {
  MigGpuInstanceRecord* gi = FindGiMut(s, gi_id);
  if (gi == nullptr) return NVML_ERROR_NOT_FOUND;
  const MigGiProfile* gp = MigGiProfileById(model, gi->profile_id);
  if (gp == nullptr) return NVML_ERROR_NOT_FOUND;  // a record from other tables: treat as gone
  if (ci_profile >= kMigCiProfileEnumCount) return NVML_ERROR_INVALID_ARGUMENT;
  MigCiProfile cp;
  if (!MigCiProfileFor(model, *gp, ci_profile, &cp)) return NVML_ERROR_NOT_SUPPORTED;
  uint32_t start;
  if (placement != nullptr) {
    if (placement->size != cp.slices ||
        std::find(cp.starts.begin(), cp.starts.end(), placement->start) == cp.starts.end()) {
      return NVML_ERROR_INVALID_ARGUMENT;
    }
    start = placement->start;
    if (!CiSlotFree(*gi, start, cp.slices)) return NVML_ERROR_INSUFFICIENT_RESOURCES;
  } else {
    auto it = std::find_if(cp.starts.begin(), cp.starts.end(),
                           [&](uint32_t st) { return CiSlotFree(*gi, st, cp.slices); });
    if (it == cp.starts.end()) return NVML_ERROR_INSUFFICIENT_RESOURCES;
    start = *it;
  }
  if (LiveCis(*gi, cp.id) >= cp.instance_count) return NVML_ERROR_INSUFFICIENT_RESOURCES;
  // Lowest free id; CIs of one GI never outnumber its 7 compute slices, so one is free.
  uint32_t id = 0;
  while (MigFindCi(*gi, id) != nullptr) ++id;
  MigComputeInstanceRecord* slot = nullptr;
  for (MigComputeInstanceRecord& ci : gi->cis) {
    if (!ci.live) {
      slot = &ci;
      break;
    }
  }
  if (slot == nullptr) return NVML_ERROR_INSUFFICIENT_RESOURCES;
  memset(slot, 0, sizeof(*slot));
  slot->id = id;
  slot->profile_id = cp.id;
  slot->start = start;
  slot->size = cp.slices;
  MakeUuid(uuid_seed, ++s->created, slot->uuid);
  slot->live = 1;
  *ci_id = id;
  return NVML_SUCCESS;
}

uint32_t MigComputeInstanceRemaining(const MigGpuInstanceRecord& gi, const MigCiProfile& profile) {
  const uint32_t live = LiveCis(gi, profile.id);
  if (live >= profile.instance_count) return 0;
  // Placements of one CI profile never overlap each other (starts are aligned to at least the
  // size), so every free one can be used at once.
  uint32_t free = 0;
  for (uint32_t start : profile.starts) free += CiSlotFree(gi, start, profile.slices);
  return std::min(free, profile.instance_count - live);
}

nvmlReturn_t MigDestroyComputeInstance(MigDeviceState* s, uint32_t gi_id, uint32_t ci_id,
                                       MigAliveFn alive) {
  MigGpuInstanceRecord* gi = FindGiMut(s, gi_id);
  if (gi == nullptr) return NVML_ERROR_NOT_FOUND;
  MigComputeInstanceRecord* ci = FindCiMut(gi, ci_id);
  if (ci == nullptr) return NVML_ERROR_NOT_FOUND;
  if (CiHasLiveProcess(*ci, alive)) return NVML_ERROR_IN_USE;
  ci->live = 0;
  return NVML_SUCCESS;
}

nvmlReturn_t MigAttachProcess(MigDeviceState* s, uint32_t gi_id, uint32_t ci_id, pid_t pid,
                              uint64_t start_time, MigAliveFn alive) {
  MigGpuInstanceRecord* gi = FindGiMut(s, gi_id);
  if (gi == nullptr) return NVML_ERROR_NOT_FOUND;
  MigComputeInstanceRecord* ci = FindCiMut(gi, ci_id);
  if (ci == nullptr) return NVML_ERROR_NOT_FOUND;
  MigAttachedProcess* free_slot = nullptr;
  for (MigAttachedProcess& p : ci->procs) {
    if (p.pid == pid && p.start_time == start_time) return NVML_SUCCESS;
    if (p.pid != 0 && !alive(p.pid, p.start_time)) p = MigAttachedProcess{};
    if (p.pid == 0 && free_slot == nullptr) free_slot = &p;
  }
  if (free_slot == nullptr) return NVML_ERROR_INSUFFICIENT_RESOURCES;
  free_slot->pid = pid;
  free_slot->start_time = start_time;
  return NVML_SUCCESS;
}

nvmlReturn_t MigDetachProcess(MigDeviceState* s, uint32_t gi_id, uint32_t ci_id, pid_t pid,
                              uint64_t start_time) {
  MigGpuInstanceRecord* gi = FindGiMut(s, gi_id);
  if (gi == nullptr) return NVML_ERROR_NOT_FOUND;
  MigComputeInstanceRecord* ci = FindCiMut(gi, ci_id);
  if (ci == nullptr) return NVML_ERROR_NOT_FOUND;
  for (MigAttachedProcess& p : ci->procs) {
    if (p.pid == pid && p.start_time == start_time) p = MigAttachedProcess{};
  }
  return NVML_SUCCESS;
}

void MigSmRange(uint32_t gi_start, uint32_t ci_start, uint32_t ci_sms, int device_sms, int* first,
                int* count) {
  const int slice = static_cast<int>(std::min(gi_start + ci_start, kMigComputeSlices - 1));
  *count = std::max(1, std::min(static_cast<int>(ci_sms), device_sms));
  *first = std::min(slice * device_sms / static_cast<int>(kMigComputeSlices), device_sms - *count);
}

std::vector<std::pair<uint32_t, uint32_t>> MigDevices(const MigDeviceState& s) {
  std::vector<std::pair<uint32_t, uint32_t>> out;
  for (const MigGpuInstanceRecord& gi : s.gis) {
    if (!gi.live) continue;
    for (const MigComputeInstanceRecord& ci : gi.cis) {
      if (ci.live) out.emplace_back(gi.id, ci.id);
    }
  }
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace hami::sim
