// The simulated NVIDIA container runtime: what `hami-sim-container-runtime` does to a container
// before handing it to runc, the way the NVIDIA container runtime mounts the host's driver into
// a GPU container. containerd runs it in place of runc (its runc runtime's BinaryName) on a real
// node of the tests (sim/world/kube_node.h); a real node with GPUs has the NVIDIA runtime there.
//
// For `runc create` (and `runc run`) of a container whose environment names GPUs
// (NVIDIA_VISIBLE_DEVICES set, and neither empty nor `void`), it edits the bundle's config.json:
//   - the simulated driver libraries (libcuda.so.1, libnvidia-ml.so.1 of `lib_dir`) are mounted
//     read-only where Debian's loader finds them, /usr/lib/x86_64-linux-gnu;
//   - the node's simulated GPU config and state file are mounted at the same paths, and
//     HAMI_SIM_CONFIG / HAMI_SIM_STATE name them: every container on the node shares the one
//     simulated driver, as containers share the kernel's;
//   - the host's procfs is mounted read-only at kHostProcMount and HAMI_SIM_HOST_PROC names it,
//     so that the simulated driver records the container's processes by their host PIDs, as the
//     real kernel driver does (sim/gpu/proc_liveness.h);
//   - `nvidia_smi` (when set) is mounted as /usr/bin/nvidia-smi, as the NVIDIA runtime mounts
//     the host's nvidia-smi.
// Every other runc call, and every container without GPUs, passes through untouched.
//
// Thread safety: pure functions.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "common/status.h"

namespace hami::sim {

inline constexpr const char* kHostProcMount = "/run/hami-sim/host-proc";

struct SimRuntimeConfig {
  std::string runc = "/usr/sbin/runc";  // the runtime every call is handed to
  std::string lib_dir;                  // libcuda.so.1 and libnvidia-ml.so.1 (build/sim)
  std::string gpu_config;               // the node's HAMI_SIM_CONFIG file
  std::string gpu_state;                // the node's HAMI_SIM_STATE file
  std::string nvidia_smi;               // "" = none
};

// Reads the runtime's config file: `key = value` lines (runc, lib_dir, gpu_config, gpu_state,
// nvidia_smi), `#` comments. InvalidArgument naming the line for an unknown key or a line
// without `=`, and when lib_dir, gpu_config or gpu_state is missing or not absolute.
Result<SimRuntimeConfig> ParseSimRuntimeConfig(const std::string& text);

// The bundle folder of a runc command line (argv without the program name) that creates a
// container (`create` or `run`): its --bundle / -b value, or "." (runc's default, the working
// directory); nullopt for every other command.
std::optional<std::string> CreateBundle(const std::vector<std::string>& args);

// The process file of a runc command line that runs a process in a running container
// (`exec --process FILE`, how containerd's shim runs `kubectl exec`), or nullopt. containerd
// builds that process from the container's spec as it stored it, before this runtime's edits:
// its environment lacks the variables added above, which ProcessWithDriverEnv adds again.
std::optional<std::string> ExecProcessFile(const std::vector<std::string>& args);

// An OCI process (`process.json` of runc exec) with HAMI_SIM_CONFIG, HAMI_SIM_STATE and
// HAMI_SIM_HOST_PROC set as in the container, or nullopt when it names no GPUs.
// InvalidArgument when the text is not a process (no JSON object, env not a list of strings).
Result<std::optional<std::string>> ProcessWithDriverEnv(const std::string& process_json,
                                                        const SimRuntimeConfig& config);

// The OCI runtime spec `spec_json` with the simulated driver added (see above), or nullopt when
// the container names no GPUs. InvalidArgument when the text is not a runtime spec (no JSON
// object, or a process.env that is not a list of strings).
Result<std::optional<std::string>> AddSimulatedDriver(const std::string& spec_json,
                                                      const SimRuntimeConfig& config);

// The OCI runtime spec `spec_json` with process.oomScoreAdj raised to `floor` where it is lower,
// or nullopt when nothing changes. For a machine whose kernel refuses to lower an OOM score (some
// sandboxed VMs answer EIO even to root): runc fails to start a container whose spec asks for
// one (the kubelet asks -998 for every pod sandbox), so the node's runtime keeps it at the floor.
// InvalidArgument as AddSimulatedDriver.
Result<std::optional<std::string>> RaiseOomScoreAdj(const std::string& spec_json, int floor);
// process.oomScoreAdj of a spec, or nullopt (none, or the text is no spec).
std::optional<int> SpecOomScoreAdj(const std::string& spec_json);

}  // namespace hami::sim
