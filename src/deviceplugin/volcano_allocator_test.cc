// VolcanoAllocator on a scripted API server (FakeTransport): which pod it serves, what it answers
// and writes, and when it releases Volcano's node lock. tests/e2e runs it under Volcano's own
// scheduler.
#include "deviceplugin/volcano_allocator.h"

#include <gtest/gtest.h>

#include "k8s/object.h"
#include "k8s/test_util.h"

namespace hami::deviceplugin {
namespace {

using k8s::FakeTransport;
using k8s::testing::FakeClient;

constexpr const char* kGpu0 = "GPU-cccccccc-0000-4000-8000-000000000000";
constexpr const char* kGpu1 = "GPU-dddddddd-0000-4000-8000-000000000000";
constexpr const char* kNodeUrl = "/api/v1/nodes/node-a";
constexpr const char* kPodsUrl = "/api/v1/pods";
constexpr const char* kEventsUrl = "/api/v1/namespaces/default/events";

std::string PodUrl(const std::string& name) { return "/api/v1/namespaces/default/pods/" + name; }

// The API server's answer to removing a node annotation that is not there.
constexpr const char* kNoLock =
    R"({"kind":"Status","reason":"Invalid","code":422,)"
    R"("message":"the server rejected our request: remove operation does not apply"})";

k8s::Object Container(const std::string& name, const char* count, const char* memory = nullptr) {
  k8s::Object c = {{"name", name}};
  if (count != nullptr) c["resources"]["limits"]["volcano.sh/vgpu-number"] = count;
  if (memory != nullptr) c["resources"]["limits"]["volcano.sh/vgpu-memory"] = memory;
  return c;
}

k8s::Object Pod(const std::string& name, const std::string& time, const std::string& to_allocate,
                std::vector<k8s::Object> containers, const std::string& rv = "11") {
  k8s::Object p;
  p["metadata"] = {{"name", name}, {"namespace", "default"}, {"uid", "uid-" + name},
                   {"resourceVersion", rv}};
  k8s::Object& a = p["metadata"]["annotations"];
  a["volcano.sh/vgpu-node"] = "node-a";
  a["volcano.sh/vgpu-time"] = time;
  a["volcano.sh/vgpu-ids-new"] = to_allocate;
  a["volcano.sh/devices-to-allocate"] = to_allocate;
  a["volcano.sh/bind-phase"] = "allocating";
  p["spec"]["nodeName"] = "node-a";
  p["spec"]["containers"] = containers;
  p["status"]["phase"] = "Pending";
  return p;
}

std::string List(std::vector<k8s::Object> pods) {
  return k8s::Object{{"items", pods}}.dump();
}

class VolcanoAllocatorTest : public ::testing::Test {
 protected:
  VolcanoAllocatorTest() {
    options_.node_name = "node-a";
    options_.allocation.hook_path = dir_.path() + "/hook";
    options_.allocation.libvgpu_file = "libvgpu.so.test";
    options_.volcano.memory_factor = 2;
    Make();
  }
  void Make() {
    allocator_ = std::make_unique<VolcanoAllocator>(*fc_.client, options_, [] {
      ReplicaMap m;
      for (const char* gpu : {kGpu0, kGpu1}) {
        for (int i = 0; i < 4; ++i) m[std::string(gpu) + "-" + std::to_string(i)] = gpu;
      }
      return m;
    });
  }

  // "METHOD path" of every request made, in order.
  std::vector<std::string> Trace() const {
    std::vector<std::string> out;
    for (const k8s::HttpRequest& r : fc_.fake->requests()) {
      std::string path = r.url.substr(r.url.find("/api/"));
      out.push_back(r.method + " " + path.substr(0, path.find('?')));
    }
    return out;
  }
  k8s::Object Body(size_t i) const { return *k8s::ParseObject(fc_.fake->requests().at(i).body); }

