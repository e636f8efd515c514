// Multi-process tests of libvgpu.so on the simulated GPU: every test starts real processes
// (vgpu_probe) with the library preloaded and the simulated driver on LD_LIBRARY_PATH, each test
// with its own simulator state and region files, and checks what the processes observed.
#include <gtest/gtest.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "common/subprocess.h"
#include "vgpu/region.h"

namespace {

constexpr uint64_t kMiB = 1ULL << 20;
constexpr uint64_t kGiB = 1ULL << 30;

using hami::KeyValues;
using hami::ProcessResult;
using Result = hami::ProcessResult;

std::map<std::string, std::string> Line(const std::string& text, const std::string& key) {
  return KeyValues(text, key);
}

uint64_t U(const std::map<std::string, std::string>& kv, const std::string& k) {
  auto it = kv.find(k);
  return it == kv.end() ? UINT64_MAX : strtoull(it->second.c_str(), nullptr, 10);
}

// Writes a simulator device config file; false if it cannot be written.
bool WriteConfig(const std::string& path, const char* text) {
  FILE* f = fopen(path.c_str(), "w");
  if (f == nullptr) return false;
  bool ok = fputs(text, f) >= 0;
  return fclose(f) == 0 && ok;
}

class Proc : public hami::Subprocess {
 public:
  using hami::Subprocess::Subprocess;
  void Kill(int sig) { Signal(sig); }
};

class VgpuTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/hami-vgpu-it-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override {
    std::string cmd = "rm -rf '" + dir_ + "'";
    ASSERT_EQ(system(cmd.c_str()), 0);
  }

  // Environment for a probe: simulator + library + region, plus `extra` (KEY=VALUE).
  std::vector<std::string> Env(const std::vector<std::string>& extra, bool preload = true,
                               const std::string& region = "region") const {
    std::vector<std::string> env = {
        "PATH=/usr/bin:/bin",
        std::string("LD_LIBRARY_PATH=") + HAMI_SIM_DIR,
        "HAMI_SIM_STATE=" + dir_ + "/sim-state",
        "CUDA_DEVICE_MEMORY_SHARED_CACHE=" + dir_ + "/" + region,
    };
    if (preload) {
      // A sanitized build must preload the sanitizer runtime ahead of the library.
      std::string runtime = HAMI_SANITIZER_PRELOAD;
      env.push_back("LD_PRELOAD=" + (runtime.empty() ? "" : runtime + ":") + HAMI_LIBVGPU);
      env.push_back("ASAN_OPTIONS=detect_leaks=0:verify_asan_link_order=0");
    }
    bool level_set = false;
    for (auto& e : extra) {
      hami::SetEnv(env, e);
      level_set |= e.rfind("LIBCUDA_LOG_LEVEL=", 0) == 0;
    }
    if (!level_set) env.push_back("LIBCUDA_LOG_LEVEL=2");
    return env;
  }
  static std::vector<std::string> Probe(std::vector<std::string> args,
                                        const char* binary = HAMI_PROBE) {
    args.insert(args.begin(), binary);
    return args;
  }
  Result Run(std::vector<std::string> args, const std::vector<std::string>& env,
             const char* binary = HAMI_PROBE) {
    Proc p(Probe(std::move(args), binary), env);
    return p.Wait();
  }
  std::string dir_;
};

TEST_F(VgpuTest, WithoutTheLibraryTheProcessSeesTheWholeCard) {
  Result r = Run({"info"}, Env({}, /*preload=*/false));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto d0 = Line(r.out, "device");
  EXPECT_EQ(U(d0, "total"), 80 * kGiB);
  EXPECT_EQ(U(d0, "visible_total"), 80 * kGiB);
}

