// Device visibility, emulating the container runtime and the CUDA driver.
//
//   NVIDIA_VISIBLE_DEVICES (what the container runtime would expose; applies to CUDA and NVML):
//     unset, "", "all" or "void" -> every GPU; "none" -> no device; otherwise a comma list of
//     physical indices, full GPU UUIDs, MIG device UUIDs ("MIG-...", one MIG device as the NVIDIA
//     container runtime hands it to a container) and "GPU:MIG" index pairs ("0:1": the second
//     MIG device of GPU 0, in NVML's MIG device order), in any mix. Unknown entries (a MIG
//     device that was destroyed among them) are skipped with a warning; repeats are dropped.
//   CUDA_VISIBLE_DEVICES (CUDA only, applied on top): unset -> all of the above; otherwise a
//     comma list of ordinals (positions in the NVIDIA-visible list) and/or UUIDs or unique UUID
//     prefixes ("GPU-5a3c" matches whole GPUs, "MIG-4b1e" MIG devices), in the order given.
//     Like the real driver, parsing stops at the first invalid, ambiguous or repeated entry
//     ("-1" therefore hides everything; "" too).
//
// Thread safety: pure functions.
#pragma once

#include <stdint.h>

#include <string>
#include <vector>

namespace hami::sim {

// A MIG device (a compute instance) that exists when visibility is resolved.
struct MigDeviceName {
  int phys;  // its GPU
  uint32_t gi_id;
  uint32_t ci_id;
  std::string uuid;  // "MIG-..."
};

// One device a process may use: a whole GPU, or one MIG device of it.
struct VisibleDevice {
  int phys;
  int mig = -1;  // index into the MIG device list given to the resolver; -1: the whole GPU
  friend bool operator==(const VisibleDevice&, const VisibleDevice&) = default;
};

// The devices NVIDIA_VISIBLE_DEVICES=`env` (nullptr = unset) exposes, in the order given.
// `uuids[i]` is the UUID of physical device i; `migs` the MIG devices that exist, each GPU's in
// NVML's index order (by GI id, then CI id). Problems are appended to *warnings.
std::vector<VisibleDevice> ResolveNvidiaVisible(const char* env,
                                                const std::vector<std::string>& uuids,
                                                const std::vector<MigDeviceName>& migs,
                                                std::vector<std::string>* warnings);

// The GPUs NVML enumerates for `visible`: each GPU that is named, or one of whose MIG devices is,
// once, in order of first appearance (inside a container given a MIG device the real NVML lists
// its parent GPU, MIG mode enabled).
std::vector<int> NvmlGpus(const std::vector<VisibleDevice>& visible);

// The devices CUDA enumerates, in CUDA ordinal order, given the NVIDIA-visible list `base`.
std::vector<VisibleDevice> ResolveCudaVisible(const char* env,
                                              const std::vector<VisibleDevice>& base,
                                              const std::vector<std::string>& uuids,
                                              const std::vector<MigDeviceName>& migs,
                                              std::vector<std::string>* warnings);

}  // namespace hami::sim
