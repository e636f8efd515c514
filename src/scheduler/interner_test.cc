#include "scheduler/interner.h"

#include <gtest/gtest.h>

#include <string>

namespace hami::scheduler {
namespace {

TEST(StringInterner, DenseStableIds) {
  StringInterner in;
  EXPECT_EQ(in.Find("a"), StringInterner::kNotFound);
  uint32_t a = in.Intern("a");
  uint32_t b = in.Intern("GPU-b");
  EXPECT_EQ(a, 0u);
  EXPECT_EQ(b, 1u);
  EXPECT_EQ(in.Intern("a"), a);
  EXPECT_EQ(in.Find("GPU-b"), b);
  EXPECT_EQ(in.Intern(""), 2u);
  EXPECT_EQ(in.Get(2), "");
}

TEST(StringInterner, ViewsSurviveGrowthAndMove) {
  StringInterner in;
  std::string_view first = in.Get(in.Intern("node-0"));
  for (int i = 1; i < 20000; ++i) in.Intern("node-" + std::to_string(i));
  in.Intern(std::string(100000, 'x'));  // oversized: own allocation
  StringInterner moved = std::move(in);
  EXPECT_EQ(first, "node-0");
  EXPECT_EQ(moved.Get(19999), "node-19999");
  EXPECT_EQ(moved.Find("node-123"), 123u);
  for (int i = 0; i < 20000; ++i) {
    ASSERT_EQ(moved.Find("node-" + std::to_string(i)), static_cast<uint32_t>(i));
    ASSERT_EQ(moved.Find("node-" + std::to_string(i) + "x"), StringInterner::kNotFound);
  }
  EXPECT_EQ(moved.Intern("node-77"), 77u);
  EXPECT_EQ(moved.size(), 20001u);
  EXPECT_GT(moved.MemoryBytes(), 100000u);
}

}  // namespace
}  // namespace hami::scheduler

namespace hami::scheduler {
namespace {

// Found by fuzz_extender_args: the empty string as the very first entry (a Node without a name).
TEST(StringInterner, EmptyStringFirst) {
  StringInterner in;
  uint32_t id = in.Intern("");
  EXPECT_EQ(in.Get(id), "");
  EXPECT_EQ(in.Find(""), id);
  EXPECT_EQ(in.Get(in.Intern("next")), "next");
}

}  // namespace
}  // namespace hami::scheduler