// The quota is what the process sees, whichever way it reached the driver.
TEST_F(VgpuTest, QuotaIsVisibleThroughEveryResolutionPath) {
  for (const char* mode : {"dlsym", "getproc", "link"}) {
    const char* bin = std::string(mode) == "link" ? HAMI_PROBE_LINKED : HAMI_PROBE;
    std::vector<std::string> args = {"info"};
    if (std::string(mode) != "link") args = {"--resolve", mode, "info"};
    Result r =
        Run(args, Env({"CUDA_DEVICE_MEMORY_LIMIT=4Gi"}, true, std::string("r-") + mode), bin);
    ASSERT_EQ(r.exit_code, 0) << mode << ": " << r.err;
    auto d0 = Line(r.out, "device");
    EXPECT_EQ(U(d0, "total"), 4 * kGiB) << mode << " cuDeviceTotalMem";
    EXPECT_EQ(U(d0, "visible_total"), 4 * kGiB) << mode << " cuMemGetInfo total";
    EXPECT_EQ(U(d0, "free"), 4 * kGiB) << mode << " cuMemGetInfo free";
  }
}

// Every allocation family is charged against the quota: filling in 256 MiB chunks stops with
// CUDA_ERROR_OUT_OF_MEMORY at the 4 GiB limit although the card has 80 GiB.
TEST_F(VgpuTest, EveryAllocationFamilyIsLimited) {
  for (const char* kind :
       {"data", "pitch", "managed", "async", "pool", "vmm", "array", "array3d", "mipmap"}) {
    Result r = Run({"fill", "--kind", kind, "--chunk", "256Mi"},
                   Env({"CUDA_DEVICE_MEMORY_LIMIT=4Gi"}, true, std::string("r-") + kind));
    ASSERT_EQ(r.exit_code, 0) << kind << ": " << r.err;
    auto kv = Line(r.out, "allocated");
    EXPECT_EQ(U(kv, "error"), 2u) << kind << " must fail with CUDA_ERROR_OUT_OF_MEMORY";
    EXPECT_LE(U(kv, "allocated"), 4 * kGiB) << kind;
    EXPECT_GE(U(kv, "allocated"), 3 * kGiB) << kind;
    EXPECT_NE(r.err.find("refused by the container's memory limit"), std::string::npos)
        << kind << ": the decision is logged";
  }
}

// A refusal is an error line even at LIBCUDA_LOG_LEVEL=0 (the chart sets 1): asked, used and
// limit, so a job dying of CUDA_ERROR_OUT_OF_MEMORY on a card with free memory shows why. A loop
// of refusals writes one line a second, not one per call.
TEST_F(VgpuTest, OutOfMemoryRefusalIsLoggedAtEveryLevelWithoutFlooding) {
  for (const char* level : {"0", "1"}) {
    Result r = Run({"alloc", "--bytes", "768Mi", "--count", "200"},
                   Env({"CUDA_DEVICE_MEMORY_LIMIT=1Gi", std::string("LIBCUDA_LOG_LEVEL=") + level},
                       true, std::string("oom-") + level));
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(U(Line(r.out, "kind"), "fail"), 199u) << r.out;
    EXPECT_NE(r.err.find("cuMemAlloc: out of memory: 805306368 bytes (768.0 MiB) on device 0 "
                         "refused by the container's memory limit: 768.0 of 1024.0 MiB in use"),
              std::string::npos)
        << "level " << level << ": " << r.err;
    size_t lines = 0;
    for (size_t at = 0; (at = r.err.find("refused by", at)) != std::string::npos; ++at) ++lines;
    EXPECT_GE(lines, 1u);
    EXPECT_LE(lines, 3u) << "199 refusals within a few seconds: " << r.err;
  }
}

