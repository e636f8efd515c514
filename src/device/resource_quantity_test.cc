#include "device/resource_quantity.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <limits>

namespace hami::device {
namespace {

TEST(ResourceQuantity, WholeNumbers) {
  struct {
    const char* text;
    int64_t want;
  } cases[] = {
      {"0", 0},
      {"1", 1},
      {"+2", 2},
      {"-3", -3},
      {"007", 7},
      {"1000m", 1},
      {"2000m", 2},
      {"1.0", 1},
      {"2k", 2000},
      {"0.5k", 500},
      {"3M", 3000000},
      {"1G", 1000000000},
      {"1Ki", 1024},
      {"4Mi", 4194304},
      {"4Gi", 4294967296},
      {"1Ti", 1099511627776},
      {"1Ei", int64_t{1} << 60},
      {"1e3", 1000},
      {"20E-1", 2},
      {"5000000000n", 5},
      {"3000000u", 3},
      {".5k", 500},
      {"0.000m", 0},
      {"9223372036854775807", std::numeric_limits<int64_t>::max()},
      {"-9223372036854775808", std::numeric_limits<int64_t>::min()},
      {"1.50000000000000000000000000k", 1500},
  };
  for (const auto& c : cases) {
    Result<int64_t> r = ParseIntegerQuantity(c.text);
    ASSERT_TRUE(r.ok()) << c.text << ": " << r.status().ToString();
    EXPECT_EQ(*r, c.want) << c.text;
  }
}

TEST(ResourceQuantity, RejectsWithReason) {
  const char* cases[][2] = {
      {"", "not a quantity"},
      {"abc", "not a quantity"},
      {"m", "not a quantity"},
      {"1.5", "not a whole number"},
      {"1500m", "not a whole number"},
      {"15E-1", "not a whole number"},
      {"1x", "unknown suffix"},
      {"1 ", "unknown suffix"},
      {" 1", "not a quantity"},
      {"1KiB", "unknown suffix"},
      {"1.2.3", "not a quantity"},
      {"9223372036854775808", "too large"},
      {"8Ei", "too large"},
      {"1e40", "too large"},
      {"123456789012345678901", "too many digits"},
      {"1e-50", "not a whole number"},
      {"1e", "unknown suffix"},
  };
  for (const auto& c : cases) {
    Result<int64_t> r = ParseIntegerQuantity(c[0]);
    ASSERT_FALSE(r.ok()) << c[0];
    EXPECT_NE(r.status().message().find(c[1]), std::string::npos)
        << c[0] << " -> " << r.status().message();
  }
  EXPECT_EQ(*ParseIntegerQuantity("0e99"), 0);
}

TEST(ResourceQuantity, MultiplierSuffixes) {
  for (const char* q : {"4Ki", "1.5Gi", "2Ei", "1k", "2G", "+3M", "7E"}) {
    EXPECT_FALSE(QuantityMultiplier(q).empty()) << q;
  }
  EXPECT_EQ(QuantityMultiplier("4Gi"), "Gi");
  EXPECT_EQ(QuantityMultiplier("2G"), "G");
  for (const char* q :
       {"", "4096", "1e3", "4E3", "500m", "5n", "7u", "4Xi", "4gi", "Gi", "abc", "4 Gi"}) {
    EXPECT_EQ(QuantityMultiplier(q), "") << q;
  }
}

}  // namespace
}  // namespace hami::device
