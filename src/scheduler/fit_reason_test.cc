#include "scheduler/fit_reason.h"

#include <gtest/gtest.h>

namespace hami::scheduler {
namespace {

TEST(NodeFailure, UpstreamFormat) {
  NodeFailure f;
  f.kind = NodeFailure::Kind::kCards;
  f.total = 4;
  f.Add(CardReason::kCardNotHealth, 3);
  f.Add(CardReason::kCardInsufficientMemory);
  EXPECT_EQ(f.ToString(), "1/4 CardInsufficientMemory, 3/4 CardNotHealth");
}

TEST(NodeFailure, EntriesSortedAsStrings) {
  NodeFailure f;
  f.kind = NodeFailure::Kind::kCards;
  f.total = 12;
  f.Add(CardReason::kCardUuidMismatch, 10);
  f.Add(CardReason::kAllocatedCardsInsufficientRequest, 2);
  // "10/12 ..." sorts before "2/12 ..." (plain string order, as upstream).
  EXPECT_EQ(f.ToString(), "10/12 CardUuidMismatch, 2/12 AllocatedCardsInsufficientRequest");
}

TEST(NodeFailure, NodeLevelKinds) {
  NodeFailure f;
  f.kind = NodeFailure::Kind::kNodeInsufficientDevice;
  EXPECT_EQ(f.ToString(), "NodeInsufficientDevice");
  f.kind = NodeFailure::Kind::kNodeUnregistered;
  EXPECT_EQ(f.ToString(), "node unregistered");
  f.kind = NodeFailure::Kind::kNone;
  EXPECT_EQ(f.ToString(), "");
}

TEST(CardReason, AllNamed) {
  for (size_t i = 0; i < kCardReasonCount; ++i) {
    EXPECT_NE(CardReasonName(static_cast<CardReason>(i)), "Unknown");
  }
}

}  // namespace
}  // namespace hami::scheduler
