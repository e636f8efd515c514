// MIG profile tables of the GPU models the simulated driver can partition: what a GPU instance
// (GI) of each profile gets (slices, SMs, memory, engines), where it may be placed, and which
// compute instance (CI) profiles a GI of a given size offers.
//
// Figures are those a real driver reports (see README.md, "MIG", for their sources and the
// uncertain ones). A GPU has 8 memory slices and 7 compute slices; GI placements are
// {start, size} in memory slices, CI placements {start, size} in compute slices of their GI.
//
// Usage:
//   const MigModel* m = MigModelFor(device.name, device.memory_bytes);  // nullptr: no MIG
//   const MigGiProfile* p = MigGiProfileById(*m, 9);                     // 3g.20gb / 3g.40gb
//
// Thread safety: immutable tables and pure functions.
#pragma once

#include <stdint.h>

#include <string>
#include <vector>

namespace hami::sim {

inline constexpr uint32_t kMigMemorySlices = 8;
inline constexpr uint32_t kMigComputeSlices = 7;
// nvmlDeviceGetMaxMigDeviceCount on a MIG-enabled GPU: one MIG device per compute slice.
inline constexpr uint32_t kMigMaxDevices = 7;

struct MigGiProfile {
  uint32_t profile_enum;  // NVML_GPU_INSTANCE_PROFILE_*
  uint32_t id;            // the driver's profile ID (nvmlGpuInstanceProfileInfo_t.id)
  const char* name;       // without the "MIG " prefix NVML puts in front
  uint32_t compute_slices;
  uint32_t memory_slices;  // = placement size
  uint32_t instance_count;
  uint32_t sm_count;
  uint64_t memory_mib;
  uint32_t copy_engines;
  uint32_t decoders;
  uint32_t encoders;
  uint32_t jpegs;
  uint32_t ofas;
  uint32_t placement_starts;  // bit s set: {start s, size memory_slices} is a valid placement
};

struct MigModel {
  const char* name;  // "A100-40GB", "A100-80GB", "H100-80GB"
  const MigGiProfile* profiles;
  int profile_count;
};

// A compute instance profile as offered inside one GI (derived from the GI's size).
struct MigCiProfile {
  uint32_t id;  // NVML_COMPUTE_INSTANCE_PROFILE_* (the enum is the ID for CIs)
  uint32_t slices;
  uint32_t instance_count;
  uint32_t sm_count;
  std::string name;             // "1c.7g.80gb"; a CI spanning its whole GI has the GI's name
  std::vector<uint32_t> starts;  // valid placements {start, slices}, ascending
};

// The model whose tables apply to a device of this name and memory size, or nullptr if the
// sim does not partition it (the device then reports MIG as not supported). An A100 with at
// most 48 GiB uses the 40GB tables, a larger one the 80GB tables; an H100 with at most 88 GiB
// the H100-80GB tables.
const MigModel* MigModelFor(const std::string& device_name, uint64_t memory_bytes);

// Lookups; nullptr if the model has no such profile.
const MigGiProfile* MigGiProfileByEnum(const MigModel& model, uint32_t profile_enum);
const MigGiProfile* MigGiProfileById(const MigModel& model, uint32_t id);

// Valid placement starts of a GI profile, ascending.
std::vector<uint32_t> MigGiPlacementStarts(const MigGiProfile& profile);

// The GI id a driver assigns to a GI at this placement (unique among non-overlapping GIs):
// (8 / size - 1) + start / size, so 7g -> 0, a 4-slice GI at 0 -> 1 and at 4 -> 2, 2-slice
// GIs -> 3..6, 1-slice GIs -> 7..13.
uint32_t MigGiId(uint32_t start, uint32_t size);

// Number of NVML_COMPUTE_INSTANCE_PROFILE_* enums (0..7); ids at or past it are invalid.
inline constexpr uint32_t kMigCiProfileEnumCount = 8;

// The CI profile `ci_enum` inside a GI of profile `gi`; false if the GI does not offer it.
// A GI of n compute slices offers the n-slice CI and, below it, 1 and 2 slices (n >= 2),
// 3 slices (n = 7) and 4 slices (n = 7); CI placements start at multiples of the CI size
// rounded up to a power of two.
bool MigCiProfileFor(const MigModel& model, const MigGiProfile& gi, uint32_t ci_enum,
                     MigCiProfile* out);

}  // namespace hami::sim
