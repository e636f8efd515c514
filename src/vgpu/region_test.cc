#include "vgpu/region.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <string>
#include <thread>
#include <vector>

namespace hami::vgpu {
namespace {

class RegionTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/hami-region-test-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    path_ = dir_ + "/region";
  }
  void TearDown() override {
    unlink(path_.c_str());
    rmdir(dir_.c_str());
  }
  Region* OpenWithLimit(uint64_t limit) {
    RegionInit init;
    init.mem_limit[0] = limit;
    char err[256] = {};
    Region* r = Region::Open(path_.c_str(), init, err, sizeof(err));
    EXPECT_NE(r, nullptr) << err;
    return r;
  }
  std::string dir_, path_;
};

TEST_F(RegionTest, ReserveRespectsTheLimitAndNeverUnderflows) {
  Region* r = OpenWithLimit(1000);
  int s = r->RegisterSelf();
  ASSERT_GE(s, 0);
  EXPECT_TRUE(r->Reserve(s, 0, 600, MemKind::kData).ok);
  ReserveResult denied = r->Reserve(s, 0, 401, MemKind::kData);
  EXPECT_FALSE(denied.ok);
  EXPECT_EQ(denied.used, 600u);
  EXPECT_EQ(denied.limit, 1000u);
  EXPECT_TRUE(r->Reserve(s, 0, 400, MemKind::kArray).ok);
  EXPECT_EQ(r->Used(0), 1000u);
  EXPECT_FALSE(r->Reserve(s, 0, UINT64_MAX, MemKind::kData).ok) << "overflow must not wrap";
  r->Unreserve(s, 0, 5000, MemKind::kData);  // more than held: clamps
  EXPECT_EQ(r->Used(0), 0u);
  EXPECT_EQ(r->header()->devices[0].oom_denials.load(), 2u);
  EXPECT_TRUE(r->Reserve(s, 1, UINT64_MAX / 2, MemKind::kData).ok) << "device 1 is unlimited";
  r->ReleaseSlot(s);
  EXPECT_EQ(r->Used(1), 0u);
  Region::Free(r);
}

TEST_F(RegionTest, SecondOpenerSeesTheCreatorsLimits) {
  Region* a = OpenWithLimit(1000);
  Region* b = OpenWithLimit(5);  // a later process with other env: the region's value wins
  EXPECT_EQ(b->Limit(0), 1000u);
  int sa = a->RegisterSelf();
  EXPECT_TRUE(a->Reserve(sa, 0, 700, MemKind::kData).ok);
  EXPECT_EQ(b->Used(0), 700u);
  a->ReleaseSlot(sa);
  Region::Free(a);
  Region::Free(b);
}

TEST_F(RegionTest, RejectsForeignFilesWithoutTouchingThem) {
  FILE* f = fopen(path_.c_str(), "w");
  fputs("not a region", f);
  fclose(f);
  RegionInit init;
  char err[256] = {};
  EXPECT_EQ(Region::Open(path_.c_str(), init, err, sizeof(err)), nullptr);
  EXPECT_NE(std::string(err).find("bytes"), std::string::npos) << err;
  f = fopen(path_.c_str(), "r");
  char buf[32] = {};
  ASSERT_NE(fgets(buf, sizeof(buf), f), nullptr);
  fclose(f);
  EXPECT_STREQ(buf, "not a region");
}

TEST_F(RegionTest, PrivateRegionWorksWithoutAFile) {
  RegionInit init;
  init.mem_limit[0] = 10;
  Region* r = Region::CreatePrivate(init);
  ASSERT_NE(r, nullptr);
  int s = r->RegisterSelf();
  EXPECT_TRUE(r->Reserve(s, 0, 10, MemKind::kData).ok);
  EXPECT_FALSE(r->Reserve(s, 0, 1, MemKind::kData).ok);
  Region::Free(r);
}

// Many threads of one process hammer the same device: the limit is never exceeded and the
// final total equals what is still held.
TEST_F(RegionTest, ConcurrentThreadsNeverOvershoot) {
  Region* r = OpenWithLimit(1 << 20);
  int s = r->RegisterSelf();
  std::vector<std::thread> threads;
  std::atomic<bool> overshoot{false};
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 20000; ++i) {
        if (r->Reserve(s, 0, 4096, MemKind::kData).ok) {
          if (r->Used(0) > (1u << 20)) overshoot = true;
          r->Unreserve(s, 0, 4096, MemKind::kData);
        }
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_FALSE(overshoot.load());
  EXPECT_EQ(r->Used(0), 0u);
  Region::Free(r);
}

