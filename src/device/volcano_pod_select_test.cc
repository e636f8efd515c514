#include "device/volcano_pod_select.h"

#include <gtest/gtest.h>

#include <vector>

namespace hami::device {
namespace {

constexpr char kNode[] = "node-1";

ContainerResources Ctr(const char* name, const char* count, const char* memory = nullptr) {
  ContainerResources c;
  c.name = name;
  if (count != nullptr) c.limits["volcano.sh/vgpu-number"] = count;
  if (memory != nullptr) c.limits["volcano.sh/vgpu-memory"] = memory;
  return c;
}

// A pod as Volcano >= 1.16 leaves it at kubelet admission: bound to kNode, Pending, allocating.
VolcanoPod Pod(const char* name, const char* vgpu_time, const char* to_allocate,
               std::vector<ContainerResources> containers) {
  VolcanoPod p;
  p.uid = std::string("uid-") + name;
  p.name = name;
  p.ns = "default";
  p.node_name = kNode;
  p.phase = "Pending";
  p.annotations = {
      {"volcano.sh/vgpu-node", kNode},
      {"volcano.sh/vgpu-time", vgpu_time},
      {"volcano.sh/vgpu-ids-new", to_allocate},
      {"volcano.sh/devices-to-allocate", to_allocate},
      {"volcano.sh/bind-phase", "allocating"},
  };
  p.resources.containers = std::move(containers);
  return p;
}

VolcanoPod OneGpuPod(const char* name, const char* vgpu_time, const char* uuid = "GPU-a") {
  return Pod(name, vgpu_time, (std::string(uuid) + ",NVIDIA,3000,30:").c_str(),
             {Ctr("main", "1")});
}

void ExpectPicked(const Result<VolcanoPick>& r, size_t pod, size_t container) {
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->pod, pod);
  EXPECT_EQ(r->container, container);
}

void ExpectStatus(const Result<VolcanoPick>& r, StatusCode code,
                  std::initializer_list<const char*> fragments) {
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), code) << r.status().ToString();
  for (const char* f : fragments) {
    EXPECT_NE(r.status().message().find(f), std::string::npos)
        << "want \"" << f << "\" in: " << r.status().message();
  }
}

TEST(VolcanoPodSelect, PicksTheOnlyWaitingPod) {
  std::vector<VolcanoPod> pods = {OneGpuPod("p", "100")};
  Result<VolcanoPick> r = SelectVolcanoPod(pods, kNode, 1);
  ExpectPicked(r, 0, 0);
  EXPECT_EQ(r->entry, 0u);
  EXPECT_EQ(r->devices.size(), 1u);
  EXPECT_EQ(r->devices[0].uuid, "GPU-a");
  EXPECT_TRUE(r->last);
  EXPECT_EQ(VolcanoToAllocateAfter(*r), "");
}

TEST(VolcanoPodSelect, OldestVgpuTimeWins) {
  std::vector<VolcanoPod> pods = {OneGpuPod("young", "200", "GPU-b"),
                                  OneGpuPod("old", "100", "GPU-a"),
                                  OneGpuPod("no-time", "", "GPU-c")};
  ExpectPicked(SelectVolcanoPod(pods, kNode, 1), 1, 0);
}

