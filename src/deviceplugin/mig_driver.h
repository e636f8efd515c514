// MigDriver: the device plugin's seam for dynamic MIG (node operating mode "mig"): what a GPU's
// MIG profiles are, as its driver names and sizes them, and making and destroying the MIG devices
// the scheduler reserved. Existing MIG devices are read through GpuDriver::Discover (their GPU
// instance profile and placement included), so one inventory describes both.
//
// The production implementation is NvmlDriver (nvml_driver.h), the same code on a real driver
// and on the simulated one; FakeMigDriver (fake_mig_driver.h) serves unit tests.
//
// Profiles are named by the driver (NVML's profile name, "MIG " dropped: "1g.10gb",
// "1g.10gb+me", "1g.20gb"), never derived from the slice count, so every variant of a slice
// count is reachable and its memory is the driver's.
//
// Thread safety: implementations must allow calls from several threads; calls for one GPU are
// serialised by the caller (MigInstances).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/status.h"
#include "device/device.h"

namespace hami::deviceplugin {

// One GPU instance profile a GPU supports.
struct MigProfileSpec {
  // The driver's id of the profile (nvmlGpuInstanceProfileInfo_t.id, e.g. 19 for an A100's
  // 1g.10gb), which its create and list calls take; not the NVML_GPU_INSTANCE_PROFILE_* index.
  uint32_t profile_id = 0;
  std::string name;         // the driver's name, e.g. "1g.10gb" or "1g.10gb+me"
  uint32_t slice_count = 0;     // compute slices
  uint32_t instance_count = 0;  // how many fit on an empty GPU
  uint64_t memory_mib = 0;
  uint32_t multiprocessors = 0;  // SMs of a full-size compute instance of it
  // Where an instance of it may start, in memory slices, as the driver lists them.
  std::vector<device::MigPlacement> placements;
  friend bool operator==(const MigProfileSpec&, const MigProfileSpec&) = default;
};

struct MigModeState {
  bool current = false;  // MIG enabled now
  bool pending = false;  // MIG enabled after the next GPU reset
  friend bool operator==(const MigModeState&, const MigModeState&) = default;
};

// A MIG device just made: a GPU instance at the placement asked for and one compute instance
// spanning it.
struct CreatedMigDevice {
  std::string uuid;  // "MIG-..."
  uint32_t gi_id = 0;
  uint32_t ci_id = 0;
  friend bool operator==(const CreatedMigDevice&, const CreatedMigDevice&) = default;
};

class MigDriver {
 public:
  virtual ~MigDriver() = default;

  // NotFound for an unknown GPU; Unimplemented when the GPU cannot do MIG.
  virtual Result<MigModeState> GetMigMode(const std::string& gpu_uuid) = 0;
  // Turns MIG on. FailedPrecondition, naming the reason, when the change stays pending (a GPU
  // reset is required, or the GPU is in use).
  virtual Status EnableMig(const std::string& gpu_uuid) = 0;
  // Every GPU instance profile the GPU supports, base and variants, in profile id order.
  virtual Result<std::vector<MigProfileSpec>> MigProfiles(const std::string& gpu_uuid) = 0;
  // Makes a GPU instance of `profile_id` at `placement` and a full compute instance in it.
  // ResourceExhausted when the placement overlaps an existing instance (the driver's
  // INSUFFICIENT_RESOURCES); InvalidArgument when the profile cannot start there; on any
  // failure nothing made by the call is left behind.
  virtual Result<CreatedMigDevice> CreateMigDevice(const std::string& gpu_uuid,
                                                   uint32_t profile_id,
                                                   device::MigPlacement placement) = 0;
  // Destroys the compute instance and then its GPU instance. NotFound when the GPU instance is
  // already gone; FailedPrecondition containing "in use" while processes still run on it (the
  // caller retries later).
  virtual Status DestroyMigDevice(const std::string& gpu_uuid, uint32_t gi_id, uint32_t ci_id) = 0;
};

}  // namespace hami::deviceplugin