  k8s::testing::TempDir dir_;
  FakeClient fc_;
  VolcanoAllocatorOptions options_;
  std::unique_ptr<VolcanoAllocator> allocator_;
};

TEST_F(VolcanoAllocatorTest, ServesTheOldestPodWritesSuccessAndReleasesTheLock) {
  const std::string entry = std::string(kGpu1) + ",NVIDIA,3000,30:";
  // p-young is younger; the list order does not matter.
  fc_.fake->Push("GET", kPodsUrl,
                 FakeTransport::Json(200, List({Pod("p-young", "200", entry, {Container("m", "1")}),
                                                Pod("p-old", "100", entry,
                                                    {Container("sidecar", nullptr),
                                                     Container("main", "1", "3000")})})));
  fc_.fake->Push("PATCH", PodUrl("p-old"), FakeTransport::Json(200, "{}"));
  fc_.fake->Push("PATCH", kNodeUrl, FakeTransport::Json(200, "{}"));
  Result<std::vector<ContainerAllocation>> r = allocator_->Allocate({{std::string(kGpu0) + "-3"}});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ(r->size(), 1u);
  const ContainerAllocation& a = (*r)[0];
  EXPECT_EQ(a.container_name, "main");
  // kubelet's ID named GPU 0; the pod gets the GPU Volcano reserved.
  EXPECT_EQ(a.envs.at("NVIDIA_VISIBLE_DEVICES"), kGpu1);
  EXPECT_EQ(a.envs.at("CUDA_DEVICE_MEMORY_LIMIT_0"), "6000m");  // 3000 units x factor 2
  EXPECT_EQ(a.envs.at("CUDA_DEVICE_SM_LIMIT"), "30");
  EXPECT_EQ(a.host_dir, dir_.path() + "/hook/vgpu/containers/uid-p-old_main");
  EXPECT_EQ(Trace(), (std::vector<std::string>{"GET " + std::string(kPodsUrl),
                                               "PATCH " + PodUrl("p-old"),
                                               "PATCH " + std::string(kNodeUrl)}));
  EXPECT_NE(fc_.fake->requests()[0].url.find("fieldSelector=spec.nodeName%3Dnode-a"),
            std::string::npos)
      << fc_.fake->requests()[0].url;
  k8s::Object patch = Body(1);
  EXPECT_EQ(patch["metadata"]["resourceVersion"], "11");
  EXPECT_EQ(patch["metadata"]["annotations"]["volcano.sh/devices-to-allocate"], "");
  EXPECT_EQ(patch["metadata"]["annotations"]["volcano.sh/bind-phase"], "success");
  EXPECT_EQ(patch["metadata"]["annotations"]["volcano.sh/vgpu-time"], "18446744073709551615");
  const k8s::HttpRequest unlock = fc_.fake->requests().at(2);
  EXPECT_EQ(unlock.body, R"([{"op":"remove","path":"/metadata/annotations/hamivgpu"}])");
  bool json_patch = false;
  for (const auto& [name, value] : unlock.headers) {
    json_patch |= name == "Content-Type" && value == "application/json-patch+json";
  }
  EXPECT_TRUE(json_patch);
  EXPECT_EQ(allocator_->stats().allocations, 1u);
}

TEST_F(VolcanoAllocatorTest, TheFirstOfTwoContainersLeavesThePodAllocating) {
  const std::string both = std::string(kGpu0) + ",NVIDIA,1000,0:;" + kGpu1 + ",NVIDIA,2000,0:";
  k8s::Object pod = Pod("p", "100", both, {Container("a", "1"), Container("b", "1")});
  fc_.fake->Push("GET", kPodsUrl, FakeTransport::Json(200, List({pod})));
  fc_.fake->Push("PATCH", PodUrl("p"), FakeTransport::Json(200, "{}"));
  Result<std::vector<ContainerAllocation>> r = allocator_->Allocate({{std::string(kGpu0) + "-0"}});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ((*r)[0].container_name, "a");
  EXPECT_EQ((*r)[0].envs.at("NVIDIA_VISIBLE_DEVICES"), kGpu0);
  EXPECT_EQ(Trace().size(), 2u);  // no node read: the lock stays until the pod is done
  k8s::Object anns = Body(1)["metadata"]["annotations"];
  EXPECT_EQ(anns["volcano.sh/devices-to-allocate"], ";" + std::string(kGpu1) + ",NVIDIA,2000,0:");
  EXPECT_FALSE(anns.contains("volcano.sh/bind-phase"));
  EXPECT_FALSE(anns.contains("volcano.sh/vgpu-time"));
}

TEST_F(VolcanoAllocatorTest, AWriteConflictReadsThePodsAgain) {
  const std::string entry = std::string(kGpu0) + ",NVIDIA,1000,0:";
  fc_.fake->Push("GET", kPodsUrl,
                 FakeTransport::Json(200, List({Pod("p", "100", entry, {Container("m", "1")})})));
  fc_.fake->Push("PATCH", PodUrl("p"), FakeTransport::Json(409, R"({"reason":"Conflict"})"));
  fc_.fake->Push("GET", kPodsUrl,
                 FakeTransport::Json(200,
                                     List({Pod("p", "100", entry, {Container("m", "1")}, "12")})));
  fc_.fake->Push("PATCH", PodUrl("p"), FakeTransport::Json(200, "{}"));
  fc_.fake->Push("PATCH", kNodeUrl, FakeTransport::Json(422, kNoLock));
  Result<std::vector<ContainerAllocation>> r = allocator_->Allocate({{std::string(kGpu0) + "-0"}});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(Body(3)["metadata"]["resourceVersion"], "12");
  EXPECT_EQ(Trace().size(), 5u);  // the lock release is refused: there was none
  EXPECT_EQ(allocator_->stats().allocation_failures, 0u);
}

TEST_F(VolcanoAllocatorTest, NoPodToServeIsNotFoundAndReleasesTheLock) {
  // The only pod asks for 2 devices; kubelet for 1.
  const std::string two = std::string(kGpu0) + ",NVIDIA,1000,0:" + kGpu1 + ",NVIDIA,1000,0:";
  fc_.fake->Push("GET", kPodsUrl,
                 FakeTransport::Json(200, List({Pod("p", "100", two, {Container("m", "2")})})));
  fc_.fake->Push("PATCH", kNodeUrl, FakeTransport::Json(200, "{}"));
  Result<std::vector<ContainerAllocation>> r = allocator_->Allocate({{std::string(kGpu0) + "-0"}});
  EXPECT_EQ(r.status().code(), StatusCode::kNotFound);
  EXPECT_NE(r.status().message().find("default/p: its next container \"m\" asks for 2 devices"),
            std::string::npos)
      << r.status().message();
  EXPECT_EQ(Trace().back(), "PATCH " + std::string(kNodeUrl));  // the lock, not the pod
  EXPECT_EQ(allocator_->stats().allocation_failures, 1u);
}

TEST_F(VolcanoAllocatorTest, ADefectiveOldestPodIsMarkedFailedWithAnEvent) {
  k8s::Object broken = Pod("broken", "100", "GPU-x,NVIDIA,1000:", {Container("m", "1")});
  fc_.fake->Push("GET", kPodsUrl, FakeTransport::Json(200, List({broken})));
  fc_.fake->Push("PATCH", PodUrl("broken"), FakeTransport::Json(200, "{}"));
  fc_.fake->Push("POST", kEventsUrl, FakeTransport::Json(201, "{}"));
  fc_.fake->Push("PATCH", kNodeUrl, FakeTransport::Json(422, kNoLock));
  Result<std::vector<ContainerAllocation>> r = allocator_->Allocate({{std::string(kGpu0) + "-0"}});
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(Trace(), (std::vector<std::string>{"GET " + std::string(kPodsUrl),
                                               "PATCH " + PodUrl("broken"), "POST " +
                                               std::string(kEventsUrl),
                                               "PATCH " + std::string(kNodeUrl)}));
  EXPECT_EQ(Body(1)["metadata"]["annotations"]["volcano.sh/bind-phase"], "failed");
  k8s::Object ev = Body(2);
  EXPECT_EQ(ev["reason"], "AllocationFailed");
  EXPECT_EQ(ev["type"], "Warning");
  EXPECT_NE(ev["message"].get<std::string>().find("volcano.sh/devices-to-allocate"),
            std::string::npos);
}

TEST_F(VolcanoAllocatorTest, AReservedGpuNotOnThisNodeFailsThePod) {
  const std::string entry = "GPU-elsewhere,NVIDIA,1000,0:";
  fc_.fake->Push("GET", kPodsUrl,
                 FakeTransport::Json(200, List({Pod("p", "100", entry, {Container("m", "1")})})));
  fc_.fake->Push("PATCH", PodUrl("p"), FakeTransport::Json(200, "{}"));
  fc_.fake->Push("POST", kEventsUrl, FakeTransport::Json(201, "{}"));
  fc_.fake->Push("PATCH", kNodeUrl, FakeTransport::Json(422, kNoLock));
  Result<std::vector<ContainerAllocation>> r = allocator_->Allocate({{std::string(kGpu0) + "-0"}});
  EXPECT_EQ(r.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(r.status().message().find("GPU-elsewhere is not served by this node"),
            std::string::npos);
  EXPECT_EQ(Body(1)["metadata"]["annotations"]["volcano.sh/bind-phase"], "failed");
}

TEST_F(VolcanoAllocatorTest, AMemoryOnlyContainerGetsAWarningEvent) {
  const std::string both = std::string(kGpu0) + ",NVIDIA,1000,0:;" + kGpu1 + ",NVIDIA,2000,0:";
  fc_.fake->Push(
      "GET", kPodsUrl,
      FakeTransport::Json(200, List({Pod("p", "100", both, {Container("memonly", nullptr, "1000"),
                                                            Container("gpu", "1", "2000")})})));
  fc_.fake->Push("PATCH", PodUrl("p"), FakeTransport::Json(200, "{}"));
  fc_.fake->Push("PATCH", kNodeUrl, FakeTransport::Json(422, kNoLock));
  fc_.fake->Push("POST", kEventsUrl, FakeTransport::Json(201, "{}"));
  Result<std::vector<ContainerAllocation>> r = allocator_->Allocate({{std::string(kGpu1) + "-0"}});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ((*r)[0].container_name, "gpu");
  EXPECT_EQ(Body(1)["metadata"]["annotations"]["volcano.sh/bind-phase"], "success");
  k8s::Object ev = Body(3);
  EXPECT_EQ(ev["reason"], "VolcanoMemoryOnlyContainer");
  EXPECT_NE(ev["message"].get<std::string>().find("memonly"), std::string::npos);
}

TEST_F(VolcanoAllocatorTest, AnUnknownDeviceIdIsRefusedWithoutAnyRequest) {
  Result<std::vector<ContainerAllocation>> r = allocator_->Allocate({{"GPU-nope-0"}});
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(fc_.fake->requests().empty());
}

TEST_F(VolcanoAllocatorTest, AnUnreadablePodListWritesNothing) {
  fc_.fake->Push("GET", kPodsUrl, FakeTransport::Json(403, R"({"reason":"Forbidden"})"));
  Result<std::vector<ContainerAllocation>> r = allocator_->Allocate({{std::string(kGpu0) + "-0"}});
  EXPECT_EQ(r.status().code(), StatusCode::kUnavailable);
  for (const std::string& t : Trace()) EXPECT_EQ(t.rfind("GET ", 0), 0u) << t;
}

TEST(VolcanoPodOf, ReadsWhatTheSelectionNeeds) {
  k8s::Object p = Pod("p", "100", "", {Container("m", "1", "2000")});
  p["spec"]["initContainers"] = k8s::Object::array({{{"name", "init"}}});
  p["spec"]["containers"][0]["resources"]["limits"]["volcano.sh/vgpu-cores"] = 50;  // a number
  p["metadata"]["deletionTimestamp"] = "2026-12-01T10:00:00Z";
  device::VolcanoPod v = VolcanoPodOf(p);
  EXPECT_EQ(v.Key(), "default/p");
  EXPECT_EQ(v.uid, "uid-p");
  EXPECT_EQ(v.node_name, "node-a");
  EXPECT_EQ(v.phase, "Pending");
  EXPECT_TRUE(v.deleting);
  EXPECT_EQ(v.annotations.at("volcano.sh/vgpu-time"), "100");
  ASSERT_EQ(v.resources.init_containers.size(), 1u);
  ASSERT_EQ(v.resources.containers.size(), 1u);
  EXPECT_EQ(v.resources.containers[0].limits.at("volcano.sh/vgpu-number"), "1");
  EXPECT_EQ(v.resources.containers[0].limits.at("volcano.sh/vgpu-cores"), "50");
}

}  // namespace
}  // namespace hami::deviceplugin