// Upstream's agent (VDP#159): when the final vgpu-time/bind-phase patch failed, the running pod
// still looked oldest and its GPUs went to the next pod.
TEST(VolcanoPodSelect, RunningPodWithStaleAnnotationsIsNotPickedAgain) {
  VolcanoPod running = OneGpuPod("running", "50", "GPU-a");
  running.phase = "Running";
  VolcanoPod served = OneGpuPod("served", "60", "GPU-a");
  served.annotations["volcano.sh/bind-phase"] = "success";
  served.annotations["volcano.sh/vgpu-time"] = "18446744073709551615";
  VolcanoPod failed = OneGpuPod("failed", "70", "GPU-a");
  failed.annotations["volcano.sh/bind-phase"] = "failed";
  VolcanoPod deleting = OneGpuPod("deleting", "80", "GPU-a");
  deleting.deleting = true;
  std::vector<VolcanoPod> pods = {running, served, failed, deleting,
                                  OneGpuPod("new", "300", "GPU-b")};
  Result<VolcanoPick> r = SelectVolcanoPod(pods, kNode, 1);
  ExpectPicked(r, 4, 0);
  EXPECT_EQ(r->devices[0].uuid, "GPU-b");

  pods.pop_back();
  ExpectStatus(SelectVolcanoPod(pods, kNode, 1), StatusCode::kNotFound,
               {"no pod waits for a volcano.sh/vgpu-number allocation of 1 device on node "
                "\"node-1\"",
                "default/deleting: being deleted", "default/running: phase \"Running\"",
                "default/served: volcano.sh/bind-phase is \"success\"",
                "default/failed: volcano.sh/bind-phase is \"failed\""});
}

// A pod whose last entry was served but whose bind-phase write was lost is not served twice.
TEST(VolcanoPodSelect, FullyServedPodDropsOut) {
  VolcanoPod done = Pod("done", "10", "", {Ctr("main", "1")});
  std::vector<VolcanoPod> pods = {done, OneGpuPod("next", "20")};
  ExpectPicked(SelectVolcanoPod(pods, kNode, 1), 1, 0);
  pods.pop_back();
  ExpectStatus(SelectVolcanoPod(pods, kNode, 1), StatusCode::kNotFound,
               {"default/done: every container is served already"});
}

// V#5532, VDP#52: the pick is restricted to pods both bound to this node and assigned to it.
TEST(VolcanoPodSelect, PodBoundElsewhereIsNeverPicked) {
  VolcanoPod elsewhere = OneGpuPod("elsewhere", "10");
  elsewhere.node_name = "node-2";  // vgpu-node says node-1, the Binding said node-2
  VolcanoPod other_node = OneGpuPod("other", "11");
  other_node.node_name = "node-2";
  other_node.annotations["volcano.sh/vgpu-node"] = "node-2";
  VolcanoPod disagrees = OneGpuPod("disagrees", "12");
  disagrees.annotations["volcano.sh/vgpu-node"] = "node-3";  // bound here, assigned to node-3
  VolcanoPod unbound = OneGpuPod("unbound", "13");
  unbound.node_name.clear();  // a <= 1.15 scheduler patched it before binding
  std::vector<VolcanoPod> pods = {elsewhere, other_node, disagrees, unbound};
  Result<VolcanoPick> r = SelectVolcanoPod(pods, kNode, 1);
  ExpectStatus(r, StatusCode::kNotFound,
               {"default/elsewhere: bound to node \"node-2\"",
                "default/disagrees: Volcano assigned it to node \"node-3\" but it is bound here",
                "default/unbound: not bound to a node yet"});
  EXPECT_EQ(r.status().message().find("default/other"), std::string::npos)
      << "a pod of another node is not worth a word: " << r.status().message();

  pods.push_back(OneGpuPod("here", "99", "GPU-h"));
  Result<VolcanoPick> ok = SelectVolcanoPod(pods, kNode, 1);
  ExpectPicked(ok, 4, 0);
  EXPECT_EQ(ok->devices[0].uuid, "GPU-h");
}

