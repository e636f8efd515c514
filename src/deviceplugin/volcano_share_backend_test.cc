// VolcanoShareBackend on a scripted API server (FakeTransport): which pod and container it serves
// in Volcano's GPU sharing and GPU number modes, what the container gets, what it writes, and
// when it releases Volcano's `gpu` node lock.
#include "deviceplugin/volcano_share_backend.h"

#include <gtest/gtest.h>

#include "k8s/object.h"
#include "k8s/test_util.h"

namespace hami::deviceplugin {
namespace {

using k8s::FakeTransport;
using k8s::testing::FakeClient;

constexpr const char* kGpu0 = "GPU-eeeeeeee-0000-4000-8000-000000000000";
constexpr const char* kGpu1 = "GPU-ffffffff-0000-4000-8000-000000000000";
constexpr const char* kNodeUrl = "/api/v1/nodes/node-a";
constexpr const char* kPodsUrl = "/api/v1/pods";
constexpr const char* kEventsUrl = "/api/v1/namespaces/default/events";

std::string PodUrl(const std::string& name) { return "/api/v1/namespaces/default/pods/" + name; }

k8s::Object Container(const std::string& name, const char* resource, const char* value) {
  k8s::Object c = {{"name", name}};
  if (resource != nullptr) c["resources"]["limits"][resource] = value;
  return c;
}

k8s::Object Pod(const std::string& name, const char* time, const char* index,
                std::vector<k8s::Object> containers) {
  k8s::Object p;
  p["metadata"] = {{"name", name}, {"namespace", "default"}, {"uid", "uid-" + name},
                   {"resourceVersion", "21"}};
  k8s::Object& a = p["metadata"]["annotations"];
  a = k8s::Object::object();
  if (time != nullptr) a["volcano.sh/predicate-time"] = time;
  if (index != nullptr) a["volcano.sh/gpu-index"] = index;
  p["spec"]["nodeName"] = "node-a";
  p["spec"]["containers"] = containers;
  p["status"]["phase"] = "Pending";
  return p;
}

std::string List(std::vector<k8s::Object> pods) { return k8s::Object{{"items", pods}}.dump(); }

class VolcanoShareBackendTest : public ::testing::Test {
 protected:
  VolcanoShareBackendTest() {
    options_.node_name = "node-a";
    options_.allocation.hook_path = dir_.path() + "/hook";
    options_.allocation.libvgpu_file = "libvgpu.so.test";
    options_.memory_factor = 2;
    gpus_.resize(2);
    for (uint32_t i = 0; i < 2; ++i) {
      gpus_[i].id = i == 0 ? kGpu0 : kGpu1;
      gpus_[i].index = i;
      gpus_[i].devmem = 16384;
      gpus_[i].health = true;
    }
    Make();
  }
  void Make() {
    backend_ = std::make_unique<VolcanoShareBackend>(
        *fc_.client, options_,
        [this](uint64_t, std::chrono::milliseconds, std::vector<PluginDevice>* out) {
          out->clear();
          for (const device::DeviceInfo& g : gpus_) {
            if (options_.mode == device::VolcanoShareMode::kNumber) {
              out->push_back({g.id, g.id, g.health, -1});
              continue;
            }
            for (int j = 0; j < 4; ++j) {
              out->push_back({std::to_string(g.index) + "-" + std::to_string(j), g.id, g.health,
                              -1});
            }
          }
          return uint64_t{1};
        },
        [this] { return gpus_; });
  }
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
  VolcanoShareOptions options_;
  std::vector<device::DeviceInfo> gpus_;
  std::unique_ptr<VolcanoShareBackend> backend_;
};

TEST_F(VolcanoShareBackendTest, SharingServesTheOldestPodWithItsGpuByUuidAndReleasesTheLock) {
  fc_.fake->Push(
      "GET", kPodsUrl,
      FakeTransport::Json(200, List({Pod("young", "200", "0",
                                         {Container("m", "volcano.sh/gpu-memory", "2")}),
                                     Pod("old", "100", "1",
                                         {Container("m", "volcano.sh/gpu-memory", "2")})})));
  fc_.fake->Push("PATCH", PodUrl("old"), FakeTransport::Json(200, "{}"));
  fc_.fake->Push("PATCH", kNodeUrl, FakeTransport::Json(200, "{}"));
  Result<std::vector<ContainerAllocation>> r = backend_->Allocate({{"0-0", "0-1"}});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  const ContainerAllocation& a = (*r)[0];
  EXPECT_EQ(a.container_name, "m");
  EXPECT_EQ(a.envs.at("NVIDIA_VISIBLE_DEVICES"), kGpu1);  // gpu-index 1, not kubelet's IDs
  EXPECT_EQ(a.envs.at("VOLCANO_GPU_ALLOCATED"), "4");      // 2 units x factor 2, MiB
  EXPECT_EQ(a.envs.at("VOLCANO_GPU_MEMORY_TOTAL"), "16384");
  EXPECT_EQ(a.envs.count("CUDA_DEVICE_MEMORY_LIMIT_0"), 0u);  // not enforced by default
  EXPECT_TRUE(a.mounts.empty());
  EXPECT_EQ(Trace(), (std::vector<std::string>{"GET " + std::string(kPodsUrl),
                                               "PATCH " + PodUrl("old"),
                                               "PATCH " + std::string(kNodeUrl)}));
  k8s::Object patch = Body(1);
  EXPECT_EQ(patch["metadata"]["resourceVersion"], "21");
  EXPECT_EQ(patch["metadata"]["annotations"]["hami.io/volcano-gpu-containers-served"], "1");
  EXPECT_EQ(patch["metadata"]["annotations"]["volcano.sh/gpu-assigned"], "true");
  EXPECT_EQ(fc_.fake->requests()[2].body,
            R"([{"op":"remove","path":"/metadata/annotations/gpu"}])");
  EXPECT_EQ(backend_->stats().allocations, 1u);
}

TEST_F(VolcanoShareBackendTest, EnforcedSharingGivesTheLibvgpuContract) {
  options_.enforce_memory = true;
  Make();
  fc_.fake->Push("GET", kPodsUrl,
                 FakeTransport::Json(200, List({Pod("p", "1", "0",
                                                    {Container("m", "volcano.sh/gpu-memory",
                                                               "3")})})));
  fc_.fake->Push("PATCH", PodUrl("p"), FakeTransport::Json(200, "{}"));
  fc_.fake->Push("PATCH", kNodeUrl, FakeTransport::Json(200, "{}"));
  Result<std::vector<ContainerAllocation>> r = backend_->Allocate({{"1-0", "1-1", "1-2"}});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  const ContainerAllocation& a = (*r)[0];
  EXPECT_EQ(a.envs.at("NVIDIA_VISIBLE_DEVICES"), kGpu0);
  EXPECT_EQ(a.envs.at("CUDA_DEVICE_MEMORY_LIMIT_0"), "6m");
  EXPECT_EQ(a.envs.count("CUDA_DEVICE_SM_LIMIT"), 0u);
  EXPECT_EQ(a.envs.at("VOLCANO_GPU_ALLOCATED"), "6");
  EXPECT_EQ(a.host_dir, dir_.path() + "/hook/vgpu/containers/uid-p_m");
  EXPECT_FALSE(a.mounts.empty());
}

TEST_F(VolcanoShareBackendTest, GpuNumberGivesEachContainerItsSliceAndNeedsNoLock) {
  options_.mode = device::VolcanoShareMode::kNumber;
  Make();
  k8s::Object pod = Pod("train", "5", "1,0",
                        {Container("a", "volcano.sh/gpu-number", "1"),
                         Container("b", "volcano.sh/gpu-number", "1")});
  fc_.fake->Push("GET", kPodsUrl, FakeTransport::Json(200, List({pod})));
  fc_.fake->Push("PATCH", PodUrl("train"), FakeTransport::Json(200, "{}"));
  Result<std::vector<ContainerAllocation>> first = backend_->Allocate({{kGpu0}});
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  EXPECT_EQ((*first)[0].container_name, "a");
  EXPECT_EQ((*first)[0].envs.at("NVIDIA_VISIBLE_DEVICES"), kGpu1);
  EXPECT_EQ((*first)[0].envs.at("VOLCANO_GPU_ALLOCATED"), "16384");
  EXPECT_EQ(Body(1)["metadata"]["annotations"].count("volcano.sh/gpu-assigned"), 0u);
  pod["metadata"]["annotations"]["hami.io/volcano-gpu-containers-served"] = "1";
  fc_.fake->Push("GET", kPodsUrl, FakeTransport::Json(200, List({pod})));
  fc_.fake->Push("PATCH", PodUrl("train"), FakeTransport::Json(200, "{}"));
  Result<std::vector<ContainerAllocation>> second = backend_->Allocate({{kGpu1}});
  ASSERT_TRUE(second.ok()) << second.status().ToString();
  EXPECT_EQ((*second)[0].container_name, "b");
  EXPECT_EQ((*second)[0].envs.at("NVIDIA_VISIBLE_DEVICES"), kGpu0);
  EXPECT_EQ(Body(3)["metadata"]["annotations"]["volcano.sh/gpu-assigned"], "true");
  // No PATCH of the node: GPU number takes no lock.
  EXPECT_EQ(Trace(), (std::vector<std::string>{"GET " + std::string(kPodsUrl),
                                               "PATCH " + PodUrl("train"),
                                               "GET " + std::string(kPodsUrl),
                                               "PATCH " + PodUrl("train")}));
}

TEST_F(VolcanoShareBackendTest, AnUnhealthyGpuFailsThePodWithAnEventAndItIsNotPickedAgain) {
  gpus_[1].health = false;
  fc_.fake->Push("GET", kPodsUrl,
                 FakeTransport::Json(200, List({Pod("p", "1", "1",
                                                    {Container("m", "volcano.sh/gpu-memory",
                                                               "1")})})));
  fc_.fake->Push("PATCH", PodUrl("p"), FakeTransport::Json(200, "{}"));
  fc_.fake->Push("POST", kEventsUrl, FakeTransport::Json(201, "{}"));
  fc_.fake->Push("PATCH", kNodeUrl, FakeTransport::Json(200, "{}"));
  Result<std::vector<ContainerAllocation>> r = backend_->Allocate({{"0-0"}});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(r.status().message().find(std::string("GPU 1 (") + kGpu1 + ") is unhealthy"),
            std::string::npos)
      << r.status().message();
  EXPECT_EQ(Body(1)["metadata"]["annotations"]["hami.io/volcano-gpu-allocation-failed"],
            std::string("GPU 1 (") + kGpu1 + ") is unhealthy");
  k8s::Object event = Body(2);
  EXPECT_EQ(event["reason"], "AllocationFailed");
  EXPECT_EQ(event["type"], "Warning");
  EXPECT_EQ(backend_->stats().allocation_failures, 1u);
}

TEST_F(VolcanoShareBackendTest, NothingToServeReleasesTheLockAndUnknownIdsAreRefused) {
  fc_.fake->Push("GET", kPodsUrl, FakeTransport::Json(200, List({})));
  fc_.fake->Push("PATCH", kNodeUrl, FakeTransport::Json(200, "{}"));
  Result<std::vector<ContainerAllocation>> r = backend_->Allocate({{"0-0"}});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kNotFound);
  EXPECT_EQ(Trace(), (std::vector<std::string>{"GET " + std::string(kPodsUrl),
                                               "PATCH " + std::string(kNodeUrl)}));
  Result<std::vector<ContainerAllocation>> bad = backend_->Allocate({{"7-0"}});
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(Trace().size(), 2u);  // no request for an unknown ID
}

TEST_F(VolcanoShareBackendTest, AWriteConflictReadsThePodsAgain) {
  const k8s::Object pod =
      Pod("p", "1", "0", {Container("m", "volcano.sh/gpu-memory", "1")});
  for (int i = 0; i < 2; ++i) {
    fc_.fake->Push("GET", kPodsUrl, FakeTransport::Json(200, List({pod})));
  }
  fc_.fake->Push("PATCH", PodUrl("p"),
                 FakeTransport::Json(409, R"({"kind":"Status","reason":"Conflict","code":409})"));
  fc_.fake->Push("PATCH", PodUrl("p"), FakeTransport::Json(200, "{}"));
  fc_.fake->Push("PATCH", kNodeUrl, FakeTransport::Json(200, "{}"));
  Result<std::vector<ContainerAllocation>> r = backend_->Allocate({{"0-0"}});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(Trace().size(), 5u);
}

}  // namespace
}  // namespace hami::deviceplugin
