// Pure helpers of the driver: how many feasible nodes a cycle looks for, and the leader identity.
#include "sim/kubescheduler/kube_scheduler.h"

#include <gtest/gtest.h>
#include <unistd.h>

namespace hami::sim {
namespace {

TEST(NumFeasibleNodesToFindTest, FollowsKubeSchedulerSampling) {
  EXPECT_EQ(NumFeasibleNodesToFind(0, 0), 0u);
  EXPECT_EQ(NumFeasibleNodesToFind(0, 50), 50u);  // small clusters: every node
  EXPECT_EQ(NumFeasibleNodesToFind(10, 99), 99u);
  EXPECT_EQ(NumFeasibleNodesToFind(0, 100), 100u);    // never fewer than 100
  EXPECT_EQ(NumFeasibleNodesToFind(0, 1000), 420u);   // adaptive: 50 - 1000/125 = 42%
  EXPECT_EQ(NumFeasibleNodesToFind(0, 5000), 500u);   // 50 - 40 = 10%
  EXPECT_EQ(NumFeasibleNodesToFind(0, 10000), 500u);  // floor of 5%
  EXPECT_EQ(NumFeasibleNodesToFind(30, 1000), 300u);
  EXPECT_EQ(NumFeasibleNodesToFind(1, 1000), 100u);
  EXPECT_EQ(NumFeasibleNodesToFind(100, 1000), 1000u);
}

TEST(DefaultLeaderIdentityTest, HostnameThenRandomUuid) {
  char host[256] = {0};
  ASSERT_EQ(gethostname(host, sizeof(host) - 1), 0);
  std::string a = DefaultLeaderIdentity();
  std::string b = DefaultLeaderIdentity();
  EXPECT_NE(a, b);
  ASSERT_EQ(a.rfind(std::string(host) + "_", 0), 0u) << a;
  std::string uuid = a.substr(std::string(host).size() + 1);
  ASSERT_EQ(uuid.size(), 36u) << uuid;
  EXPECT_EQ(uuid[8], '-');
  EXPECT_EQ(uuid[14], '4');
}

}  // namespace
}  // namespace hami::sim
