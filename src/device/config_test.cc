#include "device/config.h"

#include <gtest/gtest.h>

namespace hami::device {
namespace {

// The `nvidia:` section the upstream chart renders with its default values, plus two of the
// other vendor sections.
constexpr char kChartConfig[] = R"(nvidia:
  resourceCountName: nvidia.com/gpu
  resourceMemoryName: nvidia.com/gpumem
  resourceMemoryPercentageName: nvidia.com/gpumem-percentage
  resourceCoreName: nvidia.com/gpucores
  resourcePriorityName: nvidia.com/priority
  overwriteEnv: false
  defaultMemory: 0
  defaultCores: 0
  defaultGPUNum: 1
  preConfiguredDeviceMemory: 0
  memoryFactor: 1
  deviceSplitCount: 10
  deviceMemoryScaling: 1
  deviceCoreScaling: 1
  enableNumaTopology: false
  gpuCorePolicy: default
  libCudaLogLevel: 1
  runtimeClassName: ""
  migProfileAllowlist:
  - models: [ "A30" ]
    profiles: [ "1g.6gb", "2g.12gb", "4g.24gb" ]
  - models: [ "A100-SXM4-40GB", "A100-40GB-PCIe", "A100-PCIE-40GB"]
    profiles: [ "1g.5gb", "2g.10gb", "3g.20gb", "7g.40gb" ]
cambricon:
  resourceCountName: cambricon.com/vmlu
  resourceMemoryName: cambricon.com/mlu.smlu.vmemory
  resourceCoreName: cambricon.com/mlu.smlu.vcore
iluvatars:
- chipName: MR-V100
  commonWord: MR-V100
  resourceCountName: iluvatar.ai/MR-V100-vgpu
)";

TEST(DeviceConfig, DefaultsMatchTheChart) {
  NvidiaConfig c;
  EXPECT_EQ(c.resource_count_name, "nvidia.com/gpu");
  EXPECT_EQ(c.resource_memory_name, "nvidia.com/gpumem");
  EXPECT_EQ(c.resource_memory_percentage_name, "nvidia.com/gpumem-percentage");
  EXPECT_EQ(c.resource_core_name, "nvidia.com/gpucores");
  EXPECT_EQ(c.resource_priority_name, "nvidia.com/priority");
  EXPECT_FALSE(c.overwrite_env);
  EXPECT_EQ(c.default_memory_mib, 0);
  EXPECT_EQ(c.default_cores, 0);
  EXPECT_EQ(c.default_gpu_num, 1);
  EXPECT_EQ(c.preconfigured_device_memory_mib, 0);
  EXPECT_EQ(c.memory_factor, 1);
  EXPECT_EQ(c.device_split_count, 10u);
  EXPECT_EQ(c.device_memory_scaling, 1.0);
  EXPECT_EQ(c.device_core_scaling, 1.0);
  EXPECT_FALSE(c.enable_numa_topology);
  EXPECT_EQ(c.gpu_core_policy, GpuCorePolicy::kDefault);
  EXPECT_EQ(c.lib_cuda_log_level, 1);
  EXPECT_EQ(c.runtime_class_name, "");
  EXPECT_FALSE(c.disable_core_limit);
  ASSERT_EQ(c.mig_profile_allowlist.size(), 9u);
  EXPECT_EQ(c.mig_profile_allowlist[0].models, std::vector<std::string>{"A30"});
  EXPECT_EQ(c.mig_profile_allowlist[6].profiles.back(), "7g.141gb");
  EXPECT_TRUE(ValidateNvidiaConfig(c).ok());
  EXPECT_TRUE(DefaultDeviceConfig().nvidia.has_value());
}

TEST(DeviceConfig, ParsesChartFile) {
  Result<DeviceConfig> r = ParseDeviceConfigYaml(kChartConfig);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_TRUE(r->nvidia.has_value());
  EXPECT_EQ(r->nvidia->resource_count_name, "nvidia.com/gpu");
  ASSERT_EQ(r->nvidia->mig_profile_allowlist.size(), 2u);
  EXPECT_EQ(r->nvidia->mig_profile_allowlist[1].models.size(), 3u);
  EXPECT_TRUE(r->warnings.empty());
  ASSERT_EQ(r->vendor_sections.size(), 2u);
  EXPECT_NE(r->vendor_sections.at("cambricon").find("cambricon.com/vmlu"), std::string::npos);
  // A kept section is YAML that parses again.
  Result<DeviceConfig> again =
      ParseDeviceConfigYaml("iluvatars:\n" + r->vendor_sections.at("iluvatars"));
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_FALSE(again->nvidia.has_value());
}

TEST(DeviceConfig, OverridesAndMissingKeysKeepDefaults) {
  Result<DeviceConfig> r = ParseDeviceConfigYaml(R"(nvidia:
  resourceCountName: example.com/vgpu
  defaultMemory: 1000
  defaultCores: 20
  defaultGPUNum: 2
  memoryFactor: 4
  deviceSplitCount: 5
  deviceMemoryScaling: 1.5
  deviceCoreScaling: 2
  overwriteEnv: "true"
  enableNumaTopology: yes
  gpuCorePolicy: force
  libCudaLogLevel: 4
  runtimeClassName: nvidia
  disableCoreLimit: true
  preConfiguredDeviceMemory: 81920
  knownMigGeometries: []
  somethingNew: 1
)");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  const NvidiaConfig& c = *r->nvidia;
  EXPECT_EQ(c.resource_count_name, "example.com/vgpu");
  EXPECT_EQ(c.resource_memory_name, "nvidia.com/gpumem");  // default kept
  EXPECT_EQ(c.default_memory_mib, 1000);
  EXPECT_EQ(c.default_cores, 20);
  EXPECT_EQ(c.default_gpu_num, 2);
  EXPECT_EQ(c.memory_factor, 4);
  EXPECT_EQ(c.device_split_count, 5u);
  EXPECT_EQ(c.device_memory_scaling, 1.5);
  EXPECT_EQ(c.device_core_scaling, 2.0);
  EXPECT_TRUE(c.overwrite_env);
  EXPECT_TRUE(c.enable_numa_topology);
  EXPECT_EQ(c.gpu_core_policy, GpuCorePolicy::kForce);
  EXPECT_EQ(GpuCorePolicyName(c.gpu_core_policy), "force");
  EXPECT_EQ(c.lib_cuda_log_level, 4);
  EXPECT_EQ(c.runtime_class_name, "nvidia");
  EXPECT_TRUE(c.disable_core_limit);
  EXPECT_EQ(c.preconfigured_device_memory_mib, 81920);
  EXPECT_EQ(c.mig_profile_allowlist.size(), 9u);  // default kept
  ASSERT_EQ(r->warnings.size(), 2u);
  EXPECT_NE(r->warnings[0].find("nvidia.knownMigGeometries"), std::string::npos);
  EXPECT_NE(r->warnings[1].find("nvidia.somethingNew: unknown key"), std::string::npos);
}

TEST(DeviceConfig, MemoryFactorBelowOneActsAsOne) {
  Result<DeviceConfig> r = ParseDeviceConfigYaml("nvidia:\n  memoryFactor: 0\n");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->nvidia->EffectiveMemoryFactor(), 1);
}

