// The extender service's parts on their own, on a scripted API (FakeTransport) and virtual time
// (FakeClock), with no threads started: each test drives the part's queue itself.
#include <gtest/gtest.h>

#include <chrono>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "device/node_lock.h"
#include "device/node_locker.h"
#include "extender/lease_follower.h"
#include "extender/lease_test_util.h"
#include "extender/lock_releaser.h"
#include "k8s/test_util.h"

namespace hami::extender {
namespace {

using Json = nlohmann::json;
using k8s::FakeTransport;
using testing::kLeasePath;
using testing::Lease;
using std::chrono::milliseconds;
using std::chrono::seconds;

Json NodeLockedBy(const std::string& pod, int64_t now) {
  Json n = {{"apiVersion", "v1"},
            {"kind", "Node"},
            {"metadata", {{"name", "node-a"}, {"resourceVersion", "5"}}}};
  if (!pod.empty()) {
    device::NodeLockValue held;
    held.time.unix_seconds = now;
    held.pod_namespace = "default";
    held.pod_name = pod;
    n["metadata"]["annotations"][std::string(device::kNodeLockAnnotation)] =
        device::EncodeNodeLock(held);
  }
  return n;
}

k8s::Object PodWithPhase(const std::string& name, const std::string& bind_phase) {
  Json p = {{"apiVersion", "v1"},
            {"kind", "Pod"},
            {"metadata",
             {{"name", name},
              {"namespace", "default"},
              {"uid", "uid-" + name},
              {"annotations", {{"hami.io/bind-phase", bind_phase}}}}},
            {"spec", {{"nodeName", "node-a"}}},
            {"status", {{"phase", "Running"}}}};
  return k8s::ParseObject(p.dump()).value();
}

std::vector<std::string> Writes(const FakeTransport& fake) {
  std::vector<std::string> out;
  for (const k8s::HttpRequest& r : fake.requests()) {
    if (r.method != "GET") out.push_back(r.method + " " + r.url);
  }
  return out;
}

class LockReleaserTest : public ::testing::Test {
 protected:
  LockReleaserTest()
      : locker_(*fc_.client, fc_.clock),
        releaser_(locker_, fc_.clock, seconds(2),
                  [this](const std::string&) { return node_; }) {}

  void ShowNode(const std::string& holder) {
    node_ = std::make_shared<const k8s::Object>(
        k8s::ParseObject(NodeLockedBy(holder, fc_.clock.NowUnixSeconds()).dump()).value());
  }

