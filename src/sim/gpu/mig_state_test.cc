#include "sim/gpu/mig_state.h"

#include <gtest/gtest.h>
#include <string.h>

#include <set>
#include <string>

namespace hami::sim {
namespace {

constexpr uint64_t kGiB = 1ull << 30;
constexpr uint64_t kSeed = 0x5eed;

// Fake liveness: processes with an odd start time are alive.
bool OddIsAlive(pid_t, uint64_t start_time) { return start_time % 2 == 1; }

class MigStateTest : public ::testing::Test {
 protected:
  MigStateTest() : model_(*MigModelFor("NVIDIA A100-SXM4-80GB", 80 * kGiB)) {
    memset(&s_, 0, sizeof(s_));
  }
  void Enable() {
    nvmlReturn_t activation;
    ASSERT_EQ(MigSetMode(&s_, NVML_DEVICE_MIG_ENABLE, NVML_SUCCESS, &activation), NVML_SUCCESS);
    ASSERT_EQ(activation, NVML_SUCCESS);
  }
  nvmlReturn_t CreateGi(uint32_t profile, uint32_t start, uint32_t size, uint32_t* id) {
    nvmlGpuInstancePlacement_t p{start, size};
    return MigCreateGpuInstance(&s_, model_, profile, &p, id);
  }
  nvmlReturn_t CreateCi(uint32_t gi, uint32_t profile, uint32_t* id) {
    return MigCreateComputeInstance(&s_, model_, gi, profile, nullptr, kSeed, id);
  }
  uint32_t Remaining(uint32_t profile_id) {
    return MigGpuInstanceRemaining(s_, *MigGiProfileById(model_, profile_id));
  }