// Two processes race for the last 600 MiB of a 1 GiB quota, 1000 times: exactly one wins every
// round.
TEST_F(RegionTest, TwoProcessesRacingForTheLastBytesExactlyOneWins) {
  const uint64_t kMiB = 1 << 20;
  Region* r = OpenWithLimit(1024 * kMiB);
  auto* shared = static_cast<std::atomic<int>*>(
      mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0));
  // shared[0]: round barrier counter, shared[1+round%2]: winners of the round.
  constexpr int kRounds = 1000;
  auto worker = [&](int id) {
    Region* mine = OpenWithLimit(0);
    int s = mine->RegisterSelf();
    for (int round = 0; round < kRounds; ++round) {
      // Barrier: both arrive before either allocates.
      shared[0].fetch_add(1);
      while (shared[0].load() < 2 * (2 * round + 1)) {
      }
      bool won = mine->Reserve(s, 0, 600 * kMiB, MemKind::kData).ok;
      if (won) shared[2 + round % 2].fetch_add(1);
      shared[0].fetch_add(1);
      while (shared[0].load() < 2 * (2 * round + 2)) {
      }
      if (id == 0) {
        int winners = shared[2 + round % 2].exchange(0);
        if (winners != 1) shared[1].fetch_add(1);  // count bad rounds
      }
      if (won) mine->Unreserve(s, 0, 600 * kMiB, MemKind::kData);
    }
    mine->ReleaseSlot(s);
    Region::Free(mine);
  };
  pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    worker(1);
    _exit(0);
  }
  worker(0);
  int status = 0;
  waitpid(child, &status, 0);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  EXPECT_EQ(shared[1].load(), 0) << "rounds without exactly one winner";
  EXPECT_EQ(r->Used(0), 0u);
  munmap(shared, 4096);
  Region::Free(r);
}

// A process killed while holding memory AND the region lock: the next locker recovers the lock,
// and the dead process's memory is reclaimed when the quota is needed.
TEST_F(RegionTest, KilledProcessHoldingTheLockAndMemoryIsRecovered) {
  const uint64_t kMiB = 1 << 20;
  Region* r = OpenWithLimit(1024 * kMiB);
  int pipefd[2];
  ASSERT_EQ(pipe(pipefd), 0);
  pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    Region* mine = OpenWithLimit(0);
    int s = mine->RegisterSelf();
    if (!mine->Reserve(s, 0, 900 * kMiB, MemKind::kData).ok) _exit(1);
    // Take the region lock and never release it.
    mine->Lock();
    char c = 'x';
    if (write(pipefd[1], &c, 1) != 1) _exit(2);
    pause();
    _exit(0);
  }
  char c;
  ASSERT_EQ(read(pipefd[0], &c, 1), 1);
  kill(child, SIGKILL);
  int status;
  waitpid(child, &status, 0);
  EXPECT_EQ(r->Used(0), 900 * kMiB);
  int s = r->RegisterSelf();  // must not hang on the dead owner's lock
  ASSERT_GE(s, 0);
  EXPECT_TRUE(r->Reserve(s, 0, 1000 * kMiB, MemKind::kData).ok)
      << "the killed process's 900 MiB must be reclaimed";
  EXPECT_EQ(r->Used(0), 1000 * kMiB);
  r->ReleaseSlot(s);
  close(pipefd[0]);
  close(pipefd[1]);
  Region::Free(r);
}

// A container's process seen from the host: its slot's PID (here 1, which on the host is
// another process) does not name it, the host PID the monitor recorded does. Sweeping from the
// host must not reclaim it; without a host PID it is taken for dead.
TEST_F(RegionTest, ASlotIsAliveThroughItsHostPid) {
  Region* r = OpenWithLimit(1000);
  int s = r->RegisterSelf();
  ASSERT_GE(s, 0);
  ASSERT_TRUE(r->Reserve(s, 0, 100, MemKind::kData).ok);
  RegionHeader* h = r->header();
  r->Lock();
  h->slots[s].pid.store(1);
  h->slot_pid[s].store(1);
  r->Unlock();
  h->slots[s].host_pid.store(getpid());
  EXPECT_EQ(r->SweepDead(), 0) << "alive through its host PID";
  EXPECT_EQ(r->Used(0), 100u);
  h->slots[s].host_pid.store(0);
  EXPECT_EQ(r->SweepDead(), 1) << "PID 1 has another start time: dead";
  EXPECT_EQ(r->Used(0), 0u);
  Region::Free(r);
}

TEST(ProcessStartTime, SelfAliveUnknownDead) {
  uint64_t t = 0;
  EXPECT_TRUE(ProcessStartTime(getpid(), &t));
  EXPECT_GT(t, 0u);
  EXPECT_FALSE(ProcessStartTime(0x3fffffff, &t));
}

}  // namespace
}  // namespace hami::vgpu
