// The MIG state of one simulated GPU, as kept in the node-wide state file, and the driver's rules
// for changing it: MIG mode (current and pending), GPU instances (GIs) with their placements and
// compute instances (CIs) with their UUIDs and the processes attached to them.
//
// The records are plain data with a fixed layout (they live in the mmap'd file, see
// shared_state.h); the functions below are the only code that changes them. They return NVML
// codes because they implement NVML's semantics:
//   INVALID_ARGUMENT        unknown profile, or a placement the profile does not list
//   NOT_SUPPORTED           MIG mode is disabled, or the GI does not offer the CI profile
//   INSUFFICIENT_RESOURCES  the placement overlaps a live instance, or the profile's instance
//                           count is reached, or (no placement given) nothing is free
//   IN_USE                  destroying a GI that has CIs, or a CI with live processes
//   NOT_FOUND               no live instance has that id
//
// Thread safety: none; callers hold the state lock (SharedState::UpdateMig / MigSnapshot).
#pragma once

#include <stdint.h>
#include <sys/types.h>

#include <utility>
#include <vector>

#include "nvml/abi.h"
#include "sim/gpu/mig_profiles.h"

namespace hami::sim {

inline constexpr int kMigMaxGpuInstances = 8;      // at most 7 live (seven 1-slice GIs)
inline constexpr int kMigMaxComputeInstances = 8;  // per GI; at most 7 live
inline constexpr int kMigMaxAttached = 8;          // processes attached to one CI
inline constexpr int kMigUuidSize = 48;            // "MIG-" + 36 characters + NUL, rounded up
// Id spaces: GI ids are 0..13 (MigGiId), CI ids 0..6. Tables indexed by id use these bounds.
inline constexpr int kMigGiIdSpace = 16;
inline constexpr int kMigCiIdSpace = 8;

// A process running inside a CI (hami-simctl mig-attach; see README.md).
struct MigAttachedProcess {
  int32_t pid;  // 0 = free
  int32_t reserved;
  uint64_t start_time;  // ProcessStartTime token
};

struct MigComputeInstanceRecord {
  uint32_t live;
  uint32_t id;
  uint32_t profile_id;  // NVML_COMPUTE_INSTANCE_PROFILE_*
  uint32_t start;       // placement in compute slices of the GI
  uint32_t size;
  uint32_t reserved;
  char uuid[kMigUuidSize];  // the MIG device's UUID, new on every create
  MigAttachedProcess procs[kMigMaxAttached];
};

struct MigGpuInstanceRecord {
  uint32_t live;
  uint32_t id;
  uint32_t profile_id;  // the driver's GI profile ID (19, 15, 14, 9, 5, 0, ...)
  uint32_t start;       // placement in memory slices
  uint32_t size;
  uint32_t reserved;
  MigComputeInstanceRecord cis[kMigMaxComputeInstances];
};

struct MigDeviceState {
  uint32_t current_mode;  // NVML_DEVICE_MIG_DISABLE / _ENABLE
  uint32_t pending_mode;
  uint64_t created;  // CIs created so far; with the seed, makes each UUID new
  MigGpuInstanceRecord gis[kMigMaxGpuInstances];
};

// Liveness of an attached process: ProcessAlive in production, a fake in tests.
using MigAliveFn = bool (*)(pid_t pid, uint64_t start_time);

// Sets the pending mode to `mode` and activates it unless something blocks it, in which case
// *activation says what and the current mode stays: `blocker` (IN_USE when processes use the
// GPU, or a forced status), else IN_USE when disabling with GIs left. Returns INVALID_ARGUMENT
// for a mode other than DISABLE/ENABLE, else SUCCESS (the outcome is in *activation).
nvmlReturn_t MigSetMode(MigDeviceState* s, uint32_t mode, nvmlReturn_t blocker,
                        nvmlReturn_t* activation);

// True if a process attached to any CI is still alive.
bool MigHasLiveProcesses(const MigDeviceState& s, MigAliveFn alive);

const MigGpuInstanceRecord* MigFindGi(const MigDeviceState& s, uint32_t gi_id);
const MigComputeInstanceRecord* MigFindCi(const MigGpuInstanceRecord& gi, uint32_t ci_id);

// Creates a GI of profile `profile_id` at `placement` (nullptr: the free placement with the
// highest start, as the driver picks). On success *gi_id is the new GI's id.
nvmlReturn_t MigCreateGpuInstance(MigDeviceState* s, const MigModel& model, uint32_t profile_id,
                                  const nvmlGpuInstancePlacement_t* placement, uint32_t* gi_id);
// How many more GIs of `profile` could be created now (0 while MIG mode is disabled).
uint32_t MigGpuInstanceRemaining(const MigDeviceState& s, const MigGiProfile& profile);
nvmlReturn_t MigDestroyGpuInstance(MigDeviceState* s, uint32_t gi_id);

// Creates a CI of `ci_profile` in GI `gi_id` at `placement` (nullptr: the free placement with
// the lowest start). Its id is the lowest free one (the first CI of a GI is 0); its UUID is
// derived from `uuid_seed` and the creation count. On success *ci_id is the new CI's id.
nvmlReturn_t MigCreateComputeInstance(MigDeviceState* s, const MigModel& model, uint32_t gi_id,
                                      uint32_t ci_profile,
                                      const nvmlComputeInstancePlacement_t* placement,
                                      uint64_t uuid_seed, uint32_t* ci_id);
uint32_t MigComputeInstanceRemaining(const MigGpuInstanceRecord& gi, const MigCiProfile& profile);
nvmlReturn_t MigDestroyComputeInstance(MigDeviceState* s, uint32_t gi_id, uint32_t ci_id,
                                       MigAliveFn alive);

// Attaches process (pid, start_time) to a CI, first dropping dead ones; INSUFFICIENT_RESOURCES
// if the CI's table is full of live processes, NOT_FOUND if there is no such CI.
nvmlReturn_t MigAttachProcess(MigDeviceState* s, uint32_t gi_id, uint32_t ci_id, pid_t pid,
                              uint64_t start_time, MigAliveFn alive);

// Undoes MigAttachProcess (its last CUDA context on the CI is gone); NOT_FOUND if there is no
// such CI. Detaching a process that is not attached is a no-op.
nvmlReturn_t MigDetachProcess(MigDeviceState* s, uint32_t gi_id, uint32_t ci_id, pid_t pid,
                              uint64_t start_time);

// The SMs of a GPU with `device_sms` SMs that kernels on a CI book: [*first, *first + *count).
// A GI's first compute slice is its memory-slice start (7g, 4g and 3g at 0 -> 0, 3g at 4 -> 4,
// 1g at s -> s); the CI adds its own start. Slice k begins at SM k * device_sms / 7; the range
// holds `ci_sms` SMs, clamped to fit the device (the tables' SM counts are not a multiple of
// the slice width, and a config may give the GPU fewer SMs than the tables assume).
void MigSmRange(uint32_t gi_start, uint32_t ci_start, uint32_t ci_sms, int device_sms, int* first,
                int* count);

// The live MIG devices (GI id, CI id) in NVML's index order: by GI id, then CI id.
std::vector<std::pair<uint32_t, uint32_t>> MigDevices(const MigDeviceState& s);

}  // namespace hami::sim
