#include "deviceplugin/volcano_devices.h"

#include <gtest/gtest.h>

#include "device/volcano_vgpu.h"

namespace hami::deviceplugin {
namespace {

device::DeviceInfo Gpu(const std::string& uuid, int32_t mib, bool healthy, int32_t numa = 0) {
  device::DeviceInfo d;
  d.id = uuid;
  d.count = 10;
  d.devmem = mib;
  d.devcore = 100;
  d.type = "NVIDIA A100-SXM4-80GB";  // HAMi's registration keeps such names unprefixed
  d.mode = "hami-core";
  d.health = healthy;
  d.numa = numa;
  return d;
}

TEST(VolcanoDevices, RegisterListsHealthyGpusInFactorUnits) {
  VolcanoSettings s;
  s.memory_factor = 4;
  std::vector<device::DeviceInfo> reg = VolcanoRegisterDevices(
      {Gpu("GPU-a", 81920, true), Gpu("GPU-b", 81920, false), Gpu("GPU-c", 15359, true)}, s);
  ASSERT_EQ(reg.size(), 2u);  // the unhealthy GPU is left out: schedulers ignore the field
  EXPECT_EQ(reg[0].id, "GPU-a");
  EXPECT_EQ(reg[0].devmem, 20480);
  EXPECT_EQ(reg[1].devmem, 3839);  // rounded down
  Result<std::string> text = device::EncodeVolcanoNodeDevices(reg);
  ASSERT_TRUE(text.ok()) << text.status().ToString();
  EXPECT_EQ(*text,
            "GPU-a,10,20480,NVIDIA-NVIDIA A100-SXM4-80GB,true,hami-core:"
            "GPU-c,10,3839,NVIDIA-NVIDIA A100-SXM4-80GB,true,hami-core:");
}

TEST(VolcanoDevices, MemoryAndCoreListsCarryHealthAndNuma) {
  VolcanoSettings s;
  s.memory_factor = 1024;
  s.core_scaling = 0.5;
  std::vector<device::DeviceInfo> reg = {Gpu("GPU-a", 2048, true, 1), Gpu("GPU-b", 1024, false)};
  std::vector<PluginDevice> mem = VolcanoMemoryDevices(reg, s, /*numa_topology=*/true);
  ASSERT_EQ(mem.size(), 3u);
  EXPECT_EQ(mem[0], (PluginDevice{"GPU-a-memory-0", "GPU-a", true, 1}));
  EXPECT_EQ(mem[1].id, "GPU-a-memory-1");
  EXPECT_EQ(mem[2], (PluginDevice{"GPU-b-memory-0", "GPU-b", false, 0}));
  std::vector<PluginDevice> cores = VolcanoCoreDevices(reg, s, /*numa_topology=*/false);
  ASSERT_EQ(cores.size(), 100u);  // 50 per GPU
  EXPECT_EQ(cores[49], (PluginDevice{"GPU-a-core-49", "GPU-a", true, -1}));
  EXPECT_EQ(cores[50].id, "GPU-b-core-0");
  EXPECT_FALSE(cores[50].healthy);
}

TEST(VolcanoDevices, SettingsThatCannotWorkAreNamed) {
  std::vector<device::DeviceInfo> eight;
  for (int i = 0; i < 8; ++i) eight.push_back(Gpu("GPU-" + std::to_string(i), 81920, true));
  VolcanoSettings s;
  Status big = CheckVolcanoSettings(eight, s);
  EXPECT_EQ(big.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(big.message().find("655360 volcano.sh/vgpu-memory devices"), std::string::npos)
      << big.message();
  EXPECT_NE(big.message().find("set gpuMemoryFactor to 11 or more"), std::string::npos)
      << big.message();
  s.memory_factor = 11;
  EXPECT_TRUE(CheckVolcanoSettings(eight, s).ok());
  EXPECT_LE(VolcanoMemoryDevices(eight, s, false).size(), kVolcanoMaxMemoryIds);

  VolcanoSettings zero;
  zero.memory_factor = 0;
  EXPECT_NE(CheckVolcanoSettings({}, zero).message().find("gpuMemoryFactor must be at least 1"),
            std::string::npos);
  VolcanoSettings scaling;
  scaling.core_scaling = 0;
  EXPECT_NE(CheckVolcanoSettings({}, scaling).message().find("deviceCoreScaling"),
            std::string::npos);
  VolcanoSettings same;
  same.cores_resource = same.memory_resource;
  EXPECT_NE(CheckVolcanoSettings({}, same).message().find("\"volcano.sh/vgpu-memory\" is used"),
            std::string::npos);
}

TEST(VolcanoDevices, ShareAndNumberListsCapacityAndUnhealthyIds) {
  VolcanoSettings s;
  s.memory_factor = 1024;
  s.share = device::VolcanoShareMode::kMemory;
  device::DeviceInfo a = Gpu("GPU-a", 4096, true, 1), b = Gpu("GPU-b", 2048, false);
  a.index = 0;
  b.index = 3;
  std::vector<PluginDevice> list = VolcanoShareDevices({a, b}, s, true);
  ASSERT_EQ(list.size(), 6u);  // 4 + 2 units of 1 GiB
  EXPECT_EQ(list[0], (PluginDevice{"0-0", "GPU-a", true, 1}));
  EXPECT_EQ(list[5], (PluginDevice{"3-1", "GPU-b", false, 0}));
  EXPECT_EQ(VolcanoShareCapacity({a, b}, s),
            std::make_pair(std::string("volcano.sh/gpu-number"), std::string("2")));
  EXPECT_EQ(VolcanoUnhealthyIndices({a, b}), "3");
  EXPECT_EQ(VolcanoUnhealthyIndices({a}), "");
  s.share = device::VolcanoShareMode::kNumber;
  list = VolcanoShareDevices({a, b}, s, false);
  ASSERT_EQ(list.size(), 2u);
  EXPECT_EQ(list[1], (PluginDevice{"GPU-b", "GPU-b", false, -1}));
  EXPECT_EQ(VolcanoShareCapacity({a, b}, s),
            std::make_pair(std::string("volcano.sh/gpu-memory"), std::string("0")));
  // GPU number has no memory IDs to count; GPU sharing has.
  s.memory_factor = 1;
  EXPECT_TRUE(CheckVolcanoSettings({Gpu("GPU-a", 81920, true)}, s).ok());
  s.share = device::VolcanoShareMode::kMemory;
  Status big = CheckVolcanoSettings({Gpu("GPU-a", 81920, true)}, s);
  EXPECT_NE(big.message().find("81920 volcano.sh/gpu-memory devices"), std::string::npos)
      << big.message();
}

}  // namespace
}  // namespace hami::deviceplugin
