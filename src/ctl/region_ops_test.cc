#include "ctl/region_ops.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include "ctl/region_test_util.h"

namespace hami::ctl {
namespace {

using testing::DeadPid;
using testing::TestRegion;

constexpr uint64_t kGiB = 1ULL << 30;

class RegionOpsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    vgpu::RegionInit init;
    init.mem_limit[0] = 4 * kGiB;
    region_ = std::make_unique<TestRegion>(init);
    ASSERT_NE(region_->get(), nullptr) << region_->error();
    char uuids[2][vgpu::kUuidLen] = {"GPU-a", "GPU-b"};
    region_->get()->SetDevices(2, uuids);
  }
  vgpu::Region& r() { return *region_->get(); }
  std::unique_ptr<TestRegion> region_;
};

TEST_F(RegionOpsTest, AttachRejectsWhatIsNotARegion) {
  std::string err;
  EXPECT_NE(AttachRegion(region_->path(), &err), nullptr) << err;
  EXPECT_EQ(AttachRegion(region_->dir() + "/missing", &err), nullptr);
  EXPECT_NE(err.find("cannot open"), std::string::npos) << err;
  std::string other = region_->dir() + "/other";
  FILE* f = fopen(other.c_str(), "w");
  ASSERT_NE(f, nullptr);
  fputs("not a region", f);
  fclose(f);
  EXPECT_EQ(AttachRegion(other, &err), nullptr);
  EXPECT_NE(err.find("not a hami-cpp region"), std::string::npos) << err;
}

TEST_F(RegionOpsTest, SuspendSetsTheFlagAndResumeClearsIt) {
  SuspendOutcome s = Suspend(r(), 0);
  EXPECT_EQ(region_->header()->suspend_request.load(), 1u);
  EXPECT_EQ(s.live, 0);
  EXPECT_TRUE(s.not_suspended.empty());
  Resume(r());
  EXPECT_EQ(region_->header()->suspend_request.load(), 0u);
}

TEST_F(RegionOpsTest, SuspendWaitReportsLiveProcessesThatDidNotPause) {
  int slot = r().RegisterSelf();
  ASSERT_GE(slot, 0);
  region_->FakeSlot(7, DeadPid(), 1, 0, 0);  // dead processes are not waited for
  SuspendOutcome s = Suspend(r(), 20);
  EXPECT_EQ(s.live, 1);
  EXPECT_EQ(s.not_suspended, std::vector<int>{static_cast<int>(getpid())});

  region_->header()->slots[slot].status.store(vgpu::kSlotSuspended);
  s = Suspend(r(), 60'000);  // returns as soon as everyone is suspended
  EXPECT_TRUE(s.not_suspended.empty());
  r().ReleaseSlot(slot);
}

TEST_F(RegionOpsTest, SweepReclaimsOnlyExitedProcesses) {
  int slot = r().RegisterSelf();
  ASSERT_GE(slot, 0);
  int dead = DeadPid();
  region_->FakeSlot(9, dead, 1, 0, kGiB);
  EXPECT_EQ(Sweep(r()), std::vector<int>{dead});
  EXPECT_EQ(region_->header()->slots[9].pid.load(), 0);
  EXPECT_EQ(region_->header()->slots[slot].pid.load(), static_cast<int>(getpid()));
  EXPECT_TRUE(Sweep(r()).empty());
  r().ReleaseSlot(slot);
}

TEST_F(RegionOpsTest, SetChangesQuotasLive) {
  std::vector<std::string> notes;
  std::string err;
  ASSERT_TRUE(SetQuotas(r(), {{1, 2 * kGiB}}, {{0, 50}}, &notes, &err)) << err;
  EXPECT_EQ(region_->header()->devices[0].mem_limit.load(), 4 * kGiB);
  EXPECT_EQ(region_->header()->devices[1].mem_limit.load(), 2 * kGiB);
  EXPECT_EQ(region_->header()->devices[0].sm_limit.load(), 50u);
  EXPECT_TRUE(notes.empty());

  // A global value first, then the per-device one wins.
  ASSERT_TRUE(SetQuotas(r(), {{0, kGiB}, {-1, 8 * kGiB}}, {}, &notes, &err)) << err;
  EXPECT_EQ(region_->header()->devices[0].mem_limit.load(), kGiB);
  EXPECT_EQ(region_->header()->devices[1].mem_limit.load(), 8 * kGiB);
}

TEST_F(RegionOpsTest, SetRejectsUnknownDevicesAndNotesUsageAboveTheNewLimit) {
  std::vector<std::string> notes;
  std::string err;
  EXPECT_FALSE(SetQuotas(r(), {{5, kGiB}}, {}, &notes, &err));
  EXPECT_NE(err.find("device 5 does not exist"), std::string::npos) << err;
  EXPECT_FALSE(SetQuotas(r(), {}, {{2, 10}}, &notes, &err));
  EXPECT_EQ(region_->header()->devices[0].mem_limit.load(), 4 * kGiB) << "nothing changed";

  int slot = r().RegisterSelf();
  ASSERT_GE(slot, 0);
  ASSERT_TRUE(r().Reserve(slot, 0, 2 * kGiB, vgpu::MemKind::kData).ok);
  ASSERT_TRUE(SetQuotas(r(), {{0, kGiB}}, {}, &notes, &err)) << err;
  ASSERT_EQ(notes.size(), 1u);
  EXPECT_NE(notes[0].find("already uses 2 GiB"), std::string::npos) << notes[0];
  r().ReleaseSlot(slot);
}

}  // namespace
}  // namespace hami::ctl