// vgpu_probe lists its commands on --help and help, and refuses an option its command does not
// read instead of measuring something else than asked.
TEST_F(VgpuTest, ProbeListsItsCommandsAndRefusesUnknownOptions) {
  for (std::vector<std::string> help :
       {std::vector<std::string>{"--help"}, std::vector<std::string>{"help"}}) {
    Result r = Run(help, Env({}, false));
    EXPECT_EQ(r.exit_code, 0) << r.err;
    for (const char* cmd : {"info", "alloc", "fill", "spin", "race", "workload"}) {
      EXPECT_NE(r.out.find(std::string("  ") + cmd + " "), std::string::npos) << cmd << r.out;
    }
  }
  Result bad = Run({"fill", "--chunks", "256Mi"}, Env({}, false));
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_NE(bad.err.find("fill does not take --chunks"), std::string::npos) << bad.err;
  Result unknown = Run({"fil"}, Env({}, false));
  EXPECT_EQ(unknown.exit_code, 2);
  EXPECT_NE(unknown.err.find("unknown command fil"), std::string::npos) << unknown.err;
}

TEST_F(VgpuTest, GetProcAddressWithPerThreadStreamsIsLimitedToo) {
  Result r = Run({"--resolve", "getproc", "--ptsz", "fill", "--kind", "async", "--chunk", "512Mi"},
                 Env({"CUDA_DEVICE_MEMORY_LIMIT=2Gi"}));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto kv = Line(r.out, "allocated");
  EXPECT_EQ(U(kv, "allocated"), 2 * kGiB);
  EXPECT_EQ(U(kv, "error"), 2u);
}

TEST_F(VgpuTest, FreeingGivesTheQuotaBack) {
  Result r = Run({"alloc", "--kind", "data", "--bytes", "1Gi", "--count", "3"},
                 Env({"CUDA_DEVICE_MEMORY_LIMIT=4Gi"}));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(U(Line(r.out, "ok"), "ok"), 3u);
  EXPECT_EQ(U(Line(r.out, "after_alloc"), "free"), 1 * kGiB);
  EXPECT_EQ(U(Line(r.out, "after_free"), "free"), 4 * kGiB);
}

TEST_F(VgpuTest, PerDeviceLimitsApplyToTheirOwnDevice) {
  auto env = Env({"CUDA_DEVICE_MEMORY_LIMIT_0=2Gi", "CUDA_DEVICE_MEMORY_LIMIT_1=1Gi"});
  Result r1 = Run({"fill", "--device", "1", "--chunk", "256Mi"}, env);
  ASSERT_EQ(r1.exit_code, 0) << r1.err;
  EXPECT_EQ(U(Line(r1.out, "allocated"), "allocated"), 1 * kGiB);
  Result r0 = Run({"fill", "--device", "0", "--chunk", "256Mi"}, env);
  EXPECT_EQ(U(Line(r0.out, "allocated"), "allocated"), 2 * kGiB);
}

// CUDA_VISIBLE_DEVICES renumbers CUDA devices; the limit follows the physical device whether
// it is selected by index or by UUID.
TEST_F(VgpuTest, VisibleDevicesByIndexAndUuidKeepLimitsOnTheRightDevice) {
  Result info = Run({"info"}, Env({}, false));
  std::string uuid1;
  {
    std::istringstream in(info.out);
    std::string line;
    while (std::getline(in, line)) {
      if (line.rfind("device=1 ", 0) == 0) uuid1 = Line(line, "device")["uuid"];
    }
  }
  ASSERT_FALSE(uuid1.empty()) << info.out;
  for (const std::string& sel : {std::string("1"), uuid1}) {
    Result r = Run({"fill", "--chunk", "256Mi"},
                   Env({"CUDA_DEVICE_MEMORY_LIMIT_0=3Gi", "CUDA_DEVICE_MEMORY_LIMIT_1=1Gi",
                        "CUDA_VISIBLE_DEVICES=" + sel},
                       true, "r-" + std::to_string(sel.size())));
    ASSERT_EQ(r.exit_code, 0) << sel << ": " << r.err;
    EXPECT_EQ(U(Line(r.out, "allocated"), "allocated"), 1 * kGiB)
        << "CUDA device 0 is container device 1 when CUDA_VISIBLE_DEVICES=" << sel;
  }
}

