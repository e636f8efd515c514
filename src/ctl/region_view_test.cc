#include "ctl/region_view.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include "ctl/json.h"
#include "ctl/region_test_util.h"

namespace hami::ctl {
namespace {

using testing::TestRegion;

constexpr uint64_t kMiB = 1ULL << 20;
constexpr uint64_t kGiB = 1ULL << 30;
constexpr int kDeadPid = 424242;

bool OnlyMeAlive(int pid, uint64_t) { return pid == static_cast<int>(getpid()); }

class RegionViewTest : public ::testing::Test {
 protected:
  void SetUp() override {
    vgpu::RegionInit init;
    init.mem_limit[0] = 4 * kGiB;
    init.sm_limit[0] = 30;
    region_ = std::make_unique<TestRegion>(init);
    ASSERT_NE(region_->get(), nullptr) << region_->error();
    char uuids[2][vgpu::kUuidLen] = {"GPU-aaaaaaaa-0000-0000-0000-000000000000",
                                     "GPU-bbbbbbbb-0000-0000-0000-000000000000"};
    region_->get()->SetDevices(2, uuids);
    slot_ = region_->get()->RegisterSelf();
    ASSERT_GE(slot_, 0);
    vgpu::Region& r = *region_->get();
    ASSERT_TRUE(r.Reserve(slot_, 0, kGiB, vgpu::MemKind::kData).ok);
    ASSERT_TRUE(r.Reserve(slot_, 0, 256 * kMiB, vgpu::MemKind::kManaged).ok);
    ASSERT_FALSE(r.Reserve(slot_, 0, 4 * kGiB, vgpu::MemKind::kData).ok);
    vgpu::RegionHeader* h = region_->header();
    h->devices[0].util_percent.store(2950);
    h->devices[0].ns_per_unit_q16.store(3 * 65536 / 2);
    h->devices[0].launches.store(77);
    h->controller.store((static_cast<uint64_t>(getpid()) << 32) | 3);
    region_->FakeSlot(5, kDeadPid, 1, 1, 512 * kMiB);
  }
  void TearDown() override {
    if (region_ != nullptr && region_->get() != nullptr && slot_ >= 0) {
      region_->get()->ReleaseSlot(slot_);
    }
  }

  RegionView View() { return Snapshot(*region_->header(), region_->path(), OnlyMeAlive); }

