#include "sim/gpu/shared_state.h"

#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <string>
#include <vector>

#include "sim/gpu/clock.h"
#include "sim/gpu/proc_liveness.h"

namespace hami::sim {
namespace {

class SharedStateTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/hami-sim-state-test-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    path_ = dir_ + "/sub/state";
  }
  void TearDown() override {
    unlink(path_.c_str());
    rmdir((dir_ + "/sub").c_str());
    rmdir(dir_.c_str());
  }
  std::unique_ptr<SharedState> OpenDefault() {
    std::string error;
    auto s = SharedState::Open(path_, DefaultConfig(), &error);
    EXPECT_NE(s, nullptr) << error;
    return s;
  }
  std::string dir_, path_;
};

TEST_F(SharedStateTest, CreatesFileWithDevices) {
  auto s = OpenDefault();
  ASSERT_NE(s, nullptr);
  EXPECT_EQ(s->device_count(), 2);
  EXPECT_STREQ(s->device(0).name, "NVIDIA A100-SXM4-80GB");
  EXPECT_EQ(s->device(1).sm_count, 108);
  // A second opener sees the same file.
  auto t = OpenDefault();
  ASSERT_NE(t, nullptr);
  EXPECT_STREQ(t->device(1).uuid, s->device(1).uuid);
}

TEST_F(SharedStateTest, ConfigChangeIsAClearError) {
  ASSERT_NE(OpenDefault(), nullptr);
  SimConfig other = DefaultConfig();
  other.devices[0].memory_bytes = 40ull << 30;
  std::string error;
  EXPECT_EQ(SharedState::Open(path_, other, &error), nullptr);
  EXPECT_NE(error.find("hami-simctl reset"), std::string::npos) << error;
}

TEST_F(SharedStateTest, ChargeStopsAtPhysicalMemory) {
  auto s = OpenDefault();
  int slot = s->RegisterProcess(getpid(), ProcessStartTime(getpid()));
  ASSERT_GE(slot, 0);
  EXPECT_TRUE(s->Charge(slot, 0, 60ull << 30));
  EXPECT_FALSE(s->Charge(slot, 0, 30ull << 30));
  EXPECT_TRUE(s->Charge(slot, 1, 30ull << 30));
  EXPECT_EQ(s->UsedMemory(0), 60ull << 30);
  s->Uncharge(slot, 0, 60ull << 30);
  EXPECT_EQ(s->UsedMemory(0), 0u);
}

TEST_F(SharedStateTest, DeadProcessMemoryIsReclaimed) {
  auto s = OpenDefault();
  pid_t child = fork();
  if (child == 0) {
    int slot = s->RegisterProcess(getpid(), ProcessStartTime(getpid()));
    _exit(slot >= 0 && s->Charge(slot, 0, 70ull << 30) ? 0 : 1);
  }
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  ASSERT_EQ(WEXITSTATUS(status), 0);
  int slot = s->RegisterProcess(getpid(), ProcessStartTime(getpid()));
  // The dead child's 70 GiB is reclaimed when the charge would otherwise fail.
  EXPECT_TRUE(s->Charge(slot, 0, 20ull << 30));
  EXPECT_EQ(s->UsedMemory(0), 20ull << 30);
}

TEST_F(SharedStateTest, ScheduledBusyShowsUpPerProcess) {
  auto s = OpenDefault();
  int slot = s->RegisterProcess(getpid(), ProcessStartTime(getpid()));
  const uint64_t t0 = MonotonicNs() + 1000000000ull + 123;  // booked ahead, like a launch
  uint64_t end = s->ScheduleKernel(slot, 0, 0, 108, t0, 54, 1000000);
  EXPECT_EQ(end, t0 + 1000000);
  auto procs = s->Processes(0, t0, t0 + 2000000);
  ASSERT_EQ(procs.size(), 1u);
  EXPECT_EQ(procs[0].pid, getpid());
  EXPECT_DOUBLE_EQ(procs[0].busy_sm_ns, 54.0 * 1000000);
  EXPECT_DOUBLE_EQ(s->DeviceBusyNs(0, t0, t0 + 2000000), 54.0 * 1000000);
}

