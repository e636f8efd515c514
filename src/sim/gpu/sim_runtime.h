// The per-process view of the simulated node, shared by the CUDA and NVML entry points.
//
// On first use it loads the device config (HAMI_SIM_CONFIG, else the built-in default), opens
// or creates the shared state (HAMI_SIM_STATE, else /tmp/hami-sim/state) and resolves device
// visibility from NVIDIA_VISIBLE_DEVICES and CUDA_VISIBLE_DEVICES (visibility.h), against the MIG
// devices that exist at that moment. Each simulated library links
// its own copy of this code, so a process that loads both maps the state twice; that is fine
// because all shared facts live in the state file.
//
// Thread safety: Get() is thread-safe and initialises exactly once per library instance;
// the returned object is immutable except for the process-slot cache, which is atomic.
#pragma once

#include <stdint.h>
#include <sys/types.h>

#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "sim/gpu/config.h"
#include "sim/gpu/shared_state.h"

namespace hami::sim {

// A device CUDA enumerates: a whole GPU, or a MIG device (one compute instance) of it.
struct CudaDevice {
  int phys = 0;
  bool mig = false;
  uint32_t gi_id = 0;  // mig only
  uint32_t ci_id = 0;
  std::string uuid;           // "GPU-..." or "MIG-..."
  uint64_t memory_bytes = 0;  // the GPU's, or its GPU instance's
  int sm_count = 0;           // the GPU's, or the compute instance's (as the tables say)
  int sm_first = 0;           // the SMs of the GPU's timeline its kernels book (MigSmRange)
  int sm_span = 0;
};

class SimRuntime {
 public:
  // The runtime, or nullptr if the config or state could not be loaded; the reason is logged to
  // stderr once and kept in InitError().
  static SimRuntime* Get();
  static const std::string& InitError();

  SimRuntime(const SimRuntime&) = delete;
  SimRuntime& operator=(const SimRuntime&) = delete;

  SharedState& state() { return *state_; }
  const SharedDeviceInfo& device(int phys) const { return state_->device(phys); }
  int physical_count() const { return state_->device_count(); }
  // Physical indices of the GPUs NVML enumerates (a GPU one of whose MIG devices is visible
  // counts), in NVML index order.
  const std::vector<int>& nvml_visible() const { return nvml_visible_; }
  // Whether NVML reaches MIG device (gi_id, ci_id) of `phys`: its GPU was named whole, or a MIG
  // device with those ids was (by ids, as the container's device capabilities name GI and CI).
  bool NvmlSeesMig(int phys, uint32_t gi_id, uint32_t ci_id) const;
  // The devices CUDA enumerates, by CUDA ordinal.
  const std::vector<CudaDevice>& cuda_devices() const { return cuda_devices_; }
  // Timing knobs from the config (see SimConfig).
  uint64_t nvml_sample_ns() const { return nvml_sample_ns_; }
  uint64_t max_queued_ns() const { return max_queued_ns_; }

  // This process's slot in the shared process table, registering it (again after a fork) on
  // first use. Returns -1 if the table is full of live processes.
  int Slot();

  // Builds the runtime from the environment; used once by Get().
  static SimRuntime* CreateForInit(std::string* error);

 private:
  SimRuntime() = default;
  // Fills the visible lists from the environment and the MIG devices that exist now.
  void ResolveVisibility();

  std::unique_ptr<SharedState> state_;
  std::vector<int> nvml_visible_;
  std::vector<int> nvml_whole_;  // GPUs named whole: all their MIG devices are reachable
  struct MigId {
    int phys;
    uint32_t gi_id;
    uint32_t ci_id;
  };
  std::vector<MigId> nvml_migs_;  // MIG devices named one by one
  std::vector<CudaDevice> cuda_devices_;
  uint64_t nvml_sample_ns_ = 0;
  uint64_t max_queued_ns_ = 200'000'000;
  std::atomic<int64_t> slot_cache_{-1};  // (pid << 16) | slot, or -1
};

}  // namespace hami::sim
