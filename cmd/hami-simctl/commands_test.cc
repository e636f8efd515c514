// hami-simctl's MIG operator commands, run in process on a state file of their own: what they
// make, what the driver's rules refuse and how they say so.
#include "commands.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <string>

#include "sim/gpu/config.h"
#include "sim/gpu/shared_state.h"

namespace hami::simctl {
namespace {

constexpr const char* kConfig = R"(
[device]
name = NVIDIA A100-SXM4-80GB
memory = 80Gi
[device]
name = Tesla T4
memory = 16Gi
)";

struct Ran {
  int rc = 0;
  std::string out, err;
};

// Runs `command` with its output streams captured.
Ran Capture(const std::function<int(FILE* out, FILE* err)>& command) {
  char* out = nullptr;
  char* err = nullptr;
  size_t out_size = 0, err_size = 0;
  FILE* o = open_memstream(&out, &out_size);
  FILE* e = open_memstream(&err, &err_size);
  Ran r;
  r.rc = command(o, e);
  fclose(o);
  fclose(e);
  r.out.assign(out, out_size);
  r.err.assign(err, err_size);
  free(out);
  free(err);
  return r;
}

bool Has(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

class SimctlMigTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/simctl-test-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    config_ = dir_ + "/sim.conf";
    state_ = dir_ + "/state";
    std::ofstream(config_) << kConfig;
    sim::SimConfig config;
    std::string error;
    ASSERT_TRUE(sim::LoadConfigFile(config_, &config, &error)) << error;
    // The node's first process makes the state; the commands never do.
    ASSERT_NE(sim::SharedState::Open(state_, config, &error), nullptr) << error;
  }
  void TearDown() override {
    if (child_ > 0) {
      kill(child_, SIGKILL);
      waitpid(child_, nullptr, 0);
    }
    std::filesystem::remove_all(dir_);
  }

  Ran Create(int device, const std::string& profile, int start = -1) {
    return Capture([&](FILE* o, FILE* e) {
      return MigCreate(state_, config_, device, profile, start, o, e);
    });
  }
  Ran Destroy(int device, int64_t gi) {
    return Capture([&](FILE* o, FILE* e) { return MigDestroy(state_, config_, device, gi, o, e); });
  }
  Ran Mode(int device, bool enable) {
    return Capture(
        [&](FILE* o, FILE* e) { return MigMode(state_, config_, device, enable, o, e); });
  }
  Ran List() {
    return Capture([&](FILE* o, FILE* e) { return MigList(state_, config_, o, e); });
  }
  // A process that runs until the test kills it.
  pid_t StartChild() {
    child_ = fork();
    if (child_ == 0) {
      pause();
      _exit(0);
    }
    return child_;
  }
  void KillChild() {
    kill(child_, SIGKILL);
    waitpid(child_, nullptr, 0);
    child_ = -1;
  }

  std::string dir_, config_, state_;
  pid_t child_ = -1;
};

