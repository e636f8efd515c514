// The FailedScheduling summary: identical reasons grouped, "<count> <reason>" strings sorted.
#include "sim/kubescheduler/diagnosis.h"

#include <gtest/gtest.h>

namespace hami::sim {
namespace {

TEST(DiagnosisTest, GroupsAndSortsReasons) {
  Diagnosis d;
  d.Add("n1", "CardInsufficientMemory");
  d.Add("n2", kReasonNodeUnschedulable);
  d.Add("n3", "CardInsufficientMemory");
  d.Add("n4", "NodeUnfitPod");
  EXPECT_EQ(d.size(), 4u);
  EXPECT_TRUE(d.Has("n2"));
  EXPECT_EQ(d.Message(5),
            "0/5 nodes are available: 1 NodeUnfitPod, 1 node(s) were unschedulable, "
            "2 CardInsufficientMemory.");
}

TEST(DiagnosisTest, CountsEveryReasonOfANode) {
  Diagnosis d;
  d.Add("n1", "a");
  d.Add("n1", "b");
  d.Add("n2", "a");
  EXPECT_EQ(d.Message(2), "0/2 nodes are available: 1 b, 2 a.");
}

TEST(DiagnosisTest, NoReasons) { EXPECT_EQ(Diagnosis().Message(3), "0/3 nodes are available."); }

}  // namespace
}  // namespace hami::sim
