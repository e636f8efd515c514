// Global device configuration: the `device-config.yaml` the scheduler and device plugins read
// (ConfigMap `<release>-device`).
//
// The `nvidia:` section is parsed into NvidiaConfig, every key of upstream's chart with the
// chart's default; a key left out keeps its default (upstream would zero it). Keys are matched
// exactly (case-sensitive), as upstream's YAML decoder does. Unknown keys are reported in
// `warnings` and otherwise ignored. The other top-level sections (cambricon, hygon, metax,
// enflame, mthreads, iluvatars, kunlun, awsneuron, amd, vastai, biren, vnpus, ...) are kept as
// YAML text for their vendor modules to parse.
//
// Errors name the key and the reason: `nvidia.defaultCores: 150 is out of range [0, 100]`.
//
//   Result<DeviceConfig> cfg = ParseDeviceConfigYaml(file_contents);
//
// Thread safety: pure functions; the structs are plain values.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace hami::device {

// GPU_CORE_UTILIZATION_POLICY injected into containers.
enum class GpuCorePolicy { kDefault, kForce, kDisable };
std::string_view GpuCorePolicyName(GpuCorePolicy p);

// Which MIG profiles may be created on which GPU models (models match by substring of the NVML
// name; profiles look like "<N>g.<memory>").
struct MigAllowlistEntry {
  std::vector<std::string> models;
  std::vector<std::string> profiles;
  friend bool operator==(const MigAllowlistEntry&, const MigAllowlistEntry&) = default;
};

// The chart's default allowlist (A30; A100 40/80 GB; H100 80/94 GB; H20/GH200; H200; B200;
// RTX PRO 6000 Blackwell).
std::vector<MigAllowlistEntry> DefaultMigProfileAllowlist();

// `nvidia:` keys (YAML name in brackets) with the chart defaults.
struct NvidiaConfig {
  std::string resource_count_name = "nvidia.com/gpu";      // resourceCountName
  std::string resource_memory_name = "nvidia.com/gpumem";  // resourceMemoryName
  std::string resource_memory_percentage_name =
      "nvidia.com/gpumem-percentage";                          // resourceMemoryPercentageName
  std::string resource_core_name = "nvidia.com/gpucores";      // resourceCoreName
  std::string resource_priority_name = "nvidia.com/priority";  // resourcePriorityName
  bool overwrite_env = false;                                  // overwriteEnv
  int32_t default_memory_mib = 0;  // defaultMemory: MiB when a pod gives none; 0 = whole card
  int32_t default_cores = 0;       // defaultCores: 0..100
  int32_t default_gpu_num = 1;     // defaultGPUNum: devices when only mem/cores are given
  int64_t preconfigured_device_memory_mib = 0;  // preConfiguredDeviceMemory
  int32_t memory_factor = 1;          // memoryFactor: gpumem is multiplied by it (< 1 acts as 1)
  uint32_t device_split_count = 10;   // deviceSplitCount: slots per device
  double device_memory_scaling = 1;   // deviceMemoryScaling
  double device_core_scaling = 1;     // deviceCoreScaling
  bool enable_numa_topology = false;  // enableNumaTopology
  GpuCorePolicy gpu_core_policy = GpuCorePolicy::kDefault;  // gpuCorePolicy
  int32_t lib_cuda_log_level = 1;                           // libCudaLogLevel: 0..4
  std::string runtime_class_name;                           // runtimeClassName
  bool disable_core_limit = false;                          // disableCoreLimit
  std::vector<MigAllowlistEntry> mig_profile_allowlist =
      DefaultMigProfileAllowlist();  // migProfileAllowlist

  int32_t EffectiveMemoryFactor() const { return memory_factor < 1 ? 1 : memory_factor; }
};

struct DeviceConfig {
  // Absent when the file has no `nvidia:` section (NVIDIA support off).
  std::optional<NvidiaConfig> nvidia;
  // Every other top-level section: key -> that section re-emitted as YAML.
  std::map<std::string, std::string> vendor_sections;
  // Ignored keys and similar non-fatal findings, for logging.
  std::vector<std::string> warnings;
};

// The configuration upstream's chart installs for NVIDIA (an `nvidia:` section of defaults).
DeviceConfig DefaultDeviceConfig();

// Parses device-config.yaml. A file without any section is an error (as upstream).
Result<DeviceConfig> ParseDeviceConfigYaml(std::string_view text);

// The semantic checks ParseDeviceConfigYaml applies to the nvidia section.
Status ValidateNvidiaConfig(const NvidiaConfig& c);

}  // namespace hami::device