// V#4505, VDP#77: entries belong to the requesting containers (a sidecar without a GPU takes
// no entry), and each container is matched by its own count, not the pod's total.
TEST(VolcanoPodSelect, MultiContainerPodServedContainerByContainer) {
  VolcanoPod p =
      Pod("multi", "100", "GPU-a,NVIDIA,3000,50:GPU-b,NVIDIA,3000,50:;GPU-c,NVIDIA,8000,0:",
          {Ctr("sidecar", nullptr), Ctr("trainer", "2"), Ctr("logger", nullptr), Ctr("eval", "1")});
  std::vector<VolcanoPod> pods = {p};

  // The pod's total (3) is not what kubelet asks for in any call.
  ExpectStatus(SelectVolcanoPod(pods, kNode, 3), StatusCode::kNotFound,
               {"default/multi: its next container \"trainer\" asks for 2 devices, not 3"});

  Result<VolcanoPick> first = SelectVolcanoPod(pods, kNode, 2);
  ExpectPicked(first, 0, 1);
  EXPECT_EQ(first->entry, 0u);
  EXPECT_EQ(first->devices.size(), 2u);
  EXPECT_FALSE(first->last);
  const std::string after = VolcanoToAllocateAfter(*first);
  EXPECT_EQ(after, ";GPU-c,NVIDIA,8000,0:");

  pods[0].annotations["volcano.sh/devices-to-allocate"] = after;
  Result<VolcanoPick> second = SelectVolcanoPod(pods, kNode, 1);
  ExpectPicked(second, 0, 3);
  EXPECT_EQ(second->entry, 1u);
  EXPECT_EQ(second->devices[0].uuid, "GPU-c");
  EXPECT_TRUE(second->last);
  EXPECT_EQ(VolcanoToAllocateAfter(*second), ";");
}

// VDP#93: pods of different sizes waiting together on one node. Kubelet may admit the younger
// one first; its request size tells the pods apart.
TEST(VolcanoPodSelect, PodsWithDifferentGpuCountsTogether) {
  VolcanoPod two = Pod("two", "100", "GPU-a,NVIDIA,1000,0:GPU-b,NVIDIA,1000,0:",
                       {Ctr("main", "2")});
  VolcanoPod one = Pod("one", "200", "GPU-c,NVIDIA,1000,0:", {Ctr("main", "1")});
  std::vector<VolcanoPod> pods = {two, one};
  Result<VolcanoPick> r1 = SelectVolcanoPod(pods, kNode, 1);
  ExpectPicked(r1, 1, 0);
  EXPECT_EQ(r1->devices[0].uuid, "GPU-c");
  Result<VolcanoPick> r2 = SelectVolcanoPod(pods, kNode, 2);
  ExpectPicked(r2, 0, 0);
  EXPECT_EQ(r2->devices[1].uuid, "GPU-b");
  ExpectStatus(SelectVolcanoPod(pods, kNode, 4), StatusCode::kNotFound,
               {"default/two: its next container \"main\" asks for 2 devices, not 4",
                "default/one: its next container \"main\" asks for 1 device, not 4"});
}

// The mix within one pod: the 1-GPU container follows the 2-GPU one while another pod waits.
TEST(VolcanoPodSelect, MixedPodAndSinglePodAlternate) {
  VolcanoPod mixed = Pod("mixed", "100", "GPU-a,NVIDIA,1,0:GPU-b,NVIDIA,1,0:;GPU-c,NVIDIA,1,0:",
                         {Ctr("a", "2"), Ctr("b", "1")});
  VolcanoPod single = OneGpuPod("single", "90", "GPU-d");
  std::vector<VolcanoPod> pods = {mixed, single};
  // A 2-device call can only be the mixed pod, though the single pod is older.
  ExpectPicked(SelectVolcanoPod(pods, kNode, 2), 0, 0);
  // A 1-device call: both fit (mixed's first container is served), the older one wins.
  pods[0].annotations["volcano.sh/devices-to-allocate"] = ";GPU-c,NVIDIA,1,0:";
  ExpectPicked(SelectVolcanoPod(pods, kNode, 1), 1, 0);
}

