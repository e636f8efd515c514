#include "device/topology_score.h"

#include <gtest/gtest.h>

namespace hami::device {
namespace {

TEST(TopologyScore, RoundTripsUpstreamShape) {
  constexpr char kValue[] =
      R"([{"uuid":"GPU-a","score":{"GPU-b":200,"GPU-c":20}},{"uuid":"GPU-b","score":{"GPU-a":200}}])";
  Result<DevicePairScores> r = DecodePairScores(kValue);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ(r->size(), 2u);
  EXPECT_EQ((*r)[0].uuid, "GPU-a");
  EXPECT_EQ((*r)[0].scores.at("GPU-b"), 200);
  EXPECT_EQ(EncodePairScores(*r), kValue);
}

TEST(TopologyScore, GoMapOrderAndOmitEmpty) {
  DevicePairScores s = {{"GPU-z", {{"GPU-c", 1}, {"GPU-a", 1800}, {"GPU-b", 0}}}, {"", {}}};
  EXPECT_EQ(EncodePairScores(s),
            R"([{"uuid":"GPU-z","score":{"GPU-a":1800,"GPU-b":0,"GPU-c":1}},{}])");
  EXPECT_EQ(EncodePairScores({}), "[]");
}

TEST(TopologyScore, Lookup) {
  DevicePairScores s = {{"GPU-a", {{"GPU-b", 100}}}};
  EXPECT_EQ(PairScore(s, "GPU-a", "GPU-b"), 100);
  EXPECT_EQ(PairScore(s, "GPU-b", "GPU-a"), 100);
  EXPECT_EQ(PairScore(s, "GPU-a", "GPU-c"), 0);
}

TEST(TopologyScore, DecodingRules) {
  EXPECT_TRUE(DecodePairScores("null")->empty());
  Result<DevicePairScores> r = DecodePairScores(R"([{"UUID":"GPU-a","Score":{"GPU-b":3}},null])");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->size(), 1u);
  EXPECT_EQ((*r)[0].scores.at("GPU-b"), 3);
  for (const char* bad : {"", "{}", R"([{"uuid":1}])", R"([{"score":[]}])",
                          R"([{"score":{"GPU-b":1.5}}])", R"([{"score":{"GPU-b":"1"}}])", "[1]"}) {
    EXPECT_FALSE(DecodePairScores(bad).ok()) << bad;
  }
}

}  // namespace
}  // namespace hami::device