  const MigModel& model_;
  MigDeviceState s_;
};

TEST_F(MigStateTest, ModeChangeActivatesUnlessBlocked) {
  nvmlReturn_t activation;
  EXPECT_EQ(MigSetMode(&s_, 2, NVML_SUCCESS, &activation), NVML_ERROR_INVALID_ARGUMENT);
  // A busy GPU: the enable stays pending.
  ASSERT_EQ(MigSetMode(&s_, NVML_DEVICE_MIG_ENABLE, NVML_ERROR_IN_USE, &activation),
            NVML_SUCCESS);
  EXPECT_EQ(activation, NVML_ERROR_IN_USE);
  EXPECT_EQ(s_.current_mode, static_cast<uint32_t>(NVML_DEVICE_MIG_DISABLE));
  EXPECT_EQ(s_.pending_mode, static_cast<uint32_t>(NVML_DEVICE_MIG_ENABLE));
  ASSERT_EQ(MigSetMode(&s_, NVML_DEVICE_MIG_ENABLE, NVML_ERROR_RESET_REQUIRED, &activation),
            NVML_SUCCESS);
  EXPECT_EQ(activation, NVML_ERROR_RESET_REQUIRED);
  // Idle again: the retry activates it.
  ASSERT_EQ(MigSetMode(&s_, NVML_DEVICE_MIG_ENABLE, NVML_SUCCESS, &activation), NVML_SUCCESS);
  EXPECT_EQ(activation, NVML_SUCCESS);
  EXPECT_EQ(s_.current_mode, static_cast<uint32_t>(NVML_DEVICE_MIG_ENABLE));
  EXPECT_EQ(s_.pending_mode, static_cast<uint32_t>(NVML_DEVICE_MIG_ENABLE));
  // Setting the current mode while blocked is a no-op that succeeds.
  ASSERT_EQ(MigSetMode(&s_, NVML_DEVICE_MIG_ENABLE, NVML_ERROR_IN_USE, &activation),
            NVML_SUCCESS);
  EXPECT_EQ(activation, NVML_SUCCESS);
  // Disabling with a GI left stays pending.
  uint32_t gi;
  ASSERT_EQ(CreateGi(9, 0, 4, &gi), NVML_SUCCESS);
  ASSERT_EQ(MigSetMode(&s_, NVML_DEVICE_MIG_DISABLE, NVML_SUCCESS, &activation), NVML_SUCCESS);
  EXPECT_EQ(activation, NVML_ERROR_IN_USE);
  EXPECT_EQ(s_.current_mode, static_cast<uint32_t>(NVML_DEVICE_MIG_ENABLE));
  EXPECT_EQ(s_.pending_mode, static_cast<uint32_t>(NVML_DEVICE_MIG_DISABLE));
  ASSERT_EQ(MigDestroyGpuInstance(&s_, gi), NVML_SUCCESS);
  ASSERT_EQ(MigSetMode(&s_, NVML_DEVICE_MIG_DISABLE, NVML_SUCCESS, &activation), NVML_SUCCESS);
  EXPECT_EQ(activation, NVML_SUCCESS);
  EXPECT_EQ(s_.current_mode, static_cast<uint32_t>(NVML_DEVICE_MIG_DISABLE));
}

TEST_F(MigStateTest, NothingIsCreatedWhileMigIsDisabled) {
  uint32_t id;
  EXPECT_EQ(CreateGi(9, 0, 4, &id), NVML_ERROR_NOT_SUPPORTED);
  EXPECT_EQ(Remaining(9), 0u);
}

TEST_F(MigStateTest, PlacementRules) {
  Enable();
  uint32_t id;
  EXPECT_EQ(CreateGi(9, 2, 4, &id), NVML_ERROR_INVALID_ARGUMENT);  // 3g starts at 0 or 4
  EXPECT_EQ(CreateGi(9, 0, 3, &id), NVML_ERROR_INVALID_ARGUMENT);  // size is in memory slices
  EXPECT_EQ(CreateGi(14, 6, 2, &id), NVML_ERROR_INVALID_ARGUMENT);  // 2g: {0,2,4}
  EXPECT_EQ(CreateGi(42, 0, 1, &id), NVML_ERROR_INVALID_ARGUMENT);  // no such profile
  ASSERT_EQ(CreateGi(9, 4, 4, &id), NVML_SUCCESS);
  EXPECT_EQ(id, 2u);
  EXPECT_EQ(CreateGi(14, 4, 2, &id), NVML_ERROR_INSUFFICIENT_RESOURCES);  // overlaps the 3g
  EXPECT_EQ(CreateGi(0, 0, 8, &id), NVML_ERROR_INSUFFICIENT_RESOURCES);
  ASSERT_EQ(CreateGi(14, 2, 2, &id), NVML_SUCCESS);
  EXPECT_EQ(id, 4u);
  ASSERT_EQ(CreateGi(19, 0, 1, &id), NVML_SUCCESS);
  EXPECT_EQ(id, 7u);
  EXPECT_EQ(Remaining(19), 1u);  // slice 1 only
  EXPECT_EQ(Remaining(14), 0u);
  EXPECT_EQ(Remaining(9), 0u);
  ASSERT_EQ(CreateGi(19, 1, 1, &id), NVML_SUCCESS);
  EXPECT_EQ(id, 8u);
  EXPECT_EQ(Remaining(19), 0u);
}

TEST_F(MigStateTest, InstanceCountLimitsTheMediaProfile) {
  Enable();
  uint32_t id;
  EXPECT_EQ(Remaining(20), 1u);
  ASSERT_EQ(CreateGi(20, 0, 1, &id), NVML_SUCCESS);
  EXPECT_EQ(Remaining(20), 0u);
  EXPECT_EQ(CreateGi(20, 3, 1, &id), NVML_ERROR_INSUFFICIENT_RESOURCES);
  EXPECT_EQ(Remaining(19), 6u);
}

TEST_F(MigStateTest, DriverPicksTheHighestFreePlacement) {
  Enable();
  uint32_t a, b, c;
  ASSERT_EQ(MigCreateGpuInstance(&s_, model_, 9, nullptr, &a), NVML_SUCCESS);
  ASSERT_EQ(MigCreateGpuInstance(&s_, model_, 9, nullptr, &b), NVML_SUCCESS);
  EXPECT_EQ(a, 2u);
  EXPECT_EQ(b, 1u);
  EXPECT_EQ(MigCreateGpuInstance(&s_, model_, 9, nullptr, &c), NVML_ERROR_INSUFFICIENT_RESOURCES);
}

TEST_F(MigStateTest, SevenSingleSliceInstancesFillTheGpu) {
  Enable();
  std::set<uint32_t> ids;
  for (int i = 0; i < 7; ++i) {
    uint32_t id;
    ASSERT_EQ(MigCreateGpuInstance(&s_, model_, 19, nullptr, &id), NVML_SUCCESS);
    ids.insert(id);
  }
  EXPECT_EQ(ids, (std::set<uint32_t>{7, 8, 9, 10, 11, 12, 13}));
  uint32_t id;
  EXPECT_EQ(MigCreateGpuInstance(&s_, model_, 19, nullptr, &id),
            NVML_ERROR_INSUFFICIENT_RESOURCES);
  for (uint32_t gi : ids) {
    uint32_t ci;
    ASSERT_EQ(CreateCi(gi, NVML_COMPUTE_INSTANCE_PROFILE_1_SLICE, &ci), NVML_SUCCESS);
    EXPECT_EQ(ci, 0u);
  }
  auto devices = MigDevices(s_);
  ASSERT_EQ(devices.size(), 7u);
  EXPECT_EQ(devices[0], (std::pair<uint32_t, uint32_t>{7, 0}));
  EXPECT_EQ(devices[6], (std::pair<uint32_t, uint32_t>{13, 0}));
}

TEST_F(MigStateTest, ComputeInstancesInsideAGpuInstance) {
  Enable();
  uint32_t gi;
  ASSERT_EQ(CreateGi(0, 0, 8, &gi), NVML_SUCCESS);
  EXPECT_EQ(gi, 0u);
  uint32_t a, b, c;
  ASSERT_EQ(CreateCi(gi, NVML_COMPUTE_INSTANCE_PROFILE_3_SLICE, &a), NVML_SUCCESS);
  ASSERT_EQ(CreateCi(gi, NVML_COMPUTE_INSTANCE_PROFILE_3_SLICE, &b), NVML_SUCCESS);
  EXPECT_EQ(a, 0u);
  EXPECT_EQ(b, 1u);
  EXPECT_EQ(CreateCi(gi, NVML_COMPUTE_INSTANCE_PROFILE_1_SLICE, &c), NVML_SUCCESS);  // slice 3
  EXPECT_EQ(CreateCi(gi, NVML_COMPUTE_INSTANCE_PROFILE_1_SLICE, &c),
            NVML_ERROR_INSUFFICIENT_RESOURCES);
  EXPECT_EQ(CreateCi(gi, NVML_COMPUTE_INSTANCE_PROFILE_8_SLICE, &c), NVML_ERROR_NOT_SUPPORTED);
  EXPECT_EQ(CreateCi(gi, NVML_COMPUTE_INSTANCE_PROFILE_COUNT, &c), NVML_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(CreateCi(5, NVML_COMPUTE_INSTANCE_PROFILE_1_SLICE, &c), NVML_ERROR_NOT_FOUND);
  nvmlComputeInstancePlacement_t bad{1, 3};
  EXPECT_EQ(MigCreateComputeInstance(&s_, model_, gi, NVML_COMPUTE_INSTANCE_PROFILE_3_SLICE, &bad,
                                     kSeed, &c),
            NVML_ERROR_INVALID_ARGUMENT);
  const MigGpuInstanceRecord* rec = MigFindGi(s_, gi);
  ASSERT_NE(rec, nullptr);
  MigCiProfile one;
  ASSERT_TRUE(MigCiProfileFor(model_, *MigGiProfileById(model_, 0), 0, &one));
  EXPECT_EQ(MigComputeInstanceRemaining(*rec, one), 0u);
  // The first CI is gone: its id is reused by the next one, with a new UUID.
  std::string old_uuid = MigFindCi(*rec, a)->uuid;
  ASSERT_EQ(MigDestroyComputeInstance(&s_, gi, a, &OddIsAlive), NVML_SUCCESS);
  EXPECT_EQ(MigDestroyComputeInstance(&s_, gi, a, &OddIsAlive), NVML_ERROR_NOT_FOUND);
  EXPECT_EQ(MigComputeInstanceRemaining(*rec, one), 3u);
  ASSERT_EQ(CreateCi(gi, NVML_COMPUTE_INSTANCE_PROFILE_3_SLICE, &c), NVML_SUCCESS);
  EXPECT_EQ(c, a);
  EXPECT_NE(std::string(MigFindCi(*rec, c)->uuid), old_uuid);
}

TEST_F(MigStateTest, UuidsAreWellFormedAndNeverRepeat) {
  Enable();
  std::set<std::string> seen;
  for (int round = 0; round < 20; ++round) {
    uint32_t gi, ci;
    ASSERT_EQ(CreateGi(5, 0, 4, &gi), NVML_SUCCESS);
    ASSERT_EQ(CreateCi(gi, NVML_COMPUTE_INSTANCE_PROFILE_4_SLICE, &ci), NVML_SUCCESS);
    std::string uuid = MigFindCi(*MigFindGi(s_, gi), ci)->uuid;
    ASSERT_EQ(uuid.size(), 40u) << uuid;
    EXPECT_EQ(uuid.substr(0, 4), "MIG-");
    EXPECT_EQ(uuid[12], '-');
    EXPECT_TRUE(seen.insert(uuid).second) << uuid;
    ASSERT_EQ(MigDestroyComputeInstance(&s_, gi, ci, &OddIsAlive), NVML_SUCCESS);
    ASSERT_EQ(MigDestroyGpuInstance(&s_, gi), NVML_SUCCESS);
  }
}

TEST_F(MigStateTest, DestroyRefusesInstancesInUse) {
  Enable();
  uint32_t gi, ci;
  ASSERT_EQ(CreateGi(14, 0, 2, &gi), NVML_SUCCESS);
  ASSERT_EQ(CreateCi(gi, NVML_COMPUTE_INSTANCE_PROFILE_2_SLICE, &ci), NVML_SUCCESS);
  EXPECT_EQ(MigDestroyGpuInstance(&s_, gi), NVML_ERROR_IN_USE);  // it has a CI
  EXPECT_EQ(MigAttachProcess(&s_, gi, 5, 42, 3, &OddIsAlive), NVML_ERROR_NOT_FOUND);
  ASSERT_EQ(MigAttachProcess(&s_, gi, ci, 42, 3, &OddIsAlive), NVML_SUCCESS);
  EXPECT_TRUE(MigHasLiveProcesses(s_, &OddIsAlive));
  EXPECT_EQ(MigDestroyComputeInstance(&s_, gi, ci, &OddIsAlive), NVML_ERROR_IN_USE);
  // The process "exits" (its recorded start time now reads as dead).
  MigGpuInstanceRecord& rec = s_.gis[0];
  ASSERT_EQ(rec.id, gi);
  rec.cis[0].procs[0].start_time = 4;
  EXPECT_FALSE(MigHasLiveProcesses(s_, &OddIsAlive));
  EXPECT_EQ(MigDestroyComputeInstance(&s_, gi, ci, &OddIsAlive), NVML_SUCCESS);
  EXPECT_EQ(MigDestroyGpuInstance(&s_, gi), NVML_SUCCESS);
  EXPECT_EQ(MigDestroyGpuInstance(&s_, gi), NVML_ERROR_NOT_FOUND);
}

TEST_F(MigStateTest, AttachTableDropsDeadProcesses) {
  Enable();
  uint32_t gi, ci;
  ASSERT_EQ(CreateGi(19, 3, 1, &gi), NVML_SUCCESS);
  ASSERT_EQ(CreateCi(gi, NVML_COMPUTE_INSTANCE_PROFILE_1_SLICE, &ci), NVML_SUCCESS);
  for (int i = 0; i < kMigMaxAttached; ++i) {
    ASSERT_EQ(MigAttachProcess(&s_, gi, ci, 100 + i, 1, &OddIsAlive), NVML_SUCCESS);
  }
  EXPECT_EQ(MigAttachProcess(&s_, gi, ci, 200, 1, &OddIsAlive), NVML_ERROR_INSUFFICIENT_RESOURCES);
  EXPECT_EQ(MigAttachProcess(&s_, gi, ci, 100, 1, &OddIsAlive), NVML_SUCCESS);  // already there
  s_.gis[0].cis[0].procs[2].start_time = 2;  // dies
  EXPECT_EQ(MigAttachProcess(&s_, gi, ci, 200, 1, &OddIsAlive), NVML_SUCCESS);
}

// A process whose last CUDA context on the MIG device is gone no longer holds the instance.
TEST_F(MigStateTest, DetachReleasesTheInstance) {
  Enable();
  uint32_t gi, ci;
  ASSERT_EQ(CreateGi(19, 3, 1, &gi), NVML_SUCCESS);
  ASSERT_EQ(CreateCi(gi, NVML_COMPUTE_INSTANCE_PROFILE_1_SLICE, &ci), NVML_SUCCESS);
  ASSERT_EQ(MigAttachProcess(&s_, gi, ci, 42, 3, &OddIsAlive), NVML_SUCCESS);
  ASSERT_EQ(MigAttachProcess(&s_, gi, ci, 43, 5, &OddIsAlive), NVML_SUCCESS);
  EXPECT_EQ(MigDetachProcess(&s_, gi, ci + 1, 42, 3), NVML_ERROR_NOT_FOUND);
  ASSERT_EQ(MigDetachProcess(&s_, gi, ci, 42, 3), NVML_SUCCESS);
  ASSERT_EQ(MigDetachProcess(&s_, gi, ci, 42, 3), NVML_SUCCESS);  // not attached: a no-op
  EXPECT_EQ(MigDestroyComputeInstance(&s_, gi, ci, &OddIsAlive), NVML_ERROR_IN_USE);  // 43
  ASSERT_EQ(MigDetachProcess(&s_, gi, ci, 43, 5), NVML_SUCCESS);
  EXPECT_FALSE(MigHasLiveProcesses(s_, &OddIsAlive));
  EXPECT_EQ(MigDestroyComputeInstance(&s_, gi, ci, &OddIsAlive), NVML_SUCCESS);
}

TEST(MigSmRangeTest, InstancesBookDisjointSmsOfTheirSlices) {
  int first = -1, count = -1;
  // A100 (108 SMs): a 3g at 0 and a 3g at 4, 42 SMs each, do not overlap.
  MigSmRange(0, 0, 42, 108, &first, &count);
  EXPECT_EQ(first, 0);
  EXPECT_EQ(count, 42);
  MigSmRange(4, 0, 42, 108, &first, &count);
  EXPECT_EQ(first, 61);  // slice 4 starts at 4 * 108 / 7
  EXPECT_EQ(count, 42);
  // 1g instances at slices 0..6 each get 14 SMs of their own.
  int end = 0;
  for (uint32_t slice = 0; slice < 7; ++slice) {
    MigSmRange(slice, 0, 14, 108, &first, &count);
    EXPECT_GE(first, end) << slice;
    end = first + count;
  }
  EXPECT_LE(end, 108);
  // A CI inside a GI adds its own start: the second 1-slice CI of a 7g GI.
  MigSmRange(0, 1, 14, 108, &first, &count);
  EXPECT_EQ(first, 15);
  // Clamped to the device: a 26-SM H100 1g at slice 6, and a config with fewer SMs than the
  // tables assume.
  MigSmRange(6, 0, 26, 132, &first, &count);
  EXPECT_EQ(first + count, 132);
  MigSmRange(0, 0, 98, 40, &first, &count);
  EXPECT_EQ(first, 0);
  EXPECT_EQ(count, 40);
}

}  // namespace
}  // namespace hami::sim