TEST_F(SharedStateTest, XidRingDeliversInOrder) {
  auto s = OpenDefault();
  uint64_t seen = s->LatestXidSeq(1);
  uint32_t gen = s->XidGeneration();
  s->InjectXid(1, 79);
  s->InjectXid(1, 48);
  EXPECT_NE(s->XidGeneration(), gen);
  XidRecord r;
  ASSERT_TRUE(s->NextXid(1, seen, &r));
  EXPECT_EQ(r.xid, 79u);
  ASSERT_TRUE(s->NextXid(1, r.seq, &r));
  EXPECT_EQ(r.xid, 48u);
  EXPECT_FALSE(s->NextXid(1, r.seq, &r));
  EXPECT_FALSE(s->NextXid(0, 0, &r));
}

TEST_F(SharedStateTest, XidRecordsTheInstanceItIsChargedTo) {
  auto s = OpenDefault();
  uint64_t seen = s->LatestXidSeq(0);
  s->InjectXid(0, 43, 2, 0);
  s->InjectXid(0, 79);
  XidRecord r;
  ASSERT_TRUE(s->NextXid(0, seen, &r));
  EXPECT_EQ(r.xid, 43u);
  EXPECT_EQ(r.gi_id, 2u);
  EXPECT_EQ(r.ci_id, 0u);
  ASSERT_TRUE(s->NextXid(0, r.seq, &r));
  EXPECT_EQ(r.xid, 79u);
  EXPECT_EQ(r.gi_id, kXidNoInstance);
  EXPECT_EQ(r.ci_id, kXidNoInstance);
}

// The ring keeps the newest kXidRing events: a reader that fell behind resumes at the oldest
// one still there, instance ids intact.
TEST_F(SharedStateTest, XidRingOverwritesTheOldest) {
  auto s = OpenDefault();
  for (int i = 0; i < kXidRing + 5; ++i) s->InjectXid(1, 100 + i, i % 3, 0);
  XidRecord r;
  ASSERT_TRUE(s->NextXid(1, 0, &r));
  EXPECT_EQ(r.seq, 6u);
  EXPECT_EQ(r.xid, 105u);
  EXPECT_EQ(r.gi_id, 2u);
}

TEST_F(SharedStateTest, KernelsOnDisjointSmRangesDoNotWaitForEachOther) {
  auto s = OpenDefault();
  int slot = s->RegisterProcess(getpid(), ProcessStartTime(getpid()));
  const uint64_t t0 = MonotonicNs() + 1000000000ull;
  // Two 3g instances of GPU 0 (SMs 0..41 and 61..102): a full wave on each ends at t0 + 1 ms.
  EXPECT_EQ(s->ScheduleKernel(slot, 0, 0, 42, t0, 42, 1000000), t0 + 1000000);
  EXPECT_EQ(s->ScheduleKernel(slot, 0, 61, 42, t0, 42, 1000000), t0 + 1000000);
  // A 43rd block on the first instance needs a second wave; the whole GPU still has free SMs.
  EXPECT_EQ(s->ScheduleKernel(slot, 0, 0, 42, t0, 43, 1000000), t0 + 3000000);
  EXPECT_EQ(s->ScheduleKernel(slot, 0, 0, 108, t0, 6, 1000000), t0 + 1000000);
}

TEST_F(SharedStateTest, WaitReturnsAtDeadlineWithoutEvents) {
  auto s = OpenDefault();
  uint64_t start = MonotonicNs();
  s->WaitXidChange(s->XidGeneration(), start + 20000000);
  EXPECT_GE(MonotonicNs(), start + 20000000);
}