  k8s::testing::FakeClient fc_;
  device::NodeLocker locker_;
  k8s::ObjectPtr node_;
  LockReleaser releaser_;
};

TEST_F(LockReleaserTest, AFinishedHoldersLockIsClearedOnlyAfterTheGrace) {
  ShowNode("p");
  releaser_.ObservePod(PodWithPhase("p", "success"), /*gone=*/false);
  EXPECT_EQ(releaser_.stats().queued, 1u);
  EXPECT_FALSE(releaser_.ProcessOne());  // the device plugin has the grace to clear it
  fc_.clock.Advance(milliseconds(1900));
  EXPECT_FALSE(releaser_.ProcessOne());
  fc_.fake->Push("PATCH", "/api/v1/nodes/node-a",
                 FakeTransport::Json(200, NodeLockedBy("", 0).dump()));
  fc_.clock.Advance(milliseconds(400));  // the grace, rounded up to the 250 ms grid
  ASSERT_TRUE(releaser_.ProcessOne());
  EXPECT_EQ(Writes(*fc_.fake),
            std::vector<std::string>{"PATCH https://api.test:6443/api/v1/nodes/node-a"});
  EXPECT_EQ(releaser_.stats().released, 1u);
}

TEST_F(LockReleaserTest, AHolderStillAllocatingOrAnotherPodsLockIsLeftAlone) {
  ShowNode("p");
  releaser_.ObservePod(PodWithPhase("p", "allocating"), false);
  releaser_.ObservePod(PodWithPhase("q", "success"), false);  // the lock is p's, not q's
  EXPECT_EQ(releaser_.stats().queued, 0u);
  fc_.clock.Advance(seconds(5));
  EXPECT_FALSE(releaser_.ProcessOne());
  EXPECT_TRUE(Writes(*fc_.fake).empty());
}

TEST_F(LockReleaserTest, ALockTheDevicePluginClearedDuringTheGraceIsNotWritten) {
  ShowNode("p");
  releaser_.ObservePod(PodWithPhase("p", "failed"), false);
  ShowNode("");  // the plugin cleared it
  fc_.clock.Advance(seconds(3));
  ASSERT_TRUE(releaser_.ProcessOne());
  EXPECT_TRUE(Writes(*fc_.fake).empty());
  EXPECT_EQ(releaser_.stats().released, 0u);
}

TEST_F(LockReleaserTest, AFailedReleaseIsRetriedWithBackoff) {
  ShowNode("p");
  releaser_.ObservePod(PodWithPhase("p", "success"), /*gone=*/true);
  fc_.fake->Push("PATCH", "/api/v1/nodes/node-a",
                 FakeTransport::Json(500, R"({"kind":"Status","code":500,"message":"boom"})"));
  fc_.clock.Advance(seconds(3));
  ASSERT_TRUE(releaser_.ProcessOne());
  EXPECT_EQ(releaser_.stats().released, 0u);
  EXPECT_FALSE(releaser_.ProcessOne());  // not at once: after the first backoff step
  fc_.fake->Push("PATCH", "/api/v1/nodes/node-a",
                 FakeTransport::Json(200, NodeLockedBy("", 0).dump()));
  fc_.clock.Advance(milliseconds(100));
  ASSERT_TRUE(releaser_.ProcessOne());
  EXPECT_EQ(releaser_.stats().released, 1u);
}


TEST(LeaseFollowerTest, LeadsWithoutLeaderElection) {
  k8s::testing::FakeClient fc;
  LeaseFollower lease(*fc.client, fc.clock, LeaseFollowerOptions{}, nullptr);
  EXPECT_TRUE(lease.IsLeader());
  lease.FollowOnce();
  EXPECT_TRUE(lease.IsLeader());
  EXPECT_TRUE(fc.fake->requests().empty());
}

TEST(LeaseFollowerTest, LeadsWhileItsIdentityHoldsAFreshLeaseAndLabelsItsPod) {
  k8s::testing::FakeClient fc;
  LeaseFollowerOptions o;
  o.enabled = true;
  o.identity = "me";
  o.pod_namespace = "kube-system";
  o.pod_name = "hami-scheduler-0";
  std::vector<bool> changes;
  LeaseFollower lease(*fc.client, fc.clock, o, [&](bool leader) {
    EXPECT_EQ(lease.IsLeader(), leader);  // already answering the new state
    changes.push_back(leader);
  });
  EXPECT_FALSE(lease.IsLeader());
  const std::string pod = "/api/v1/namespaces/kube-system/pods/hami-scheduler-0";
  fc.fake->Push("GET", kLeasePath, Lease("me_0a1b", "t1"));
  fc.fake->Push("PATCH", pod, FakeTransport::Json(200, R"({"kind":"Pod"})"));
  lease.FollowOnce();
  EXPECT_TRUE(lease.IsLeader());
  fc.fake->Push("GET", kLeasePath, Lease("me_0a1b", "t2"));
  lease.FollowOnce();  // still ours: no change, no write
  fc.fake->Push("GET", kLeasePath, Lease("other_9", "t3"));
  fc.fake->Push("PATCH", pod, FakeTransport::Json(200, R"({"kind":"Pod"})"));
  lease.FollowOnce();
  EXPECT_FALSE(lease.IsLeader());
  EXPECT_EQ(changes, (std::vector<bool>{true, false}));
  std::vector<std::string> labels;
  for (const k8s::HttpRequest& r : fc.fake->requests()) {
    if (r.method == "PATCH") labels.push_back(r.body);
  }
  ASSERT_EQ(labels.size(), 2u);
  EXPECT_NE(labels[0].find("\"leader\""), std::string::npos) << labels[0];
  EXPECT_NE(labels[1].find("\"follower\""), std::string::npos) << labels[1];
}

TEST(LeaseFollowerTest, AnUnreadableLeaseMeansFollowing) {
  k8s::testing::FakeClient fc(k8s::testing::FakeClient::DefaultConfig(), k8s::RetryPolicy{1});
  LeaseFollowerOptions o;
  o.enabled = true;
  o.identity = "me";
  LeaseFollower lease(*fc.client, fc.clock, o, nullptr);
  fc.fake->Push("GET", kLeasePath, Lease("me_0a1b", "t1"));
  lease.FollowOnce();
  ASSERT_TRUE(lease.IsLeader());
  fc.fake->Push("GET", kLeasePath,
                FakeTransport::Json(404, R"({"kind":"Status","code":404,"reason":"NotFound"})"));
  lease.FollowOnce();
  EXPECT_FALSE(lease.IsLeader());
}

}  // namespace
}  // namespace hami::extender
