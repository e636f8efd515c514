// `hamictl smi`: an nvidia-smi-like view of the GPUs through NVML.
//
// NVML is reached exactly as nvidia-smi reaches it, dlopen("libnvidia-ml.so.1") + dlsym, so that
// under `hamictl run` the preloaded libvgpu's virtual view (memory total = the quota, used = the
// container's usage) is what gets shown. Collection (CollectSmi) is separate from rendering
// (pure, unit-tested).
//
// Thread safety: CollectSmi initialises and shuts down NVML; do not run two at once in a
// process. The Render functions are pure.
#pragma once

#include <stdint.h>

#include <string>
#include <vector>

namespace hami::ctl {

struct SmiProcess {
  unsigned pid = 0;
  bool used_known = false;  // false when NVML reports the usage as not available
  uint64_t used_bytes = 0;
  std::string name;  // from /proc/<pid>/comm; empty if not visible
};

struct SmiDevice {
  unsigned index = 0;
  std::string name;
  std::string uuid;
  bool memory_known = false;
  uint64_t memory_total = 0;
  uint64_t memory_used = 0;
  int gpu_util = -1;  // percent; -1 = not available
  std::vector<SmiProcess> processes;
};

struct SmiView {
  std::string driver_version;  // empty if not available
  int cuda_version = 0;        // e.g. 12040; 0 if not available
  std::vector<SmiDevice> devices;
};

// Loads NVML and reads every device. False with a one-line reason when NVML is absent or fails
// to initialise; a device whose individual queries fail is still listed with what is known.
bool CollectSmi(SmiView* view, std::string* error);

std::string RenderSmiText(const SmiView& v);
std::string RenderSmiJson(const SmiView& v);

}  // namespace hami::ctl
