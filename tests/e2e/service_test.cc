// hami-scheduler's parts against the simulated API server, without the kube-scheduler stand-in:
// the node lock protocol, ResourceQuota enforcement (webhook and filter), the full-nodes
// simulation path, and garbage request bodies.
#include <gtest/gtest.h>

#include "device/node_lock.h"
#include "k8s/typed.h"
#include "scheduler/node_locker.h"
#include "scheduler/quota.h"
#include "scheduler/test_util.h"
#include "sim/cluster/sim_cluster.h"

namespace hami::e2e {
using sim::SimCluster;
using sim::SimClusterOptions;
using sim::SplitYamlDocuments;
using sim::YamlToJson;
namespace {

using Json = nlohmann::json;
using scheduler::testing::Gpu;

Json Pod(const std::string& name, const std::string& mem, const std::string& cores = "",
         bool ignore_webhook = false) {
  Json pod;
  pod["apiVersion"] = "v1";
  pod["kind"] = "Pod";
  pod["metadata"]["name"] = name;
  if (ignore_webhook) {
    pod["metadata"]["labels"]["hami.io/webhook"] = "ignore";
    pod["spec"]["schedulerName"] = "hami-scheduler";
  }
  Json limits;
  limits["nvidia.com/gpu"] = "1";
  limits["nvidia.com/gpumem"] = mem;
  if (!cores.empty()) limits["nvidia.com/gpucores"] = cores;
  pod["spec"]["containers"] =
      Json::array({Json{{"name", "main"}, {"image", "x"}, {"resources", {{"limits", limits}}}}});
  return pod;
}

class LockTest : public ::testing::Test {
 protected:
  void SetUp() override {
    SimClusterOptions o;
    o.device_plugin = false;
    c_ = std::make_unique<SimCluster>(o);
    c_->AddNode("n1", {Gpu("GPU-1", 0, 16384)});
    for (const char* p : {"a", "b"}) {
      Json pod = Pod(p, "1000", "", true);
      pod["spec"]["schedulerName"] = "nobody";  // keep the driver away
      ASSERT_TRUE(c_->CreatePod("default", pod).ok());
    }
  }
  std::string Lock() {
    Result<k8s::Object> n = k8s::GetNode(c_->client(), "n1");
    return n.ok() ? k8s::GetString(*n, "/metadata/annotations/hami.io~1mutex.lock") : "?";
  }
  std::unique_ptr<SimCluster> c_;
  scheduler::FakeClock clock_{1'800'000'000};
};

TEST_F(LockTest, AcquireContendReleaseAndTakeOver) {
  scheduler::NodeLocker locker(c_->client(), clock_);
  ASSERT_TRUE(locker.Acquire("n1", "default", "a", nullptr).ok());
  EXPECT_EQ(Lock(), "2027-01-15T08:00:00Z,default,a");
  EXPECT_TRUE(locker.Acquire("n1", "default", "a", nullptr).ok());  // already ours
  // b must wait while a is allocating.
  ASSERT_TRUE(
      k8s::PatchPodAnnotations(c_->client(), "default", "a", {{"hami.io/bind-phase", "allocating"}})
          .ok());
  Status s = locker.Acquire("n1", "default", "b", nullptr);
  EXPECT_EQ(s.code(), StatusCode::kUnavailable) << s.ToString();
  EXPECT_NE(s.message().find("default/a"), std::string::npos);
  // Release is owner-checked.
  EXPECT_TRUE(locker.Release("n1", "default", "b").ok());
  EXPECT_EQ(Lock(), "2027-01-15T08:00:00Z,default,a");
  // a finished allocating: its lock is stale and b takes it.
  ASSERT_TRUE(
      k8s::PatchPodAnnotations(c_->client(), "default", "a", {{"hami.io/bind-phase", "success"}})
          .ok());
  ASSERT_TRUE(locker.Acquire("n1", "default", "b", nullptr).ok());
  EXPECT_EQ(Lock(), "2027-01-15T08:00:00Z,default,b");
  ASSERT_TRUE(locker.Release("n1", "default", "b").ok());
  EXPECT_EQ(Lock(), "");
}

// Bind takes the lock, then posts a Binding that stamps bind-phase: between the two the holder
// is unbound without a phase, and that is a bind in flight, not an abandoned lock.
TEST_F(LockTest, BindInFlightHoldsAndAbandonedOrMisplacedHoldersDoNot) {
  scheduler::NodeLocker locker(c_->client(), clock_);
  ASSERT_TRUE(locker.Acquire("n1", "default", "a", nullptr).ok());
  EXPECT_EQ(locker.Acquire("n1", "default", "b", nullptr).code(), StatusCode::kUnavailable);
  clock_.Advance(scheduler::kBindInFlightSeconds + 1);
  ASSERT_TRUE(locker.Acquire("n1", "default", "b", nullptr).ok());  // a's bind died
  EXPECT_NE(Lock().find(",default,b"), std::string::npos) << Lock();
  // b gets bound and allocates on n1: it holds.
  ASSERT_TRUE(
      k8s::BindPod(c_->client(), "default", "b", "", "n1", {{"hami.io/bind-phase", "allocating"}})
          .ok());
  clock_.Advance(scheduler::kBindInFlightSeconds + 1);
  EXPECT_EQ(locker.Acquire("n1", "default", "a", nullptr).code(), StatusCode::kUnavailable);
  // A holder that ended up on another node will not release n1's lock.
  ASSERT_TRUE(locker.Release("n1", "default", "b").ok());
  ASSERT_TRUE(locker.Acquire("n1", "default", "b", nullptr).ok());
  clock_.Advance(1);
  EXPECT_EQ(locker.Acquire("n1", "default", "a", nullptr).code(), StatusCode::kUnavailable);
  Json spec;
  spec["spec"]["nodeName"] = "n2";
  ASSERT_TRUE(
      c_->client().Patch(k8s::kPods, "default", "b", k8s::PatchType::kMerge, spec.dump()).ok());
  ASSERT_TRUE(locker.Acquire("n1", "default", "a", nullptr).ok());
  EXPECT_NE(Lock().find(",default,a"), std::string::npos) << Lock();
}

TEST(NodeLockTest, OnlyNodeLockChangedSeesNothingButTheLock) {
  Json before = Json::parse(R"({"metadata":{"name":"n1","resourceVersion":"1",
      "annotations":{"hami.io/node-nvidia-register":"[]"}},"status":{"allocatable":{"x":"1"}}})");
  Json locked = before;
  locked["metadata"]["resourceVersion"] = "2";
  locked["metadata"]["annotations"]["hami.io/mutex.lock"] = "2027-01-15T08:00:00Z,default,a";
  EXPECT_TRUE(scheduler::OnlyNodeLockChanged(before, locked));
  EXPECT_TRUE(scheduler::OnlyNodeLockChanged(locked, before));  // released
  Json other = locked;
  other["metadata"]["annotations"]["hami.io/node-nvidia-register"] = "[{}]";
  EXPECT_FALSE(scheduler::OnlyNodeLockChanged(locked, other));
  other = locked;
  other["status"]["allocatable"]["x"] = "0";
  EXPECT_FALSE(scheduler::OnlyNodeLockChanged(locked, other));
  other = locked;
  other["metadata"]["labels"]["gpu"] = "on";
  EXPECT_FALSE(scheduler::OnlyNodeLockChanged(locked, other));
  other = locked;
  other["metadata"]["annotations"]["hami.io/node-handshake"] = "Requesting_x";
  EXPECT_FALSE(scheduler::OnlyNodeLockChanged(locked, other));
  other = before;
  other["metadata"].erase("annotations");
  EXPECT_FALSE(scheduler::OnlyNodeLockChanged(other, before));
}

TEST_F(LockTest, ExpiredGoneAndLegacyLocks) {
  scheduler::NodeLocker locker(c_->client(), clock_);
  // A legacy bare timestamp, fresh: contention; old: taken over.
  ASSERT_TRUE(k8s::PatchNodeAnnotations(c_->client(), "n1",
                                        {{"hami.io/mutex.lock", "2027-01-15T07:59:00Z"}})
                  .ok());
  EXPECT_EQ(locker.Acquire("n1", "default", "a", nullptr).code(), StatusCode::kUnavailable);
  clock_.Advance(301);
  EXPECT_TRUE(locker.Acquire("n1", "default", "a", nullptr).ok());
  // Held by a pod that no longer exists: taken over.
  ASSERT_TRUE(k8s::PatchNodeAnnotations(
                  c_->client(), "n1", {{"hami.io/mutex.lock", "2027-01-15T08:05:00Z,default,gone"}})
                  .ok());
  EXPECT_TRUE(locker.Acquire("n1", "default", "b", nullptr).ok());
  // Garbage: taken over.
  ASSERT_TRUE(k8s::PatchNodeAnnotations(c_->client(), "n1", {{"hami.io/mutex.lock", "a,b"}}).ok());
  EXPECT_TRUE(locker.Acquire("n1", "default", "a", nullptr).ok());
  // A stale cached copy only costs a retry.
  k8s::Object stale = k8s::GetNode(c_->client(), "n1").value();
  ASSERT_TRUE(locker.Release("n1", "default", "a").ok());
  EXPECT_TRUE(locker.Acquire("n1", "default", "b", &stale).ok());
  EXPECT_NE(Lock().find(",default,b"), std::string::npos);
}

// A device plugin that acknowledged the allocation but died before clearing the node lock: the
// scheduler clears it once the grace has passed, and never while the pod is still allocating.
TEST(ServiceTest, ReleasesTheLockOfAFinishedHolderItsPluginLeftBehind) {
  SimClusterOptions o;
  o.device_plugin = false;
  o.scheduler.lock_release_grace = std::chrono::milliseconds(0);
  SimCluster c(o);
  c.AddNode("n1", {Gpu("GPU-1", 0, 16384)});
  ASSERT_TRUE(c.CreatePod("default", Pod("p", "1000")).ok());
  ASSERT_TRUE(SimCluster::WaitFor([&] { return !c.BoundNode("default", "p").empty(); }));
  auto lock = [&] {
    Result<k8s::Object> n = k8s::GetNode(c.client(), "n1");
    return n.ok() ? k8s::GetString(*n, "/metadata/annotations/hami.io~1mutex.lock") : "?";
  };
  EXPECT_NE(lock().find(",default,p"), std::string::npos) << lock();
  EXPECT_EQ(c.Annotation("default", "p", "hami.io/bind-phase"), "allocating");
  // An unrelated change to the pod while it allocates does not release anything.
  ASSERT_TRUE(k8s::PatchPodAnnotations(c.client(), "default", "p", {{"example.com/x", "1"}}).ok());
  EXPECT_NE(lock().find(",default,p"), std::string::npos) << lock();
  EXPECT_EQ(c.scheduler().stats().locks_released, 0u);
  ASSERT_TRUE(
      k8s::PatchPodAnnotations(c.client(), "default", "p", {{"hami.io/bind-phase", "success"}})
          .ok());
  EXPECT_TRUE(SimCluster::WaitFor([&] { return lock().empty(); })) << lock();
  EXPECT_TRUE(SimCluster::WaitFor([&] { return c.scheduler().stats().locks_released == 1; }));
}

TEST(ServiceTest, QuotaEnforcedByWebhookAndFilter) {
  SimCluster c;
  c.AddNode("n1", {Gpu("GPU-1", 0, 32768), Gpu("GPU-2", 1, 32768)});
  Json quota;
  quota["apiVersion"] = "v1";
  quota["kind"] = "ResourceQuota";
  quota["metadata"]["name"] = "gpu-quota";
  quota["spec"]["hard"]["limits.nvidia.com/gpumem"] = "10000";
  quota["spec"]["hard"]["limits.nvidia.com/gpucores"] = "not-a-number";  // reported, skipped
  k8s::Resource quotas{"v1", "resourcequotas", true};
  ASSERT_TRUE(c.client().Create(quotas, "default", quota).ok());
  ASSERT_TRUE(SimCluster::WaitFor([&] {
    return c.scheduler().Metrics().find("hami_resource_quota_limit") != std::string::npos;
  }));
  ASSERT_TRUE(c.CreatePod("default", Pod("q1", "8000")).ok());
  ASSERT_TRUE(SimCluster::WaitFor([&] { return !c.BoundNode("default", "q1").empty(); }));
  // The webhook refuses what cannot fit the quota.
  Result<k8s::Object> denied = c.CreatePod("default", Pod("q2", "4000"));
  ASSERT_FALSE(denied.ok());
  EXPECT_NE(denied.status().message().find("exceeding resource quota"), std::string::npos)
      << denied.status().ToString();
  // A pod that skips the webhook is held back by the filter.
  ASSERT_TRUE(c.CreatePod("default", Pod("q3", "4000", "", true)).ok());
  ASSERT_TRUE(SimCluster::WaitFor([&] {
    for (const k8s::Object& e : c.Events("default", "q3")) {
      if (k8s::GetString(e, "/message").find("ResourceQuotaNotFit") != std::string::npos) {
        return true;
      }
    }
    return false;
  }));
  EXPECT_EQ(c.BoundNode("default", "q3"), "");
  std::string metrics = c.scheduler().Metrics();
  EXPECT_NE(metrics.find("hami_resource_quota_used{"), std::string::npos);
  EXPECT_NE(metrics.find("hami_gpu_memory_allocated_bytes{"), std::string::npos);
}

TEST(ServiceTest, GarbageBodiesAndSimulationPath) {
  SimClusterOptions o;
  o.device_plugin = false;
  SimCluster c(o);
  c.AddNode("n1", {Gpu("GPU-1", 0, 16384)});
  scheduler::SchedulerService& s = c.scheduler();
  for (const char* body :
       {"", "not json", "[]", "{}", "{\"pod\": 3}", "{\"pod\":{},\"nodenames\":7}",
        "{\"pod\":{\"spec\":{\"containers\":[{\"resources\":{\"limits\":"
        "{\"nvidia.com/gpu\":\"-1\"}}}]}},\"nodenames\":[\"n1\"]}",
        "{\"pod\":{\"spec\":{\"containers\":[{\"resources\":{\"limits\":"
        "{\"nvidia.com/gpu\":\"1\",\"nvidia.com/gpumem\":\"lots\"}}}]}},"
        "\"nodenames\":[\"n1\"]}"}) {
    Result<Json> r = k8s::ParseJson(s.Filter(body));
    ASSERT_TRUE(r.ok()) << body;
    EXPECT_TRUE(r->contains("error")) << body << " -> " << r->dump();
  }
  for (const char* body :
       {"", "x", "[]", "{}", "{\"podName\":\"p\"}",
        "{\"podName\":\"missing\",\"podNamespace\":\"default\",\"node\":\"n1\"}"}) {
    Result<Json> r = k8s::ParseJson(s.Bind(body));
    ASSERT_TRUE(r.ok()) << body;
    EXPECT_TRUE(r->contains("error")) << body;
  }
  EXPECT_FALSE(s.Webhook("garbage").ok());
  // A pod asking for nothing keeps every node.
  Json plain = {{"pod", {{"metadata", {{"name", "p"}, {"uid", "u"}}}}},
                {"nodenames", {"n1", "n2"}}};
  EXPECT_EQ(k8s::ParseJson(s.Filter(plain.dump())).value()["nodenames"].size(), 2u);
  // Simulation path (full Node objects, as the cluster autoscaler sends): no reservation.
  Json node = k8s::GetNode(c.client(), "n1").value();
  Json sim = {{"pod", Pod("sim", "1000")}, {"nodes", {{"items", Json::array({node})}}}};
  sim["pod"]["metadata"]["uid"] = "sim-uid";
  Json out = k8s::ParseJson(s.Filter(sim.dump())).value();
  ASSERT_EQ(out["nodes"]["items"].size(), 1u) << out.dump();
  EXPECT_EQ(k8s::Name(out["nodes"]["items"][0]), "n1");
  EXPECT_EQ(s.LedgerDump().find("sim-uid"), std::string::npos);
  Json too_big = sim;
  too_big["pod"] = Pod("sim", "99999");
  out = k8s::ParseJson(s.Filter(too_big.dump())).value();
  EXPECT_TRUE(out["nodes"]["items"].empty());
  EXPECT_EQ(out["failedNodes"]["n1"], "1/1 CardInsufficientMemory");
}

TEST(ServiceTest, NodeLeavesWhenItsDevicePluginGoesAway) {
  SimClusterOptions o;
  o.device_plugin = false;
  SimCluster c(o);
  c.AddNode("n1", {Gpu("GPU-gone", 0, 16384)});
  // The scheduler asked for a registration (handshake) when it first saw the node.
  EXPECT_TRUE(SimCluster::WaitFor([&] {
    Result<k8s::Object> n = k8s::GetNode(c.client(), "n1");
    return n.ok() && k8s::GetString(*n, "/metadata/annotations/hami.io~1node-handshake")
                             .rfind("Requesting_", 0) == 0;
  }));
  // Allocatable drops to 0 (kubelet lost the plugin): the node is taken out and asked to
  // register again.
  Json patch;
  patch["status"]["allocatable"]["nvidia.com/gpu"] = "0";
  ASSERT_TRUE(
      c.client().Patch(k8s::kNodes, "", "n1", k8s::PatchType::kMerge, patch.dump(), "status").ok());
  EXPECT_TRUE(SimCluster::WaitFor(
      [&] { return c.scheduler().LedgerDump().find("GPU-gone") == std::string::npos; }));
  EXPECT_TRUE(SimCluster::WaitFor([&] {
    Result<k8s::Object> n = k8s::GetNode(c.client(), "n1");
    return n.ok() && k8s::GetString(*n, "/metadata/annotations/hami.io~1node-handshake").empty();
  }));
  // It stays out (no flapping back in) until the device plugin is back.
  EXPECT_EQ(c.scheduler().LedgerDump().find("GPU-gone"), std::string::npos);
  patch["status"]["allocatable"]["nvidia.com/gpu"] = "10";
  ASSERT_TRUE(
      c.client().Patch(k8s::kNodes, "", "n1", k8s::PatchType::kMerge, patch.dump(), "status").ok());
  EXPECT_TRUE(SimCluster::WaitFor(
      [&] { return c.scheduler().LedgerDump().find("GPU-gone") != std::string::npos; }));
}

TEST(ServiceTest, FollowsTheLeaseOfItsKubeScheduler) {
  SimClusterOptions o;
  o.device_plugin = false;
  o.scheduler.leader_elect = true;
  o.scheduler.identity = "host-a";
  o.scheduler.lease_namespace = "default";
  o.scheduler.lease_poll = std::chrono::milliseconds(50);
  o.scheduler.filter_ready_wait = std::chrono::milliseconds(200);
  SimCluster c(o);
  auto lease = [&](const std::string& holder) {
    Json l;
    l["apiVersion"] = "coordination.k8s.io/v1";
    l["kind"] = "Lease";
    l["metadata"]["name"] = "hami-scheduler";
    l["spec"]["holderIdentity"] = holder;
    l["spec"]["leaseDurationSeconds"] = 15;
    l["spec"]["renewTime"] = "2026-11-22T00:00:00.000000Z";
    Result<k8s::Object> old = k8s::GetLease(c.client(), "default", "hami-scheduler");
    if (old.ok()) {
      l["metadata"]["resourceVersion"] = k8s::ResourceVersion(*old);
      return k8s::UpdateLease(c.client(), "default", l).ok();
    }
    return k8s::CreateLease(c.client(), "default", l).ok();
  };
  ASSERT_TRUE(lease("host-b_1234"));
  // A filter waits (filter_ready_wait, several lease polls) and is refused: another host leads.
  Json args = {{"pod", Pod("p", "1000")}, {"nodenames", {"n1"}}};
  args["pod"]["metadata"]["uid"] = "u1";
  Json out = k8s::ParseJson(c.scheduler().Filter(args.dump())).value();
  EXPECT_NE(out.value("error", "").find("not the leader"), std::string::npos) << out.dump();
  EXPECT_FALSE(c.scheduler().IsLeader());
  EXPECT_FALSE(c.scheduler().Ready());
  // Our kube-scheduler sidecar (same host) takes the lease: the extender leads.
  ASSERT_TRUE(lease("host-a_5678"));
  EXPECT_TRUE(SimCluster::WaitFor([&] { return c.scheduler().Ready(); }));
  // The sidecar stops renewing... a holder change away from us ends leadership.
  ASSERT_TRUE(lease("host-b_9999"));
  EXPECT_TRUE(SimCluster::WaitFor([&] { return !c.scheduler().IsLeader(); }));
}

}  // namespace
}  // namespace hami::e2e
