#include "device/scoring_weights.h"

#include <gtest/gtest.h>

namespace hami::device {
namespace {

TEST(ScoringWeights, ParsesUpstreamExample) {
  Result<ScoringWeights> w = DecodeScoringWeights("slot=1,core=1,memory=3");
  ASSERT_TRUE(w.ok());
  EXPECT_EQ(*w, (ScoringWeights{1, 1, 3}));
  EXPECT_EQ(EncodeScoringWeights(*w), "slot=1,core=1,memory=3");
}

TEST(ScoringWeights, AnyOrderBlanksAndDefaults) {
  EXPECT_EQ(*DecodeScoringWeights(" memory = 2 , slot=0,core=5 "), (ScoringWeights{0, 5, 2}));
  EXPECT_EQ(*DecodeScoringWeights(""), ScoringWeights{});
  EXPECT_EQ(*DecodeScoringWeights("  "), (ScoringWeights{1, 1, 1}));
}

TEST(ScoringWeights, RejectsInvalidValues) {
  const char* cases[][2] = {
      {"slot=1,core=1", "exactly three"},
      {"slot=1,core=1,memory=1,slot=1", "exactly three"},
      {"slot=1,slot=1,memory=1", "given twice"},
      {"slot=1,core=-1,memory=1", "non-negative integer"},
      {"slot=1,core=1.5,memory=1", "non-negative integer"},
      {"slot=1,core=,memory=1", "non-negative integer"},
      {"slot=0,core=0,memory=0", "all weights are zero"},
      {"slot=1,gpu=1,memory=1", "unknown weight"},
      {"slot=1,core,memory=1", "has no '='"},
      {"slot=1,core=99999999999,memory=1", "out of range"},
  };
  for (const auto& c : cases) {
    Result<ScoringWeights> r = DecodeScoringWeights(c[0]);
    ASSERT_FALSE(r.ok()) << c[0];
    EXPECT_NE(r.status().message().find(c[1]), std::string::npos)
        << c[0] << " -> " << r.status().message();
    EXPECT_NE(r.status().message().find("hami.io/device-scoring-weights"), std::string::npos);
  }
}

}  // namespace
}  // namespace hami::device