TEST(VolcanoPodSelect, MemoryOnlyContainerHasAnEntryButIsNotServedByCount) {
  // Volcano gives a container with only a memory limit one device (and an entry).
  VolcanoPod p = Pod("memonly", "100", "GPU-a,NVIDIA,2000,0:;GPU-b,NVIDIA,4000,0:",
                     {Ctr("mem", nullptr, "2000"), Ctr("count", "1", "4000")});
  std::vector<VolcanoPod> pods = {p};
  Result<VolcanoPick> r = SelectVolcanoPod(pods, kNode, 1);
  ExpectPicked(r, 0, 1);
  EXPECT_EQ(r->entry, 1u);
  EXPECT_EQ(r->devices[0].uuid, "GPU-b");
  // The memory-only entry still lists a device, but kubelet never asks the count plugin for it:
  // it does not hold the pod back, and it is named for a warning.
  EXPECT_TRUE(r->last);
  EXPECT_EQ(r->memory_only, std::vector<size_t>{0});
}

TEST(VolcanoPodSelect, TieIsAnError) {
  std::vector<VolcanoPod> pods = {OneGpuPod("a", "100", "GPU-a"), OneGpuPod("b", "100", "GPU-b"),
                                  OneGpuPod("c", "101", "GPU-c")};
  ExpectStatus(SelectVolcanoPod(pods, kNode, 1), StatusCode::kFailedPrecondition,
               {"cannot tell which pod kubelet is admitting", "default/a, default/b",
                "at volcano.sh/vgpu-time 100", "NodeLockEnable"});
  std::vector<VolcanoPod> timeless = {OneGpuPod("x", "?"), OneGpuPod("y", "")};
  ExpectStatus(SelectVolcanoPod(timeless, kNode, 1), StatusCode::kFailedPrecondition,
               {"default/x, default/y", "without a readable volcano.sh/vgpu-time"});
}

// A defective pod that is oldest fails the call rather than letting a younger pod be served.
TEST(VolcanoPodSelect, DefectiveOldestPodFailsClosed) {
  VolcanoPod broken = OneGpuPod("broken", "10");
  broken.annotations["volcano.sh/devices-to-allocate"] = "GPU-a,NVIDIA,3000:";
  std::vector<VolcanoPod> pods = {broken, OneGpuPod("fine", "20", "GPU-f")};
  ExpectStatus(SelectVolcanoPod(pods, kNode, 1), StatusCode::kInvalidArgument,
               {"pod default/broken: volcano.sh/devices-to-allocate: entry 0: device 0"});
  size_t defective = 99;
  EXPECT_FALSE(SelectVolcanoPod(pods, kNode, 1, {}, &defective).ok());
  EXPECT_EQ(defective, 0u);  // the caller can mark it failed
  // Younger than a good pod, it does not matter.
  pods[0].annotations["volcano.sh/vgpu-time"] = "30";
  ExpectPicked(SelectVolcanoPod(pods, kNode, 1), 1, 0);
}

TEST(VolcanoPodSelect, DefectsAreNamed) {
  struct Case {
    VolcanoPod pod;
    const char* want;
  };
  VolcanoPod misaligned = Pod("p", "1", "GPU-a,NVIDIA,1,0:;GPU-b,NVIDIA,1,0:", {Ctr("m", "1")});
  VolcanoPod miscounted = Pod("p", "1", "GPU-a,NVIDIA,1,0:GPU-b,NVIDIA,1,0:", {Ctr("m", "1")});
  VolcanoPod bad_limit = Pod("p", "1", "GPU-a,NVIDIA,1,0:", {Ctr("m", "one")});
  VolcanoPod init = OneGpuPod("p", "1");
  init.resources.init_containers.push_back(Ctr("setup", "1"));
  Case cases[] = {
      {misaligned,
       "volcano.sh/devices-to-allocate has 2 entries but the pod has 1 app container with a "
       "volcano.sh/vgpu-number or volcano.sh/vgpu-memory limit"},
      {miscounted, "entry 0 lists 2 devices but container \"m\" asks for 1"},
      {bad_limit, "container \"m\": limit volcano.sh/vgpu-number \"one\" is not a device count"},
      {init, "init container \"setup\" asks for volcano.sh/vgpu-number"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.want);
    std::vector<VolcanoPod> pods = {c.pod};
    ExpectStatus(SelectVolcanoPod(pods, kNode, 1), StatusCode::kInvalidArgument,
                 {"pod default/p: ", c.want});
    ExpectStatus(NextVolcanoContainer(c.pod, 1), StatusCode::kInvalidArgument, {c.want});
  }
}

