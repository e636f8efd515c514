// GpuStats: what the node monitor asks the GPU driver: the node's GPUs with their memory and
// utilisation and their MIG devices, the compute processes on each (host PIDs) and their SM
// utilisation samples.
// NvmlStats (nvml_stats.h) is the production implementation (NVML loaded at run time, the same
// code on the real and the simulated driver); tests may supply their own.
//
// Thread safety: implementations are called from the monitor's update thread and its metrics
// handler; they must allow concurrent calls.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/status.h"

namespace hami::monitor {

// A MIG device (one compute instance of one GPU instance) that exists on a GPU, whoever made it:
// an operator (static MIG) or the device plugin (dynamic MIG).
struct MigDevice {
  std::string uuid;     // "MIG-..."
  std::string profile;  // its GPU instance's profile ("1g.10gb"); "" when the driver cannot say
  uint32_t gpu_instance_id = 0, compute_instance_id = 0;
  uint64_t memory_used = 0, memory_total = 0;  // bytes, of its GPU instance (shared by its CIs)
};

struct HostGpu {
  uint32_t index = 0;
  std::string uuid;
  std::string name;                            // model as NVML names it ("NVIDIA A100-SXM4-80GB")
  uint64_t memory_used = 0, memory_total = 0;  // bytes
  uint32_t utilization = 0;                    // percent of time a kernel ran (NVML "gpu")
  uint32_t memory_utilization = 0;             // percent of time memory was read or written
  // By NVML's MIG device index; none without MIG. (`= {}` lets initialisers leave it out.)
  std::vector<MigDevice> migs = {};
};

struct GpuProcess {
  int pid = 0;  // host PID
  uint64_t used_memory = 0;
};

struct ProcessSample {
  int pid = 0;  // host PID
  uint32_t sm_util = 0;
  uint64_t timestamp_us = 0;
};

class GpuStats {
 public:
  virtual ~GpuStats() = default;
  virtual Result<std::vector<HostGpu>> Gpus() = 0;
  virtual Result<std::vector<GpuProcess>> Processes(const std::string& uuid) = 0;
  // Per-process SM samples newer than `since_us` (wall clock, microseconds); empty when none.
  virtual Result<std::vector<ProcessSample>> Samples(const std::string& uuid,
                                                     uint64_t since_us) = 0;
};

}  // namespace hami::monitor
