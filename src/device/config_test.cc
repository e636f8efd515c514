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
  EXPECT_TRUE(r->vendor_sections.empty());
  ASSERT_EQ(r->vendors.count("cambricon"), 1u);
  EXPECT_EQ(r->vendors.at("cambricon").count, "cambricon.com/vmlu");
  ASSERT_TRUE(r->iluvatars.has_value());
  ASSERT_EQ(r->iluvatars->size(), 1u);
  EXPECT_EQ((*r->iluvatars)[0].common_word, "MR-V100");
  EXPECT_EQ((*r->iluvatars)[0].count, "iluvatar.ai/MR-V100-vgpu");
}

// The user's mixed multi-vendor device config, as they wrote it (their key names, their `ascend:`
// form).
constexpr char kUsersMixedConfig[] = R"(# NVIDIA GPU配置
nvidia:
  resourceCountName: "nvidia.com/gpu"
  resourceMemoryName: "nvidia.com/gpumem"
  resourceCoreName: "nvidia.com/gpucores"
  deviceSplitCount: 10
  defaultMem: 0
  defaultCores: 0
# 华为昇腾NPU配置
ascend:
  resourceCountName: "huawei.com/Ascend910B3"
  resourceMemoryName: "huawei.com/Ascend910B3-memory"
  deviceSplitCount: 8
  defaultMem: 0
  defaultCores: 0
# 寒武纪MLU配置
cambricon:
  resourceCountName: "cambricon.com/vmlu"
  resourceMemoryName: "cambricon.com/mlu.smlu.vmemory"
  resourceCoreName: "cambricon.com/mlu.smlu.vcore"
  deviceSplitCount: 10
  defaultMem: 0
  defaultCores: 0
)";

TEST(DeviceConfig, TheUsersMixedConfigLoadsAsWritten) {
  Result<DeviceConfig> r = ParseDeviceConfigYaml(kUsersMixedConfig);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_TRUE(r->warnings.empty()) << r->warnings[0];
  ASSERT_TRUE(r->nvidia.has_value());
  EXPECT_EQ(r->nvidia->device_split_count, 10u);
  ASSERT_TRUE(r->ascend.has_value());
  ASSERT_EQ(r->ascend->chips.size(), 1u);
  const AscendChipConfig& chip = r->ascend->chips[0];
  EXPECT_EQ(chip.common_word, "Ascend910B3");
  EXPECT_EQ(chip.resource_name, "huawei.com/Ascend910B3");
  EXPECT_EQ(chip.resource_memory_name, "huawei.com/Ascend910B3-memory");
  EXPECT_EQ(chip.memory_allocatable, 65536);
  ASSERT_EQ(chip.templates.size(), 2u);  // the chart's, for that chip
  EXPECT_EQ(chip.templates[0].name, "vir05_1c_16g");
  EXPECT_EQ(chip.templates[0].memory_mib, 16384);
  ASSERT_EQ(r->vendors.size(), 1u);
  const VendorResources& mlu = r->vendors.at("cambricon");
  EXPECT_EQ(mlu.count, "cambricon.com/vmlu");
  EXPECT_EQ(mlu.memory, "cambricon.com/mlu.smlu.vmemory");
  EXPECT_EQ(mlu.core, "cambricon.com/mlu.smlu.vcore");
  EXPECT_EQ(mlu.device_split_count, 10u);
}

TEST(DeviceConfig, VendorSectionsTakeTheChartsDefaults) {
  Result<DeviceConfig> r = ParseDeviceConfigYaml(
      "hygon: {}\nmthreads:\nmetax:\n  sgpuTopologyAware: yes\nkunlunxin:\n"
      "  resourceVCountName: kunlunxin.com/vxpu\nawsneuron: {}\namd: {}\nvastai: {}\n"
      "biren: {}\nenflame:\n  resourceCountName: enflame.com/vgcu\n"
      "  resourceMemoryPercentageName: enflame.com/vgcu-percentage\niluvatars:\nvnpus:\n");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_TRUE(r->warnings.empty()) << r->warnings[0];
  EXPECT_FALSE(r->nvidia.has_value());
  EXPECT_EQ(r->vendors.size(), 9u);
  EXPECT_EQ(r->vendors.at("hygon"), *VendorSectionDefaults("hygon"));
  EXPECT_EQ(r->vendors.at("hygon").count, "hygon.com/dcunum");
  EXPECT_EQ(r->vendors.at("hygon").memory, "hygon.com/dcumem");
  EXPECT_EQ(r->vendors.at("hygon").core, "hygon.com/dcucores");
  EXPECT_EQ(r->vendors.at("mthreads").memory_factor, 512);
  EXPECT_EQ(r->vendors.at("metax").extra.at("sgpuTopologyAware"), "true");
  EXPECT_EQ(r->vendors.at("metax").extra.at("resourceVCountName"), "metax-tech.com/sgpu");
  EXPECT_EQ(r->vendors.at("kunlun").count, "kunlunxin.com/xpu");  // kunlunxin: read as kunlun
  EXPECT_EQ(r->vendors.at("enflame").memory_percentage, "enflame.com/vgcu-percentage");
  EXPECT_EQ(r->vendors.at("awsneuron").core, "aws.amazon.com/neuroncore");
  EXPECT_EQ(r->vendors.at("amd").memory, "amd.com/gpumem");
  EXPECT_EQ(r->vendors.at("vastai").count, "vastaitech.com/va");
  EXPECT_EQ(r->vendors.at("biren").count, "birentech.com/gpu");
  EXPECT_EQ(*r->iluvatars, DefaultIluvatarChips());
  ASSERT_TRUE(r->ascend.has_value());
  EXPECT_EQ(r->ascend->chips, DefaultAscendChips());
  EXPECT_FALSE(VendorSectionDefaults("nvidia").has_value());
  // The chart's chips: templates sorted by memory, 910C a super pod, 310P's capacity above its
  // allocatable memory.
  std::vector<AscendChipConfig> chips = DefaultAscendChips();
  ASSERT_EQ(chips.size(), 7u);
  for (const AscendChipConfig& c : chips) {
    EXPECT_EQ(c.resource_memory_name, c.resource_name + "-memory") << c.common_word;
    for (size_t i = 1; i < c.templates.size(); ++i) {
      EXPECT_LE(c.templates[i - 1].memory_mib, c.templates[i].memory_mib) << c.common_word;
    }
  }
  EXPECT_TRUE(chips[6].super_pod);
  EXPECT_EQ(chips[5].memory_allocatable, 21527);
  EXPECT_EQ(chips[5].memory_capacity, 24576);
}

