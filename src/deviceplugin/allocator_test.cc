// The allocator on a scripted API server (FakeTransport): which requests an allocation makes, in
// which order, and what it writes. tests/deviceplugin/plugin_test.cc runs the same paths on the
// simulated API server and kubelet.
#include "deviceplugin/allocator.h"

#include <gtest/gtest.h>

#include "deviceplugin/fake_mig_driver.h"
#include "k8s/object.h"
#include "k8s/test_util.h"

namespace hami::deviceplugin {
namespace {

using k8s::FakeTransport;
using k8s::testing::FakeClient;

constexpr const char* kGpu0 = "GPU-cccccccc-0000-4000-8000-000000000000";
constexpr const char* kNodeUrl = "/api/v1/nodes/node-a";
constexpr const char* kPodUrl = "/api/v1/namespaces/default/pods/p1";

std::string NodeJson(bool locked) {
  k8s::Object n = {{"metadata", {{"name", "node-a"}, {"resourceVersion", "7"}}}};
  if (locked) {
    n["metadata"]["annotations"]["hami.io/mutex.lock"] = "2026-11-24T10:00:00Z,default,p1";
  }
  return n.dump();
}

std::string PodJson(const std::string& to_allocate, const std::string& rv) {
  k8s::Object p;
  p["metadata"] = {{"name", "p1"}, {"namespace", "default"}, {"uid", "uid-1"},
                   {"resourceVersion", rv}};
  k8s::Object& a = p["metadata"]["annotations"];
  a["hami.io/vgpu-node"] = "node-a";
  a["hami.io/vgpu-devices-to-allocate"] = to_allocate;
  a["hami.io/bind-phase"] = "allocating";
  a["hami.io/bind-time"] = "1700000001";
  p["spec"]["nodeName"] = "node-a";
  p["spec"]["containers"] = k8s::Object::array({{{"name", "main"}}});
  p["status"]["phase"] = "Pending";
  return p.dump();
}

class AllocatorTest : public ::testing::Test {
 protected:
  AllocatorTest() {
    options_.node_name = "node-a";
    options_.allocation.hook_path = dir_.path() + "/hook";
    options_.allocation.libvgpu_file = "libvgpu.so.test";
    allocator_ = std::make_unique<Allocator>(
        *fc_.client, options_,
        [] {
          ReplicaMap m;
          for (int i = 0; i < 4; ++i) m[std::string(kGpu0) + "-" + std::to_string(i)] = kGpu0;
          return m;
        },
        fc_.clock);
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
  AllocatorOptions options_;
  std::unique_ptr<Allocator> allocator_;
};

TEST_F(AllocatorTest, AllocatesTheLockHoldersPodAndReleasesTheLock) {
  fc_.fake->Push("GET", kNodeUrl, FakeTransport::Json(200, NodeJson(true)));
  fc_.fake->Push("GET", kPodUrl,
                 FakeTransport::Json(200, PodJson(std::string(kGpu0) + ",NVIDIA,8192,50:;", "11")));
  fc_.fake->Push("PATCH", kPodUrl, FakeTransport::Json(200, "{}"));
  fc_.fake->Push("PATCH", kNodeUrl, FakeTransport::Json(200, "{}"));
  Result<std::vector<ContainerAllocation>> r = allocator_->Allocate({{std::string(kGpu0) + "-2"}});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ(r->size(), 1u);
  EXPECT_EQ((*r)[0].container_name, "main");
  EXPECT_EQ(Trace(), (std::vector<std::string>{"GET " + std::string(kNodeUrl),
                                               "GET " + std::string(kPodUrl),
                                               "PATCH " + std::string(kPodUrl),
                                               "PATCH " + std::string(kNodeUrl)}));
  k8s::Object patch = Body(2);
  EXPECT_EQ(patch["metadata"]["resourceVersion"], "11");
  EXPECT_EQ(patch["metadata"]["annotations"]["hami.io/vgpu-devices-to-allocate"], ";");
  EXPECT_EQ(patch["metadata"]["annotations"]["hami.io/bind-phase"], "success");
  EXPECT_EQ(allocator_->stats().allocations, 1u);
  EXPECT_EQ(allocator_->stats().allocation_failures, 0u);
}

TEST_F(AllocatorTest, AWriteConflictReadsThePodAgain) {
  const std::string to_allocate = std::string(kGpu0) + ",NVIDIA,1000,0:;";
  fc_.fake->Push("GET", kNodeUrl, FakeTransport::Json(200, NodeJson(true)));
  fc_.fake->Push("GET", kPodUrl, FakeTransport::Json(200, PodJson(to_allocate, "11")));
  fc_.fake->Push("PATCH", kPodUrl, FakeTransport::Json(409, R"({"reason":"Conflict"})"));
  fc_.fake->Push("GET", kNodeUrl, FakeTransport::Json(200, NodeJson(true)));
  fc_.fake->Push("GET", kPodUrl, FakeTransport::Json(200, PodJson(to_allocate, "12")));
  fc_.fake->Push("PATCH", kPodUrl, FakeTransport::Json(200, "{}"));
  fc_.fake->Push("PATCH", kNodeUrl, FakeTransport::Json(200, "{}"));
  Result<std::vector<ContainerAllocation>> r = allocator_->Allocate({{std::string(kGpu0) + "-0"}});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ(fc_.fake->requests().size(), 7u);
  EXPECT_EQ(Body(5)["metadata"]["resourceVersion"], "12");
  EXPECT_EQ(allocator_->stats().allocation_failures, 0u);
}

TEST_F(AllocatorTest, NoPendingPodIsNotFoundAndWritesNothing) {
  fc_.fake->Push("GET", kNodeUrl, FakeTransport::Json(200, NodeJson(false)));
  fc_.fake->Push("GET", "/api/v1/pods", FakeTransport::Json(200, R"({"items":[]})"));
  Result<std::vector<ContainerAllocation>> r = allocator_->Allocate({{std::string(kGpu0) + "-0"}});
  EXPECT_EQ(r.status().code(), StatusCode::kNotFound);
  EXPECT_NE(r.status().message().find("no pod bound to node node-a"), std::string::npos);
  for (const std::string& t : Trace()) EXPECT_EQ(t.rfind("GET ", 0), 0u) << t;

  // PreferredAllocation without a pod: no preference, no error.
  fc_.fake->Push("GET", kNodeUrl, FakeTransport::Json(200, NodeJson(false)));
  fc_.fake->Push("GET", "/api/v1/pods", FakeTransport::Json(200, R"({"items":[]})"));
  PreferredRequest req;
  req.available = {std::string(kGpu0) + "-0", std::string(kGpu0) + "-1"};
  req.size = 1;
  std::vector<std::vector<std::string>> pref = allocator_->PreferredAllocation({req});
  ASSERT_EQ(pref.size(), 1u);
  EXPECT_TRUE(pref[0].empty());
}

TEST_F(AllocatorTest, APlanThatCannotBeMetMarksThePodFailedAndReleasesTheLock) {
  // Two GPUs reserved, one asked for.
  fc_.fake->Push("GET", kNodeUrl, FakeTransport::Json(200, NodeJson(true)));
  fc_.fake->Push("GET", kPodUrl,
                 FakeTransport::Json(200, PodJson(std::string(kGpu0) + ",NVIDIA,1000,0:" + kGpu0 +
                                                      ",NVIDIA,1000,0:;",
                                                  "11")));
  fc_.fake->Push("PATCH", kPodUrl, FakeTransport::Json(200, "{}"));
  fc_.fake->Push("POST", "/api/v1/namespaces/default/events", FakeTransport::Json(201, "{}"));
  fc_.fake->Push("PATCH", kNodeUrl, FakeTransport::Json(200, "{}"));
  Result<std::vector<ContainerAllocation>> r = allocator_->Allocate({{std::string(kGpu0) + "-0"}});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("device number not matched"), std::string::npos)
      << r.status().ToString();
  ASSERT_EQ(fc_.fake->requests().size(), 5u);
  EXPECT_EQ(Body(2)["metadata"]["annotations"]["hami.io/bind-phase"], "failed");
  EXPECT_EQ(Body(3)["reason"], "AllocationFailed");
  EXPECT_EQ(Body(3)["type"], "Warning");
  EXPECT_EQ(allocator_->stats().allocation_failures, 1u);
}

// Operating mode mig: the reservation becomes a MIG device at Allocate, the container is told
// its UUID (no libvgpu), and the runtime identity goes into the same guarded write. A write
// conflict reads the pod again and reuses the device made on the first try.
class MigAllocatorTest : public AllocatorTest {
 protected:
  MigAllocatorTest() : instances_(mig_driver_, "") {
    mig_driver_.AddGpu(kGpu0, {{0, "1g.10gb", 1, 7, 9728, 14, {{5, 1}, {6, 1}}},
                               {1, "2g.20gb", 2, 3, 19968, 28, {{0, 2}}}});
    options_.allocation.operating_mode = device::OperatingMode::kMig;
    options_.mig_instances = &instances_;
    allocator_ = std::make_unique<Allocator>(
        *fc_.client, options_, [] { return ReplicaMap{{std::string(kGpu0) + "-0", kGpu0}}; },
        fc_.clock);
  }
  static std::string MigPod(const std::string& rv, const std::string& profile) {
    k8s::Object p = *k8s::ParseObject(PodJson(std::string(kGpu0) + ",NVIDIA,9728,15:;", rv));
    p["metadata"]["annotations"]["hami.io/vgpu-mig-allocations"] =
        R"([{"containerIndex":0,"deviceIndex":0,"gpuUUID":")" + std::string(kGpu0) +
        R"(","profile":")" + profile + R"(","placement":{"start":6,"size":1}}])";
    return p.dump();
  }

  FakeMigDriver mig_driver_;
  MigInstances instances_;
};