// Two processes race for 600 MiB each under a 1 GiB quota, 1000 times: exactly one wins.
TEST_F(VgpuTest, ConcurrentAllocationsNeverOvershootAcrossProcesses) {
  std::string sync = dir_ + "/sync";
  {
    FILE* f = fopen(sync.c_str(), "w");
    ASSERT_NE(f, nullptr);
    ASSERT_EQ(ftruncate(fileno(f), 4096), 0);
    fclose(f);
  }
  // Half of the 2000 allocations are refused (logged at most once a second); warnings only, so
  // the two processes never block on a full pipe while the test waits for the other one.
  auto env = Env({"CUDA_DEVICE_MEMORY_LIMIT=1Gi", "LIBCUDA_LOG_LEVEL=1"});
  Proc a(Probe({"race", "--bytes", "600Mi", "--rounds", "1000", "--sync", sync, "--id", "0"}), env);
  Proc b(Probe({"race", "--bytes", "600Mi", "--rounds", "1000", "--sync", sync, "--id", "1"}), env);
  Result rb = b.Wait();
  Result ra = a.Wait();
  ASSERT_EQ(ra.exit_code, 0) << ra.err;
  ASSERT_EQ(rb.exit_code, 0) << rb.err;
  auto kv = Line(ra.out, "rounds");
  EXPECT_EQ(U(kv, "rounds"), 1000u);
  EXPECT_EQ(U(kv, "bad_rounds"), 0u) << "rounds in which both or neither allocation succeeded";
}

// A process holding most of the quota is SIGKILLed; its memory is usable again at once.
TEST_F(VgpuTest, KilledProcessMemoryIsReclaimedPromptly) {
  auto env = Env({"CUDA_DEVICE_MEMORY_LIMIT=1Gi"});
  Proc holder(Probe({"crash-hold", "--bytes", "900Mi"}), env);
  ASSERT_NE(holder.ReadUntil("ready").find("ready"), std::string::npos);
  Result blocked = Run({"alloc", "--bytes", "500Mi"}, env);
  EXPECT_EQ(U(Line(blocked.out, "ok"), "fail"), 1u) << "the holder's 900 MiB still count";
  holder.Kill(SIGKILL);
  holder.Wait();
  struct timespec t0, t1;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  Result after = Run({"alloc", "--bytes", "1000Mi"}, env);
  clock_gettime(CLOCK_MONOTONIC, &t1);
  ASSERT_EQ(after.exit_code, 0) << after.err;
  EXPECT_EQ(U(Line(after.out, "ok"), "ok"), 1u) << after.err;
  double secs = (t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) / 1e9;
  EXPECT_LT(secs, 1.0) << "reclaiming must not wait for a timeout";
  EXPECT_NE(after.err.find("reclaimed"), std::string::npos) << after.err;
}

// A forked child gets its own slot: both processes' usage counts against the shared quota and
// the child's is given back when it exits.
TEST_F(VgpuTest, ForkedChildIsAccountedSeparately) {
  Result r = Run({"fork", "--bytes", "300Mi"}, Env({"CUDA_DEVICE_MEMORY_LIMIT=1Gi"}));
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_EQ(U(Line(r.out, "parent_after_alloc"), "free"), 1 * kGiB - 300 * kMiB);
  EXPECT_EQ(U(Line(r.out, "child_alloc"), "rc"), 0u);
  EXPECT_EQ(U(Line(r.out, "child_after_alloc"), "free"), 1 * kGiB - 600 * kMiB);
  EXPECT_EQ(U(Line(r.out, "parent_after_child"), "free"), 1 * kGiB - 300 * kMiB);
  EXPECT_EQ(U(Line(r.out, "parent_after_free"), "free"), 1 * kGiB);
}

