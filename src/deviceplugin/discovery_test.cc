#include "deviceplugin/discovery.h"

#include <gtest/gtest.h>

namespace hami::deviceplugin {
namespace {

GpuInfo Gpu(uint32_t index, std::string uuid, uint64_t mib, int numa,
            std::string name = "NVIDIA A100-SXM4-80GB") {
  GpuInfo g;
  g.index = index;
  g.uuid = std::move(uuid);
  g.name = std::move(name);
  g.memory_bytes = mib << 20;
  g.numa_node = numa;
  return g;
}

Inventory FourGpus() {
  Inventory inv;
  inv.gpus = {Gpu(0, "GPU-a", 81920, 0), Gpu(1, "GPU-b", 81920, 0), Gpu(2, "GPU-c", 81920, 1),
              Gpu(3, "GPU-d", 81920, -1, "Tesla T4")};
  // a-b: NVLink x12 on one board; a-c: across CPUs; b-c: asymmetric NVLink report.
  inv.pairs = {{0, 1, 0, 12, false}, {0, 2, 50, 0, false}, {1, 2, 40, 0, true},
               {0, 3, 30, 0, false}, {1, 3, 20, 0, false}, {2, 3, 50, 0, false}};
  return inv;
}

TEST(Registration, FollowsTheSettingsAndTheDriver) {
  device::NodeDeviceSettings s;
  s.device_split_count = 4;
  s.device_memory_scaling = 1.5;
  s.device_core_scaling = 2;
  Registration r = BuildRegistration(FourGpus(), s, {"GPU-b"});
  ASSERT_EQ(r.devices.size(), 4u);
  EXPECT_TRUE(r.warnings.empty());
  const device::DeviceInfo& a = r.devices[0];
  EXPECT_EQ(a.id, "GPU-a");
  EXPECT_EQ(a.index, 0u);
  EXPECT_EQ(a.count, 4);
  EXPECT_EQ(a.devmem, 122880);  // 81920 x 1.5
  EXPECT_EQ(a.devcore, 200);
  EXPECT_EQ(a.type, "NVIDIA A100-SXM4-80GB");  // already starts with NVIDIA
  EXPECT_EQ(a.mode, "hami-core");
  EXPECT_TRUE(a.health);
  EXPECT_EQ(a.vendor, "NVIDIA");
  EXPECT_FALSE(r.devices[1].health);  // unhealthy
  EXPECT_EQ(r.devices[2].numa, 1);
  EXPECT_EQ(r.devices[3].numa, 0);  // unknown NUMA node registers as 0
  EXPECT_EQ(r.devices[3].type, "NVIDIA-Tesla T4");
}

TEST(Registration, FiltersSkipsAndPreconfiguredMemory) {
  Inventory inv = FourGpus();
  inv.gpus[1].memory_bytes.reset();  // driver cannot tell
  inv.gpus[2].mig_enabled = true;
  device::NodeDeviceSettings s;
  s.filter_devices.uuids = {"GPU-a"};
  Registration r = BuildRegistration(inv, s, {});
  // a filtered, b without memory and no preconfigured value, c in MIG mode: only d is left.
  ASSERT_EQ(r.devices.size(), 1u);
  EXPECT_EQ(r.devices[0].id, "GPU-d");
  ASSERT_EQ(r.warnings.size(), 2u);
  EXPECT_NE(r.warnings[0].find("preConfiguredDeviceMemory"), std::string::npos);
  EXPECT_NE(r.warnings[1].find("MIG"), std::string::npos);

  s.filter_devices = {{}, {3}};
  s.preconfigured_device_memory_mib = 16384;
  r = BuildRegistration(inv, s, {});
  ASSERT_EQ(r.devices.size(), 2u);
  EXPECT_EQ(r.devices[0].id, "GPU-a");
  EXPECT_EQ(r.devices[1].id, "GPU-b");
  EXPECT_EQ(r.devices[1].devmem, 16384);
}

TEST(Registration, MemoryThatDoesNotFitTheWireFormatIsClamped) {
  Inventory inv;
  inv.gpus = {Gpu(0, "GPU-a", uint64_t{1} << 40, 0)};
  device::NodeDeviceSettings s;
  s.device_memory_scaling = 4;
  Registration r = BuildRegistration(inv, s, {});
  ASSERT_EQ(r.devices.size(), 1u);
  EXPECT_EQ(r.devices[0].devmem, 2147483647);
}

// GPU c has MIG on with two 1g.10gb instances (A100-80GB, 9728 MiB each).
Inventory WithMig() {
  Inventory inv = FourGpus();
  GpuInfo& c = inv.gpus[2];
  c.mig_enabled = true;
  c.mig_devices = {{"MIG-c1", 3, 0, 1, 1, 9728, 14, false, 0, {}},
                   {"MIG-c2", 4, 0, 1, 1, 9728, 14, false, 0, {}}};
  return inv;
}

TEST(Registration, MigGpusUnderEachStrategy) {
  device::NodeDeviceSettings s;
  s.device_split_count = 4;
  s.device_memory_scaling = 2;  // never applied to a MIG instance: it is a hard partition
  Registration none = BuildRegistration(WithMig(), s, {}, MigStrategy::kNone);
  ASSERT_EQ(none.devices.size(), 3u);
  ASSERT_EQ(none.warnings.size(), 1u);
  EXPECT_NE(none.warnings[0].find("--mig-strategy"), std::string::npos);

  Registration mixed = BuildRegistration(WithMig(), s, {}, MigStrategy::kMixed);
  EXPECT_EQ(mixed.devices.size(), 3u);  // c's instances are nvidia.com/mig-* resources
  EXPECT_TRUE(mixed.warnings.empty());

  Inventory all_mig = WithMig();
  all_mig.gpus = {all_mig.gpus[2]};
  Registration single = BuildRegistration(all_mig, s, {"MIG-c2"}, MigStrategy::kSingle);
  ASSERT_EQ(single.devices.size(), 2u);
  const device::DeviceInfo& d = single.devices[0];
  EXPECT_EQ(d.id, "MIG-c1");
  EXPECT_EQ(d.index, 0u);
  EXPECT_EQ(d.count, 1);
  EXPECT_EQ(d.devmem, 9728);
  EXPECT_EQ(d.devcore, 100);
  EXPECT_EQ(d.type, "NVIDIA A100-SXM4-80GB");
  EXPECT_EQ(d.numa, 1);
  EXPECT_TRUE(d.health);
  EXPECT_EQ(single.devices[1].index, 1u);
  EXPECT_FALSE(single.devices[1].health);
  // An unhealthy GPU takes its instances with it.
  single = BuildRegistration(all_mig, s, {"GPU-c"}, MigStrategy::kSingle);
  EXPECT_FALSE(single.devices[0].health);
  // Filtering the GPU hides its instances too.
  s.filter_devices.uuids = {"GPU-c"};
  EXPECT_TRUE(BuildRegistration(all_mig, s, {}, MigStrategy::kSingle).devices.empty());
}

TEST(PairScores, PcieLevelPlusNvlinksBothWays) {
  Inventory inv = FourGpus();
  device::NodeDeviceSettings s;
  Registration r = BuildRegistration(inv, s, {});
  std::vector<std::string> warnings;
  device::DevicePairScores scores = BuildPairScores(inv, r.devices, &warnings);
  EXPECT_EQ(device::PairScore(scores, "GPU-a", "GPU-b"), 60 + 1200);
  EXPECT_EQ(device::PairScore(scores, "GPU-b", "GPU-a"), 60 + 1200);
  EXPECT_EQ(device::PairScore(scores, "GPU-a", "GPU-c"), 10);
  EXPECT_EQ(device::PairScore(scores, "GPU-b", "GPU-c"), 0);  // asymmetric
  EXPECT_EQ(device::PairScore(scores, "GPU-a", "GPU-d"), 30);
  EXPECT_EQ(device::PairScore(scores, "GPU-c", "GPU-d"), 10);
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_NE(warnings[0].find("GPU-b and GPU-c"), std::string::npos);
  // Registration order, each device listing its peers.
  ASSERT_EQ(scores.size(), 4u);
  EXPECT_EQ(scores[0].uuid, "GPU-a");
  EXPECT_EQ(scores[0].scores.size(), 3u);

  // Devices that are not registered have no scores.
  s.filter_devices.uuids = {"GPU-a"};
  r = BuildRegistration(inv, s, {});
  scores = BuildPairScores(inv, r.devices, nullptr);
  EXPECT_EQ(device::PairScore(scores, "GPU-a", "GPU-b"), 0);
  EXPECT_EQ(scores.size(), 3u);
}

TEST(PluginDevices, ReplicasWithHealthAndOptionalTopology) {
  device::NodeDeviceSettings s;
  s.device_split_count = 2;
  Registration r = BuildRegistration(FourGpus(), s, {"GPU-c"});
  std::vector<PluginDevice> plain = BuildPluginDevices(r.devices, false);
  ASSERT_EQ(plain.size(), 8u);
  EXPECT_EQ(plain[0], (PluginDevice{"GPU-a-0", "GPU-a", true, -1}));
  EXPECT_EQ(plain[1], (PluginDevice{"GPU-a-1", "GPU-a", true, -1}));
  EXPECT_EQ(plain[4], (PluginDevice{"GPU-c-0", "GPU-c", false, -1}));
  std::vector<PluginDevice> numa = BuildPluginDevices(r.devices, true);
  EXPECT_EQ(numa[4], (PluginDevice{"GPU-c-0", "GPU-c", false, 1}));
  EXPECT_EQ(numa[6].numa_node, 0);
}

}  // namespace
}  // namespace hami::deviceplugin
