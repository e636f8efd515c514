#include "vgpu/config.h"

#include <gtest/gtest.h>

#include <map>
#include <string>

namespace hami::vgpu {
namespace {

std::map<std::string, std::string>* g_env;
const char* FakeEnv(const char* name) {
  auto it = g_env->find(name);
  return it == g_env->end() ? nullptr : it->second.c_str();
}

Config Load(std::map<std::string, std::string> env) {
  g_env = &env;
  Config cfg;
  LoadConfig(FakeEnv, &cfg);
  return cfg;
}

TEST(LoadConfig, DefaultsAreUnlimited) {
  Config c = Load({});
  EXPECT_FALSE(c.control_disabled);
  EXPECT_EQ(c.policy, CorePolicy::kDefault);
  EXPECT_STREQ(c.region_path, kDefaultRegionPath);
  for (int i = 0; i < kMaxDevices; ++i) {
    EXPECT_EQ(c.init.mem_limit[i], 0u);
    EXPECT_EQ(c.init.sm_limit[i], 0u);
    EXPECT_FALSE(c.mem_limit_set[i]);
  }
  EXPECT_EQ(c.init.priority, 1);
}

TEST(LoadConfig, PerDeviceValuesOverrideTheGlobalOne) {
  Config c = Load({{"CUDA_DEVICE_MEMORY_LIMIT", "4Gi"},
                   {"CUDA_DEVICE_MEMORY_LIMIT_1", "1024m"},
                   {"CUDA_DEVICE_SM_LIMIT", "30"},
                   {"CUDA_DEVICE_SM_LIMIT_2", "70"},
                   {"CUDA_DEVICE_MEMORY_SHARED_CACHE", "/x/y.cache"},
                   {"GPU_CORE_UTILIZATION_POLICY", "FORCE"},
                   {"CUDA_TASK_PRIORITY", "0"}});
  EXPECT_EQ(c.init.mem_limit[0], 4ULL << 30);
  EXPECT_EQ(c.init.mem_limit[1], 1ULL << 30);
  EXPECT_EQ(c.init.mem_limit[15], 4ULL << 30);
  EXPECT_EQ(c.init.sm_limit[0], 30u);
  EXPECT_EQ(c.init.sm_limit[2], 70u);
  EXPECT_EQ(c.policy, CorePolicy::kForce);
  EXPECT_EQ(c.init.priority, 0);
  EXPECT_STREQ(c.region_path, "/x/y.cache");
}

TEST(LoadConfig, UpstreamDevicePluginFormat) {
  // What HAMi's device plugin writes: MiB with an "m" suffix per device.
  Config c = Load({{"CUDA_DEVICE_MEMORY_LIMIT_0", "8192m"}, {"CUDA_DEVICE_SM_LIMIT", "50"}});
  EXPECT_EQ(c.init.mem_limit[0], 8ULL << 30);
  EXPECT_TRUE(c.mem_limit_set[0]);
  EXPECT_FALSE(c.mem_limit_set[1]);
}

TEST(LoadConfig, InvalidValuesAreIgnoredNotMisread) {
  Config c = Load({{"CUDA_DEVICE_MEMORY_LIMIT", "1Gx"},
                   {"CUDA_DEVICE_MEMORY_LIMIT_3", "-5"},
                   {"CUDA_DEVICE_SM_LIMIT", "150"},
                   {"CUDA_DISABLE_CONTROL", "perhaps"},
                   {"GPU_CORE_UTILIZATION_POLICY", "sometimes"},
                   {"CUDA_TASK_PRIORITY", "high"}});
  EXPECT_EQ(c.init.mem_limit[0], 0u);
  EXPECT_FALSE(c.mem_limit_set[3]);
  EXPECT_EQ(c.init.sm_limit[0], 0u);
  EXPECT_FALSE(c.control_disabled);
  EXPECT_EQ(c.policy, CorePolicy::kDefault);
  EXPECT_EQ(c.init.priority, 1);
}

TEST(LoadConfig, DisableControlAndDisablePolicy) {
  Config c = Load({{"CUDA_DISABLE_CONTROL", "true"}, {"GPU_CORE_UTILIZATION_POLICY", "disable"}});
  EXPECT_TRUE(c.control_disabled);
  EXPECT_EQ(c.policy, CorePolicy::kDisable);
}

TEST(LoadConfig, OverlongRegionPathFallsBackToTheDefault) {
  Config c = Load({{"CUDA_DEVICE_MEMORY_SHARED_CACHE", std::string(600, 'a')}});
  EXPECT_STREQ(c.region_path, kDefaultRegionPath);
}

}  // namespace
}  // namespace hami::vgpu
