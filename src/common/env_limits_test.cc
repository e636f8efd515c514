#include "common/env_limits.h"

#include <gtest/gtest.h>

namespace hami {
namespace {

uint64_t Bytes(const char* s) {
  uint64_t v = 12345;
  const char* err = ParseByteSize(s, &v);
  EXPECT_EQ(err, nullptr) << s << ": " << (err ? err : "");
  return v;
}

std::string Error(const char* s) {
  uint64_t v = 777;
  const char* err = ParseByteSize(s, &v);
  EXPECT_EQ(v, 777u) << "value must be untouched on error for '" << s << "'";
  return err ? err : "";
}

TEST(ParseByteSize, AcceptsEverySpellingOfTheSameSize) {
  const uint64_t four_gib = 4ULL << 30;
  EXPECT_EQ(Bytes("4096m"), four_gib);
  EXPECT_EQ(Bytes("4096M"), four_gib);
  EXPECT_EQ(Bytes("4096Mi"), four_gib);
  EXPECT_EQ(Bytes("4Gi"), four_gib);
  EXPECT_EQ(Bytes("4G"), four_gib);
  EXPECT_EQ(Bytes("4g"), four_gib);
  EXPECT_EQ(Bytes("4GiB"), four_gib);
  EXPECT_EQ(Bytes("4GB"), four_gib);
  EXPECT_EQ(Bytes("4294967296"), four_gib);
  EXPECT_EQ(Bytes(" 4Gi \n"), four_gib);
  EXPECT_EQ(Bytes("4194304k"), four_gib);
  EXPECT_EQ(Bytes("0.00390625Ti"), four_gib);
}

TEST(ParseByteSize, FractionsAndEdges) {
  EXPECT_EQ(Bytes("1.5g"), (3ULL << 30) / 2);
  EXPECT_EQ(Bytes("0"), 0u);
  EXPECT_EQ(Bytes("010g"), 10ULL << 30) << "leading zeros are decimal, not octal";
  EXPECT_EQ(Bytes("18446744073709551615"), UINT64_MAX);
  EXPECT_EQ(Bytes("16777215Ti"), 16777215ULL << 40);
}

TEST(ParseByteSize, RejectsGarbageWithAReason) {
  EXPECT_NE(Error(""), "");
  EXPECT_NE(Error("   "), "");
  EXPECT_NE(Error("-1"), "");
  EXPECT_NE(Error("12x"), "");
  EXPECT_NE(Error("1e9"), "");
  EXPECT_NE(Error("0x10"), "");
  EXPECT_NE(Error("g"), "");
  EXPECT_NE(Error("."), "");
  EXPECT_NE(Error("18446744073709551616"), "");
  EXPECT_NE(Error("16777216Ti"), "");
  EXPECT_NE(Error("4 Gi"), "") << "a space inside the value is not a unit";
  uint64_t v = 0;
  EXPECT_NE(ParseByteSize(nullptr, &v), nullptr);
}

TEST(ParsePercent, RangeAndFormat) {
  int p = -1;
  EXPECT_EQ(ParsePercent("30", &p), nullptr);
  EXPECT_EQ(p, 30);
  EXPECT_EQ(ParsePercent("100%", &p), nullptr);
  EXPECT_EQ(p, 100);
  EXPECT_EQ(ParsePercent("0", &p), nullptr);
  EXPECT_EQ(p, 0);
  p = 7;
  EXPECT_NE(ParsePercent("101", &p), nullptr);
  EXPECT_NE(ParsePercent("-5", &p), nullptr);
  EXPECT_NE(ParsePercent("5.5", &p), nullptr);
  EXPECT_NE(ParsePercent("", &p), nullptr);
  EXPECT_NE(ParsePercent("99999999999", &p), nullptr);
  EXPECT_EQ(p, 7);
}

TEST(ParseBool, Spellings) {
  bool b = false;
  EXPECT_EQ(ParseBool("TRUE", &b), nullptr);
  EXPECT_TRUE(b);
  EXPECT_EQ(ParseBool("0", &b), nullptr);
  EXPECT_FALSE(b);
  EXPECT_EQ(ParseBool(" yes ", &b), nullptr);
  EXPECT_TRUE(b);
  EXPECT_NE(ParseBool("maybe", &b), nullptr);
}

}  // namespace
}  // namespace hami
