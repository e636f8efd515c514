// State of the simulated libnvidia-ml.so.1 shared by its files: nvml_api.cc (init, system,
// enumeration, identity, topology), nvml_usage.cc (memory, utilisation, processes, sensors) and
// nvml_events.cc (event sets). Nothing here is exported from the library.
//
// Thread safety: g_rt is written once, under the init lock, before Initialized() first returns
// true; callers check Initialized() (or CheckDevice) before reading it.
#pragma once

#include <stdint.h>

#include "nvml/abi.h"
#include "sim/gpu/sim_runtime.h"

#define HAMI_SIM_EXPORT extern "C" __attribute__((visibility("default")))

struct nvmlDevice_st {
  uint32_t magic;
  int phys;
};

namespace hami::sim {

// The runtime NVML reports on; set by the first successful init, never cleared (nvml_api.cc).
extern SimRuntime* g_rt;

// True between a successful nvmlInit* and the matching last nvmlShutdown.
bool Initialized();
// Checks the library state and a device handle (one NVML can see); fills *phys.
nvmlReturn_t CheckDevice(nvmlDevice_t device, int* phys);

}  // namespace hami::sim
