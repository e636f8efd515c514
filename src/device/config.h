// Global device configuration: the `device-config.yaml` the scheduler and device plugins read
// (ConfigMap `<release>-device`).
//
// The `nvidia:` section is parsed into NvidiaConfig, every key of upstream's chart with the
// chart's default; a key left out keeps its default (upstream would zero it). The other vendors'
// sections are parsed the same way: the flat ones (cambricon, hygon, metax, enflame, mthreads,
// kunlun, awsneuron, amd, vastai, biren) into VendorResources, `vnpus`/`ascend` into
// AscendConfig, `iluvatars` into its chip list. Keys are matched exactly (case-sensitive), as
// upstream's YAML decoder does. Unknown keys are reported in `warnings` and otherwise ignored;
// unknown sections are kept as YAML text in `vendor_sections`, with a warning.
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

// Volcano's MIG geometries (`knownMigGeometries`, read by Volcano's scheduler and by a node in
// operating mode mig under Volcano): for GPUs whose name contains one of `models`, the layouts a
// GPU may be cut into. A group's instances are listed in the order Volcano numbers their slots
// (device/volcano_mig.h).
struct MigGeometryInstance {
  std::string name;         // a MIG profile, e.g. "1g.10gb"
  int64_t memory_mib = 0;   // what Volcano's scheduler counts the instance as
  int32_t count = 0;        // instances of it in the group
  friend bool operator==(const MigGeometryInstance&, const MigGeometryInstance&) = default;
};
struct MigGeometryGroup {
  std::string group;  // never contains '-' (Volcano splits device IDs on it)
  std::vector<MigGeometryInstance> instances;
  friend bool operator==(const MigGeometryGroup&, const MigGeometryGroup&) = default;
};
struct KnownMigGeometry {
  std::vector<std::string> models;
  std::vector<MigGeometryGroup> groups;  // allowedGeometries
  friend bool operator==(const KnownMigGeometry&, const KnownMigGeometry&) = default;
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
  // gpuMemoryFactor (Volcano's device config): MiB per unit of Volcano's memory resource, in the
  // node registration and the kubelet device list (hami-device-plugin --volcano).
  int32_t gpu_memory_factor = 1;
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
  // knownMigGeometries in Volcano's form (HAMi's older list-of-lists form is ignored with a
  // warning); empty when not given.
  std::vector<KnownMigGeometry> known_mig_geometries;

  int32_t EffectiveMemoryFactor() const { return memory_factor < 1 ? 1 : memory_factor; }
};

// A vendor section of the flat kind (`cambricon:`, `hygon:`, ...): the resource names its pods
// use and the request defaults. Which keys a section takes, and their defaults, are the chart's
// for that vendor (VendorSectionDefaults); the user's documents also give every section
// `defaultMem`, `defaultCores` and `deviceSplitCount`, accepted everywhere.
struct VendorResources {
  std::string count;                 // resourceCountName
  std::string memory;                // resourceMemoryName
  std::string memory_percentage;     // resourceMemoryPercentageName
  std::string core;                  // resourceCoreName
  int32_t memory_factor = 1;         // memoryFactor: a memory quantity is this many MiB
  int32_t default_memory_mib = 0;    // defaultMem
  int32_t default_cores = 0;         // defaultCores: 0..100
  uint32_t device_split_count = 10;  // deviceSplitCount
  // Keys of this section that are not resource names above (metax's resourceVCountName,
  // enflame's resourceNameDRSGCU, kunlun's resourceVMemoryName, ...): YAML key -> value.
  std::map<std::string, std::string> extra;
  // extra[key], or `fallback` when absent or empty.
  std::string Extra(const std::string& key, std::string_view fallback) const {
    auto it = extra.find(key);
    return it != extra.end() && !it->second.empty() ? it->second : std::string(fallback);
  }
  friend bool operator==(const VendorResources&, const VendorResources&) = default;
};

// The chart's defaults of a flat section ("cambricon", "hygon", "metax", "enflame", "mthreads",
// "kunlun", "awsneuron", "amd", "vastai", "biren"); nullopt for other names.
std::optional<VendorResources> VendorSectionDefaults(std::string_view section);

// One Ascend vNPU template: a card slice of `memory_mib` with its AI cores and CPUs.
struct AscendTemplate {
  std::string name;
  int64_t memory_mib = 0;
  int32_t ai_core = 0, ai_cpu = 0;
  friend bool operator==(const AscendTemplate&, const AscendTemplate&) = default;
};

// One Ascend chip (`vnpus.configs[]`); its vendor key is `common_word` (e.g. Ascend910B3).
struct AscendChipConfig {
  std::string chip_name;                  // chipName
  std::string common_word;                // commonWord
  std::string resource_name;              // resourceName: huawei.com/<commonWord>
  std::string resource_memory_name;       // resourceMemoryName: huawei.com/<commonWord>-memory
  std::string resource_core_name;         // resourceCoreName: huawei.com/<commonWord>-core
  int64_t memory_allocatable = 0;         // memoryAllocatable (MiB): a whole card's share
  int64_t memory_capacity = 0;            // memoryCapacity (MiB)
  int32_t memory_factor = 1;              // memoryFactor
  int32_t ai_core = 0, ai_cpu = 0;        // aiCore, aiCPU
  std::string runtime_class_name;         // runtimeClassName
  bool overwrite_env = false;             // overwriteEnv
  bool super_pod = false;                 // superPod
  std::vector<AscendTemplate> templates;  // sorted by memory
  friend bool operator==(const AscendChipConfig&, const AscendChipConfig&) = default;
};

struct AscendConfig {
  bool hami_vnpu_core = false;  // hamiVnpuCore
  // Written in the user's flat `ascend:` form (an explicit choice of one chip), not `vnpus`.
  bool flat_form = false;
  std::vector<AscendChipConfig> chips;
  friend bool operator==(const AscendConfig&, const AscendConfig&) = default;
};

// The chart's seven chips (910A, 910B2, 910B3, 910B4-1, 910B4, 310P3, 910C).
std::vector<AscendChipConfig> DefaultAscendChips();

// One Iluvatar chip (`iluvatars[]`).
struct IluvatarChipConfig {
  std::string chip_name, common_word;  // chipName, commonWord
  std::string count, memory, core;     // resourceCountName, resourceMemoryName, resourceCoreName
  friend bool operator==(const IluvatarChipConfig&, const IluvatarChipConfig&) = default;
};

// The chart's four chips (MR-V100, MR-V50, BI-V150, BI-V100).
std::vector<IluvatarChipConfig> DefaultIluvatarChips();

struct DeviceConfig {
  // Absent when the file has no `nvidia:` section (NVIDIA support off).
  std::optional<NvidiaConfig> nvidia;
  // Flat vendor sections present in the file, by section name ("cambricon", "hygon", ...;
  // `kunlunxin:` is read as `kunlun:`), each with the chart's defaults for keys left out.
  std::map<std::string, VendorResources> vendors;
  // `vnpus:` (upstream's form: chips with templates), or `ascend:` (the user's documents' flat
  // form naming one chip by its count resource, e.g. huawei.com/Ascend910B3, whose templates
  // come from the chart's chip of that name).
  std::optional<AscendConfig> ascend;
  // `iluvatars:`, a list of chips.
  std::optional<std::vector<IluvatarChipConfig>> iluvatars;
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
