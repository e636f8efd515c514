#include "device/wire_time.h"

#include <gtest/gtest.h>

namespace hami::device {
namespace {

TEST(WireTime, CivilUnixConversions) {
  CivilTime t{2024, 5, 1, 8, 30, 0};
  EXPECT_EQ(CivilToUnix(t, 0), 1714552200);
  EXPECT_EQ(CivilToUnix(t, 8 * 3600), 1714552200 - 8 * 3600);
  EXPECT_EQ(UnixToCivil(1714552200, 0), t);
  EXPECT_EQ(UnixToCivil(-1, 0), (CivilTime{1969, 12, 31, 23, 59, 59}));
  EXPECT_EQ(CivilToUnix(CivilTime{2024, 2, 29, 0, 0, 0}, 0), 1709164800);
}

TEST(WireTime, DateTimeFormat) {
  EXPECT_EQ(FormatDateTime(CivilTime{2024, 5, 1, 8, 3, 9}), "2024-05-01 08:03:09");
  Result<CivilTime> t = ParseDateTime("2024-05-01 08:03:09");
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(*t, (CivilTime{2024, 5, 1, 8, 3, 9}));
  for (const char* bad : {"", "2024-05-01", "2024-05-01T08:03:09", "2024-02-30 00:00:00",
                          "2023-02-29 00:00:00", "2024-05-01 24:00:00", "2024-5-01 08:03:09",
                          "2024-05-01 08:03:09 ", "2024-13-01 00:00:00", "2024-05-01 08:60:00"}) {
    EXPECT_FALSE(ParseDateTime(bad).ok()) << bad;
  }
}

TEST(WireTime, Rfc3339) {
  Timestamp utc{1714552200, 0, 0};
  EXPECT_EQ(FormatRfc3339(utc), "2024-05-01T08:30:00Z");
  EXPECT_EQ(*ParseRfc3339("2024-05-01T08:30:00Z"), utc);
  Result<Timestamp> east = ParseRfc3339("2024-05-01T16:30:00+08:00");
  ASSERT_TRUE(east.ok());
  EXPECT_EQ(east->unix_seconds, 1714552200);
  EXPECT_EQ(east->utc_offset_seconds, 8 * 3600);
  EXPECT_EQ(FormatRfc3339(*east), "2024-05-01T16:30:00+08:00");
  Result<Timestamp> west = ParseRfc3339("2024-05-01T03:00:00-05:30");
  ASSERT_TRUE(west.ok());
  EXPECT_EQ(west->unix_seconds, 1714552200);
  EXPECT_EQ(FormatRfc3339(*west), "2024-05-01T03:00:00-05:30");
  // Go accepts a fraction when parsing with the RFC3339 layout; formatting drops it.
  Result<Timestamp> frac = ParseRfc3339("2024-05-01T08:30:00.25Z");
  ASSERT_TRUE(frac.ok());
  EXPECT_EQ(frac->nanos, 250000000);
  EXPECT_EQ(FormatRfc3339(*frac), "2024-05-01T08:30:00Z");
  for (const char* bad :
       {"", "2024-05-01T08:30:00", "2024-05-01 08:30:00Z", "2024-05-01T08:30:00+8:00",
        "2024-05-01T08:30:00.Z", "2024-05-01T08:30:00Zjunk", "2024-05-01T08:30:00+24:00",
        "2024-04-31T08:30:00Z"}) {
    EXPECT_FALSE(ParseRfc3339(bad).ok()) << bad;
  }
}

}  // namespace
}  // namespace hami::device