TEST_F(MigAllocatorTest, MakesTheReservedDeviceOnceAndRecordsIt) {
  fc_.fake->Push("GET", kNodeUrl, FakeTransport::Json(200, NodeJson(true)));
  fc_.fake->Push("GET", kPodUrl, FakeTransport::Json(200, MigPod("11", "1g.10gb")));
  fc_.fake->Push("PATCH", kPodUrl, FakeTransport::Json(409, R"({"reason":"Conflict"})"));
  fc_.fake->Push("GET", kNodeUrl, FakeTransport::Json(200, NodeJson(true)));
  fc_.fake->Push("GET", kPodUrl, FakeTransport::Json(200, MigPod("12", "1g.10gb")));
  fc_.fake->Push("PATCH", kPodUrl, FakeTransport::Json(200, "{}"));
  fc_.fake->Push("PATCH", kNodeUrl, FakeTransport::Json(200, "{}"));
  Result<std::vector<ContainerAllocation>> r = allocator_->Allocate({{std::string(kGpu0) + "-0"}});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(mig_driver_.creates(), 1);  // the retry found the device the first try made
  ASSERT_EQ(mig_driver_.Instances(kGpu0).size(), 1u);
  const CreatedMigDevice made = mig_driver_.Instances(kGpu0)[0].device;
  EXPECT_EQ((*r)[0].envs, (std::map<std::string, std::string>{
                              {"NVIDIA_VISIBLE_DEVICES", made.uuid}}));
  EXPECT_TRUE((*r)[0].mounts.empty());
  k8s::Object patch = Body(5);
  EXPECT_EQ(patch["metadata"]["resourceVersion"], "12");
  std::string written = patch["metadata"]["annotations"]["hami.io/vgpu-mig-allocations"];
  EXPECT_NE(written.find("\"migUUID\":\"" + made.uuid + "\""), std::string::npos) << written;
  EXPECT_EQ(patch["metadata"]["annotations"]["hami.io/bind-phase"], "success");
}