// MIG instances live in the file: a later opener (a restarted client) finds them.
TEST_F(SharedStateTest, MigStateOutlivesTheOpener) {
  const MigModel& model = *MigModelFor(DefaultConfig().devices[1].name, 80ull << 30);
  std::string uuid;
  {
    auto s = OpenDefault();
    ASSERT_NE(s, nullptr);
    EXPECT_EQ(s->MigSnapshot(1).current_mode, static_cast<uint32_t>(NVML_DEVICE_MIG_DISABLE));
    uint32_t gi = 0, ci = 0;
    ASSERT_EQ(s->UpdateMig(1,
                           [&](MigDeviceState& mig, bool busy) {
                             EXPECT_FALSE(busy);
                             nvmlReturn_t activation;
                             MigSetMode(&mig, NVML_DEVICE_MIG_ENABLE, NVML_SUCCESS, &activation);
                             nvmlGpuInstancePlacement_t at{4, 4};
                             nvmlReturn_t rc = MigCreateGpuInstance(&mig, model, 9, &at, &gi);
                             if (rc != NVML_SUCCESS) return rc;
                             return MigCreateComputeInstance(&mig, model, gi, 2, nullptr,
                                                             s->MigUuidSeed(1), &ci);
                           }),
              NVML_SUCCESS);
    uuid = MigFindCi(*MigFindGi(s->MigSnapshot(1), gi), ci)->uuid;
  }
  auto t = OpenDefault();
  ASSERT_NE(t, nullptr);
  MigDeviceState snap = t->MigSnapshot(1);
  EXPECT_EQ(snap.current_mode, static_cast<uint32_t>(NVML_DEVICE_MIG_ENABLE));
  const MigGpuInstanceRecord* gi = MigFindGi(snap, 2);
  ASSERT_NE(gi, nullptr);
  EXPECT_EQ(gi->profile_id, 9u);
  EXPECT_EQ(gi->start, 4u);
  ASSERT_NE(MigFindCi(*gi, 0), nullptr);
  EXPECT_EQ(MigFindCi(*gi, 0)->uuid, uuid);
  EXPECT_EQ(t->MigSnapshot(0).current_mode, static_cast<uint32_t>(NVML_DEVICE_MIG_DISABLE));
  EXPECT_NE(t->MigUuidSeed(0), t->MigUuidSeed(1));
}

// A process holding memory makes the device busy for a MIG mode change.
TEST_F(SharedStateTest, MigUpdateSeesProcessesOnTheDevice) {
  auto s = OpenDefault();
  int slot = s->RegisterProcess(getpid(), ProcessStartTime(getpid()));
  ASSERT_TRUE(s->Charge(slot, 0, 1ull << 30));
  bool busy0 = false, busy1 = true;
  s->UpdateMig(0, [&](MigDeviceState&, bool busy) {
    busy0 = busy;
    return NVML_SUCCESS;
  });
  s->UpdateMig(1, [&](MigDeviceState&, bool busy) {
    busy1 = busy;
    return NVML_SUCCESS;
  });
  EXPECT_TRUE(busy0);
  EXPECT_FALSE(busy1);
}

// Creates MIG devices on GPU 0 of the default node: a 3g.40gb GI at {0,4} with a 2-slice and a
// 1-slice CI, and a 3g.40gb GI at {4,4} with a full CI. Returns their charge targets.
std::vector<MigChargeTarget> MakeMigDevices(SharedState& s, std::vector<std::string>* uuids) {
  const MigModel& model = *MigModelFor(DefaultConfig().devices[0].name, 80ull << 30);
  struct Want {
    uint32_t start, ci_profile;
  } want[] = {{0, NVML_COMPUTE_INSTANCE_PROFILE_2_SLICE},
              {0, NVML_COMPUTE_INSTANCE_PROFILE_1_SLICE},
              {4, NVML_COMPUTE_INSTANCE_PROFILE_3_SLICE}};
  std::vector<MigChargeTarget> out;
  uuids->reserve(3);
  for (const Want& w : want) {
    uint32_t gi = 0, ci = 0;
    nvmlReturn_t rc = s.UpdateMig(0, [&](MigDeviceState& mig, bool) {
      nvmlReturn_t activation;
      MigSetMode(&mig, NVML_DEVICE_MIG_ENABLE, NVML_SUCCESS, &activation);
      nvmlGpuInstancePlacement_t at{w.start, 4};
      gi = MigGiId(w.start, 4);
      if (MigFindGi(mig, gi) == nullptr) MigCreateGpuInstance(&mig, model, 9, &at, &gi);
      return MigCreateComputeInstance(&mig, model, gi, w.ci_profile, nullptr, 7, &ci);
    });
    EXPECT_EQ(rc, NVML_SUCCESS) << w.start << " " << w.ci_profile;
    uuids->push_back(MigFindCi(*MigFindGi(s.MigSnapshot(0), gi), ci)->uuid);
    out.push_back(MigChargeTarget{0, gi, ci, uuids->back().c_str(), 40192ull << 20});
  }
  return out;
}

