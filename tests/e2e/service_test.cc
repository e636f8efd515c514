// hami-scheduler's parts against the simulated API server, without the kube-scheduler stand-in:
// the node lock protocol, ResourceQuota enforcement (webhook and filter), the full-nodes
// simulation path, and garbage request bodies.
#include <gtest/gtest.h>

#include <ctime>
#include <regex>
#include <thread>

#include "device/node_lock.h"
#include "device/node_locker.h"
#include "extender/k8s_objects.h"
#include "extender/quota.h"
#include "k8s/typed.h"
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
  hami::FakeClock clock_{1'800'000'000};
};

TEST_F(LockTest, AcquireContendReleaseAndTakeOver) {
  device::NodeLocker locker(c_->client(), clock_);
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

// A vendor's own time-stamped lock (Cambricon's): taken when absent, refused while younger than
// two minutes, taken over once older or unreadable, cleared on request.
TEST_F(LockTest, ATimestampLockIsRefusedForTwoMinutesThenTakenOver) {
  const std::string key = "cambricon.com/dsmlu.lock";
  auto held = [&] {
    Result<k8s::Object> n = k8s::GetNode(c_->client(), "n1");
    return n.ok() ? k8s::GetString(*n, "/metadata/annotations/cambricon.com~1dsmlu.lock") : "?";
  };
  ASSERT_TRUE(device::TakeTimestampLock(c_->client(), clock_, "n1", key).ok());
  EXPECT_EQ(held(), "2027-01-15T08:00:00Z");
  clock_.Advance(std::chrono::seconds(119));
  Status busy = device::TakeTimestampLock(c_->client(), clock_, "n1", key);
  EXPECT_EQ(busy.code(), StatusCode::kUnavailable) << busy.ToString();
  EXPECT_NE(busy.message().find("119 s old"), std::string::npos) << busy.message();
  clock_.Advance(std::chrono::seconds(1));
  ASSERT_TRUE(device::TakeTimestampLock(c_->client(), clock_, "n1", key).ok());
  EXPECT_EQ(held(), "2027-01-15T08:02:00Z");
  ASSERT_TRUE(k8s::PatchNodeAnnotations(c_->client(), "n1", {{key, "garbage"}}).ok());
  ASSERT_TRUE(device::TakeTimestampLock(c_->client(), clock_, "n1", key).ok());
  EXPECT_EQ(held(), "2027-01-15T08:02:00Z");
  ASSERT_TRUE(device::ClearTimestampLock(c_->client(), "n1", key).ok());
  EXPECT_EQ(held(), "");
}

TEST_F(LockTest, ACompanionWriteGoesOutWithTheFirstLockWriteOnly) {
  device::NodeLocker locker(c_->client(), clock_);
  auto companion_for = [](const std::string& pod) {
    device::NodeLocker::Companion c;
    c.patch.resource = &k8s::kPods;
    c.patch.ns = "default";
    c.patch.name = pod;
    c.patch.patch = R"({"metadata":{"annotations":{"example.com/placed":"yes"}}})";
    return c;
  };
  auto with = companion_for("a");
  ASSERT_TRUE(locker.Acquire("n1", "default", "a", nullptr, &with).ok());
  EXPECT_TRUE(with.sent);
  ASSERT_TRUE(with.result.ok()) << with.result.status().ToString();
  EXPECT_FALSE(with.result->resource_version.empty());
  Result<k8s::Object> a = k8s::GetPod(c_->client(), "default", "a");
  EXPECT_EQ(k8s::GetString(*a, "/metadata/annotations/example.com~1placed"), "yes");
  EXPECT_EQ(Lock(), "2027-01-15T08:00:00Z,default,a");
  // Already held: nothing is written, the companion neither.
  auto again = companion_for("a");
  ASSERT_TRUE(locker.Acquire("n1", "default", "a", nullptr, &again).ok());
  EXPECT_FALSE(again.sent);
  // Contention: nothing is written either.
  ASSERT_TRUE(
      k8s::PatchPodAnnotations(c_->client(), "default", "a", {{"hami.io/bind-phase", "allocating"}})
          .ok());
  auto other = companion_for("b");
  EXPECT_EQ(locker.Acquire("n1", "default", "b", nullptr, &other).code(), StatusCode::kUnavailable);
  EXPECT_FALSE(other.sent);
  EXPECT_EQ(k8s::GetString(k8s::GetPod(c_->client(), "default", "b").value(),
                           "/metadata/annotations/example.com~1placed"),
            "");
}

// Bind takes the lock, then posts a Binding that stamps bind-phase: between the two the holder
// is unbound without a phase, and that is a bind in flight, not an abandoned lock.
TEST_F(LockTest, BindInFlightHoldsAndAbandonedOrMisplacedHoldersDoNot) {
  device::NodeLocker locker(c_->client(), clock_);
  ASSERT_TRUE(locker.Acquire("n1", "default", "a", nullptr).ok());
  EXPECT_EQ(locker.Acquire("n1", "default", "b", nullptr).code(), StatusCode::kUnavailable);
  clock_.Advance(std::chrono::seconds(device::kBindInFlightSeconds + 1));
  ASSERT_TRUE(locker.Acquire("n1", "default", "b", nullptr).ok());  // a's bind died
  EXPECT_NE(Lock().find(",default,b"), std::string::npos) << Lock();
  // b gets bound and allocates on n1: it holds.
  ASSERT_TRUE(
      k8s::BindPod(c_->client(), "default", "b", "", "n1", {{"hami.io/bind-phase", "allocating"}})
          .ok());
  clock_.Advance(std::chrono::seconds(device::kBindInFlightSeconds + 1));
  EXPECT_EQ(locker.Acquire("n1", "default", "a", nullptr).code(), StatusCode::kUnavailable);
  // A holder that ended up on another node will not release n1's lock.
  ASSERT_TRUE(locker.Release("n1", "default", "b").ok());
  ASSERT_TRUE(locker.Acquire("n1", "default", "b", nullptr).ok());
  clock_.Advance(std::chrono::seconds(1));
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
  EXPECT_TRUE(device::OnlyNodeLockChanged(before, locked));
  EXPECT_TRUE(device::OnlyNodeLockChanged(locked, before));  // released
  Json other = locked;
  other["metadata"]["annotations"]["hami.io/node-nvidia-register"] = "[{}]";
  EXPECT_FALSE(device::OnlyNodeLockChanged(locked, other));
  other = locked;
  other["status"]["allocatable"]["x"] = "0";
  EXPECT_FALSE(device::OnlyNodeLockChanged(locked, other));
  other = locked;
  other["metadata"]["labels"]["gpu"] = "on";
  EXPECT_FALSE(device::OnlyNodeLockChanged(locked, other));
  other = locked;
  other["metadata"]["annotations"]["hami.io/node-handshake"] = "Requesting_x";
  EXPECT_FALSE(device::OnlyNodeLockChanged(locked, other));
  other = before;
  other["metadata"].erase("annotations");
  EXPECT_FALSE(device::OnlyNodeLockChanged(other, before));
}

TEST_F(LockTest, ExpiredGoneAndLegacyLocks) {
  device::NodeLocker locker(c_->client(), clock_);
  // A legacy bare timestamp, fresh: contention; old: taken over.
  ASSERT_TRUE(k8s::PatchNodeAnnotations(c_->client(), "n1",
                                        {{"hami.io/mutex.lock", "2027-01-15T07:59:00Z"}})
                  .ok());
  EXPECT_EQ(locker.Acquire("n1", "default", "a", nullptr).code(), StatusCode::kUnavailable);
  clock_.Advance(std::chrono::seconds(301));
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
  // An unrelated change to the pod while it allocates does not release anything: once the
  // scheduler has handled that very change, no release is queued and the lock is still there.
  Result<k8s::WriteAck> unrelated =
      k8s::PatchPodAnnotations(c.client(), "default", "p", {{"example.com/x", "1"}});
  ASSERT_TRUE(unrelated.ok());
  const int64_t rv = extender::ResourceVersionNumberOf(unrelated->resource_version);
  ASSERT_GT(rv, 0);
  ASSERT_TRUE(c.WaitForScheduler([&] { return c.scheduler().stats().last_pod_version >= rv; }));
  EXPECT_EQ(c.scheduler().stats().lock_releases_queued, 0u);
  EXPECT_NE(lock().find(",default,p"), std::string::npos) << lock();
  EXPECT_EQ(c.scheduler().stats().locks_released, 0u);
  ASSERT_TRUE(
      k8s::PatchPodAnnotations(c.client(), "default", "p", {{"hami.io/bind-phase", "success"}})
          .ok());
  EXPECT_TRUE(SimCluster::WaitFor([&] { return lock().empty(); })) << lock();
  EXPECT_TRUE(c.WaitForScheduler([&] { return c.scheduler().stats().locks_released == 1; }));
  EXPECT_EQ(c.scheduler().stats().lock_releases_queued, 1u);
  // The service's counters are on its /metrics page.
  const std::string metrics = c.scheduler().Metrics();
  for (const char* line :
       {"hami_scheduler_node_lock_releases_total{stage=\"queued\",zone=\"vGPU\"} 1",
        "hami_scheduler_node_lock_releases_total{stage=\"released\",zone=\"vGPU\"} 1",
        "hami_scheduler_bind_requests_total{zone=\"vGPU\"} 1",
        "hami_scheduler_filter_results_total{result=\"fit\",zone=\"vGPU\"} 1"}) {
    EXPECT_NE(metrics.find(line), std::string::npos) << line << "\n" << metrics;
  }
}

TEST(ServiceTest, QuotaEnforcedByWebhookAndFilter) {
  SimCluster c;
  c.AddNode("n1", {Gpu("GPU-1", 0, 32768), Gpu("GPU-2", 1, 32768)});
  Json quota;
  quota["apiVersion"] = "v1";
  quota["kind"] = "ResourceQuota";
  quota["metadata"]["name"] = "gpu-quota";
  quota["spec"]["hard"]["limits.nvidia.com/gpumem"] = "not-a-number";
  k8s::Resource quotas{"v1", "resourcequotas", true};
  // The API server refuses a quota that is not a quantity, as kube-apiserver does (the
  // scheduler's own handling of one is unit-tested with the quota book).
  Result<k8s::Object> invalid = c.client().Create(quotas, "default", quota);
  ASSERT_FALSE(invalid.ok());
  EXPECT_NE(invalid.status().message().find("limits.nvidia.com/gpumem"), std::string::npos)
      << invalid.status().ToString();
  quota["spec"]["hard"]["limits.nvidia.com/gpumem"] = "10000";
  ASSERT_TRUE(c.client().Create(quotas, "default", quota).ok());
  ASSERT_TRUE(c.WaitForScheduler([&] {
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

// The filter reserves; the bind writes the placement onto the pod in one pipelined batch with
// the node lock, then posts the Binding. A bind this instance did not filter for (a restart in
// between) is refused, and one that cannot get the lock gives the devices back.
TEST(ServiceTest, TheBindWritesTheFiltersPlacementWithTheLock) {
  SimClusterOptions o;
  o.device_plugin = false;  // locks stay held: the third pod meets p's
  o.scheduler.node_lock_wait = std::chrono::milliseconds(200);
  SimCluster c(o);
  c.AddNode("n1", {Gpu("GPU-1", 0, 16384)});
  c.AddNode("n2", {Gpu("GPU-2", 0, 16384)});
  auto create = [&](const std::string& name) {
    Json pod = Pod(name, "1000", "", true);
    pod["spec"]["schedulerName"] = "nobody";  // keep the driver away: this test is kube-scheduler
    return c.CreatePod("default", pod).value();
  };
  auto filter = [&](const Json& pod, const std::string& node) {
    Json args = {{"pod", pod}, {"nodenames", {node}}};
    return k8s::ParseJson(c.scheduler().Filter(args.dump())).value();
  };
  auto bind = [&](const Json& pod, const std::string& node) {
    Json args = {{"podName", k8s::Name(pod)},
                 {"podNamespace", "default"},
                 {"podUID", k8s::Uid(pod)},
                 {"node", node}};
    return k8s::ParseJson(c.scheduler().Bind(args.dump())).value();
  };
  auto count = [&](const std::string& what) {
    auto counts = c.apiserver().RequestCounts();
    return counts.count(what) ? counts[what] : 0;
  };

  Json p = create("p");
  ASSERT_EQ(filter(p, "n1")["nodenames"], Json::array({"n1"}));
  EXPECT_EQ(c.Annotation("default", "p", "hami.io/vgpu-node"), "");  // reserved, not written
  EXPECT_NE(c.scheduler().LedgerDump().find(k8s::Uid(p)), std::string::npos);
  uint64_t pod_patches = count("PATCH pods"), node_patches = count("PATCH nodes");
  Json bound = bind(p, "n1");
  ASSERT_FALSE(bound.contains("error")) << bound.dump();
  EXPECT_EQ(c.BoundNode("default", "p"), "n1");
  EXPECT_EQ(c.Annotation("default", "p", "hami.io/vgpu-node"), "n1");
  EXPECT_NE(c.Annotation("default", "p", "hami.io/vgpu-devices-to-allocate"), "");
  EXPECT_EQ(c.Annotation("default", "p", "hami.io/bind-phase"), "allocating");
  Json written = k8s::GetPod(c.client(), "default", "p").value();
  EXPECT_EQ(k8s::GetString(written, "/metadata/labels/hami.io~1vgpu-node"), "n1");
  EXPECT_EQ(count("PATCH pods") - pod_patches, 1u);  // the placement, nothing else
  // The lock (registration handshakes may write nodes too, so the lock itself is checked).
  EXPECT_GE(count("PATCH nodes") - node_patches, 1u);
  EXPECT_NE(k8s::GetString(k8s::GetNode(c.client(), "n1").value(),
                           "/metadata/annotations/hami.io~1mutex.lock")
                .find(",default,p"),
            std::string::npos);

  // Filtered by one instance, bound through the next: refused, and fine once filtered again.
  Json q = create("q");
  ASSERT_EQ(filter(q, "n2")["nodenames"], Json::array({"n2"}));
  c.RestartScheduler();
  Json refused = bind(q, "n2");
  ASSERT_TRUE(refused.contains("error"));
  EXPECT_NE(refused["error"].get<std::string>().find("no device placement"), std::string::npos)
      << refused.dump();
  EXPECT_EQ(c.BoundNode("default", "q"), "");
  ASSERT_EQ(filter(q, "n2")["nodenames"], Json::array({"n2"}));
  bound = bind(q, "n2");
  ASSERT_FALSE(bound.contains("error")) << bound.dump();
  EXPECT_EQ(c.Annotation("default", "q", "hami.io/vgpu-node"), "n2");

  // n1 stays locked by p (no device plugin here): r's bind gives up and its devices go back.
  Json r = create("r");
  ASSERT_EQ(filter(r, "n1")["nodenames"], Json::array({"n1"}));
  EXPECT_NE(c.scheduler().LedgerDump().find(k8s::Uid(r)), std::string::npos);
  Json contended = bind(r, "n1");
  ASSERT_TRUE(contended.contains("error"));
  EXPECT_NE(contended["error"].get<std::string>().find("lock"), std::string::npos)
      << contended.dump();
  EXPECT_EQ(c.scheduler().LedgerDump().find(k8s::Uid(r)), std::string::npos);
  EXPECT_EQ(c.Annotation("default", "r", "hami.io/vgpu-node"), "");
  EXPECT_TRUE(c.scheduler().CheckLedger().ok());
}

// kube-scheduler gives up on a bind after its extender timeout and tries the pod again while
// the first bind may still succeed: the retried filter and bind must not touch the first
// bind's reservation, and once the first bind ends the pod is placed as usual.
TEST(ServiceTest, ABindStillRunningKeepsItsReservationFromARetriedFilterAndBind) {
  SimClusterOptions o;
  o.device_plugin = false;  // p's lock on n1 stays held: r's bind waits for it
  o.scheduler.node_lock_wait = std::chrono::seconds(3);
  SimCluster c(o);
  c.AddNode("n1", {Gpu("GPU-1", 0, 16384)});
  auto create = [&](const std::string& name) {
    Json pod = Pod(name, "1000", "", true);
    pod["spec"]["schedulerName"] = "nobody";  // this test is kube-scheduler
    return c.CreatePod("default", pod).value();
  };
  auto filter = [&](const Json& pod) {
    Json args = {{"pod", pod}, {"nodenames", {"n1"}}};
    return k8s::ParseJson(c.scheduler().Filter(args.dump())).value();
  };
  auto bind = [&](const Json& pod) {
    Json args = {{"podName", k8s::Name(pod)},
                 {"podNamespace", "default"},
                 {"podUID", k8s::Uid(pod)},
                 {"node", "n1"}};
    return k8s::ParseJson(c.scheduler().Bind(args.dump())).value();
  };
  Json p = create("p");
  ASSERT_EQ(filter(p)["nodenames"], Json::array({"n1"}));
  ASSERT_FALSE(bind(p).contains("error"));

  Json r = create("r");
  ASSERT_EQ(filter(r)["nodenames"], Json::array({"n1"}));
  const uint64_t waits = c.scheduler().stats().lock_waits;
  Json first;
  std::thread running([&] { first = bind(r); });
  ASSERT_TRUE(c.WaitForScheduler([&] { return c.scheduler().stats().lock_waits > waits; }));

  Json again = filter(r);
  EXPECT_EQ(again["nodenames"], Json::array());
  EXPECT_NE(again["failedNodes"]["n1"].get<std::string>().find("still running"), std::string::npos)
      << again.dump();
  EXPECT_NE(c.scheduler().LedgerDump().find(k8s::Uid(r)), std::string::npos)
      << "the running bind's reservation was given back";
  Json second = bind(r);
  ASSERT_TRUE(second.contains("error"));
  EXPECT_NE(second["error"].get<std::string>().find("still running"), std::string::npos)
      << second.dump();

  running.join();  // the lock never clears (no device plugin): the first bind gives up
  ASSERT_TRUE(first.contains("error"));
  // Its devices went back, unless the placement reached the pod with a lock attempt (a stale
  // cached node lets the first lock write go out with the placement before the conflict shows
  // the holder): then they stay reserved until the pod is filtered again or the reservation
  // expires.
  if (c.Annotation("default", "r", "hami.io/vgpu-node").empty()) {
    EXPECT_EQ(c.scheduler().LedgerDump().find(k8s::Uid(r)), std::string::npos);
  }
  EXPECT_EQ(c.BoundNode("default", "r"), "");
  // Once it ended, the pod is the filter's again.
  EXPECT_EQ(filter(r)["nodenames"], Json::array({"n1"}));
  EXPECT_TRUE(c.scheduler().CheckLedger().ok());
}

TEST(ServiceTest, GarbageBodiesAndSimulationPath) {
  SimClusterOptions o;
  o.device_plugin = false;
  SimCluster c(o);
  c.AddNode("n1", {Gpu("GPU-1", 0, 16384)});
  extender::SchedulerService& s = c.scheduler();
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
  // gpumem counts MiB: a quantity with a unit (a pod that skipped the webhook) is an error that
  // says so, not a request for 4Gi MiB.
  Json with_unit = sim;
  with_unit["pod"] = Pod("sim", "4Gi");
  out = k8s::ParseJson(s.Filter(with_unit.dump())).value();
  ASSERT_TRUE(out.contains("error")) << out.dump();
  EXPECT_NE(out["error"].get<std::string>().find(
                "nvidia.com/gpumem=\"4Gi\": counts MiB, without a unit: 4Gi is 4096"),
            std::string::npos)
      << out.dump();
  // The API server writes a plain 1000 as "1k" (its canonical form): 1000 MiB, which fits.
  Json canonical = sim;
  canonical["pod"] = Pod("sim", "1k");
  out = k8s::ParseJson(s.Filter(canonical.dump())).value();
  ASSERT_EQ(out["nodes"]["items"].size(), 1u) << out.dump();
  EXPECT_FALSE(out.contains("error") && !out["error"].get<std::string>().empty()) << out.dump();
  // From "M" up a decimal unit can only be bytes.
  Json bytes = sim;
  bytes["pod"] = Pod("sim", "2G");
  out = k8s::ParseJson(s.Filter(bytes.dump())).value();
  ASSERT_TRUE(out.contains("error")) << out.dump();
  EXPECT_NE(out["error"].get<std::string>().find("2G is about 1907"), std::string::npos)
      << out.dump();
}

TEST(ServiceTest, NodeLeavesWhenItsDevicePluginGoesAway) {
  SimClusterOptions o;
  o.device_plugin = false;
  SimCluster c(o);
  const time_t before = time(nullptr);
  c.AddNode("n1", {Gpu("GPU-gone", 0, 16384)});
  // The scheduler asked for a registration (handshake) when it first saw the node, in HAMi's
  // literal format: "Requesting_" and the scheduler's local time to the second.
  std::string handshake;
  EXPECT_TRUE(SimCluster::WaitFor([&] {
    Result<k8s::Object> n = k8s::GetNode(c.client(), "n1");
    if (n.ok()) handshake = k8s::GetString(*n, "/metadata/annotations/hami.io~1node-handshake");
    return handshake.rfind("Requesting_", 0) == 0;
  }));
  const time_t after = time(nullptr);
  EXPECT_TRUE(
      std::regex_match(handshake, std::regex(R"(Requesting_\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2})")))
      << handshake;
  tm written{};
  ASSERT_NE(strptime(handshake.c_str() + 11, "%Y-%m-%d %H:%M:%S", &written), nullptr) << handshake;
  written.tm_isdst = -1;
  const time_t at = mktime(&written);
  EXPECT_GE(at, before) << handshake;
  EXPECT_LE(at, after) << handshake;
  // Allocatable drops to 0 (kubelet lost the plugin): the node is taken out and asked to
  // register again.
  Json patch;
  patch["status"]["allocatable"]["nvidia.com/gpu"] = "0";
  ASSERT_TRUE(
      c.client().Patch(k8s::kNodes, "", "n1", k8s::PatchType::kMerge, patch.dump(), "status").ok());
  EXPECT_TRUE(c.WaitForScheduler(
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
  EXPECT_TRUE(c.WaitForScheduler(
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
  // Readiness has sources no one announces (informer syncs): the service's own wait covers them.
  EXPECT_TRUE(c.scheduler().WaitReady(std::chrono::seconds(30)));
  // The sidecar stops renewing... a holder change away from us ends leadership.
  ASSERT_TRUE(lease("host-b_9999"));
  EXPECT_TRUE(c.WaitForScheduler([&] { return !c.scheduler().IsLeader(); }));
}

}  // namespace
}  // namespace hami::e2e
