#include "ctl/run_spec.h"

#include <gtest/gtest.h>

#include <algorithm>

namespace hami::ctl {
namespace {

constexpr uint64_t kGiB = 1ULL << 30;

RunFlags WithCommand() {
  RunFlags f;
  f.command = {"/bin/true"};
  return f;
}

std::string Invalid(const RunFlags& f) {
  RunSpec spec;
  std::string error;
  EXPECT_FALSE(ValidateRunFlags(f, &spec, &error));
  return error;
}

TEST(ParseMemQuota, AcceptsGlobalAndIndexedSizes) {
  MemQuota q;
  std::string err;
  ASSERT_TRUE(ParseMemQuota("--mem", "4Gi", false, &q, &err)) << err;
  EXPECT_EQ(q.device, -1);
  EXPECT_EQ(q.bytes, 4 * kGiB);
  ASSERT_TRUE(ParseMemQuota("--mem", "1=4096m", false, &q, &err)) << err;
  EXPECT_EQ(q.device, 1);
  EXPECT_EQ(q.bytes, 4 * kGiB);
  ASSERT_TRUE(ParseMemQuota("--mem", "15=1024", false, &q, &err)) << err;
  EXPECT_EQ(q.device, 15);
  EXPECT_EQ(q.bytes, 1024u);
}

TEST(ParseMemQuota, RejectsGarbageWithTheFlagInTheMessage) {
  MemQuota q;
  std::string err;
  for (const char* bad : {"12x", "-1", "", "1e9", "=4Gi", "16=4Gi", "a=4Gi", "-1=4Gi",
                          "0=", "99999999999999999999"}) {
    EXPECT_FALSE(ParseMemQuota("--mem", bad, false, &q, &err)) << bad;
    EXPECT_NE(err.find("--mem"), std::string::npos) << err;
    EXPECT_EQ(err.find('\n'), std::string::npos) << "one line: " << err;
  }
  EXPECT_FALSE(ParseMemQuota("--mem", "0", false, &q, &err));
  EXPECT_NE(err.find("greater than zero"), std::string::npos) << err;
  EXPECT_TRUE(ParseMemQuota("--mem", "0=0", true, &q, &err)) << "region set may clear a limit";
}

TEST(ParseCoreQuota, AcceptsPercentagesOnly) {
  CoreQuota q;
  std::string err;
  ASSERT_TRUE(ParseCoreQuota("--cores", "30", false, &q, &err)) << err;
  EXPECT_EQ(q.device, -1);
  EXPECT_EQ(q.percent, 30);
  ASSERT_TRUE(ParseCoreQuota("--cores", "1=100", false, &q, &err)) << err;
  EXPECT_EQ(q.device, 1);
  EXPECT_EQ(q.percent, 100);
  ASSERT_TRUE(ParseCoreQuota("--cores", "30%", false, &q, &err)) << err;
  EXPECT_EQ(q.percent, 30);
  for (const char* bad : {"101", "-5", "30%%", "x", "", "1=", "0", "1.5"}) {
    EXPECT_FALSE(ParseCoreQuota("--cores", bad, false, &q, &err)) << bad;
    EXPECT_NE(err.find("--cores"), std::string::npos) << err;
  }
  EXPECT_TRUE(ParseCoreQuota("--cores", "0", true, &q, &err));
}

TEST(ValidateRunFlags, AcceptsAFullRequest) {
  RunFlags f = WithCommand();
  f.mem = {"4Gi", "1=2Gi"};
  f.cores = {"0=30"};
  f.policy = "FORCE";
  f.priority = "0";
  f.log_level = "4";
  f.sim = true;
  f.sim_state = "/tmp/x";
  RunSpec spec;
  std::string err;
  ASSERT_TRUE(ValidateRunFlags(f, &spec, &err)) << err;
  ASSERT_EQ(spec.mem.size(), 2u);
  EXPECT_EQ(spec.policy, "force");
  EXPECT_EQ(spec.priority, 0);
  EXPECT_EQ(spec.log_level, 4);
  EXPECT_EQ(spec.command, f.command);
}

TEST(ValidateRunFlags, RejectsEachMistakeClearly) {
  RunFlags f = WithCommand();
  f.mem = {"4Gi", "8Gi"};
  EXPECT_NE(Invalid(f).find("twice"), std::string::npos);
  f = WithCommand();
  f.mem = {"0=4Gi", "0=8Gi"};
  EXPECT_NE(Invalid(f).find("device 0"), std::string::npos);
  f = WithCommand();
  f.cores = {"30", "40"};
  EXPECT_NE(Invalid(f).find("--cores"), std::string::npos);
  f = WithCommand();
  f.policy = "strict";
  EXPECT_NE(Invalid(f).find("default, force or disable"), std::string::npos);
  f = WithCommand();
  f.priority = "-1";
  EXPECT_NE(Invalid(f).find("--priority"), std::string::npos);
  f = WithCommand();
  f.priority = "1001";
  EXPECT_NE(Invalid(f).find("--priority"), std::string::npos);
  f = WithCommand();
  f.log_level = "5";
  EXPECT_NE(Invalid(f).find("--log-level"), std::string::npos);
  f = WithCommand();
  f.sim_state = "/tmp/s";
  EXPECT_NE(Invalid(f).find("--sim"), std::string::npos);
  f = WithCommand();
  f.command.clear();
  EXPECT_NE(Invalid(f).find("no command"), std::string::npos);
}

class BuildRunEnvTest : public ::testing::Test {
 protected:
  RunPaths paths_{"/opt/hami/lib/libvgpu.so", "/opt/hami/sim"};
};

TEST_F(BuildRunEnvTest, WritesTheContractAndDropsInheritedLimits) {
  RunFlags f = WithCommand();
  f.mem = {"4Gi", "1=2Gi"};
  f.cores = {"30", "1=60"};
  f.policy = "force";
  f.priority = "0";
  f.log_level = "3";
  RunSpec spec;
  std::string err;
  ASSERT_TRUE(ValidateRunFlags(f, &spec, &err)) << err;
  std::vector<std::string> base = {"PATH=/usr/bin",
                                   "CUDA_DEVICE_MEMORY_LIMIT_3=1Gi",
                                   "CUDA_DEVICE_SM_LIMIT=10",
                                   "CUDA_DISABLE_CONTROL=true",
                                   "CUDA_DEVICE_MEMORY_SHARED_CACHE=/old",
                                   "LIBCUDA_LOG_LEVEL=0",
                                   "HAMI_SIM_STATE=/keep/me",
                                   "HOME=/root"};
  auto env = BuildRunEnv(spec, base, paths_, "/tmp/r/vgpu.cache");
  EXPECT_EQ(EnvValue(env, "PATH"), "/usr/bin");
  EXPECT_EQ(EnvValue(env, "HOME"), "/root");
  EXPECT_EQ(EnvValue(env, "LD_PRELOAD"), "/opt/hami/lib/libvgpu.so");
  EXPECT_EQ(EnvValue(env, "CUDA_DEVICE_MEMORY_LIMIT"), std::to_string(4 * kGiB));
  EXPECT_EQ(EnvValue(env, "CUDA_DEVICE_MEMORY_LIMIT_1"), std::to_string(2 * kGiB));
  EXPECT_EQ(EnvValue(env, "CUDA_DEVICE_MEMORY_LIMIT_3"), std::nullopt);
  EXPECT_EQ(EnvValue(env, "CUDA_DEVICE_SM_LIMIT"), "30");
  EXPECT_EQ(EnvValue(env, "CUDA_DEVICE_SM_LIMIT_1"), "60");
  EXPECT_EQ(EnvValue(env, "CUDA_DISABLE_CONTROL"), std::nullopt);
  EXPECT_EQ(EnvValue(env, "GPU_CORE_UTILIZATION_POLICY"), "force");
  EXPECT_EQ(EnvValue(env, "CUDA_TASK_PRIORITY"), "0");
  EXPECT_EQ(EnvValue(env, "LIBCUDA_LOG_LEVEL"), "3");
  EXPECT_EQ(EnvValue(env, "CUDA_DEVICE_MEMORY_SHARED_CACHE"), "/tmp/r/vgpu.cache");
  EXPECT_EQ(EnvValue(env, "HAMI_SIM_STATE"), "/keep/me") << "without --sim it is left alone";
  EXPECT_EQ(EnvValue(env, "LD_LIBRARY_PATH"), std::nullopt);
  // Each variable appears once.
  for (const auto& e : env) {
    std::string key = e.substr(0, e.find('='));
    EXPECT_EQ(std::count_if(env.begin(), env.end(),
                            [&](const std::string& x) { return x.rfind(key + "=", 0) == 0; }),
              1)
        << key;
  }
}

TEST_F(BuildRunEnvTest, KeepsTheCallersLogLevelAndOmitsUnsetSwitches) {
  RunSpec spec;
  spec.command = {"x"};
  auto env =
      BuildRunEnv(spec, {"LIBCUDA_LOG_LEVEL=4", "GPU_CORE_UTILIZATION_POLICY=force"}, paths_, "/r");
  EXPECT_EQ(EnvValue(env, "LIBCUDA_LOG_LEVEL"), "4");
  EXPECT_EQ(EnvValue(env, "GPU_CORE_UTILIZATION_POLICY"), std::nullopt);
  EXPECT_EQ(EnvValue(env, "CUDA_TASK_PRIORITY"), std::nullopt);
  EXPECT_EQ(EnvValue(env, "CUDA_DEVICE_MEMORY_LIMIT"), std::nullopt);
}

TEST_F(BuildRunEnvTest, PreloadKeepsEarlierEntriesFirstAndAddsTheLibraryOnce) {
  RunSpec spec;
  spec.command = {"x"};
  auto env = BuildRunEnv(spec, {"LD_PRELOAD=/usr/lib/libasan.so /opt/hami/lib/libvgpu.so:/x.so"},
                         paths_, "/r");
  EXPECT_EQ(EnvValue(env, "LD_PRELOAD"), "/usr/lib/libasan.so:/x.so:/opt/hami/lib/libvgpu.so");
}

TEST_F(BuildRunEnvTest, SimPrependsTheDriverAndPicksTheState) {
  RunSpec spec;
  spec.command = {"x"};
  spec.sim = true;
  auto env = BuildRunEnv(spec, {"LD_LIBRARY_PATH=/usr/local/lib"}, paths_, "/r");
  EXPECT_EQ(EnvValue(env, "LD_LIBRARY_PATH"), "/opt/hami/sim:/usr/local/lib");
  EXPECT_EQ(EnvValue(env, "HAMI_SIM_STATE"), kDefaultSimState);

  env = BuildRunEnv(spec, {"HAMI_SIM_STATE=/mine"}, paths_, "/r");
  EXPECT_EQ(EnvValue(env, "HAMI_SIM_STATE"), "/mine");
  EXPECT_EQ(EnvValue(env, "LD_LIBRARY_PATH"), "/opt/hami/sim");

  spec.sim_state = "/flag";
  env = BuildRunEnv(spec, {"HAMI_SIM_STATE=/mine"}, paths_, "/r");
  EXPECT_EQ(EnvValue(env, "HAMI_SIM_STATE"), "/flag");
}

TEST(EnvValue, MatchesWholeKeysOnly) {
  std::vector<std::string> env = {"AB=1", "A=2", "EMPTY="};
  EXPECT_EQ(EnvValue(env, "A"), "2");
  EXPECT_EQ(EnvValue(env, "EMPTY"), "");
  EXPECT_EQ(EnvValue(env, "B"), std::nullopt);
}

}  // namespace
}  // namespace hami::ctl
