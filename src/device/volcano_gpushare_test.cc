#include "device/volcano_gpushare.h"

#include <gtest/gtest.h>

#include <vector>

namespace hami::device {
namespace {

constexpr char kNode[] = "node-1";
constexpr VolcanoShareMode kMemory = VolcanoShareMode::kMemory;
constexpr VolcanoShareMode kNumber = VolcanoShareMode::kNumber;

ContainerResources Ctr(const char* name, const char* memory = nullptr,
                       const char* number = nullptr) {
  ContainerResources c;
  c.name = name;
  if (memory != nullptr) c.limits["volcano.sh/gpu-memory"] = memory;
  if (number != nullptr) c.limits["volcano.sh/gpu-number"] = number;
  return c;
}

// A pod as Volcano leaves it at kubelet admission: bound to kNode, Pending, its GPUs chosen.
VolcanoPod Pod(const char* name, const char* time, const char* index,
               std::vector<ContainerResources> containers) {
  VolcanoPod p;
  p.uid = std::string("uid-") + name;
  p.name = name;
  p.ns = "default";
  p.node_name = kNode;
  p.phase = "Pending";
  if (time != nullptr) p.annotations["volcano.sh/predicate-time"] = time;
  if (index != nullptr) p.annotations["volcano.sh/gpu-index"] = index;
  p.resources.containers = std::move(containers);
  return p;
}

void ExpectStatus(const Result<VolcanoSharePick>& r, StatusCode code,
                  std::initializer_list<const char*> fragments) {
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), code) << r.status().ToString();
  for (const char* f : fragments) {
    EXPECT_NE(r.status().message().find(f), std::string::npos)
        << "want \"" << f << "\" in: " << r.status().message();
  }
}

TEST(VolcanoGpuIndices, ParseAndEncode) {
  EXPECT_EQ(ParseVolcanoGpuIndices("0").value(), std::vector<uint32_t>({0}));
  EXPECT_EQ(ParseVolcanoGpuIndices("1,3").value(), std::vector<uint32_t>({1, 3}));
  EXPECT_EQ(EncodeVolcanoGpuIndices({2, 0}), "2,0");
  EXPECT_EQ(EncodeVolcanoGpuIndices({}), "");
  for (const char* bad : {"", ",", "1,", "1, 3", "-1", "a", "1,1", "99999999999999999999"}) {
    EXPECT_FALSE(ParseVolcanoGpuIndices(bad).ok()) << bad;
  }
}

TEST(VolcanoSharePodSelect, TheOldestPlacedPodAskingForThatMuchMemoryWins) {
  std::vector<VolcanoPod> pods = {
      Pod("young", "1700000000000000002", "0", {Ctr("main", "4096")}),
      Pod("old", "1700000000000000001", "1", {Ctr("main", "4096")}),
      Pod("other-size", "1600000000000000000", "0", {Ctr("main", "1024")}),
  };
  Result<VolcanoSharePick> r = SelectVolcanoSharePod(pods, kNode, kMemory, 4096);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->pod, 1u);
  EXPECT_EQ(r->container, 0u);
  EXPECT_EQ(r->gpus, std::vector<uint32_t>({1}));
  EXPECT_EQ(r->request, 4096);
  EXPECT_TRUE(r->last);
}

TEST(VolcanoSharePodSelect, OnlyPendingUnassignedPodsBoundHereAreServed) {
  VolcanoPod elsewhere = Pod("elsewhere", "1", "0", {Ctr("main", "10")});
  elsewhere.node_name = "node-2";
  VolcanoPod running = Pod("running", "2", "0", {Ctr("main", "10")});
  running.phase = "Running";
  VolcanoPod assigned = Pod("assigned", "3", "0", {Ctr("main", "10")});
  assigned.annotations["volcano.sh/gpu-assigned"] = "true";
  VolcanoPod deleting = Pod("deleting", "4", "0", {Ctr("main", "10")});
  deleting.deleting = true;
  VolcanoPod unrelated = Pod("cpu-only", "5", nullptr, {Ctr("main")});
  VolcanoPod failed = Pod("failed", "6", "0", {Ctr("main", "10")});
  failed.annotations["hami.io/volcano-gpu-allocation-failed"] = "GPU 0 is unhealthy";
  std::vector<VolcanoPod> pods = {elsewhere, running, assigned, deleting, unrelated, failed};
  ExpectStatus(SelectVolcanoSharePod(pods, kNode, kMemory, 10), StatusCode::kNotFound,
               {"no pod waits for an allocation of 10 volcano.sh/gpu-memory on node \"node-1\"",
                "default/running: phase \"Running\"", "default/assigned: volcano.sh/gpu-assigned",
                "default/deleting: being deleted", "default/failed: its allocation failed"});
  EXPECT_EQ(SelectVolcanoSharePod({&failed, 1}, kNode, kMemory, 10).status().message(),
            "no pod waits for an allocation of 10 volcano.sh/gpu-memory on node \"node-1\": "
            "default/failed: its allocation failed before (GPU 0 is unhealthy)");
  // A pod whose assignment was reverted ("false") is served again.
  assigned.annotations["volcano.sh/gpu-assigned"] = "false";
  pods.push_back(assigned);
  Result<VolcanoSharePick> r = SelectVolcanoSharePod(pods, kNode, kMemory, 10);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->pod, 6u);
}

