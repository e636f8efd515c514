// State of the simulated libnvidia-ml.so.1 shared by its files: nvml_api.cc (init, system,
// enumeration, identity, topology), nvml_usage.cc (memory, utilisation, processes, sensors),
// nvml_events.cc (event sets) and nvml_mig*.cc (MIG mode, GPU/compute instances, MIG devices;
// their shared parts in nvml_mig_internal.h).
// Nothing here is exported from the library.
//
// Thread safety: g_rt is written once, under the init lock, before Initialized() first returns
// true; callers check Initialized() (or CheckDevice) before reading it. Handle objects are
// written once at the first init and never change.
#pragma once

#include <stdint.h>

#include "nvml/abi.h"
#include "sim/gpu/mig_profiles.h"
#include "sim/gpu/mig_state.h"
#include "sim/gpu/sim_runtime.h"

#define HAMI_SIM_EXPORT extern "C" __attribute__((visibility("default")))

// A GPU handle, or a MIG device handle (one compute instance of the GPU `phys`).
struct nvmlDevice_st {
  uint32_t magic;
  int phys;
  uint32_t gi_id;  // MIG device handles only
  uint32_t ci_id;
};

namespace hami::sim {

// The runtime NVML reports on; set by the first successful init, never cleared (nvml_api.cc).
extern SimRuntime* g_rt;

// True between a successful nvmlInit* and the matching last nvmlShutdown.
bool Initialized();
// Checks the library state and a GPU handle (one NVML can see); fills *phys. A MIG device
// handle is valid but not accepted here: NVML_ERROR_NOT_SUPPORTED.
nvmlReturn_t CheckDevice(nvmlDevice_t device, int* phys);

// What a valid GPU or MIG device handle names.
struct DeviceRef {
  int phys;
  bool mig;
  uint32_t gi_id;  // mig only
  uint32_t ci_id;
};
// Checks a GPU or MIG device handle; a MIG device must still exist (else NVML_ERROR_NOT_FOUND).
nvmlReturn_t CheckAnyDevice(nvmlDevice_t device, DeviceRef* ref);
nvmlDevice_t GpuHandle(int phys);
nvmlDevice_t MigDeviceHandle(int phys, uint32_t gi_id, uint32_t ci_id);

// ---- nvml_mig.cc

// Initialises the GI/CI handle objects; called once, by the first successful init.
void InitMigHandles();
// The MIG tables of physical device `phys`, or nullptr if the sim does not partition it.
const MigModel* MigModelOf(int phys);

// A MIG device as its identity and usage queries see it, read from the shared state.
struct MigDeviceView {
  MigGpuInstanceRecord gi;
  MigComputeInstanceRecord ci;
  const MigGiProfile* gi_profile;
  MigCiProfile ci_profile;
};
// Fills *view for compute instance (gi_id, ci_id) of `phys`; false if it does not exist.
bool ViewMigDevice(int phys, uint32_t gi_id, uint32_t ci_id, MigDeviceView* view);
// Finds a MIG device by UUID among the GPUs NVML sees.
bool FindMigDeviceByUuid(const char* uuid, DeviceRef* ref);

}  // namespace hami::sim