TEST(DeviceConfig, ErrorsNameKeyAndReason) {
  const char* cases[][2] = {
      {"", "no sections"},
      {"# only a comment\n", "no sections"},
      {"- a\n- b\n", "expected a map of vendor sections"},
      {"nvidia: [1, 2]\n", "nvidia: expected a map"},
      {"nvidia:\n  defaultCores: 150\n", "nvidia.defaultCores: 150 is out of range [0, 100]"},
      {"nvidia:\n  defaultCores: -1\n", "nvidia.defaultCores: -1 is out of range"},
      {"nvidia:\n  defaultMemory: 1.5\n", "nvidia.defaultMemory: \"1.5\" is not an integer"},
      {"nvidia:\n  defaultMemory: 99999999999\n",
       "nvidia.defaultMemory: 99999999999 is out of range"},
      {"nvidia:\n  deviceSplitCount: 0\n", "nvidia.deviceSplitCount: 0 is out of range [1,"},
      {"nvidia:\n  deviceMemoryScaling: abc\n",
       "nvidia.deviceMemoryScaling: \"abc\" is not a number"},
      {"nvidia:\n  deviceCoreScaling: 0\n", "nvidia.deviceCoreScaling: must be greater than 0"},
      {"nvidia:\n  deviceCoreScaling: nan\n", "nvidia.deviceCoreScaling: \"nan\" is not a number"},
      {"nvidia:\n  overwriteEnv: maybe\n", "nvidia.overwriteEnv: \"maybe\" is not true or false"},
      {"nvidia:\n  gpuCorePolicy: strict\n", "nvidia.gpuCorePolicy: \"strict\" is not one of"},
      {"nvidia:\n  libCudaLogLevel: 7\n", "nvidia.libCudaLogLevel: 7 is out of range [0, 4]"},
      {"nvidia:\n  resourceCountName: \"\"\n", "nvidia.resourceCountName: must not be empty"},
      {"nvidia:\n  resourceCountName: [a]\n", "nvidia.resourceCountName: expected a scalar"},
      {"nvidia:\n  migProfileAllowlist: {a: 1}\n", "nvidia.migProfileAllowlist: expected a list"},
      {"nvidia:\n  migProfileAllowlist:\n  - models: [A30]\n    profiles: [big]\n",
       "nvidia.migProfileAllowlist[0].profiles[0]: \"big\" is not a MIG profile"},
      {"nvidia:\n  migProfileAllowlist:\n  - model: [A30]\n",
       "nvidia.migProfileAllowlist[0].model: unknown key"},
      {"nvidia:\n  defaultCores: 1\n  defaultCores: 2\n", "nvidia.defaultCores: key given twice"},
      {"nvidia: {a: [\n", "invalid YAML"},
  };
  for (const auto& c : cases) {
    Result<DeviceConfig> r = ParseDeviceConfigYaml(c[0]);
    ASSERT_FALSE(r.ok()) << c[0];
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(r.status().message().find(c[1]), std::string::npos)
        << c[0] << " -> " << r.status().message();
  }
}

}  // namespace
}  // namespace hami::device