TEST_F(SimctlMigTest, CreatesAndDestroysInstancesByTheDriversRules) {
  Ran r = Create(0, "1g.10gb", 0);
  EXPECT_EQ(r.rc, 2);
  EXPECT_TRUE(Has(r.err, "MIG is disabled on GPU 0 (hami-simctl mig-mode --device 0 --enable)"))
      << r.err;
  r = Mode(0, true);
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_EQ(r.out, "GPU 0: MIG enabled\n");

  r = Create(0, "1g.10gb", 0);
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_EQ(r.out.rfind("MIG-", 0), 0u) << r.out;
  EXPECT_TRUE(Has(r.out, " GPU 0 GI 7 CI 0 1g.10gb at 0:1\n")) << r.out;
  const std::string uuid = r.out.substr(0, r.out.find(' '));
  r = Create(0, "3g.40gb");  // the driver picks the free placement with the highest start
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_TRUE(Has(r.out, " GPU 0 GI 2 CI 0 3g.40gb at 4:4\n")) << r.out;
  r = Create(0, "1g.10gb+me", 2);
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_TRUE(Has(r.out, " GI 9 CI 0 1g.10gb+me at 2:1\n")) << r.out;

  r = Create(0, "1g.20gb", 0);  // overlaps the 1g.10gb at 0
  EXPECT_EQ(r.rc, 2);
  EXPECT_TRUE(Has(r.err, "no room for 1g.20gb on GPU 0")) << r.err;
  r = Create(0, "3g.40gb", 1);
  EXPECT_EQ(r.rc, 2);
  EXPECT_TRUE(Has(r.err, "3g.40gb cannot start at memory slice 1 (its placements: 0:4 4:4)"))
      << r.err;
  r = Create(0, "2g.10gb");
  EXPECT_EQ(r.rc, 2);
  EXPECT_TRUE(Has(r.err, "GPU 0 has no MIG profile 2g.10gb (A100-80GB tables: 1g.10gb, "))
      << r.err;
  EXPECT_TRUE(Has(List().out, uuid));

  r = Destroy(0, 7);
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_EQ(r.out, "destroyed GPU instance 7 of GPU 0 and its 1 compute instance(s)\n");
  EXPECT_FALSE(Has(List().out, uuid));
  r = Destroy(0, 7);
  EXPECT_EQ(r.rc, 2);
  EXPECT_TRUE(Has(r.err, "GPU 0 has no GPU instance 7")) << r.err;
  EXPECT_EQ(Create(0, "1g.20gb", 0).rc, 0);  // the slices are free again
}

TEST_F(SimctlMigTest, AnAttachedProcessKeepsItsInstanceAndTheMode) {
  ASSERT_EQ(Mode(0, true).rc, 0);
  Ran made = Create(0, "7g.80gb");
  ASSERT_EQ(made.rc, 0) << made.err;
  const std::string uuid = made.out.substr(0, made.out.find(' '));
  const pid_t pid = StartChild();
  ASSERT_EQ(Capture([&](FILE* o, FILE* e) { return MigAttach(state_, config_, uuid, pid, o, e); })
                .rc,
            0);

  Ran r = Destroy(0, 0);
  EXPECT_EQ(r.rc, 2);
  EXPECT_TRUE(Has(r.err, "GPU instance 0 of GPU 0 is in use")) << r.err;
  EXPECT_TRUE(Has(List().out, uuid));  // nothing was destroyed
  r = Mode(0, false);
  EXPECT_EQ(r.rc, 2);
  EXPECT_TRUE(Has(r.err, "GPU 0: MIG disabled is pending: processes use the GPU")) << r.err;

  KillChild();
  r = Mode(0, false);  // the process is gone, the GPU instance is not
  EXPECT_EQ(r.rc, 2);
  EXPECT_TRUE(Has(r.err, "GPU instances remain")) << r.err;
  ASSERT_EQ(Destroy(0, 0).rc, 0);
  r = Mode(0, false);
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_EQ(r.out, "GPU 0: MIG disabled\n");
  EXPECT_TRUE(Has(List().out, "MIG disabled (pending disabled;"));
}

TEST_F(SimctlMigTest, RefusesGpusWithoutMig) {
  Ran r = Mode(1, true);
  EXPECT_EQ(r.rc, 2);
  EXPECT_TRUE(Has(r.err, "GPU 1 (Tesla T4) cannot do MIG")) << r.err;
  EXPECT_EQ(Create(1, "1g.10gb").rc, 2);
  EXPECT_EQ(Destroy(1, 0).rc, 2);
  r = Create(5, "1g.10gb");
  EXPECT_EQ(r.rc, 2);
  EXPECT_TRUE(Has(r.err, "no device 5 (the node has 2)")) << r.err;
}

TEST_F(SimctlMigTest, AMissingStateIsNotCreated) {
  std::filesystem::remove(state_);
  Ran r = Mode(0, true);
  EXPECT_EQ(r.rc, 1);
  EXPECT_TRUE(Has(r.err, "no state at")) << r.err;
  EXPECT_FALSE(std::filesystem::exists(state_));
}

}  // namespace
}  // namespace hami::simctl