// A MIG device's allocations are bounded by its GPU instance's memory, which the compute
// instances of that GI share and the other GI does not.
TEST_F(SharedStateTest, MigChargesAreBoundedPerGpuInstance) {
  auto s = OpenDefault();
  std::vector<std::string> uuids;
  std::vector<MigChargeTarget> t = MakeMigDevices(*s, &uuids);
  ASSERT_EQ(t.size(), 3u);
  ASSERT_EQ(t[0].gi_id, t[1].gi_id);
  int slot = s->RegisterProcess(getpid(), ProcessStartTime(getpid()));
  const uint64_t gib = 1ull << 30;
  EXPECT_TRUE(s->ChargeMig(slot, t[0], 30 * gib));
  EXPECT_FALSE(s->ChargeMig(slot, t[1], 10 * gib));  // 40 GiB > 40192 MiB in the same GI
  EXPECT_TRUE(s->ChargeMig(slot, t[1], 9 * gib));
  EXPECT_TRUE(s->ChargeMig(slot, t[2], 39 * gib));  // the other GI has its own pool
  EXPECT_FALSE(s->ChargeMig(slot, t[2], 1 * gib));
  EXPECT_EQ(s->MigUsedMemory(0, t[0].gi_id), 39 * gib);
  EXPECT_EQ(s->MigUsedMemory(0, t[2].gi_id), 39 * gib);
  EXPECT_EQ(s->UsedMemory(0), 78 * gib);  // the GPU counts its instances' memory
  EXPECT_FALSE(s->Charge(slot, 0, 3 * gib));
  EXPECT_EQ(s->MigProcessMemory(getpid(), ProcessStartTime(getpid()), 0, t[1].gi_id, t[1].ci_id),
            9 * gib);
  s->UnchargeMig(slot, t[0], 30 * gib);
  EXPECT_EQ(s->MigUsedMemory(0, t[0].gi_id), 9 * gib);
  // A stale target (a CI re-created with the same ids has a new UUID) is refused.
  MigChargeTarget stale = t[2];
  stale.uuid = "MIG-00000000-0000-0000-0000-000000000000";
  EXPECT_FALSE(s->ChargeMig(slot, stale, 1));
}

TEST_F(SharedStateTest, DeadProcessMigMemoryIsReclaimed) {
  auto s = OpenDefault();
  std::vector<std::string> uuids;
  std::vector<MigChargeTarget> t = MakeMigDevices(*s, &uuids);
  pid_t child = fork();
  if (child == 0) {
    int slot = s->RegisterProcess(getpid(), ProcessStartTime(getpid()));
    _exit(slot >= 0 && s->ChargeMig(slot, t[2], 39ull << 30) ? 0 : 1);
  }
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  ASSERT_EQ(WEXITSTATUS(status), 0);
  int slot = s->RegisterProcess(getpid(), ProcessStartTime(getpid()));
  EXPECT_TRUE(s->ChargeMig(slot, t[2], 20ull << 30));
  EXPECT_EQ(s->MigUsedMemory(0, t[2].gi_id), 20ull << 30);
  EXPECT_EQ(s->UsedMemory(0), 20ull << 30);
}

TEST(ProcLivenessTest, SelfAliveBogusDead) {
  uint64_t st = ProcessStartTime(getpid());
  EXPECT_NE(st, 0u);
  EXPECT_TRUE(ProcessAlive(getpid(), st));
  EXPECT_FALSE(ProcessAlive(getpid(), st + 1));
  EXPECT_FALSE(ProcessAlive(0, st));
}

}  // namespace
}  // namespace hami::sim
