// Integration tests of the hamictl binary: every test starts hamictl as a user would and checks
// its exit status, its output and the effect on a region file the test created itself (in a
// fresh temp dir). Tests that need the simulated GPU skip when it is not built.
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "common/subprocess.h"
#include "vgpu/region.h"

namespace {

constexpr uint64_t kGiB = 1ULL << 30;

using hami::ProcessResult;
using hami::Subprocess;
using hami::vgpu::Region;
using hami::vgpu::RegionInit;

// KEY=VALUE lines of `env` output.
std::map<std::string, std::string> EnvLines(const std::string& text) {
  std::map<std::string, std::string> kv;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    size_t eq = line.find('=');
    if (eq != std::string::npos) kv[line.substr(0, eq)] = line.substr(eq + 1);
  }
  return kv;
}

bool Contains(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}

int Lines(const std::string& text) {
  int n = 0;
  for (char c : text) n += c == '\n';
  return n;
}

// The pid of a process that has exited and been reaped.
int DeadPid() {
  pid_t pid = fork();
  if (pid == 0) _exit(0);
  int status = 0;
  waitpid(pid, &status, 0);
  return static_cast<int>(pid);
}

class HamictlTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/hamictl-it-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override {
    if (region_ != nullptr) {
      if (my_slot_ >= 0) region_->ReleaseSlot(my_slot_);
      Region::Free(region_);
    }
    std::filesystem::remove_all(dir_);
  }

  // Environment for hamictl: minimal, plus the sanitizer runtime first in LD_PRELOAD when the
  // build is sanitized (the preloaded libvgpu.so then is too).
  std::vector<std::string> Env(const std::vector<std::string>& extra = {}) const {
    std::vector<std::string> env = {"PATH=/usr/bin:/bin", "TMPDIR=" + dir_};
    std::string runtime = HAMI_SANITIZER_PRELOAD;
    if (!runtime.empty()) {
      env.push_back("LD_PRELOAD=" + runtime);
      env.push_back("ASAN_OPTIONS=detect_leaks=0:verify_asan_link_order=0");
    }
    env.insert(env.end(), extra.begin(), extra.end());
    return env;
  }

  ProcessResult Hamictl(std::vector<std::string> args,
                        const std::vector<std::string>& extra_env = {}) const {
    args.insert(args.begin(), HAMICTL);
    return hami::RunProcess(args, Env(extra_env));
  }

  // `hamictl run --lib <libvgpu> FLAGS -- COMMAND`.
  ProcessResult Run(const std::vector<std::string>& flags, const std::vector<std::string>& cmd,
                    const std::vector<std::string>& extra_env = {}) const {
    std::vector<std::string> args = {"run", "--lib", HAMI_LIBVGPU};
    args.insert(args.end(), flags.begin(), flags.end());
    args.push_back("--");
    args.insert(args.end(), cmd.begin(), cmd.end());
    return Hamictl(args, extra_env);
  }

  // A region with two recorded devices, a 4 GiB limit on device 0, this test process registered
  // in it (a live process holding 1 GiB) and an exited process's leftover slot.
  void MakeRegion() {
    path_ = dir_ + "/vgpu.cache";
    RegionInit init;
    init.mem_limit[0] = 4 * kGiB;
    init.sm_limit[0] = 30;
    char err[256] = {};
    region_ = Region::Open(path_.c_str(), init, err, sizeof(err));
    ASSERT_NE(region_, nullptr) << err;
    char uuids[2][hami::vgpu::kUuidLen] = {"GPU-11111111-2222-3333-4444-555555555555",
                                           "GPU-66666666-7777-8888-9999-000000000000"};
    region_->SetDevices(2, uuids);
    my_slot_ = region_->RegisterSelf();
    ASSERT_GE(my_slot_, 0);
    ASSERT_TRUE(region_->Reserve(my_slot_, 0, kGiB, hami::vgpu::MemKind::kData).ok);
    dead_pid_ = DeadPid();
    auto& s = region_->header()->slots[my_slot_ + 1];
    s.start_time = 1;
    s.status.store(hami::vgpu::kSlotRunning);
    s.used[1].store(kGiB);
    s.pid.store(dead_pid_);
    region_->header()->slot_pid[my_slot_ + 1].store(dead_pid_);
    region_->header()->proc_count.fetch_add(1);
  }

  std::string dir_;
  std::string path_;
  Region* region_ = nullptr;
  int my_slot_ = -1;
  int dead_pid_ = 0;
};

