// The built-in side of device/config.h: the chart's defaults (MIG allowlist, Ascend and Iluvatar
// chips, the NVIDIA section) and the checks a parsed NVIDIA section must pass. Reading the YAML
// file is config.cc's job.
#include "device/config.h"
#include "device/config_internal.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <utility>
#include <vector>

namespace hami::device {

namespace {

AscendChipConfig AscendChip(std::string chip, std::string word, int64_t allocatable,
                            int64_t capacity, int32_t ai_core, int32_t ai_cpu, bool super_pod,
                            std::vector<AscendTemplate> templates) {
  AscendChipConfig c;
  c.chip_name = std::move(chip);
  c.common_word = std::move(word);
  c.resource_name = "huawei.com/" + c.common_word;
  c.resource_memory_name = c.resource_name + "-memory";
  c.resource_core_name = c.resource_name + "-core";
  c.memory_allocatable = allocatable;
  c.memory_capacity = capacity;
  c.ai_core = ai_core;
  c.ai_cpu = ai_cpu;
  c.super_pod = super_pod;
  c.templates = std::move(templates);
  return c;
}

}  // namespace

void config_internal::SortTemplates(AscendChipConfig* c) {
  std::stable_sort(
      c->templates.begin(), c->templates.end(),
      [](const AscendTemplate& a, const AscendTemplate& b) { return a.memory_mib < b.memory_mib; });
}

std::string_view GpuCorePolicyName(GpuCorePolicy p) {
  switch (p) {
    case GpuCorePolicy::kDefault:
      return "default";
    case GpuCorePolicy::kForce:
      return "force";
    case GpuCorePolicy::kDisable:
      return "disable";
  }
  return "default";
}

// HAMi's model strings, and besides them the names NVML really reports for the same cards
// (`NVIDIA H100 80GB HBM3` for the H100 SXM, `NVIDIA A100 80GB PCIe`, `NVIDIA H100 PCIe`,
// `NVIDIA H100 NVL`, `NVIDIA H200`), which HAMi's strings miss: with those alone such a GPU is
// never registered for dynamic MIG. The most specific (longest) model a GPU's name contains wins.
std::vector<MigAllowlistEntry> DefaultMigProfileAllowlist() {
  return {
      {{"A30"}, {"1g.6gb", "2g.12gb", "4g.24gb"}},
      {{"A100-SXM4-40GB", "A100-40GB-PCIe", "A100-PCIE-40GB"},
       {"1g.5gb", "2g.10gb", "3g.20gb", "7g.40gb"}},
      {{"A100-SXM4-80GB", "A100-80GB-PCIe", "A100-PCIE-80GB", "A100 80GB PCIe"},
       {"1g.10gb", "2g.20gb", "3g.40gb", "7g.79gb"}},
      {{"H100-PCIE-80GB", "H100-SXM5-80GB", "H100 80GB HBM3", "H100 PCIe"},
       {"1g.10gb", "2g.20gb", "3g.40gb", "7g.80gb"}},
      {{"H100-PCIE-94GB", "H100-SXM5-94GB", "H100 NVL"},
       {"1g.12gb", "2g.24gb", "3g.47gb", "7g.94gb"}},
      {{"H20", "H100 on GH200"}, {"1g.12gb", "2g.24gb", "3g.48gb", "7g.96gb"}},
      {{"H200 NVL", "H200-SXM5", "H200"}, {"1g.18gb", "2g.35gb", "3g.71gb", "7g.141gb"}},
      {{"B200"}, {"1g.23gb", "2g.45gb", "3g.90gb", "7g.180gb"}},
      {{"RTX PRO 6000 Blackwell Server Edition"}, {"1g.24gb", "2g.48gb", "4g.96gb"}},
  };
}

std::vector<AscendChipConfig> DefaultAscendChips() {
  std::vector<AscendChipConfig> chips = {
      AscendChip("910A", "Ascend910A", 32768, 32768, 30, 0, false,
                 {{"vir02", 2184, 2, 0},
                  {"vir04", 4369, 4, 0},
                  {"vir08", 8738, 8, 0},
                  {"vir16", 17476, 16, 0}}),
      AscendChip("910B2", "Ascend910B2", 65536, 65536, 24, 6, false,
                 {{"vir03_1c_8g", 8192, 3, 1},
                  {"vir06_1c_16g", 16384, 6, 1},
                  {"vir12_3c_32g", 32768, 12, 3}}),
      AscendChip("910B3", "Ascend910B3", 65536, 65536, 20, 7, false,
                 {{"vir05_1c_16g", 16384, 5, 1}, {"vir10_3c_32g", 32768, 10, 3}}),
      AscendChip("910B4-1", "Ascend910B4-1", 65536, 65536, 20, 7, false,
                 {{"vir05_1c_16g", 16384, 5, 1}, {"vir10_3c_32g", 32768, 10, 3}}),
      AscendChip("910B4", "Ascend910B4", 32768, 32768, 20, 7, false,
                 {{"vir05_1c_8g", 8192, 5, 1}, {"vir10_3c_16g", 16384, 10, 3}}),
      AscendChip("310P3", "Ascend310P", 21527, 24576, 8, 7, false,
                 {{"vir01", 3072, 1, 1}, {"vir02", 6144, 2, 2}, {"vir04", 12288, 4, 4}}),
      AscendChip("Ascend910", "Ascend910C", 65536, 65536, 20, 7, true,
                 {{"vir05_1c_16g", 16384, 5, 1}, {"vir10_3c_32g", 32768, 10, 3}}),
  };
  for (AscendChipConfig& c : chips) config_internal::SortTemplates(&c);
  return chips;
}

std::vector<IluvatarChipConfig> DefaultIluvatarChips() {
  std::vector<IluvatarChipConfig> chips;
  for (const char* word : {"MR-V100", "MR-V50", "BI-V150", "BI-V100"}) {
    std::string w = word;
    chips.push_back(IluvatarChipConfig{w, w, "iluvatar.ai/" + w + "-vgpu",
                                       "iluvatar.ai/" + w + ".vMem",
                                       "iluvatar.ai/" + w + ".vCore"});
  }
  return chips;
}

DeviceConfig DefaultDeviceConfig() {
  DeviceConfig c;
  c.nvidia = NvidiaConfig();
  return c;
}

Status ValidateNvidiaConfig(const NvidiaConfig& c) {
  struct {
    const char* key;
    const std::string& value;
  } names[] = {{"resourceCountName", c.resource_count_name},
               {"resourceMemoryName", c.resource_memory_name},
               {"resourceMemoryPercentageName", c.resource_memory_percentage_name},
               {"resourceCoreName", c.resource_core_name},
               {"resourcePriorityName", c.resource_priority_name}};
  for (const auto& n : names) {
    if (n.value.empty()) {
      return InvalidArgumentError(std::string("nvidia.") + n.key + ": must not be empty");
    }
  }
  if (c.default_memory_mib < 0) return InvalidArgumentError("nvidia.defaultMemory: negative");
  if (c.default_cores < 0 || c.default_cores > 100) {
    return InvalidArgumentError("nvidia.defaultCores: must be between 0 and 100");
  }
  if (c.default_gpu_num < 0) return InvalidArgumentError("nvidia.defaultGPUNum: negative");
  if (c.memory_factor < 0) return InvalidArgumentError("nvidia.memoryFactor: negative");
  if (c.device_split_count < 1) {
    return InvalidArgumentError("nvidia.deviceSplitCount: must be at least 1");
  }
  if (!(c.device_memory_scaling > 0) || !std::isfinite(c.device_memory_scaling)) {
    return InvalidArgumentError("nvidia.deviceMemoryScaling: must be greater than 0");
  }
  if (!(c.device_core_scaling > 0) || !std::isfinite(c.device_core_scaling)) {
    return InvalidArgumentError("nvidia.deviceCoreScaling: must be greater than 0");
  }
  if (c.lib_cuda_log_level < 0 || c.lib_cuda_log_level > 4) {
    return InvalidArgumentError("nvidia.libCudaLogLevel: must be between 0 and 4");
  }
  return OkStatus();
}

}  // namespace hami::device
