#include "ctl/format.h"

#include <gtest/gtest.h>

namespace hami::ctl {
namespace {

TEST(FormatBytes, PicksTheLargestWholeUnit) {
  EXPECT_EQ(FormatBytes(0), "0 B");
  EXPECT_EQ(FormatBytes(1023), "1023 B");
  EXPECT_EQ(FormatBytes(1024), "1 KiB");
  EXPECT_EQ(FormatBytes(256ULL << 20), "256 MiB");
  EXPECT_EQ(FormatBytes(4ULL << 30), "4 GiB");
  EXPECT_EQ(FormatBytes(3ULL << 29), "1.50 GiB");
  EXPECT_EQ(FormatBytes(~0ULL), "16.00 EiB");
}

TEST(FormatEpochSeconds, RendersUtcOrNever) {
  EXPECT_EQ(FormatEpochSeconds(0), "never");
  EXPECT_EQ(FormatEpochSeconds(86400), "1970-01-02 00:00:00 UTC");
}

TEST(FormatDurationNs, ScalesToTheMagnitude) {
  EXPECT_EQ(FormatDurationNs(0), "0 s");
  EXPECT_EQ(FormatDurationNs(1500), "1.5 us");
  EXPECT_EQ(FormatDurationNs(12'500'000), "12.5 ms");
  EXPECT_EQ(FormatDurationNs(1'234'000'000), "1.234 s");
}

TEST(RenderTable, AlignsColumnsWithoutTrailingSpace) {
  EXPECT_EQ(RenderTable({{"A", "BB", "C"}, {"xxx", "y"}, {"1", "2", "3"}}),
            "A    BB  C\n"
            "xxx  y\n"
            "1    2   3\n");
}

}  // namespace
}  // namespace hami::ctl
