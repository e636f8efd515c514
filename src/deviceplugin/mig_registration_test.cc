#include "deviceplugin/mig_registration.h"

#include <gtest/gtest.h>

namespace hami::deviceplugin {
namespace {

// The A100-80GB's profiles as its driver names them (base, +me and the 1g.20gb variant).
std::vector<MigProfileSpec> A100Profiles() {
  std::vector<device::MigPlacement> ones = {{0, 1}, {1, 1}, {2, 1}, {3, 1},
                                            {4, 1}, {5, 1}, {6, 1}};
  return {{0, "1g.10gb", 1, 7, 9728, 14, ones},
          {1, "2g.20gb", 2, 3, 19968, 28, {{0, 2}, {2, 2}, {4, 2}}},
          {2, "3g.40gb", 3, 2, 40192, 42, {{0, 4}, {4, 4}}},
          {4, "7g.80gb", 7, 1, 80384, 98, {{0, 8}}},
          {7, "1g.10gb+me", 1, 1, 9728, 14, ones},
          {9, "1g.20gb", 1, 4, 19968, 14, {{0, 2}, {2, 2}, {4, 2}, {6, 2}}}};
}

GpuInfo Gpu(std::string uuid, std::string name) {
  GpuInfo g;
  g.uuid = std::move(uuid);
  g.name = std::move(name);
  g.memory_bytes = uint64_t{81920} << 20;
  g.numa_node = 1;
  return g;
}

TEST(MigAllowlist, TheMostSpecificModelWins) {
  std::vector<device::MigAllowlistEntry> list = device::DefaultMigProfileAllowlist();
  const device::MigAllowlistEntry* h200 = MatchMigAllowlist(list, "NVIDIA H200 NVL");
  ASSERT_NE(h200, nullptr);
  EXPECT_EQ(h200->profiles.front(), "1g.18gb");  // not H20's 1g.12gb, whose model is a substring
  ASSERT_NE(MatchMigAllowlist(list, "NVIDIA A100-SXM4-80GB"), nullptr);
  EXPECT_EQ(MatchMigAllowlist(list, "NVIDIA A100-SXM4-80GB")->profiles.front(), "1g.10gb");
  EXPECT_EQ(MatchMigAllowlist(list, "Tesla T4"), nullptr);
}

// The names NVML reports for these cards find their entries, not only HAMi's spellings.
TEST(MigAllowlist, TheDriversOwnModelNamesAreKnown) {
  std::vector<device::MigAllowlistEntry> list = device::DefaultMigProfileAllowlist();
  auto last = [&](const char* gpu) {
    const device::MigAllowlistEntry* e = MatchMigAllowlist(list, gpu);
    return e == nullptr ? std::string("(none)") : e->profiles.back();
  };
  EXPECT_EQ(last("NVIDIA H100 80GB HBM3"), "7g.80gb");
  EXPECT_EQ(last("NVIDIA H100 PCIe"), "7g.80gb");
  EXPECT_EQ(last("NVIDIA H100 NVL"), "7g.94gb");
  EXPECT_EQ(last("NVIDIA A100 80GB PCIe"), "7g.79gb");
  EXPECT_EQ(last("NVIDIA H200"), "7g.141gb");
  EXPECT_EQ(last("NVIDIA H20"), "7g.96gb");  // not H200's: "H200" is not in its name
  EXPECT_EQ(last("NVIDIA A100-PCIE-40GB"), "7g.40gb");
}

TEST(MigProfiles, ResolvedByTheDriversNames) {
  std::vector<MigProfileSpec> p = A100Profiles();
  EXPECT_EQ(ResolveMigProfile("1g.20gb", p)->profile_id, 9u);  // a variant, not "the 1g"
  EXPECT_EQ(ResolveMigProfile("1g.10gb+me", p)->profile_id, 7u);
  EXPECT_EQ(ResolveMigProfile("1g.10gb", p)->profile_id, 0u);
  EXPECT_EQ(ResolveMigProfile("7g.79gb", p)->name, "7g.80gb");  // the chart's spelling
  EXPECT_EQ(ResolveMigProfile("7g.40gb", p), nullptr);
  EXPECT_EQ(ResolveMigProfile("4g.40gb", p), nullptr);  // not offered here
  EXPECT_EQ(ResolveMigProfile("1c.2g.20gb", p), nullptr);
  EXPECT_EQ(ResolveMigProfile("garbage", p), nullptr);
}

TEST(MigRegistration, PublishesTheAllowedProfilesLessBlockedPlacements) {
  Inventory inv;
  inv.gpus = {Gpu("GPU-a", "NVIDIA A100-SXM4-80GB"), Gpu("GPU-t", "Tesla T4"),
              Gpu("GPU-p", "NVIDIA A100-SXM4-80GB")};
  std::map<std::string, MigGpuFacts> facts;
  facts["GPU-a"].profiles = A100Profiles();
  facts["GPU-a"].blocked = {{6, 1}};  // an operator's 1g instance sits at slice 6
  facts["GPU-p"].profiles = A100Profiles();
  facts["GPU-p"].not_ready = "MIG mode is pending: reset the GPU";
  device::NodeDeviceSettings s;
  s.device_split_count = 10;
  s.device_memory_scaling = 2;
  Registration r = BuildMigRegistration(inv, s, device::DefaultMigProfileAllowlist(), facts,
                                        {});
  ASSERT_EQ(r.devices.size(), 2u);
  const device::DeviceInfo& a = r.devices[0];
  EXPECT_EQ(a.mode, "mig");
  EXPECT_EQ(a.count, 7);        // seven 1g.10gb fit
  EXPECT_EQ(a.devmem, 81920);  // no scaling
  EXPECT_EQ(a.devcore, 100);
  EXPECT_TRUE(a.health);
  ASSERT_EQ(a.mig_profiles.size(), 4u);
  EXPECT_EQ(a.mig_profiles[0].name, "1g.10gb");
  EXPECT_EQ(a.mig_profiles[0].core, 15);  // ceil(14 x 100 / 98)
  EXPECT_EQ(a.mig_profiles[0].placements.size(), 6u);  // slice 6 is taken
  EXPECT_EQ(a.mig_profiles[2].placements, (std::vector<device::MigPlacement>{{0, 4}}));
  EXPECT_EQ(a.mig_profiles[3].name, "7g.80gb");
  EXPECT_TRUE(a.mig_profiles[3].placements.empty());  // the whole GPU is not free
  EXPECT_FALSE(r.devices[1].health);  // GPU-p: pending reset
  ASSERT_EQ(r.warnings.size(), 2u);
  EXPECT_NE(r.warnings[0].find("Tesla T4"), std::string::npos);
  EXPECT_NE(r.warnings[1].find("pending"), std::string::npos);
}

TEST(MigRegistration, AnUnknownProfileIsNamedAndTheRestRegistered) {
  Inventory inv;
  inv.gpus = {Gpu("GPU-a", "NVIDIA A100-SXM4-80GB")};
  std::map<std::string, MigGpuFacts> facts;
  facts["GPU-a"].profiles = A100Profiles();
  std::vector<device::MigAllowlistEntry> list = {{{"A100"}, {"1g.10gb", "5g.50gb", "1g.20gb"}}};
  Registration r = BuildMigRegistration(inv, {}, list, facts, {"GPU-a"});
  ASSERT_EQ(r.devices.size(), 1u);
  ASSERT_EQ(r.devices[0].mig_profiles.size(), 2u);
  EXPECT_EQ(r.devices[0].mig_profiles[1].name, "1g.20gb");
  EXPECT_FALSE(r.devices[0].health);  // marked unhealthy by an XID
  ASSERT_EQ(r.warnings.size(), 1u);
  EXPECT_NE(r.warnings[0].find("5g.50gb"), std::string::npos);
  facts["GPU-a"] = MigGpuFacts{};
  facts["GPU-a"].error = "NVML_ERROR_NOT_SUPPORTED";
  r = BuildMigRegistration(inv, {}, list, facts, {});
  EXPECT_TRUE(r.devices.empty());
  ASSERT_EQ(r.warnings.size(), 1u);
  EXPECT_NE(r.warnings[0].find("NVML_ERROR_NOT_SUPPORTED"), std::string::npos);
}

}  // namespace
}  // namespace hami::deviceplugin
