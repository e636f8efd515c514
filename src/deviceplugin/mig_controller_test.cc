// MigController on a scripted API server and the in-memory drivers: adoption at start from the
// pods' annotations, reclaim of finished and deleted pods' MIG devices, nothing destroyed when
// the pods cannot be listed.
#include "deviceplugin/mig_controller.h"

#include <gtest/gtest.h>

#include "deviceplugin/fake_gpu_driver.h"
#include "deviceplugin/fake_mig_driver.h"
#include "k8s/object.h"
#include "k8s/test_util.h"

namespace hami::deviceplugin {
namespace {

using k8s::FakeTransport;
using k8s::testing::FakeClient;

constexpr const char* kGpu = "GPU-dddddddd-0000-4000-8000-000000000000";

std::string Pod(const std::string& name, const std::string& phase, const std::string& mig,
                bool deleting = false) {
  k8s::Object p;
  p["metadata"] = {{"name", name}, {"namespace", "default"}, {"uid", "uid-" + name}};
  if (!mig.empty()) p["metadata"]["annotations"]["hami.io/vgpu-mig-allocations"] = mig;
  if (deleting) p["metadata"]["deletionTimestamp"] = "2026-11-28T10:00:00Z";
  p["spec"]["nodeName"] = "node-a";
  p["status"]["phase"] = phase;
  return p.dump();
}

std::string List(const std::vector<std::string>& pods) {
  std::string out = R"({"items":[)";
  for (size_t i = 0; i < pods.size(); ++i) out += (i ? "," : "") + pods[i];
  return out + "]}";
}

class MigControllerTest : public ::testing::Test {
 protected:
  MigControllerTest() : instances_(mig_, "") {
    mig_.AddGpu(kGpu, {{0, "1g.10gb", 1, 7, 9728, 14, {{4, 1}, {5, 1}, {6, 1}}}});
  }
  // The GPU as discovery sees it: the MIG devices the fake driver holds.
  void Discovered() { gpus_.SetInventory(mig_.Discovered()); }
  // The annotation of a pod whose device the driver made for it earlier.
  static std::string Named(const CreatedMigDevice& d, uint32_t start) {
    return R"([{"containerIndex":0,"deviceIndex":0,"gpuUUID":")" + std::string(kGpu) +
           R"(","profile":"1g.10gb","placement":{"start":)" + std::to_string(start) +
           R"(,"size":1},"migUUID":")" + d.uuid + R"(","gpuInstanceID":)" +
           std::to_string(d.gi_id) + R"(,"computeInstanceID":0}])";
  }

