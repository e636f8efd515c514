// Static MIG resources from the driver's inventory, on the in-memory driver.
#include "deviceplugin/mig_resources.h"

#include <gtest/gtest.h>

#include "deviceplugin/fake_gpu_driver.h"

namespace hami::deviceplugin {
namespace {

constexpr uint64_t kGiB = uint64_t{1} << 30;

MigDeviceInfo Mig(std::string uuid, uint32_t g, uint64_t mib, bool me = false, uint32_t c = 0) {
  MigDeviceInfo m;
  m.uuid = std::move(uuid);
  m.gi_slices = g;
  m.ci_slices = c == 0 ? g : c;
  m.memory_mib = mib;
  m.media_extensions = me;
  return m;
}

GpuInfo Gpu(std::string uuid, uint64_t gib, std::vector<MigDeviceInfo> migs, bool mig = true) {
  GpuInfo g;
  g.uuid = std::move(uuid);
  g.memory_bytes = gib * kGiB;
  g.mig_enabled = mig;
  g.mig_devices = std::move(migs);
  return g;
}

TEST(MigProfileName, MatchesNvidiaNamesOnA100AndH100) {
  EXPECT_EQ(MigProfileName(Mig("m", 1, 9728), 80 * kGiB), "1g.10gb");
  EXPECT_EQ(MigProfileName(Mig("m", 1, 9728, true), 80 * kGiB), "1g.10gb+me");
  EXPECT_EQ(MigProfileName(Mig("m", 2, 19968), 80 * kGiB), "2g.20gb");
  EXPECT_EQ(MigProfileName(Mig("m", 3, 40192), 80 * kGiB), "3g.40gb");
  EXPECT_EQ(MigProfileName(Mig("m", 7, 80384), 80 * kGiB), "7g.80gb");
  EXPECT_EQ(MigProfileName(Mig("m", 1, 4864), 40 * kGiB), "1g.5gb");
  EXPECT_EQ(MigProfileName(Mig("m", 2, 9856), 40 * kGiB), "2g.10gb");
  EXPECT_EQ(MigProfileName(Mig("m", 7, 40192), 40 * kGiB), "7g.40gb");
  uint64_t h100 = uint64_t{81559} << 20;
  EXPECT_EQ(MigProfileName(Mig("m", 1, 9984), h100), "1g.10gb");
  EXPECT_EQ(MigProfileName(Mig("m", 3, 40448), h100), "3g.40gb");
  EXPECT_EQ(MigProfileName(Mig("m", 7, 81152), h100), "7g.80gb");
  // A compute instance smaller than its GPU instance, and a GPU of unknown memory.
  EXPECT_EQ(MigProfileName(Mig("m", 3, 40192, false, 1), 80 * kGiB), "1c.3g.40gb");
  EXPECT_EQ(MigProfileName(Mig("m", 1, 9728), 0), "1g.10gb");
}

TEST(MigResourceName, WritesPlusAsDot) {
  EXPECT_EQ(MigResourceName("1g.10gb"), "nvidia.com/mig-1g.10gb");
  EXPECT_EQ(MigResourceName("1g.10gb+me"), "nvidia.com/mig-1g.10gb.me");
}

TEST(ParseMigStrategy, KnowsTheThreeNames) {
  EXPECT_EQ(*ParseMigStrategy("none"), MigStrategy::kNone);
  EXPECT_EQ(*ParseMigStrategy("single"), MigStrategy::kSingle);
  EXPECT_EQ(*ParseMigStrategy("mixed"), MigStrategy::kMixed);
  Result<MigStrategy> bad = ParseMigStrategy("Mixed");
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("\"Mixed\""), std::string::npos);
}

TEST(PlanMigResources, MixedOffersOneResourcePerWholeInstanceProfile) {
  Inventory inv;
  inv.gpus.push_back(Gpu("GPU-a", 80,
                         {Mig("MIG-1", 1, 9728), Mig("MIG-2", 3, 40192, false, 1),
                          Mig("MIG-3", 1, 9728, true), Mig("MIG-4", 2, 19968)}));
  inv.gpus.push_back(Gpu("GPU-b", 80, {}, false));  // shared as vGPUs, not here
  inv.gpus.push_back(Gpu("GPU-c", 80, {Mig("MIG-5", 1, 9728)}));
  FakeGpuDriver driver(inv);
  Result<Inventory> seen = driver.Discover();
  ASSERT_TRUE(seen.ok());
  Result<MigPlan> plan = PlanMigResources(*seen, MigStrategy::kMixed);
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  EXPECT_EQ(plan->resources,
            (std::vector<MigResource>{
                {"nvidia.com/mig-1g.10gb", "nvidia-mig-1g.10gb.sock", {"MIG-1", "MIG-5"}},
                {"nvidia.com/mig-1g.10gb.me", "nvidia-mig-1g.10gb.me.sock", {"MIG-3"}},
                {"nvidia.com/mig-2g.20gb", "nvidia-mig-2g.20gb.sock", {"MIG-4"}}}));
  ASSERT_EQ(plan->warnings.size(), 1u);
  EXPECT_NE(plan->warnings[0].find("MIG-2"), std::string::npos);
  EXPECT_NE(plan->warnings[0].find("1c.3g.40gb"), std::string::npos);
}

TEST(PlanMigResources, NoneOffersNothing) {
  Inventory inv;
  inv.gpus.push_back(Gpu("GPU-a", 80, {Mig("MIG-1", 1, 9728)}));
  Result<MigPlan> plan = PlanMigResources(inv, MigStrategy::kNone);
  ASSERT_TRUE(plan.ok());
  EXPECT_TRUE(plan->resources.empty());
}

TEST(PlanMigResources, SingleOffersOneIdenticalProfileAsGpus) {
  Inventory inv;
  inv.gpus.push_back(Gpu("GPU-a", 80, {Mig("MIG-1", 1, 9728), Mig("MIG-2", 1, 9728)}));
  inv.gpus.push_back(Gpu("GPU-b", 80, {Mig("MIG-3", 1, 9728)}));
  Result<MigPlan> plan = PlanMigResources(inv, MigStrategy::kSingle);
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  EXPECT_EQ(plan->resources, (std::vector<MigResource>{{"nvidia.com/gpu", "nvidia-gpu.sock",
                                                        {"MIG-1", "MIG-2", "MIG-3"}}}));
}

TEST(PlanMigResources, SingleRefusesMixedModesMissingDevicesAndSeveralProfiles) {
  auto error = [](const Inventory& inv) {
    Result<MigPlan> plan = PlanMigResources(inv, MigStrategy::kSingle);
    EXPECT_EQ(plan.status().code(), StatusCode::kFailedPrecondition);
    return plan.status().message();
  };
  Inventory modes;
  modes.gpus = {Gpu("GPU-a", 80, {Mig("MIG-1", 1, 9728)}), Gpu("GPU-b", 80, {}, false)};
  EXPECT_NE(error(modes).find("same MIG mode"), std::string::npos);
  Inventory empty;
  empty.gpus = {Gpu("GPU-a", 80, {Mig("MIG-1", 1, 9728)}), Gpu("GPU-b", 80, {})};
  EXPECT_NE(error(empty).find("GPU-b has MIG enabled but no MIG device"), std::string::npos);
  Inventory two;
  two.gpus = {Gpu("GPU-a", 80, {Mig("MIG-1", 1, 9728), Mig("MIG-2", 1, 9728, true)})};
  std::string m = error(two);
  EXPECT_NE(m.find("more than one MIG device type"), std::string::npos) << m;
  EXPECT_NE(m.find("1g.10gb+me"), std::string::npos) << m;
  // One-slice instances of an A100-80GB and an A100-40GB are different profiles.
  Inventory sizes;
  sizes.gpus = {Gpu("GPU-a", 80, {Mig("MIG-1", 1, 9728)}),
                Gpu("GPU-b", 40, {Mig("MIG-2", 1, 4864)})};
  EXPECT_NE(error(sizes).find("more than one MIG device type"), std::string::npos);
  Inventory unread;
  unread.gpus = {Gpu("GPU-a", 80, {})};
  unread.gpus[0].mig_error = "nvmlDeviceGetMaxMigDeviceCount(GPU-a): Unknown Error (999)";
  EXPECT_NE(error(unread).find("cannot list the MIG devices of GPU GPU-a"), std::string::npos);
  Result<MigPlan> mixed = PlanMigResources(unread, MigStrategy::kMixed);
  ASSERT_TRUE(mixed.ok());
  EXPECT_TRUE(mixed->resources.empty());
  ASSERT_EQ(mixed->warnings.size(), 1u);
  EXPECT_NE(mixed->warnings[0].find("Unknown Error"), std::string::npos);
  // No GPU in MIG mode: nothing to offer, not an error.
  Inventory off;
  off.gpus = {Gpu("GPU-a", 80, {}, false)};
  EXPECT_TRUE(PlanMigResources(off, MigStrategy::kSingle)->resources.empty());
}

TEST(MigAllocation, NamesTheMigUuidsAndRefusesForeignOrRepeatedIds) {
  MigResource r{"nvidia.com/mig-1g.10gb", "nvidia-mig-1g.10gb.sock", {"MIG-1", "MIG-2"}};
  AllocationSettings s;
  Result<ContainerAllocation> a = MigAllocation(r, {"MIG-2", "MIG-1"}, s);
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->envs,
            (std::map<std::string, std::string>{{"NVIDIA_VISIBLE_DEVICES", "MIG-2,MIG-1"}}));
  EXPECT_TRUE(a->mounts.empty());  // no libvgpu on a hard partition
  Result<ContainerAllocation> foreign = MigAllocation(r, {"MIG-1", "GPU-x"}, s);
  EXPECT_EQ(foreign.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(foreign.status().message().find("GPU-x"), std::string::npos);
  EXPECT_EQ(MigAllocation(r, {}, s).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(MigAllocation(r, {"MIG-1", "MIG-1"}, s).status().code(), StatusCode::kInvalidArgument);
}

TEST(MigAllocation, FollowsTheDeviceListStrategies) {
  MigResource r{"nvidia.com/mig-1g.10gb", "nvidia-mig-1g.10gb.sock", {"MIG-1"}};
  AllocationSettings s;
  s.device_list = {.envvar = false, .volume_mounts = true, .cdi_annotations = false,
                   .cdi_cri = true};
  s.gdrcopy = true;
  Result<ContainerAllocation> a = MigAllocation(r, {"MIG-1"}, s);
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->envs.at("NVIDIA_VISIBLE_DEVICES"), "/var/run/nvidia-container-devices");
  ASSERT_EQ(a->mounts.size(), 1u);
  EXPECT_EQ(a->mounts[0].container_path, "/var/run/nvidia-container-devices/MIG-1");
  EXPECT_EQ(a->cdi_devices, std::vector<std::string>{"nvidia.com/gpu=MIG-1"});
  EXPECT_EQ(a->envs.at("NVIDIA_GDRCOPY"), "enabled");
}

}  // namespace
}  // namespace hami::deviceplugin
