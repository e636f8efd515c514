#include "device/nvidia/nvidia_vendor.h"

#include <gtest/gtest.h>

namespace hami::device {
namespace {

ContainerResources Limits(std::map<std::string, std::string, std::less<>> limits) {
  ContainerResources c;
  c.name = "main";
  c.limits = std::move(limits);
  return c;
}

ContainerRequest Parse(const NvidiaVendor& v, const ContainerResources& c) {
  Result<std::optional<ContainerRequest>> r = v.ParseRequest(c);
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_TRUE(r.ok() && r->has_value());
  return r.ok() && r->has_value() ? **r : ContainerRequest{};
}

std::string ParseError(const NvidiaVendor& v, const ContainerResources& c) {
  Result<std::optional<ContainerRequest>> r = v.ParseRequest(c);
  EXPECT_FALSE(r.ok());
  return r.ok() ? "" : r.status().message();
}

TEST(NvidiaRequest, WholeCardByDefault) {
  NvidiaVendor v{NvidiaConfig{}};
  ContainerRequest r = Parse(v, Limits({{"nvidia.com/gpu", "1"}}));
  EXPECT_EQ(r.vendor, "NVIDIA");
  EXPECT_EQ(r.count, 1);
  EXPECT_EQ(r.mem_mib, 0);
  EXPECT_EQ(r.mem_percent, 100);
  EXPECT_EQ(r.cores, 0);
  EXPECT_EQ(r.priority, -1);
  EXPECT_FALSE(r.Exclusive());
  EXPECT_EQ(r.MemOn(16384), 16384);
}

TEST(NvidiaRequest, SeedScenarioSharedSlice) {
  // Seed 000: two pods sharing one GPU, each asking 1 GPU, 3000 MiB, 30% cores.
  NvidiaVendor v{NvidiaConfig{}};
  ContainerRequest r = Parse(v, Limits({{"nvidia.com/gpu", "1"},
                                        {"nvidia.com/gpumem", "3000"},
                                        {"nvidia.com/gpucores", "30"}}));
  EXPECT_EQ(r.count, 1);
  EXPECT_EQ(r.mem_mib, 3000);
  EXPECT_EQ(r.mem_percent, kMemPercentUnset);
  EXPECT_EQ(r.cores, 30);
  EXPECT_EQ(r.MemOn(15360), 3000);
}

TEST(NvidiaRequest, PercentageAndExclusive) {
  NvidiaVendor v{NvidiaConfig{}};
  ContainerRequest r = Parse(v, Limits({{"nvidia.com/gpu", "1"},
                                        {"nvidia.com/gpumem-percentage", "100"},
                                        {"nvidia.com/gpucores", "100"}}));
  EXPECT_EQ(r.mem_percent, 100);
  EXPECT_EQ(r.cores, 100);
  EXPECT_TRUE(r.Exclusive());
  ContainerRequest half =
      Parse(v, Limits({{"nvidia.com/gpu", "2"}, {"nvidia.com/gpumem-percentage", "30"}}));
  EXPECT_EQ(half.count, 2);
  EXPECT_EQ(half.mem_percent, 30);
  EXPECT_EQ(half.MemOn(15360), 4608);  // 30% of a T4
  // 0% means "not given": falls back to the whole card.
  EXPECT_EQ(Parse(v, Limits({{"nvidia.com/gpu", "1"}, {"nvidia.com/gpumem-percentage", "0"}}))
                .mem_percent,
            100);
  // Both given: gpumem wins (upstream Fit order).
  ContainerRequest both = Parse(v, Limits({{"nvidia.com/gpu", "1"},
                                           {"nvidia.com/gpumem", "1000"},
                                           {"nvidia.com/gpumem-percentage", "50"}}));
  EXPECT_EQ(both.MemOn(16000), 1000);
}

TEST(NvidiaRequest, ConfigDefaultsAndFactor) {
  NvidiaConfig cfg;
  cfg.default_memory_mib = 1000;
  cfg.default_cores = 20;
  cfg.memory_factor = 2;
  NvidiaVendor v{cfg};
  ContainerRequest r = Parse(v, Limits({{"nvidia.com/gpu", "1"}}));
  EXPECT_EQ(r.mem_mib, 1000);  // defaultMemory is not scaled
  EXPECT_EQ(r.mem_percent, kMemPercentUnset);
  EXPECT_EQ(r.cores, 20);
  EXPECT_EQ(Parse(v, Limits({{"nvidia.com/gpu", "1"}, {"nvidia.com/gpumem", "3000"}})).mem_mib,
            6000);
  EXPECT_EQ(v.resource_names().memory_factor, 2);
}

TEST(NvidiaRequest, DefaultGpuNumWhenOnlySliceGiven) {
  NvidiaVendor v{NvidiaConfig{}};
  ContainerRequest r = Parse(v, Limits({{"nvidia.com/gpumem", "2000"}}));
  EXPECT_EQ(r.count, 1);
  EXPECT_EQ(r.mem_mib, 2000);
  NvidiaConfig cfg;
  cfg.default_gpu_num = 0;
  NvidiaVendor off{cfg};
  Result<std::optional<ContainerRequest>> none =
      off.ParseRequest(Limits({{"nvidia.com/gpucores", "10"}}));
  ASSERT_TRUE(none.ok());
  EXPECT_FALSE(none->has_value());
}

TEST(NvidiaRequest, NoRequest) {
  NvidiaVendor v{NvidiaConfig{}};
  for (const ContainerResources& c :
       {Limits({}), Limits({{"cpu", "2"}, {"memory", "4Gi"}}), Limits({{"nvidia.com/gpu", "0"}}),
        Limits({{"nvidia.com/priority", "1"}})}) {
    Result<std::optional<ContainerRequest>> r = v.ParseRequest(c);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_FALSE(r->has_value());
  }
}

TEST(NvidiaRequest, LimitsThenRequestsAndQuantitySyntax) {
  NvidiaVendor v{NvidiaConfig{}};
  ContainerResources c;
  // Quantity syntax: an exponent is a plain number (a unit on gpumem is refused: see
  // RejectsInvalidValuesWithReason).
  c.requests = {{"nvidia.com/gpu", "2"}, {"nvidia.com/gpumem", "1e3"}};
  ContainerRequest r = Parse(v, c);
  EXPECT_EQ(r.count, 2);
  EXPECT_EQ(r.mem_mib, 1000);
  c.limits = {{"nvidia.com/gpu", "1000m"}};
  EXPECT_EQ(Parse(v, c).count, 1);
  EXPECT_EQ(Parse(v, Limits({{"nvidia.com/gpu", "1"}, {"nvidia.com/priority", "1"}})).priority, 1);
}

TEST(NvidiaRequest, RejectsInvalidValuesWithReason) {
  NvidiaVendor v{NvidiaConfig{}};
  struct {
    std::map<std::string, std::string, std::less<>> limits;
    const char* reason;
  } cases[] = {
      {{{"nvidia.com/gpu", "-1"}}, "nvidia.com/gpu=\"-1\": must not be negative"},
      {{{"nvidia.com/gpu", "1.5"}}, "nvidia.com/gpu=\"1.5\": not a whole number"},
      {{{"nvidia.com/gpu", "500m"}}, "not a whole number"},
      {{{"nvidia.com/gpu", "one"}}, "nvidia.com/gpu=\"one\": not a quantity"},
      {{{"nvidia.com/gpu", "3000000000"}}, "must be between 0 and 2147483647"},
      {{{"nvidia.com/gpu", "1"}, {"nvidia.com/gpumem", "-100"}},
       "nvidia.com/gpumem=\"-100\": must not be negative"},
      {{{"nvidia.com/gpu", "1"}, {"nvidia.com/gpumem", "4Gi"}},
       "nvidia.com/gpumem=\"4Gi\": counts MiB, without a unit: 4Gi is 4096"},
      {{{"nvidia.com/gpu", "1"}, {"nvidia.com/gpumem", "1M"}},
       "nvidia.com/gpumem=\"1M\": counts MiB, without a unit: 1M is less than 1"},
      {{{"nvidia.com/gpu", "1"}, {"nvidia.com/gpumem-percentage", "101"}},
       "nvidia.com/gpumem-percentage=\"101\": must be between 0 and 100"},
      {{{"nvidia.com/gpu", "1"}, {"nvidia.com/gpucores", "150"}},
       "nvidia.com/gpucores=\"150\": must be between 0 and 100"},
      {{{"nvidia.com/gpu", "1"}, {"nvidia.com/gpucores", "12.5"}}, "not a whole number"},
      {{{"nvidia.com/gpu", "1"}, {"nvidia.com/priority", "-1"}},
       "nvidia.com/priority=\"-1\": must not be negative"},
      // Invalid values are reported even without a count.
      {{{"nvidia.com/gpucores", "abc"}}, "nvidia.com/gpucores=\"abc\""},
  };
  for (const auto& c : cases) {
    std::string msg = ParseError(v, Limits(c.limits));
    EXPECT_NE(msg.find(c.reason), std::string::npos) << msg;
    EXPECT_NE(msg.find("container \"main\""), std::string::npos) << msg;
  }
  NvidiaConfig cfg;
  cfg.memory_factor = 2;
  NvidiaVendor doubled{cfg};
  std::string msg =
      ParseError(doubled, Limits({{"nvidia.com/gpu", "1"}, {"nvidia.com/gpumem", "2000000000"}}));
  EXPECT_NE(msg.find("x memoryFactor 2 exceeds"), std::string::npos) << msg;
}

TEST(NvidiaRequest, ResourceNamesAreConfigurable) {
  NvidiaConfig cfg;
  cfg.resource_count_name = "example.com/vgpu";
  cfg.resource_memory_name = "example.com/vmem";
  cfg.resource_core_name = "example.com/vcores";
  NvidiaVendor v{cfg};
  ContainerRequest r = Parse(v, Limits({{"example.com/vgpu", "1"},
                                        {"example.com/vmem", "512"},
                                        {"example.com/vcores", "5"},
                                        {"nvidia.com/gpu", "4"}}));
  EXPECT_EQ(r.count, 1);
  EXPECT_EQ(r.mem_mib, 512);
  EXPECT_EQ(r.cores, 5);
  EXPECT_EQ(v.resource_names().count, "example.com/vgpu");
  EXPECT_EQ(v.annotation_keys().allocated, "hami.io/vgpu-devices-allocated");
}

}  // namespace
}  // namespace hami::device