TEST(VolcanoSharePodSelect, EveryContainerOfASharingPodGetsTheOneGpuInTurn) {
  VolcanoPod p = Pod("two", "1", "2", {Ctr("a", "1000"), Ctr("sidecar"), Ctr("b", "3000")});
  Result<VolcanoSharePick> first = SelectVolcanoSharePod({&p, 1}, kNode, kMemory, 1000);
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  EXPECT_EQ(first->container, 0u);
  EXPECT_EQ(first->served, 0u);
  EXPECT_FALSE(first->last);
  // Kubelet's call for container a does not match b's request.
  ExpectStatus(SelectVolcanoSharePod({&p, 1}, kNode, kMemory, 3000), StatusCode::kNotFound,
               {"its next container \"a\" asks for 1000 volcano.sh/gpu-memory, not 3000"});
  p.annotations["hami.io/volcano-gpu-containers-served"] = "1";
  Result<VolcanoSharePick> second = SelectVolcanoSharePod({&p, 1}, kNode, kMemory, 3000);
  ASSERT_TRUE(second.ok()) << second.status().ToString();
  EXPECT_EQ(second->container, 2u);
  EXPECT_EQ(second->gpus, std::vector<uint32_t>({2}));
  EXPECT_TRUE(second->last);
  p.annotations["hami.io/volcano-gpu-containers-served"] = "2";
  ExpectStatus(SelectVolcanoSharePod({&p, 1}, kNode, kMemory, 3000), StatusCode::kNotFound,
               {"every container is served already"});
}

TEST(VolcanoSharePodSelect, GpuNumberSlicesThePodsGpusAmongItsContainers) {
  VolcanoPod p = Pod("workers", "1", "3,0,2", {Ctr("one", nullptr, "1"), Ctr("two", nullptr, "2")});
  p.resources.init_containers = {Ctr("setup", nullptr, "2")};
  Result<VolcanoSharePick> init = SelectVolcanoSharePod({&p, 1}, kNode, kNumber, 2);
  ASSERT_TRUE(init.ok()) << init.status().ToString();
  EXPECT_TRUE(init->init);
  EXPECT_EQ(init->gpus, std::vector<uint32_t>({3, 0}));
  p.annotations["hami.io/volcano-gpu-containers-served"] = "1";
  Result<VolcanoSharePick> one = SelectVolcanoSharePod({&p, 1}, kNode, kNumber, 1);
  ASSERT_TRUE(one.ok()) << one.status().ToString();
  EXPECT_FALSE(one->init);
  EXPECT_EQ(one->container, 0u);
  EXPECT_EQ(one->gpus, std::vector<uint32_t>({3}));
  p.annotations["hami.io/volcano-gpu-containers-served"] = "2";
  Result<VolcanoSharePick> two = SelectVolcanoSharePod({&p, 1}, kNode, kNumber, 2);
  ASSERT_TRUE(two.ok()) << two.status().ToString();
  EXPECT_EQ(two->gpus, std::vector<uint32_t>({0, 2}));
  EXPECT_TRUE(two->last);
}

TEST(VolcanoSharePodSelect, DefectsOfTheOldestPodFailTheCall) {
  struct Case {
    VolcanoPod pod;
    VolcanoShareMode mode;
    size_t request;
    const char* want;
  };
  std::vector<Case> cases = {
      {Pod("no-index", "1", nullptr, {Ctr("main", "10")}), kMemory, 10,
       "no volcano.sh/gpu-index: Volcano's scheduler did not assign it GPUs (is "
       "deviceshare.GPUSharingEnable on"},
      {Pod("bad-index", "1", "0;1", {Ctr("main", "10")}), kMemory, 10, "is not a GPU index"},
      {Pod("two-gpus", "1", "0,1", {Ctr("main", "10")}), kMemory, 10, "names several GPUs"},
      {Pod("short", "1", "0", {Ctr("main", nullptr, "2")}), kNumber, 2,
       "names 1 GPU(s) but the pod asks for 2"},
      {Pod("bad-limit", "1", "0", {Ctr("main", "ten")}), kMemory, 10, "is not a whole number"},
  };
  for (Case& c : cases) {
    VolcanoPod younger = Pod("younger", "2", "0", {Ctr("main", "10", "2")});
    younger.annotations["volcano.sh/gpu-index"] = c.mode == kMemory ? "0" : "0,1";
    std::vector<VolcanoPod> pods = {younger, c.pod};
    size_t defective = 99;
    ExpectStatus(SelectVolcanoSharePod(pods, kNode, c.mode, c.request, &defective),
                 StatusCode::kInvalidArgument, {c.want, ("pod default/" + c.pod.name).c_str()});
    EXPECT_EQ(defective, 1u) << c.pod.name;
  }
}

TEST(VolcanoSharePodSelect, ATieIsRefusedAndBadCallsAreNamed) {
  std::vector<VolcanoPod> pods = {Pod("a", "7", "0", {Ctr("main", "10")}),
                                  Pod("b", "7", "1", {Ctr("main", "10")})};
  ExpectStatus(SelectVolcanoSharePod(pods, kNode, kMemory, 10), StatusCode::kFailedPrecondition,
               {"default/a, default/b were all placed at volcano.sh/predicate-time 7"});
  ExpectStatus(SelectVolcanoSharePod(pods, kNode, kMemory, 0), StatusCode::kInvalidArgument,
               {"no device IDs"});
  ExpectStatus(SelectVolcanoSharePod(pods, "", kMemory, 10), StatusCode::kInvalidArgument,
               {"no node name"});
  // A pod without a predicate time sorts after one with a time.
  pods[1].annotations.erase("volcano.sh/predicate-time");
  Result<VolcanoSharePick> r = SelectVolcanoSharePod(pods, kNode, kMemory, 10);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->pod, 0u);
}

}  // namespace
}  // namespace hami::device
