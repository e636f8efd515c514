#include "scheduler/policy.h"

#include <gtest/gtest.h>

namespace hami::scheduler {
namespace {

GpuPolicy Parse(std::string_view text) {
  GpuPolicy p;
  EXPECT_TRUE(ParseGpuPolicy(text, &p)) << text;
  return p;
}

TEST(GpuPolicy, SingleKeys) {
  EXPECT_EQ(Parse("binpack").ToString(), "binpack");
  EXPECT_EQ(Parse("spread").ToString(), "spread");
  EXPECT_EQ(Parse(" BinPack ").ToString(), "binpack");
  EXPECT_EQ(Parse("best-fit").ToString(), "best-fit");
  EXPECT_EQ(Parse("idle-first").ToString(), "idle-first");
  EXPECT_EQ(Parse("numa").ToString(), "numa");
}

TEST(GpuPolicy, ModifiersAloneGetDefaultOrder) {
  EXPECT_EQ(Parse("mutex").ToString(), "idle-first,spread,mutex");
  EXPECT_EQ(Parse("topology-aware").ToString(), "spread,topology-aware");
  EXPECT_EQ(Parse("topology").ToString(), "spread,topology-aware");
  EXPECT_EQ(Parse("numa-first").ToString(), "spread,numa-first");
}

TEST(GpuPolicy, ChainsKeepWrittenOrderAndDropDuplicates) {
  EXPECT_EQ(Parse("numa,binpack").ToString(), "numa,binpack");
  EXPECT_EQ(Parse("binpack,numa,binpack").ToString(), "binpack,numa");
  // binpack and spread are the same score in opposite directions: the first one wins.
  EXPECT_EQ(Parse("spread,binpack").ToString(), "spread");
  EXPECT_EQ(Parse("binpack,mutex,topology-aware").ToString(), "binpack,mutex,topology-aware");
}

TEST(GpuPolicy, UnknownTokensIgnored) {
  GpuPolicy p = Parse("binpack,bogus");
  EXPECT_EQ(p.ToString(), "binpack");
  ASSERT_EQ(p.ignored.size(), 1u);
  EXPECT_EQ(p.ignored[0], "bogus");
  GpuPolicy q;
  EXPECT_FALSE(ParseGpuPolicy("bogus", &q));
  EXPECT_FALSE(ParseGpuPolicy("", &q));
  EXPECT_FALSE(ParseGpuPolicy(" , ", &q));
}

TEST(NodePolicy, Parse) {
  NodePolicy p = NodePolicy::kBinpack;
  EXPECT_TRUE(ParseNodePolicy("spread", &p));
  EXPECT_EQ(p, NodePolicy::kSpread);
  EXPECT_TRUE(ParseNodePolicy("binpack", &p));
  EXPECT_EQ(p, NodePolicy::kBinpack);
  // Anything else acts as binpack (upstream sorts ascending for every value but spread).
  EXPECT_TRUE(ParseNodePolicy("numa-first", &p));
  EXPECT_EQ(p, NodePolicy::kBinpack);
  EXPECT_FALSE(ParseNodePolicy("  ", &p));
}

}  // namespace
}  // namespace hami::scheduler
