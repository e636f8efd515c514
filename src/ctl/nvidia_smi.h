// `nvidia-smi` inside a simulated container: hamictl answers to that name (the simulated
// kubelet puts a link called nvidia-smi on the PATH of every container given NVIDIA devices,
// as the NVIDIA container runtime mounts the real one). What it shows is NVML as the container
// sees it, so under libvgpu.so the memory total is the container's quota.
//
// The forms that verification commands and scripts use are understood:
//   nvidia-smi                                     a summary table of GPUs and processes
//   nvidia-smi -L | --list-gpus                    "GPU 0: <name> (UUID: GPU-...)"
//   nvidia-smi --query-gpu=F,... --format=csv[,noheader][,nounits]
//       F in index, name, uuid, driver_version, count, memory.total, memory.used,
//       memory.free, utilization.gpu
//   nvidia-smi -h | --help
// Anything else is refused with a message naming these (exit 2); no device is changed.
//
// Thread safety: ParseNvidiaSmiArgs and the Render functions are pure.
#pragma once

#include <iosfwd>
#include <string>
#include <vector>

#include "ctl/smi.h"

namespace hami::ctl {

struct NvidiaSmiArgs {
  enum class Mode { kTable, kList, kQuery, kHelp } mode = Mode::kTable;
  std::vector<std::string> fields;  // kQuery
  bool header = true;               // kQuery: false with noheader
  bool units = true;                // kQuery: false with nounits
};

// False with *error for arguments this nvidia-smi does not understand.
bool ParseNvidiaSmiArgs(const std::vector<std::string>& args, NvidiaSmiArgs* out,
                        std::string* error);

std::string RenderNvidiaSmiTable(const SmiView& v);
std::string RenderNvidiaSmiList(const SmiView& v);
// False with *error naming an unknown field.
bool RenderNvidiaSmiQuery(const SmiView& v, const NvidiaSmiArgs& a, std::string* out,
                          std::string* error);
std::string NvidiaSmiHelp();

// The whole command: parse, collect through NVML, print. Exit status 0, 2 (bad arguments) or
// 9 (NVML cannot be loaded or initialised, as nvidia-smi reports a missing driver).
int NvidiaSmiMain(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);

}  // namespace hami::ctl