  std::unique_ptr<TestRegion> region_;
  int slot_ = -1;
};

TEST_F(RegionViewTest, SnapshotCopiesDevicesPolicyAndLiveSlots) {
  RegionView v = View();
  EXPECT_EQ(v.device_count, 2u);
  ASSERT_EQ(v.devices.size(), 2u);
  EXPECT_EQ(v.devices[0].uuid, "GPU-aaaaaaaa-0000-0000-0000-000000000000");
  EXPECT_EQ(v.devices[0].mem_limit, 4 * kGiB);
  EXPECT_EQ(v.devices[0].mem_used, kGiB + 256 * kMiB);
  EXPECT_EQ(v.devices[0].mem_peak, kGiB + 256 * kMiB);
  EXPECT_EQ(v.devices[0].oom_denials, 1u);
  EXPECT_EQ(v.devices[0].sm_limit, 30u);
  EXPECT_DOUBLE_EQ(v.devices[0].util_percent, 29.5);
  EXPECT_DOUBLE_EQ(v.devices[0].ns_per_unit, 1.5);
  EXPECT_EQ(v.controller_pid, static_cast<int>(getpid()));
  EXPECT_EQ(v.controller_generation, 3u);
  EXPECT_EQ(v.utilization_switch, 1);
  ASSERT_EQ(v.slots.size(), 2u);
  EXPECT_EQ(v.slots[0].pid, static_cast<int>(getpid()));
  EXPECT_TRUE(v.slots[0].alive);
  ASSERT_EQ(v.slots[0].devices.size(), 1u);
  EXPECT_EQ(v.slots[0].devices[0].by_kind[static_cast<int>(vgpu::MemKind::kManaged)], 256 * kMiB);
  EXPECT_EQ(v.slots[1].slot, 5);
  EXPECT_EQ(v.slots[1].pid, kDeadPid);
  EXPECT_FALSE(v.slots[1].alive);
}

TEST_F(RegionViewTest, TextShowsEveryField) {
  std::string t = RenderRegionText(View());
  for (const char* want :
       {"GPU-aaaaaaaa-0000-0000-0000-000000000000", "GPU-bbbbbbbb", "4 GiB", "1.25 GiB", "30%",
        "29.5%", "1.500", "77", "utilization_switch=1", "suspend_request=0", "priority=1",
        "SM controller: pid", "data=1 GiB managed=256 MiB", "running", "512 MiB", "no"}) {
    EXPECT_NE(t.find(want), std::string::npos) << "missing '" << want << "' in\n" << t;
  }
  EXPECT_EQ(t.find("SUSPENDED"), std::string::npos);
  region_->header()->suspend_request.store(1);
  EXPECT_NE(RenderRegionText(View()).find("SUSPENDED"), std::string::npos);
}

TEST_F(RegionViewTest, JsonCarriesTheSameNumbers) {
  std::string j = RenderRegionJson(View());
  EXPECT_EQ(JsonScalars(j, "mem_limit"), (std::vector<std::string>{std::to_string(4 * kGiB), "0"}));
  EXPECT_EQ(JsonScalars(j, "oom_denials"), (std::vector<std::string>{"1", "0"}));
  EXPECT_EQ(JsonScalars(j, "pid"),
            (std::vector<std::string>{std::to_string(getpid()), std::to_string(kDeadPid)}));
  EXPECT_EQ(JsonScalars(j, "alive"), (std::vector<std::string>{"true", "false"}));
  EXPECT_EQ(JsonScalars(j, "managed")[0], std::to_string(256 * kMiB));
  EXPECT_EQ(JsonScalars(j, "sm_util_percent")[0], "29.5");
  EXPECT_EQ(JsonScalars(j, "suspend_request"), (std::vector<std::string>{"0"}));
  EXPECT_EQ(JsonScalars(j, "status"), (std::vector<std::string>{"running", "running"}));
}

TEST_F(RegionViewTest, SummaryHasPeakLimitAndDenialsPerDevice) {
  std::string s = RenderSummary(View());
  EXPECT_NE(s.find("device 0 (GPU-aaaaaaaa-0000-0000-0000-000000000000): peak 1.25 GiB of 4 GiB, "
                   "1 OOM denial, SM limit 30% (last measured 29.5%)"),
            std::string::npos)
      << s;
  EXPECT_NE(s.find("device 1 (GPU-bbbbbbbb-0000-0000-0000-000000000000): peak 0 B of no limit, "
                   "0 OOM denials"),
            std::string::npos)
      << s;
}

TEST(RegionViewFresh, QuotasForEveryDeviceCollapseUntilDevicesAreRecorded) {
  vgpu::RegionInit init;
  for (int i = 0; i < vgpu::kMaxDevices; ++i) init.mem_limit[i] = 4 * kGiB;
  TestRegion region(init);
  ASSERT_NE(region.get(), nullptr) << region.error();
  RegionView v = Snapshot(*region.header(), region.path(), OnlyMeAlive);
  EXPECT_EQ(v.devices.size(), static_cast<size_t>(vgpu::kMaxDevices));
  std::string t = RenderRegionText(v);
  EXPECT_NE(t.find("all  (not recorded yet)  4 GiB"), std::string::npos) << t;
  EXPECT_NE(t.find("no processes"), std::string::npos) << t;
  EXPECT_NE(RenderSummary(v).find("used no GPU"), std::string::npos);
}

TEST(RegionViewFresh, UnterminatedUuidIsCutAtTheField) {
  TestRegion region(vgpu::RegionInit{});
  ASSERT_NE(region.get(), nullptr) << region.error();
  memset(region.header()->devices[0].uuid, 'x', vgpu::kUuidLen);
  region.header()->device_count.store(1);
  RegionView v = Snapshot(*region.header(), region.path(), OnlyMeAlive);
  ASSERT_EQ(v.devices.size(), 1u);
  EXPECT_EQ(v.devices[0].uuid, std::string(vgpu::kUuidLen, 'x'));
}

}  // namespace
}  // namespace hami::ctl