TEST(VolcanoPodSelect, ExplainsPodsNotPlacedByVolcanoVgpu) {
  VolcanoPod plain = OneGpuPod("plain", "1");
  plain.annotations.clear();  // e.g. the scheduler runs gpushare, not vGPU
  VolcanoPod unrelated;
  unrelated.name = "nginx";
  unrelated.ns = "web";
  unrelated.node_name = kNode;
  unrelated.phase = "Pending";
  std::vector<VolcanoPod> pods = {plain, unrelated};
  Result<VolcanoPick> r = SelectVolcanoPod(pods, kNode, 1);
  ExpectStatus(r, StatusCode::kNotFound,
               {"default/plain: it asks for volcano.sh/vgpu-number but has no "
                "volcano.sh/vgpu-node"});
  EXPECT_EQ(r.status().message().find("web/nginx"), std::string::npos) << r.status().message();
}

TEST(VolcanoPodSelect, ReasonsAreCappedPendingFirst) {
  std::vector<VolcanoPod> pods;
  for (int i = 0; i < 6; ++i) {
    VolcanoPod p = OneGpuPod(("run" + std::to_string(i)).c_str(), "1");
    p.phase = "Running";
    pods.push_back(p);
  }
  VolcanoPod waiting = OneGpuPod("waiting", "1");
  waiting.annotations["volcano.sh/bind-phase"] = "failed";
  pods.push_back(waiting);
  Result<VolcanoPick> r = SelectVolcanoPod(pods, kNode, 1);
  ExpectStatus(r, StatusCode::kNotFound,
               {": default/waiting: volcano.sh/bind-phase is \"failed\"; default/run0",
                "; and 3 more"});
}

TEST(VolcanoPodSelect, CustomResourceNamesAndBadCalls) {
  VolcanoResourceNames names;
  names.count = "example.com/vgpu";
  names.memory = "example.com/vgpu-mem";
  VolcanoPod p = OneGpuPod("p", "1");
  p.resources.containers[0].limits = {{"example.com/vgpu", "1"}};
  std::vector<VolcanoPod> pods = {p};
  ExpectPicked(SelectVolcanoPod(pods, kNode, 1, names), 0, 0);
  // With the default names the container requests nothing, so the entry has no container.
  ExpectStatus(SelectVolcanoPod(pods, kNode, 1), StatusCode::kInvalidArgument,
               {"has 1 entry but the pod has 0 app containers"});
  ExpectStatus(SelectVolcanoPod(pods, kNode, 0), StatusCode::kInvalidArgument,
               {"no device IDs"});
  ExpectStatus(SelectVolcanoPod(pods, "", 1), StatusCode::kInvalidArgument, {"no node name"});
  ExpectStatus(SelectVolcanoPod({}, kNode, 1), StatusCode::kNotFound, {"no pod waits"});
}

TEST(VolcanoPodSelect, NextContainerWithoutCountCheck) {
  VolcanoPod p = Pod("p", "1", "GPU-a,NVIDIA,1,0:GPU-b,NVIDIA,1,0:", {Ctr("m", "2")});
  Result<VolcanoPick> r = NextVolcanoContainer(p, 0);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->devices.size(), 2u);
  p.annotations.erase("volcano.sh/devices-to-allocate");
  ExpectStatus(NextVolcanoContainer(p, 0), StatusCode::kNotFound,
               {"pod default/p: no volcano.sh/devices-to-allocate annotation"});
}

}  // namespace
}  // namespace hami::device