// nvidia-smi's view (NVML) shows the quota and the whole container's usage, v1 and v2.
TEST_F(VgpuTest, NvmlMemoryInfoShowsTheQuota) {
  auto env = Env({"CUDA_DEVICE_MEMORY_LIMIT=4Gi"});
  Proc holder(Probe({"alloc", "--bytes", "1Gi", "--hold"}), env);
  ASSERT_NE(holder.ReadUntil("after_alloc").find("after_alloc"), std::string::npos);
  Result r = Run({"nvml-mem"}, env);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto kv = Line(r.out, "nvml_device");
  EXPECT_EQ(U(kv, "total"), 4 * kGiB);
  EXPECT_EQ(U(kv, "used"), 1 * kGiB);
  EXPECT_EQ(U(kv, "free"), 3 * kGiB);
  EXPECT_EQ(U(kv, "total2"), 4 * kGiB);
  EXPECT_EQ(U(kv, "free2"), 3 * kGiB);
  holder.CloseStdin();
  EXPECT_EQ(holder.Wait().exit_code, 0);
}

TEST_F(VgpuTest, DisableControlTurnsEnforcementOff) {
  Result r = Run({"info"}, Env({"CUDA_DEVICE_MEMORY_LIMIT=4Gi", "CUDA_DISABLE_CONTROL=true"}));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(U(Line(r.out, "device"), "total"), 80 * kGiB);
}

TEST_F(VgpuTest, GarbageLimitIsRejectedWithAClearMessageAndTheProcessRuns) {
  Result r = Run({"info"}, Env({"CUDA_DEVICE_MEMORY_LIMIT=12x", "LIBCUDA_LOG_LEVEL=banana"}));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("CUDA_DEVICE_MEMORY_LIMIT=12x"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("LIBCUDA_LOG_LEVEL=banana"), std::string::npos) << r.err;
  EXPECT_EQ(U(Line(r.out, "device"), "total"), 80 * kGiB) << "an invalid limit is not applied";
}

TEST_F(VgpuTest, MissingDriverIsAnErrorNotACrash) {
  auto env = Env({"CUDA_DEVICE_MEMORY_LIMIT=4Gi"});
  for (auto& e : env) {
    if (e.rfind("LD_LIBRARY_PATH=", 0) == 0) e = "LD_LIBRARY_PATH=/nonexistent";
  }
  Result r = Run({"info"}, env);
  EXPECT_EQ(r.exit_code, 2) << "the probe reports the missing driver itself: " << r.err;
  Result sh = Run({"-c", "exit 7"}, env, "/bin/sh");
  EXPECT_EQ(sh.exit_code, 7) << "an ordinary program is unaffected: " << sh.err;
}

// SM limit. These tests check that the limiter is wired into every launch path and policy, from
// facts the library leaves in the region (its gate counters), which do not depend on how busy the
// machine is. How close utilisation stays to the limit is a real-time measurement: the closed
// loop is unit-tested on a fake clock (src/vgpu/limiter_test.cc) and its accuracy on the
// simulated GPU, per launch path, SM count and driver timing, is measured by
// `vgpu_bench --only accuracy --check` (bench/RESULTS.md).

// A short saturating run: back-to-back launches of `blocks` x 1 ms, long enough for the first
// 100 ms measurement window to calibrate the gate and for the gate to hold launches back.
std::vector<std::string> Spin(const char* blocks = "108", const char* mode = "kernel",
                              const char* device = "0") {
  return {"spin",    "--device",    device, "--mode",        mode, "--blocks", blocks, "--block-ns",
          "1000000", "--warmup-ms", "200",  "--duration-ms", "400"};
}

// What the SM gate recorded for one device of a region, after the processes using it exited.
struct GateStats {
  bool ok = false;
  uint64_t launches = 0;      // launches that went through the gate
  uint64_t cost_q16 = 0;      // calibrated cost of a work unit; 0 = never calibrated
  uint64_t throttled_ns = 0;  // time launches were held back
};

