// SimCluster::WaitFor: it wakes when the API server stores a write (also one made while the
// condition was being looked at), looks again only after writes, and gives up at the deadline.
#include "sim/cluster/sim_cluster.h"

#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include "k8s/rest_client.h"

namespace hami::sim {
namespace {

k8s::Object ConfigMap(const std::string& name) {
  return k8s::Object{{"apiVersion", "v1"}, {"kind", "ConfigMap"}, {"metadata", {{"name", name}}}};
}

SimClusterOptions Quiet() {
  SimClusterOptions o;
  o.device_plugin = false;
  return o;
}

TEST(SimClusterWaitTest, WakesOnAWriteMadeAfterItLooked) {
  SimCluster c(Quiet());
  const int64_t before = c.apiserver().revision();
  int looks = 0;
  std::thread writer;
  const bool found = SimCluster::WaitFor([&] {
    if (++looks == 1) {
      // Written only once the waiter has looked and (normally) gone to sleep.
      writer = std::thread([&] {
        ASSERT_TRUE(c.client().Create(k8s::kConfigMaps, "default", ConfigMap("late")).ok());
      });
      return false;
    }
    return c.client().Get(k8s::kConfigMaps, "default", "late").ok();
  });
  writer.join();
  EXPECT_TRUE(found);
  // Each look after the first was woken by a write.
  EXPECT_LE(looks, 1 + c.apiserver().revision() - before);
}

TEST(SimClusterWaitTest, GivesUpAtTheDeadlineHavingLookedOnlyAfterWrites) {
  SimCluster c(Quiet());
  const int64_t before = c.apiserver().revision();
  int looks = 0;
  EXPECT_FALSE(SimCluster::WaitFor(
      [&] {
        ++looks;
        return false;
      },
      std::chrono::milliseconds(200)));
  EXPECT_GE(looks, 1);
  EXPECT_LE(looks, 1 + c.apiserver().revision() - before);
}

}  // namespace
}  // namespace hami::sim