TEST(DeviceConfig, VnpusChipsOfTheirOwn) {
  Result<DeviceConfig> r = ParseDeviceConfigYaml(R"(vnpus:
  hamiVnpuCore: true
  configs:
  - chipName: 910B3
    commonWord: Ascend910B3
    resourceName: huawei.com/Ascend910B3
    resourceMemoryName: huawei.com/Ascend910B3-memory
    memoryAllocatable: 65536
    memoryCapacity: 65536
    aiCore: 20
    templates:
    - {name: big, memory: 32768, aiCore: 10}
    - {name: small, memory: 16384, aiCore: 5}
    futureKey: 1
)");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ(r->warnings.size(), 1u);
  EXPECT_EQ(r->warnings[0], "vnpus.configs[0].futureKey: unknown key ignored");
  EXPECT_TRUE(r->ascend->hami_vnpu_core);
  ASSERT_EQ(r->ascend->chips.size(), 1u);
  EXPECT_EQ(r->ascend->chips[0].templates[0].name, "small");  // sorted by memory
}

TEST(DeviceConfig, VendorSectionErrorsNameTheKey) {
  auto error = [](const std::string& yaml) {
    Result<DeviceConfig> r = ParseDeviceConfigYaml(yaml);
    return r.ok() ? std::string("ok") : r.status().message();
  };
  EXPECT_EQ(error("hygon:\n  memoryFactor: 0\n"),
            "hygon.memoryFactor: 0 is out of range [1, 2147483647]");
  EXPECT_EQ(error("cambricon:\n  defaultCores: 150\n"),
            "cambricon.defaultCores: 150 is out of range [0, 100]");
  EXPECT_EQ(error("metax:\n  sgpuTopologyAware: maybe\n"),
            "metax.sgpuTopologyAware: \"maybe\" is not true or false");
  EXPECT_NE(error("ascend:\n  resourceCountName: huawei.com/Ascend999\n")
                .find("ascend.resourceCountName: no Ascend chip named \"Ascend999\""),
            std::string::npos);
  EXPECT_NE(
      error("ascend:\n  resourceCountName: example.com/npu\n").find("is not huawei.com/<chip>"),
      std::string::npos);
  EXPECT_EQ(error("vnpus:\n  configs:\n  - commonWord: A\n    resourceName: r\n"
                  "    templates:\n    - {name: t}\n"),
            "vnpus.configs[0].templates[0].memory: missing");
  EXPECT_EQ(error("vnpus:\n  configs:\n  - {commonWord: A, resourceName: r, "
                  "memoryAllocatable: 10, memoryCapacity: 5}\n"),
            "vnpus.configs[0].memoryCapacity: 5 is below memoryAllocatable 10");
  EXPECT_EQ(error("iluvatars:\n- {commonWord: X, resourceCountName: a}\n"
                  "- {commonWord: X, resourceCountName: b}\n"),
            "iluvatars[1].commonWord: \"X\" given twice");
  EXPECT_EQ(error("vnpus:\nascend:\n"), "ascend: vnpus and ascend given together");
  EXPECT_EQ(error("kunlun:\nkunlunxin:\n"),
            "kunlunxin: the same section as kunlun/kunlunxin, given twice");
  Result<DeviceConfig> warned = ParseDeviceConfigYaml("cambricon:\n  colour: red\nfoo: {}\n");
  ASSERT_TRUE(warned.ok());
  ASSERT_EQ(warned->warnings.size(), 2u);
  EXPECT_EQ(warned->warnings[0], "cambricon.colour: unknown key ignored");
  EXPECT_EQ(warned->warnings[1], "foo: unknown vendor section ignored");
  EXPECT_EQ(warned->vendor_sections.count("foo"), 1u);
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
  EXPECT_TRUE(c.known_mig_geometries.empty());
  ASSERT_EQ(r->warnings.size(), 1u);
  EXPECT_NE(r->warnings[0].find("nvidia.somethingNew: unknown key"), std::string::npos);
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