GateStats Gate(const std::string& region_path, int device = 0) {
  GateStats g;
  char err[256] = {};
  hami::vgpu::Region* region = hami::vgpu::Region::Attach(region_path.c_str(), err, sizeof(err));
  if (region == nullptr) {
    ADD_FAILURE() << region_path << ": " << err;
    return g;
  }
  const hami::vgpu::RegionDevice& d = region->header()->devices[device];
  g = {true, d.launches.load(), d.ns_per_unit_q16.load(), d.throttled_ns.load()};
  hami::vgpu::Region::Free(region);
  return g;
}

// A limited, saturating process: every launch passed the gate, the gate calibrated itself on the
// workload and then held launches back (the probe asks for 100 % of a device limited to L %).
void ExpectLimited(const Result& r, const GateStats& g, const std::string& what) {
  ASSERT_EQ(r.exit_code, 0) << what << ": " << r.err;
  ASSERT_TRUE(g.ok) << what;
  EXPECT_EQ(g.launches, U(Line(r.out, "launches"), "launches")) << what << ": " << r.out;
  EXPECT_GT(g.cost_q16, 0u) << what << ": the gate never calibrated";
  EXPECT_GT(g.throttled_ns, 0u) << what << ": no launch was held back";
}

void ExpectNotLimited(const Result& r, const GateStats& g, const std::string& what) {
  ASSERT_EQ(r.exit_code, 0) << what << ": " << r.err;
  ASSERT_TRUE(g.ok) << what;
  EXPECT_GT(U(Line(r.out, "launches"), "launches"), 0u) << what << ": " << r.out;
  EXPECT_EQ(g.launches, 0u) << what << ": launches went through the gate";
  EXPECT_EQ(g.throttled_ns, 0u) << what;
}

TEST_F(VgpuTest, SmLimitHoldsASaturatingWorkloadBack) {
  for (int limit : {30, 70}) {
    const std::string region = "r-" + std::to_string(limit);
    Result r = Run(Spin(), Env({"CUDA_DEVICE_SM_LIMIT=" + std::to_string(limit),
                                "GPU_CORE_UTILIZATION_POLICY=force"},
                               true, region));
    ExpectLimited(r, Gate(dir_ + "/" + region), "limit " + std::to_string(limit));
  }
}

TEST_F(VgpuTest, GraphsAndCooperativeLaunchesGoThroughTheSmGate) {
  for (const char* mode : {"graph", "coop", "ex"}) {
    const std::string region = std::string("r-") + mode;
    Result r =
        Run(Spin("108", mode),
            Env({"CUDA_DEVICE_SM_LIMIT=40", "GPU_CORE_UTILIZATION_POLICY=force"}, true, region));
    ExpectLimited(r, Gate(dir_ + "/" + region), mode);
  }
}

// GPU_CORE_UTILIZATION_POLICY=default follows the region's utilization_switch (which the node
// monitor turns off when nothing competes for the GPU); disable never limits.
TEST_F(VgpuTest, DefaultPolicyFollowsTheRegionSwitchAndDisableNeverLimits) {
  Result on = Run(Spin(), Env({"CUDA_DEVICE_SM_LIMIT=30"}, true, "default-on"));
  ExpectLimited(on, Gate(dir_ + "/default-on"), "switch on by default");

  // A region whose switch the monitor has turned off.
  hami::vgpu::RegionInit init;
  for (int i = 0; i < hami::vgpu::kMaxDevices; ++i) init.sm_limit[i] = 30;
  char err[256] = {};
  std::string path = dir_ + "/default-off";
  hami::vgpu::Region* region = hami::vgpu::Region::Open(path.c_str(), init, err, sizeof(err));
  ASSERT_NE(region, nullptr) << err;
  region->header()->utilization_switch.store(0);
  Result off = Run(Spin(), Env({"CUDA_DEVICE_SM_LIMIT=30"}, true, "default-off"));
  ExpectNotLimited(off, Gate(path), "switch off");
  hami::vgpu::Region::Free(region);

  Result disabled = Run(
      Spin(),
      Env({"CUDA_DEVICE_SM_LIMIT=30", "GPU_CORE_UTILIZATION_POLICY=disable"}, true, "disabled"));
  ExpectNotLimited(disabled, Gate(dir_ + "/disabled"), "policy disable");
}