TEST_F(MigAllocatorTest, AReservationTheDriverCannotMakeFailsThePodAndLeavesNothing) {
  fc_.fake->Push("GET", kNodeUrl, FakeTransport::Json(200, NodeJson(true)));
  fc_.fake->Push("GET", kPodUrl, FakeTransport::Json(200, MigPod("11", "3g.40gb")));
  fc_.fake->Push("PATCH", kPodUrl, FakeTransport::Json(200, "{}"));
  fc_.fake->Push("POST", "/api/v1/namespaces/default/events", FakeTransport::Json(201, "{}"));
  fc_.fake->Push("PATCH", kNodeUrl, FakeTransport::Json(200, "{}"));
  Result<std::vector<ContainerAllocation>> r = allocator_->Allocate({{std::string(kGpu0) + "-0"}});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kNotFound);
  EXPECT_NE(r.status().message().find("no MIG profile 3g.40gb"), std::string::npos);
  EXPECT_EQ(Body(2)["metadata"]["annotations"]["hami.io/bind-phase"], "failed");
  EXPECT_TRUE(mig_driver_.Instances(kGpu0).empty());
}

// Upstream's B2: there, every MIG Allocate first reclaims the devices of terminating pods and
// fails when one is still in use, so one pod's slow exit blocks every allocation on the node.
// Here a busy device of a pod being deleted stays, and another pod's Allocate is served; the
// device goes at a reclaim pass once its process has exited.
TEST_F(MigAllocatorTest, ABusyDeviceOfATerminatingPodFailsNoOtherAllocation) {
  Result<MigInstance> old =
      instances_.Ensure({"uid-old", 0, 0}, "default/old", kGpu0, "1g.10gb", {5, 1});
  ASSERT_TRUE(old.ok()) << old.status().ToString();
  mig_driver_.SetBusy(old->device.uuid, true);
  MigInstances::ReconcileResult pass = instances_.Reconcile({}, instances_.Generation());
  EXPECT_EQ(pass.in_use, std::vector<std::string>{old->device.uuid});

  fc_.fake->Push("GET", kNodeUrl, FakeTransport::Json(200, NodeJson(true)));
  fc_.fake->Push("GET", kPodUrl, FakeTransport::Json(200, MigPod("11", "1g.10gb")));
  fc_.fake->Push("PATCH", kPodUrl, FakeTransport::Json(200, "{}"));
  fc_.fake->Push("PATCH", kNodeUrl, FakeTransport::Json(200, "{}"));
  Result<std::vector<ContainerAllocation>> r = allocator_->Allocate({{std::string(kGpu0) + "-0"}});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(allocator_->stats().allocation_failures, 0u);
  EXPECT_EQ(Body(2)["metadata"]["annotations"]["hami.io/bind-phase"], "success");
  ASSERT_EQ(mig_driver_.Instances(kGpu0).size(), 2u);  // the old device waits for its process

  mig_driver_.SetBusy(old->device.uuid, false);
  EXPECT_EQ(instances_.Reconcile({"uid-1"}, instances_.Generation()).destroyed, 1);
  ASSERT_EQ(mig_driver_.Instances(kGpu0).size(), 1u);
  EXPECT_EQ(mig_driver_.Instances(kGpu0)[0].placement, (device::MigPlacement{6, 1}));
}

}  // namespace
}  // namespace hami::deviceplugin
