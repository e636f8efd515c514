// How the simulated kubelet turns a container spec and the device plugins' answers into a local
// process: argv and environment. A real kubelet hands both to a container runtime, which applies
// the mounts inside the container; here the process runs on the host, so:
//  - env = the node's base env (the simulated driver's library path and state), then the
//    plugins' envs, then the spec's own env (literal values and the common downward-API fields),
//    later entries winning, as with a container runtime;
//  - the NVIDIA container toolkit's part: the GPUs a plugin names through CDI (its CDI devices,
//    or `cdi.k8s.io/*` annotations, `nvidia.com/gpu=<uuid>`) or through volume mounts
//    (NVIDIA_VISIBLE_DEVICES=/var/run/nvidia-container-devices and a mount at
//    <that directory>/<uuid> each) become the process's NVIDIA_VISIBLE_DEVICES, the variable the
//    simulated driver reads to expose devices (ToolkitDevices);
//  - with a CDI registry, a CDI name no spec defines fails the launch as containerd does
//    ("unresolvable CDI devices");
//  - every env value that is a path inside a mount's container path is rewritten to the host
//    path (CUDA_DEVICE_MEMORY_SHARED_CACHE lands in the container's host hook directory);
//  - a mount at /etc/ld.so.preload becomes LD_PRELOAD: the libraries the host file names, each
//    translated through the mounts (what the dynamic loader does inside the container);
//  - the command runs as written when its program exists on this machine (command[0] as a path,
//    or found on PATH); otherwise, or when the spec has no command (an image's entrypoint), the
//    node's stand-in GPU workload runs and `note` says why (also, with
//    stand_in_for_gpu_containers, for every container given devices).
//
// Thread safety: pure functions (file reads go through the given reader).
#pragma once

#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "common/status.h"
#include "sim/kubelet/device_manager.h"

namespace hami::sim {

struct EnvVar {
  std::string name;
  std::optional<std::string> value;      // literal value
  std::optional<std::string> field_ref;  // valueFrom.fieldRef.fieldPath
};

struct ContainerSpec {
  std::string name;
  std::string image;
  std::vector<std::string> command;
  std::vector<std::string> args;
  std::vector<EnvVar> env;
};

struct LaunchContext {
  std::vector<std::string> node_env;  // KEY=VALUE
  std::vector<std::string> stand_in;  // argv of the stand-in workload
  // Run the stand-in for every container that was given devices, whatever its command (a
  // demo cluster whose pod specs say `sleep infinity` still shows GPU use).
  bool stand_in_for_gpu_containers = false;
  bool has_devices = false;                   // this container was given devices by a plugin
  std::string path;                           // PATH used to find commands
  std::map<std::string, std::string> fields;  // downward API: "metadata.name" -> value, ...
  // Reads a host file (the ld.so.preload a plugin mounts); nullopt when unreadable.
  std::function<std::optional<std::string>(const std::string&)> read_file;
  // Whether an executable exists at a path.
  std::function<bool(const std::string&)> executable;
  // The runtime's CDI registry (cdi_registry.h), asked only for a container given CDI names:
  // they must be among these or the container is not started. Empty: every name resolves (no
  // CDI spec directories configured; the toolkit is assumed to know every device).
  std::function<std::set<std::string>()> cdi_registry;
};

struct Launch {
  std::vector<std::string> argv;
  std::vector<std::string> env;  // KEY=VALUE, sorted by key
  bool stand_in = false;
  std::string note;  // why the stand-in runs ("" otherwise)
};

Result<Launch> PrepareLaunch(const ContainerSpec& spec,
                             const std::vector<const ContainerDevices*>& answers,
                             const LaunchContext& ctx);

inline constexpr const char* kToolkitVolumeMountRoot = "/var/run/nvidia-container-devices";
inline constexpr const char* kToolkitCdiGpuKind = "nvidia.com/gpu";

// The GPU list the toolkit derives from CDI names and device volume mounts, comma-separated
// ("none" when the volume-mount directory names none); nullopt when neither channel is used,
// so NVIDIA_VISIBLE_DEVICES stays as the environment has it. `env` is the merged environment.
std::optional<std::string> ToolkitDevices(const std::vector<const ContainerDevices*>& answers,
                                          const std::vector<KubeletMount>& mounts,
                                          const std::map<std::string, std::string>& env);

// `value` rewritten through the mounts (longest container path first); unchanged when no mount
// covers it.
std::string HostPath(const std::string& value, const std::vector<KubeletMount>& mounts);

// As the NVIDIA container runtime adds the driver's tools (nvidia-smi) to a container that has
// NVIDIA devices (NVIDIA_VISIBLE_DEVICES set, not "void" or "none"): puts `tools_dir` first on
// its PATH. Other containers are left alone; so is everything with an empty `tools_dir`.
void AddDriverTools(Launch* launch, const std::string& tools_dir);

}  // namespace hami::sim