  FakeClient fc_;
  FakeGpuDriver gpus_;
  FakeMigDriver mig_;
  MigInstances instances_;
};

TEST_F(MigControllerTest, AdoptsAtStartThenReclaimsFinishedPods) {
  CreatedMigDevice a = mig_.CreateMigDevice(kGpu, 0, {6, 1}).value();
  CreatedMigDevice b = mig_.CreateMigDevice(kGpu, 0, {5, 1}).value();
  Discovered();
  fc_.fake->Push("GET", "/api/v1/pods",
                 FakeTransport::Json(200, List({Pod("a", "Running", Named(a, 6)),
                                                Pod("b", "Running", Named(b, 5)),
                                                Pod("broken", "Running", "[{\"oops\":"),
                                                Pod("plain", "Running", "")})));
  MigController c(*fc_.client, gpus_, instances_, {.node_name = "node-a"}, fc_.clock);
  ASSERT_TRUE(c.Prepare().ok());
  EXPECT_EQ(instances_.Snapshot().size(), 2u);  // the unreadable pod did not stop adoption
  c.Start(MigController::Drive::kSteps);

  // Pod a finished, pod b is being deleted and its process still runs.
  mig_.SetBusy(b.uuid, true);
  fc_.fake->Push("GET", "/api/v1/pods",
                 FakeTransport::Json(200, List({Pod("a", "Succeeded", Named(a, 6)),
                                                Pod("b", "Running", Named(b, 5), true)})));
  ASSERT_TRUE(c.Step());
  EXPECT_EQ(c.stats().destroyed, 1u);
  ASSERT_EQ(mig_.Instances(kGpu).size(), 1u);
  EXPECT_EQ(mig_.Instances(kGpu)[0].device, b);

  // The pods cannot be listed: nothing is destroyed, even though b's process has exited.
  mig_.SetBusy(b.uuid, false);
  fc_.fake->Push("GET", "/api/v1/pods", FakeTransport::Json(503, R"({"reason":"Unavailable"})"));
  fc_.clock.Advance(std::chrono::seconds(5));
  ASSERT_TRUE(c.Step());
  EXPECT_EQ(c.stats().failed_lists, 1u);
  EXPECT_EQ(mig_.Instances(kGpu).size(), 1u);

  fc_.fake->Push("GET", "/api/v1/pods", FakeTransport::Json(200, List({})));
  EXPECT_FALSE(c.Step());  // the next pass is an interval away
  fc_.clock.Advance(std::chrono::seconds(5));
  ASSERT_TRUE(c.Step());
  EXPECT_TRUE(mig_.Instances(kGpu).empty());
  EXPECT_EQ(c.stats().destroyed, 2u);
  c.Stop();
}

// Upstream's B3 and B4: there, one unreadable annotation, one pod naming a GPU that is gone, or
// one active pod whose reservation has no MIG device yet (scheduled but not allocated when the
// plugin restarted) stops adoption for every later pod, and the first two also stop reclaim.
// Here each is skipped on its own: the pods after them are adopted, and a finished pod's device
// is destroyed while those pods are still on the node.
TEST_F(MigControllerTest, NoPodsAnnotationStopsAdoptionOrReclaim) {
  CreatedMigDevice a = mig_.CreateMigDevice(kGpu, 0, {6, 1}).value();
  CreatedMigDevice b = mig_.CreateMigDevice(kGpu, 0, {5, 1}).value();
  Discovered();
  const std::string unmade = R"([{"containerIndex":0,"deviceIndex":0,"gpuUUID":")" +
                             std::string(kGpu) +
                             R"(","profile":"1g.10gb","placement":{"start":4,"size":1}}])";
  const std::string vanished =
      R"([{"containerIndex":0,"deviceIndex":0,"gpuUUID":"GPU-gone","profile":"1g.10gb",)"
      R"("placement":{"start":4,"size":1},"migUUID":"MIG-gone","gpuInstanceID":9,)"
      R"("computeInstanceID":0}])";
  std::vector<std::string> pods = {Pod("unmade", "Pending", unmade),
                                   Pod("broken", "Running", "[{\"oops\":"),
                                   Pod("vanished", "Running", vanished),
                                   Pod("a", "Running", Named(a, 6)),
                                   Pod("b", "Running", Named(b, 5))};
  fc_.fake->Push("GET", "/api/v1/pods", FakeTransport::Json(200, List(pods)));
  MigController c(*fc_.client, gpus_, instances_, {.node_name = "node-a"}, fc_.clock);
  ASSERT_TRUE(c.Prepare().ok());
  std::vector<MigInstance> owned = instances_.Snapshot();
  ASSERT_EQ(owned.size(), 2u);  // a and b, listed after the three that could not be adopted
  EXPECT_EQ(owned[0].owner.pod_uid, "uid-a");
  EXPECT_EQ(owned[1].owner.pod_uid, "uid-b");
  c.Start(MigController::Drive::kSteps);

  pods[4] = Pod("b", "Succeeded", Named(b, 5));
  fc_.fake->Push("GET", "/api/v1/pods", FakeTransport::Json(200, List(pods)));
  ASSERT_TRUE(c.Step());
  EXPECT_EQ(c.stats().passes, 1u);
  EXPECT_EQ(c.stats().destroyed, 1u);
  ASSERT_EQ(mig_.Instances(kGpu).size(), 1u);
  EXPECT_EQ(mig_.Instances(kGpu)[0].device, a);
  c.Stop();
}

}  // namespace
}  // namespace hami::deviceplugin
