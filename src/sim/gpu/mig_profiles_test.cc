#include "sim/gpu/mig_profiles.h"

#include <gtest/gtest.h>

#include "nvml/abi.h"

namespace hami::sim {
namespace {

constexpr uint64_t kGiB = 1ull << 30;

TEST(MigProfilesTest, ModelChosenByNameAndMemory) {
  ASSERT_NE(MigModelFor("NVIDIA A100-SXM4-40GB", 40 * kGiB), nullptr);
  EXPECT_STREQ(MigModelFor("NVIDIA A100-SXM4-40GB", 40 * kGiB)->name, "A100-40GB");
  EXPECT_STREQ(MigModelFor("NVIDIA A100-PCIE-40GB", 40 * kGiB)->name, "A100-40GB");
  EXPECT_STREQ(MigModelFor("NVIDIA A100-SXM4-80GB", 80 * kGiB)->name, "A100-80GB");
  EXPECT_STREQ(MigModelFor("NVIDIA H100 80GB HBM3", 81559ull << 20)->name, "H100-80GB");
  EXPECT_EQ(MigModelFor("Tesla T4", 15 * kGiB), nullptr);
  EXPECT_EQ(MigModelFor("NVIDIA H100 NVL", 94 * kGiB), nullptr);  // other tables
  EXPECT_EQ(MigModelFor("NVIDIA GeForce RTX 4090", 24 * kGiB), nullptr);
}

TEST(MigProfilesTest, RealProfileIdsBehindTheEnums) {
  const struct {
    const char* device;
    uint64_t memory;
  } cases[] = {{"NVIDIA A100-PCIE-40GB", 40 * kGiB},
               {"NVIDIA A100-SXM4-80GB", 80 * kGiB},
               {"NVIDIA H100 80GB HBM3", 80 * kGiB}};
  for (const auto& c : cases) {
    const MigModel* m = MigModelFor(c.device, c.memory);
    ASSERT_NE(m, nullptr);
    const char* name = m->name;
    EXPECT_EQ(MigGiProfileByEnum(*m, NVML_GPU_INSTANCE_PROFILE_1_SLICE)->id, 19u) << name;
    EXPECT_EQ(MigGiProfileByEnum(*m, NVML_GPU_INSTANCE_PROFILE_1_SLICE_REV1)->id, 20u) << name;
    EXPECT_EQ(MigGiProfileByEnum(*m, NVML_GPU_INSTANCE_PROFILE_1_SLICE_REV2)->id, 15u) << name;
    EXPECT_EQ(MigGiProfileByEnum(*m, NVML_GPU_INSTANCE_PROFILE_2_SLICE)->id, 14u) << name;
    EXPECT_EQ(MigGiProfileByEnum(*m, NVML_GPU_INSTANCE_PROFILE_3_SLICE)->id, 9u) << name;
    EXPECT_EQ(MigGiProfileByEnum(*m, NVML_GPU_INSTANCE_PROFILE_4_SLICE)->id, 5u) << name;
    EXPECT_EQ(MigGiProfileByEnum(*m, NVML_GPU_INSTANCE_PROFILE_7_SLICE)->id, 0u) << name;
    EXPECT_EQ(MigGiProfileByEnum(*m, NVML_GPU_INSTANCE_PROFILE_6_SLICE), nullptr) << name;
    EXPECT_EQ(MigGiProfileByEnum(*m, NVML_GPU_INSTANCE_PROFILE_8_SLICE), nullptr) << name;
    EXPECT_EQ(MigGiProfileById(*m, 9)->profile_enum,
              static_cast<uint32_t>(NVML_GPU_INSTANCE_PROFILE_3_SLICE));
    EXPECT_EQ(MigGiProfileById(*m, 3), nullptr);
  }
}

TEST(MigProfilesTest, TableFigures) {
  const MigModel& a40 = *MigModelFor("NVIDIA A100-SXM4-40GB", 40 * kGiB);
  const MigGiProfile& g1 = *MigGiProfileById(a40, 19);
  EXPECT_STREQ(g1.name, "1g.5gb");
  EXPECT_EQ(g1.memory_mib, 4864u);
  EXPECT_EQ(g1.sm_count, 14u);
  EXPECT_EQ(g1.instance_count, 7u);
  EXPECT_EQ(MigGiProfileById(a40, 0)->sm_count, 98u);
  EXPECT_LT(MigGiProfileById(a40, 0)->memory_mib, 40960u);  // below the card's total (B6)

  const MigModel& a80 = *MigModelFor("NVIDIA A100-SXM4-80GB", 80 * kGiB);
  EXPECT_STREQ(MigGiProfileById(a80, 15)->name, "1g.20gb");
  EXPECT_EQ(MigGiProfileById(a80, 15)->memory_mib, 19968u);
  EXPECT_EQ(MigGiProfileById(a80, 9)->memory_mib, 40192u);
  EXPECT_EQ(MigGiProfileById(a80, 9)->memory_slices, 4u);
  EXPECT_EQ(MigGiProfileById(a80, 9)->compute_slices, 3u);

  const MigModel& h100 = *MigModelFor("NVIDIA H100 80GB HBM3", 81559ull << 20);
  EXPECT_EQ(MigGiProfileById(h100, 19)->memory_mib, 9984u);
  EXPECT_EQ(MigGiProfileById(h100, 15)->sm_count, 26u);
  EXPECT_EQ(MigGiProfileById(h100, 14)->sm_count, 32u);
  EXPECT_EQ(MigGiProfileById(h100, 9)->sm_count, 60u);
  EXPECT_EQ(MigGiProfileById(h100, 5)->sm_count, 64u);
  EXPECT_EQ(MigGiProfileById(h100, 0)->sm_count, 132u);
  EXPECT_EQ(MigGiProfileById(h100, 0)->memory_mib, 81152u);
}

TEST(MigProfilesTest, Placements) {
  const MigModel& m = *MigModelFor("NVIDIA A100-SXM4-80GB", 80 * kGiB);
  using V = std::vector<uint32_t>;
  EXPECT_EQ(MigGiPlacementStarts(*MigGiProfileById(m, 19)), (V{0, 1, 2, 3, 4, 5, 6}));
  EXPECT_EQ(MigGiPlacementStarts(*MigGiProfileById(m, 20)), (V{0, 1, 2, 3, 4, 5, 6}));
  EXPECT_EQ(MigGiPlacementStarts(*MigGiProfileById(m, 15)), (V{0, 2, 4, 6}));
  EXPECT_EQ(MigGiPlacementStarts(*MigGiProfileById(m, 14)), (V{0, 2, 4}));
  EXPECT_EQ(MigGiPlacementStarts(*MigGiProfileById(m, 9)), (V{0, 4}));
  EXPECT_EQ(MigGiPlacementStarts(*MigGiProfileById(m, 5)), (V{0}));
  EXPECT_EQ(MigGiPlacementStarts(*MigGiProfileById(m, 0)), (V{0}));
}

TEST(MigProfilesTest, GpuInstanceIdsFollowThePlacement) {
  EXPECT_EQ(MigGiId(0, 8), 0u);   // 7g
  EXPECT_EQ(MigGiId(0, 4), 1u);   // 3g or 4g at 0
  EXPECT_EQ(MigGiId(4, 4), 2u);   // 3g at 4
  EXPECT_EQ(MigGiId(0, 2), 3u);   // 2g at 0
  EXPECT_EQ(MigGiId(4, 2), 5u);   // 2g at 4
  EXPECT_EQ(MigGiId(6, 2), 6u);   // 1g double memory at 6
  EXPECT_EQ(MigGiId(0, 1), 7u);   // 1g at 0
  EXPECT_EQ(MigGiId(6, 1), 13u);  // 1g at 6
}

TEST(MigProfilesTest, ComputeInstanceProfilesOfAGpuInstance) {
  const MigModel& m = *MigModelFor("NVIDIA A100-SXM4-80GB", 80 * kGiB);
  const MigGiProfile& g7 = *MigGiProfileById(m, 0);
  MigCiProfile p;
  ASSERT_TRUE(MigCiProfileFor(m, g7, NVML_COMPUTE_INSTANCE_PROFILE_1_SLICE, &p));
  EXPECT_EQ(p.name, "1c.7g.80gb");
  EXPECT_EQ(p.sm_count, 14u);
  EXPECT_EQ(p.instance_count, 7u);
  ASSERT_TRUE(MigCiProfileFor(m, g7, NVML_COMPUTE_INSTANCE_PROFILE_3_SLICE, &p));
  EXPECT_EQ(p.starts, (std::vector<uint32_t>{0, 4}));
  EXPECT_EQ(p.sm_count, 42u);
  ASSERT_TRUE(MigCiProfileFor(m, g7, NVML_COMPUTE_INSTANCE_PROFILE_7_SLICE, &p));
  EXPECT_EQ(p.name, "7g.80gb");
  EXPECT_EQ(p.sm_count, 98u);
  EXPECT_EQ(p.starts, (std::vector<uint32_t>{0}));
  EXPECT_FALSE(MigCiProfileFor(m, g7, NVML_COMPUTE_INSTANCE_PROFILE_8_SLICE, &p));
  EXPECT_FALSE(MigCiProfileFor(m, g7, NVML_COMPUTE_INSTANCE_PROFILE_COUNT, &p));

  const MigGiProfile& g4 = *MigGiProfileById(m, 5);
  EXPECT_TRUE(MigCiProfileFor(m, g4, NVML_COMPUTE_INSTANCE_PROFILE_2_SLICE, &p));
  EXPECT_EQ(p.starts, (std::vector<uint32_t>{0, 2}));
  EXPECT_FALSE(MigCiProfileFor(m, g4, NVML_COMPUTE_INSTANCE_PROFILE_3_SLICE, &p));
  EXPECT_TRUE(MigCiProfileFor(m, g4, NVML_COMPUTE_INSTANCE_PROFILE_4_SLICE, &p));
  EXPECT_EQ(p.name, "4g.40gb");

  const MigGiProfile& g1 = *MigGiProfileById(m, 19);
  EXPECT_TRUE(MigCiProfileFor(m, g1, NVML_COMPUTE_INSTANCE_PROFILE_1_SLICE, &p));
  EXPECT_EQ(p.name, "1g.10gb");
  EXPECT_FALSE(MigCiProfileFor(m, g1, NVML_COMPUTE_INSTANCE_PROFILE_2_SLICE, &p));
}

}  // namespace
}  // namespace hami::sim
