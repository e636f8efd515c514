// The user's seed scenarios as real containers (tests/e2e/real_node_seed.h) on a real node,
// with hami-cpp's processes started by the world as the main job starts them (the GPU-model
// choices between the main job's three nodes are its own test's; real_node_helm_e2e_test.cc runs
// the same scenarios through the chart's pods). Label realnode (real_node_e2e_test.cc has the
// node's other tests).

#include <gtest/gtest.h>

#include "sim/world/demo.h"
#include "sim/world/world.h"
#include "tests/e2e/real_node_seed.h"
#include "tests/e2e/real_node_util.h"
#include "tests/kube_bin.h"

namespace hami::e2e {
namespace {

TEST(RealNodeSeedE2E, TheSeedScenariosRunInRealContainersUnderTheirQuotas) {
  if (kube_pin::BinDir().empty() || NodeBinDir().empty()) {
    GTEST_FAIL() << "needs the Kubernetes binaries and the node's tools: "
                    "bash scripts/kube-tools.sh && bash scripts/node-tools.sh";
  }
  sim::WorldOptions o = SeedNodeWorld();
  o.start_timeout = std::chrono::seconds(180);
  o.monitors = true;
  // The cluster as seed example 5 describes it, and as the main job runs it: pods packed onto
  // GPUs (example 1's two pods share one card).
  o.scheduler_args = {"--node-scheduler-policy=spread", "--gpu-scheduler-policy=binpack"};
  Result<std::unique_ptr<sim::World>> started = sim::World::Start(o);
  ASSERT_TRUE(started.ok()) << started.status().ToString();
  CheckSeedScenarios(**started);
}

}  // namespace
}  // namespace hami::e2e