// ---- run ----------------------------------------------------------------------------------

TEST_F(HamictlTest, RunPropagatesTheExitStatus) {
  EXPECT_EQ(Run({}, {"/bin/sh", "-c", "exit 7"}).exit_code, 7);
  EXPECT_EQ(Run({}, {"/bin/sh", "-c", "exit 0"}).exit_code, 0);
}

TEST_F(HamictlTest, RunReportsDeathBySignalAs128PlusTheSignal) {
  EXPECT_EQ(Run({}, {"/bin/sh", "-c", "kill -TERM $$"}).exit_code, 128 + SIGTERM);
  EXPECT_EQ(Run({}, {"/bin/sh", "-c", "kill -KILL $$"}).exit_code, 128 + SIGKILL);
}

TEST_F(HamictlTest, RunSetsTheEnvContractAndRemovesItsTempRegion) {
  ProcessResult r =
      Run({"--mem", "4Gi", "--mem", "1=2048m", "--cores", "1=30", "--policy", "force", "--priority",
           "0", "--log-level", "3"},
          {"/usr/bin/env"}, {"CUDA_DEVICE_MEMORY_LIMIT_3=1Gi", "CUDA_DISABLE_CONTROL=1"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto env = EnvLines(r.out);
  EXPECT_TRUE(Contains(env["LD_PRELOAD"], HAMI_LIBVGPU)) << env["LD_PRELOAD"];
  EXPECT_EQ(env["CUDA_DEVICE_MEMORY_LIMIT"], std::to_string(4 * kGiB));
  EXPECT_EQ(env["CUDA_DEVICE_MEMORY_LIMIT_1"], std::to_string(2 * kGiB));
  EXPECT_EQ(env.count("CUDA_DEVICE_MEMORY_LIMIT_3"), 0u) << "inherited limits are dropped";
  EXPECT_EQ(env.count("CUDA_DISABLE_CONTROL"), 0u);
  EXPECT_EQ(env["CUDA_DEVICE_SM_LIMIT_1"], "30");
  EXPECT_EQ(env["GPU_CORE_UTILIZATION_POLICY"], "force");
  EXPECT_EQ(env["CUDA_TASK_PRIORITY"], "0");
  EXPECT_EQ(env["LIBCUDA_LOG_LEVEL"], "3");
  EXPECT_EQ(env["PATH"], "/usr/bin:/bin");
  std::string region = env["CUDA_DEVICE_MEMORY_SHARED_CACHE"];
  ASSERT_EQ(region.rfind(dir_ + "/hamictl-", 0), 0u) << "a fresh dir under TMPDIR: " << region;
  EXPECT_FALSE(std::filesystem::exists(std::filesystem::path(region).parent_path()))
      << "the temp region is removed after the command";
}

TEST_F(HamictlTest, RunCreatesTheRegionBeforeTheCommandAndKeepsANamedOne) {
  std::string region = dir_ + "/named.cache";
  // The command itself inspects the region while it runs.
  ProcessResult r = Run({"--mem", "3Gi", "--region", region, "--summary"},
                        {HAMICTL, "region", "show", "--json", region});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(Contains(r.out, "\"mem_limit\": " + std::to_string(3 * kGiB))) << r.out;
  EXPECT_TRUE(Contains(r.err, "hamictl: summary: the command used no GPU")) << r.err;
  EXPECT_TRUE(std::filesystem::exists(region)) << "a named region is kept";

  // The same region again with another limit: the region's value applies and hamictl says so.
  r = Run({"--mem", "5Gi", "--region", region}, {"/bin/true"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(Contains(r.err, "already limits device 0 to 3 GiB")) << r.err;
}

TEST_F(HamictlTest, RunKeepRegionLeavesTheTempRegion) {
  ProcessResult r = Run({"--keep-region"}, {"/bin/true"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::string marker = "hamictl: region kept at ";
  size_t at = r.err.find(marker);
  ASSERT_NE(at, std::string::npos) << r.err;
  std::string path = r.err.substr(at + marker.size());
  path = path.substr(0, path.find('\n'));
  EXPECT_TRUE(std::filesystem::exists(path)) << path;
  EXPECT_EQ(Hamictl({"region", "show", path}).exit_code, 0);
}

TEST_F(HamictlTest, RunForwardsSignalsToTheCommand) {
  // The command exits with 42 when SIGTERM reaches it; it announces itself once the trap is set.
  std::vector<std::string> argv = {
      HAMICTL, "run",     "--lib", HAMI_LIBVGPU,
      "--",    "/bin/sh", "-c",    "trap 'exit 42' TERM; echo ready; while :; do sleep 0.05; done"};
  Subprocess p(argv, Env());
  ASSERT_TRUE(Contains(p.ReadUntil("ready"), "ready"));
  p.Signal(SIGTERM);
  ProcessResult r = p.Wait();
  EXPECT_EQ(r.exit_code, 42) << r.err;
}

TEST_F(HamictlTest, RunReportsTheStatusWhenItsCallerIgnoresSigchld) {
  // An ignored SIGCHLD survives exec and would let the kernel reap the command before hamictl
  // reads its status ("waitpid failed: No child processes"). bash sets the disposition; env
  // then adds the sanitizer preload for hamictl and the command alone (bash crashes under it).
  std::vector<std::string> argv = {"/bin/bash", "-c", "trap '' CHLD; exec /usr/bin/env \"$@\"",
                                   "bash"};
  for (const std::string& e : Env()) argv.push_back(e);
  for (const char* a : {HAMICTL, "run", "--lib", HAMI_LIBVGPU, "--", "/bin/sh", "-c", "exit 7"}) {
    argv.push_back(a);
  }
  ProcessResult r = hami::RunProcess(argv, {"PATH=/usr/bin:/bin"});
  EXPECT_EQ(r.exit_code, 7) << r.err;
  EXPECT_FALSE(Contains(r.err, "waitpid")) << r.err;
}

TEST_F(HamictlTest, RunReportsMissingCommands) {
  ProcessResult r = Run({}, {"no-such-command-hamictl-test"});
  EXPECT_EQ(r.exit_code, 127);
  EXPECT_TRUE(Contains(r.err, "command not found")) << r.err;
  std::string plain = dir_ + "/plain";
  std::ofstream(plain) << "x";
  r = Run({}, {plain});
  EXPECT_EQ(r.exit_code, 126);
  EXPECT_TRUE(Contains(r.err, "not executable")) << r.err;
}

TEST_F(HamictlTest, BadInputExitsWithTwoAndOneClearLine) {
  struct Case {
    std::vector<std::string> args;
    std::string message;
  };
  const std::string lib = HAMI_LIBVGPU;
  const Case cases[] = {
      {{"run", "--lib", lib, "--mem", "12x", "--", "true"}, "--mem 12x: unknown unit"},
      {{"run", "--lib", lib, "--mem", "0", "--", "true"}, "greater than zero"},
      {{"run", "--lib", lib, "--mem", "16=1Gi", "--", "true"}, "device index"},
      {{"run", "--lib", lib, "--mem", "--", "true"}, "--mem needs a value"},
      {{"run", "--lib", lib, "--cores", "150", "--", "true"}, "--cores 150"},
      {{"run", "--lib", lib, "--cores", "1=x", "--", "true"}, "--cores 1=x"},
      {{"run", "--lib", lib, "--policy", "strict", "--", "true"}, "default, force or disable"},
      {{"run", "--lib", lib, "--priority", "high", "--", "true"}, "--priority"},
      {{"run", "--lib", lib, "--log-level", "9", "--", "true"}, "--log-level"},
      {{"run", "--lib", lib, "--sim-state", "/x", "--", "true"}, "--sim-state"},
      {{"run", "--lib", lib}, "no command given"},
      {{"run", "--lib", dir_ + "/missing.so", "--", "true"}, "--lib"},
      {{"run", "--bogus", "--", "true"}, "--bogus"},
      {{"region", "set", "/x"}, "nothing to change"},
      {{"region", "set", "/x", "--mem", "0=lots"}, "--mem 0=lots"},
      {{"region", "suspend", "/x", "--wait-ms", "-5"}, "--wait-ms"},
      {{"region", "suspend", "/x", "--wait-ms", "soon"}, "--wait-ms"},
      {{"region", "show"}, "path"},
      {{"frobnicate"}, "frobnicate"},
      {{}, "subcommand"},
  };
  for (const auto& c : cases) {
    ProcessResult r = Hamictl(c.args);
    std::string cmd;
    for (const auto& a : c.args) cmd += a + " ";
    EXPECT_EQ(r.exit_code, 2) << cmd << "\n" << r.err;
    EXPECT_TRUE(Contains(r.err, c.message)) << cmd << "\n" << r.err;
    EXPECT_EQ(Lines(r.err), 1) << cmd << "\n" << r.err;
    EXPECT_TRUE(r.out.empty()) << cmd << "\n" << r.out;
  }
}

// ---- region -------------------------------------------------------------------------------

TEST_F(HamictlTest, RegionShowRendersDevicesPolicyAndSlots) {
  MakeRegion();
  ProcessResult r = Hamictl({"region", "show", path_});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  for (const std::string& want :
       {std::string("GPU-11111111-2222-3333-4444-555555555555"), std::string("4 GiB"),
        std::string("30%"), std::string("suspend_request=0"), std::string("data=1 GiB"),
        std::to_string(getpid()), std::to_string(dead_pid_)}) {
    EXPECT_TRUE(Contains(r.out, want)) << "missing " << want << " in\n" << r.out;
  }

  r = Hamictl({"region", "show", "--json", path_});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(Contains(r.out, "\"mem_used\": " + std::to_string(kGiB))) << r.out;
  EXPECT_TRUE(Contains(r.out, "\"pid\": " + std::to_string(getpid()) + ",")) << r.out;
  EXPECT_TRUE(Contains(r.out, "\"alive\": true")) << r.out;
  EXPECT_TRUE(Contains(r.out, "\"alive\": false")) << r.out;
}

TEST_F(HamictlTest, RegionVerbsRejectFilesThatAreNotRegions) {
  std::string other = dir_ + "/other";
  std::ofstream(other) << "hello";
  for (const char* verb : {"show", "suspend", "resume", "sweep"}) {
    ProcessResult r = Hamictl({"region", verb, other});
    EXPECT_EQ(r.exit_code, 1) << verb;
    EXPECT_TRUE(Contains(r.err, "not a hami-cpp region")) << verb << ": " << r.err;
  }
  ProcessResult r = Hamictl({"region", "show", dir_ + "/missing"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_TRUE(Contains(r.err, "cannot open")) << r.err;
}

TEST_F(HamictlTest, RegionSuspendAndResume) {
  MakeRegion();
  ProcessResult r = Hamictl({"region", "suspend", path_});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(region_->header()->suspend_request.load(), 1u);
  EXPECT_TRUE(Contains(Hamictl({"region", "show", path_}).out, "SUSPENDED"));

  // This test process is a live slot that never pauses: the wait runs out and names it.
  r = Hamictl({"region", "suspend", path_, "--wait-ms", "50"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_TRUE(Contains(r.err, "not suspended yet: pid " + std::to_string(getpid()))) << r.err;
  EXPECT_FALSE(Contains(r.err, std::to_string(dead_pid_))) << "dead slots are not waited for";

  // Once it reports suspended, the wait ends at once.
  region_->header()->slots[my_slot_].status.store(hami::vgpu::kSlotSuspended);
  r = Hamictl({"region", "suspend", path_, "--wait-ms", "60000"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(Contains(r.out, "every live process is suspended")) << r.out;

  r = Hamictl({"region", "resume", path_});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(region_->header()->suspend_request.load(), 0u);
}

TEST_F(HamictlTest, RegionSweepReclaimsExitedProcesses) {
  MakeRegion();
  ProcessResult r = Hamictl({"region", "sweep", path_});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(Contains(r.out, "reclaimed 1 slot of exited pid " + std::to_string(dead_pid_)))
      << r.out;
  EXPECT_EQ(region_->header()->slots[my_slot_ + 1].pid.load(), 0);
  EXPECT_EQ(region_->header()->slots[my_slot_].pid.load(), static_cast<int>(getpid()));
  r = Hamictl({"region", "sweep", path_});
  EXPECT_TRUE(Contains(r.out, "reclaimed 0 slots")) << r.out;
}

TEST_F(HamictlTest, RegionSetChangesQuotasLive) {
  MakeRegion();
  ProcessResult r = Hamictl({"region", "set", path_, "--mem", "1=2Gi", "--cores", "0=50"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(region_->header()->devices[1].mem_limit.load(), 2 * kGiB);
  EXPECT_EQ(region_->header()->devices[0].sm_limit.load(), 50u);
  EXPECT_EQ(region_->header()->devices[0].mem_limit.load(), 4 * kGiB) << "untouched";

  // Lowering below the usage is allowed and explained.
  r = Hamictl({"region", "set", path_, "--mem", "0=512Mi"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(region_->header()->devices[0].mem_limit.load(), 512ULL << 20);
  EXPECT_TRUE(Contains(r.err, "already uses 1 GiB")) << r.err;

  r = Hamictl({"region", "set", path_, "--mem", "5=1Gi"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_TRUE(Contains(r.err, "device 5 does not exist")) << r.err;
}

// ---- smi ----------------------------------------------------------------------------------

TEST_F(HamictlTest, SmiWithoutNvmlSaysSo) {
  if (void* h = dlopen("libnvidia-ml.so.1", RTLD_NOW); h != nullptr) {
    dlclose(h);
    GTEST_SKIP() << "this machine has NVML";
  }
  ProcessResult r = Hamictl({"smi"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_TRUE(Contains(r.err, "NVML is not available")) << r.err;
  EXPECT_EQ(Lines(r.err), 1) << r.err;
}

// ---- on the simulated GPU -----------------------------------------------------------------

class HamictlSimTest : public HamictlTest {
 protected:
  void SetUp() override {
    if (!HAMICTL_TEST_HAVE_SIM) GTEST_SKIP() << "the simulated GPU is not built";
    HamictlTest::SetUp();
  }
  std::vector<std::string> SimEnv() const { return {"HAMI_SIM_STATE=" + dir_ + "/sim-state"}; }
};

TEST_F(HamictlSimTest, SimFlagPutsTheSimulatedDriverFirst) {
  ProcessResult r = Run({"--sim"}, {"/usr/bin/env"}, SimEnv());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto env = EnvLines(r.out);
  EXPECT_EQ(env["LD_LIBRARY_PATH"].rfind(HAMI_SIM_DIR, 0), 0u) << env["LD_LIBRARY_PATH"];
  EXPECT_EQ(env["HAMI_SIM_STATE"], dir_ + "/sim-state");
  r = Run({"--sim", "--sim-state", dir_ + "/other"}, {"/usr/bin/env"}, SimEnv());
  EXPECT_EQ(EnvLines(r.out)["HAMI_SIM_STATE"], dir_ + "/other");
}

TEST_F(HamictlSimTest, SmiUnderRunShowsTheQuota) {
  ProcessResult r = Run({"--sim", "--mem", "4Gi"}, {HAMICTL, "smi", "--json"}, SimEnv());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(Contains(r.out, "\"memory_total_mib\": 4096")) << r.out;
  EXPECT_FALSE(Contains(r.out, "\"memory_total_mib\": 81920")) << r.out;

  r = Run({"--sim"}, {HAMICTL, "smi"}, SimEnv());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(Contains(r.out, "/ 81920MiB")) << "without a quota, the whole card: " << r.out;
}

}  // namespace
