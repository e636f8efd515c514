// Codec for MIG reservations on a pod (`hami.io/vgpu-mig-allocations`): which GPU, profile and
// placement each MIG device of each container gets. The scheduler writes the first five keys;
// the device plugin adds the runtime identity (MIG UUID, GPU and compute instance ids) once the
// instance exists.
//
//   [{"containerIndex":0,"deviceIndex":0,"gpuUUID":"GPU-a","profile":"2g.10gb",
//     "placement":{"start":0,"size":2}}]
//
// containerIndex counts init containers first. Decoding enforces upstream's rules: indices
// non-negative, gpuUUID and profile non-empty, placement size > 0, runtime fields all or none,
// (containerIndex, deviceIndex) unique. An empty annotation value is an empty list.
//
// Thread safety: pure functions.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "device/device.h"

namespace hami::device {

inline constexpr std::string_view kMigAllocationsAnnotation = "hami.io/vgpu-mig-allocations";

struct MigRuntimeIdentity {
  std::string mig_uuid;
  uint32_t gpu_instance_id = 0;
  uint32_t compute_instance_id = 0;
  friend bool operator==(const MigRuntimeIdentity&, const MigRuntimeIdentity&) = default;
};

struct MigAllocation {
  int32_t container_index = 0;
  int32_t device_index = 0;
  std::string gpu_uuid;
  std::string profile;
  MigPlacement placement;
  std::optional<MigRuntimeIdentity> runtime;
  friend bool operator==(const MigAllocation&, const MigAllocation&) = default;
};

std::string EncodeMigAllocations(const std::vector<MigAllocation>& allocations);
Result<std::vector<MigAllocation>> DecodeMigAllocations(std::string_view text);
// The checks DecodeMigAllocations applies.
Status ValidateMigAllocations(const std::vector<MigAllocation>& allocations);

}  // namespace hami::device