// The gate works per device, on a 16-SM GPU as on a 188-SM one: each device's own entry
// calibrates and holds its launches back.
TEST_F(VgpuTest, SmLimitWorksWhateverTheSmCount) {
  std::string config = dir_ + "/gpus.conf";
  ASSERT_TRUE(WriteConfig(config,
                          "[device]\nname = Small GPU\nmemory = 8Gi\nsm_count = 16\n"
                          "[device]\nname = Large GPU\nmemory = 96Gi\nsm_count = 188\n"));
  struct Case {
    const char* device;
    const char* blocks;
  } cases[] = {{"0", "16"}, {"1", "188"}};
  for (const Case& c : cases) {
    const std::string region = std::string("sm-") + c.device;
    Result r = Run(Spin(c.blocks, "kernel", c.device),
                   Env({"HAMI_SIM_CONFIG=" + config, "HAMI_SIM_STATE=" + dir_ + "/state-sm",
                        "CUDA_DEVICE_SM_LIMIT=30", "GPU_CORE_UTILIZATION_POLICY=force"},
                       true, region));
    ExpectLimited(r, Gate(dir_ + "/" + region, std::stoi(c.device)),
                  std::string(c.blocks) + " SMs");
  }
}

// A real driver's timing (what an H100 showed): NVML produces one per-process sample every
// ~200 ms and answers NOT_FOUND in between, and a stream queues ~1024 launches however long they
// run. The limiter must still calibrate and hold the process back (rather than read "no sample"
// as "idle"). Its accuracy under this timing is in `vgpu_bench --only accuracy`.
TEST_F(VgpuTest, SmLimitEngagesUnderARealDriversSamplingAndLaunchQueue) {
  std::string config = dir_ + "/real-timing.conf";
  ASSERT_TRUE(WriteConfig(
      config, "nvml_sample_ms = 200\nmax_queued_ms = 60000\n[device]\nname = H\nmemory = 80Gi\n"));
  Result r = Run({"spin", "--blocks", "108", "--block-ns", "1000000", "--warmup-ms", "600",
                  "--duration-ms", "400"},
                 Env({"HAMI_SIM_CONFIG=" + config, "HAMI_SIM_STATE=" + dir_ + "/state-real",
                      "CUDA_DEVICE_SM_LIMIT=30", "GPU_CORE_UTILIZATION_POLICY=force"},
                     true, "real-30"));
  ExpectLimited(r, Gate(dir_ + "/real-30"), "real driver timing");
}

TEST_F(VgpuTest, TaskPriorityReachesTheRegion) {
  Result r = Run({"info"}, Env({"CUDA_TASK_PRIORITY=0"}, true, "prio"));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  char err[256] = {};
  std::string path = dir_ + "/prio";
  hami::vgpu::Region* region = hami::vgpu::Region::Attach(path.c_str(), err, sizeof(err));
  ASSERT_NE(region, nullptr) << err;
  EXPECT_EQ(region->header()->priority, 0);
  EXPECT_EQ(region->header()->proc_count.load(), 0u) << "the exited process released its slot";
  hami::vgpu::Region::Free(region);
}

TEST_F(VgpuTest, NoSmLimitMeansNoGate) {
  Result r = Run(Spin(), Env({"GPU_CORE_UTILIZATION_POLICY=force"}, true, "nolimit"));
  ExpectNotLimited(r, Gate(dir_ + "/nolimit"), "no limit");
}

}  // namespace
