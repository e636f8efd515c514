#include "scheduler/ledger.h"

#include <gtest/gtest.h>

#include "device/pod_devices.h"
#include "scheduler/test_util.h"

namespace hami::scheduler {
namespace {

using testing::Gpu;
using testing::MakeNode;

class LedgerTest : public ::testing::Test {
 protected:
  LedgerTest()
      : vendors_(
            std::move(device::VendorRegistry::FromConfig(device::DefaultDeviceConfig())).value()),
        ledger_(vendors_, clock_) {}

  // A pod holding `allocated` (the annotation text) on `node`.
  PodObject Pod(const std::string& uid, const std::string& node, const std::string& allocated,
                bool bound = true, size_t init = 0) {
    PodObject p;
    p.uid = uid;
    p.name_space = "ns";
    p.name = "pod-" + uid;
    p.node_name = bound ? node : "";
    p.phase = bound ? PodPhase::kRunning : PodPhase::kPending;
    p.init_container_count = init;
    p.annotations["hami.io/vgpu-node"] = node;
    p.annotations["hami.io/vgpu-time"] = std::to_string(clock_.NowUnixSeconds());
    p.annotations["hami.io/vgpu-devices-allocated"] = allocated;
    return p;
  }

  const LedgerDevice& Dev(std::string_view node, size_t i) {
    return ledger_.nodes()[ledger_.FindNode(node)].devices[i];
  }

  void TwoGpuNode(const std::string& name = "node-a") {
    ASSERT_TRUE(ledger_
                    .UpsertNode(MakeNode(name, {Gpu(name + "-gpu0", 0, 16384),
                                                Gpu(name + "-gpu1", 1, 16384, "T4", 1)}))
                    .ok());
  }

  device::VendorRegistry vendors_;
  FakeClock clock_;
  Ledger ledger_;
};

TEST_F(LedgerTest, UsageFromAllocatedAnnotations) {
  TwoGpuNode();
  ASSERT_TRUE(ledger_.UpsertPod(Pod("p1", "node-a", "node-a-gpu0,NVIDIA,3000,30:;")).ok());
  ASSERT_TRUE(
      ledger_
          .UpsertPod(Pod("p2", "node-a", "node-a-gpu0,NVIDIA,1000,0:node-a-gpu1,NVIDIA,500,10:;"))
          .ok());
  EXPECT_EQ(Dev("node-a", 0).used_slots, 2);
  EXPECT_EQ(Dev("node-a", 0).used_mem, 4000);
  EXPECT_EQ(Dev("node-a", 0).used_cores, 30);
  EXPECT_EQ(Dev("node-a", 1).used_slots, 1);
  EXPECT_EQ(Dev("node-a", 1).used_mem, 500);
  EXPECT_TRUE(ledger_.CheckConsistency().ok());
  ledger_.RemovePod("p1");
  EXPECT_EQ(Dev("node-a", 0).used_slots, 1);
  EXPECT_EQ(Dev("node-a", 0).used_mem, 1000);
  EXPECT_EQ(ledger_.pod_count(), 1u);
  EXPECT_TRUE(ledger_.CheckConsistency().ok());
}

TEST_F(LedgerTest, InitContainerCollapse) {
  TwoGpuNode();
  // init: gpu0 2000/30; app c1: gpu0 1000/10; app c2: gpu0 1000/10 + gpu1 700/5.
  std::string value =
      "node-a-gpu0,NVIDIA,2000,30:;node-a-gpu0,NVIDIA,1000,10:;"
      "node-a-gpu0,NVIDIA,1000,10:node-a-gpu1,NVIDIA,700,5:;";
  ASSERT_TRUE(ledger_.UpsertPod(Pod("p", "node-a", value, true, 1)).ok());
  // max(init peak, app sum) per field; slots = app occurrences.
  EXPECT_EQ(Dev("node-a", 0).used_slots, 2);
  EXPECT_EQ(Dev("node-a", 0).used_mem, 2000);
  EXPECT_EQ(Dev("node-a", 0).used_cores, 30);
  EXPECT_EQ(Dev("node-a", 1).used_mem, 700);
  // Once the init container is done only the app containers hold devices.
  PodObject done = Pod("p", "node-a", value, true, 1);
  done.init_containers_done = true;
  ASSERT_TRUE(ledger_.UpsertPod(done).ok());
  EXPECT_EQ(Dev("node-a", 0).used_slots, 2);
  EXPECT_EQ(Dev("node-a", 0).used_mem, 2000);
  EXPECT_EQ(Dev("node-a", 0).used_cores, 20);
  EXPECT_TRUE(ledger_.CheckConsistency().ok());
}

TEST_F(LedgerTest, CollapseOnlyInitContainer) {
  device::PodDevices d;
  d["NVIDIA"] = device::PodSingleDevice{{{"g", "NVIDIA", 500, 5}}, {{"g", "NVIDIA", 100, 1}}};
  std::vector<CollapsedCharge> c = CollapsePodDevices(d, 1, false);
  ASSERT_EQ(c.size(), 1u);
  EXPECT_EQ(c[0].slots, 1);
  EXPECT_EQ(c[0].mem, 500);
  EXPECT_EQ(c[0].cores, 5);
}

TEST_F(LedgerTest, TerminalAndUnscheduledPodsHoldNothing) {
  TwoGpuNode();
  PodObject p = Pod("p", "node-a", "node-a-gpu0,NVIDIA,3000,30:;");
  ASSERT_TRUE(ledger_.UpsertPod(p).ok());
  EXPECT_EQ(Dev("node-a", 0).used_slots, 1);
  p.deleting = true;  // still holds devices while terminating
  ASSERT_TRUE(ledger_.UpsertPod(p).ok());
  EXPECT_EQ(Dev("node-a", 0).used_slots, 1);
  p.phase = PodPhase::kSucceeded;
  ASSERT_TRUE(ledger_.UpsertPod(p).ok());
  EXPECT_EQ(Dev("node-a", 0).used_slots, 0);
  EXPECT_EQ(ledger_.pod_count(), 0u);
  PodObject q = Pod("q", "node-a", "node-a-gpu0,NVIDIA,3000,30:;");
  q.annotations.erase("hami.io/vgpu-node");
  ASSERT_TRUE(ledger_.UpsertPod(q).ok());
  EXPECT_EQ(ledger_.pod_count(), 0u);
}

TEST_F(LedgerTest, MalformedAllocationIsAnErrorAndReleases) {
  TwoGpuNode();
  ASSERT_TRUE(ledger_.UpsertPod(Pod("p", "node-a", "node-a-gpu0,NVIDIA,3000,30:;")).ok());
  Status s = ledger_.UpsertPod(Pod("p", "node-a", "node-a-gpu0,NVIDIA,lots,30:;"));
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("hami.io/vgpu-devices-allocated"), std::string::npos) << s.ToString();
  EXPECT_EQ(Dev("node-a", 0).used_slots, 0);
}

TEST_F(LedgerTest, ReserveConfirmExpire) {
  TwoGpuNode();
  Reservation r;
  r.uid = "p";
  r.name_space = "ns";
  r.name = "p";
  r.node = "node-a";
  r.devices["NVIDIA"] = {{{"node-a-gpu1", "NVIDIA", 4000, 20}}};
  ASSERT_TRUE(ledger_.Reserve(r).ok());
  EXPECT_EQ(Dev("node-a", 1).used_mem, 4000);
  EXPECT_EQ(ledger_.FindPod("p")->state, PodState::kReserved);
  clock_.Advance(std::chrono::seconds(299));
  EXPECT_EQ(ledger_.ExpireReservations(), 0u);
  clock_.Advance(std::chrono::seconds(1));
  EXPECT_EQ(ledger_.ExpireReservations(), 1u);
  EXPECT_EQ(Dev("node-a", 1).used_mem, 0);
  EXPECT_EQ(ledger_.FindPod("p"), nullptr);

  // Confirmed reservations never expire.
  ASSERT_TRUE(ledger_.Reserve(r).ok());
  ASSERT_TRUE(ledger_.Confirm("p").ok());
  clock_.Advance(std::chrono::seconds(10000));
  EXPECT_EQ(ledger_.ExpireReservations(), 0u);
  EXPECT_EQ(Dev("node-a", 1).used_mem, 4000);
  EXPECT_FALSE(ledger_.Confirm("nope").ok());

  Reservation bad = r;
  bad.node = "node-x";
  EXPECT_EQ(ledger_.Reserve(bad).code(), StatusCode::kFailedPrecondition);
}

TEST_F(LedgerTest, UnboundAnnotatedPodExpiresFromItsStamp) {
  TwoGpuNode();
  PodObject p = Pod("p", "node-a", "node-a-gpu0,NVIDIA,3000,30:;", /*bound=*/false);
  ASSERT_TRUE(ledger_.UpsertPod(p).ok());
  EXPECT_EQ(ledger_.FindPod("p")->expires_at, clock_.NowUnixSeconds() + 300);
  clock_.Advance(std::chrono::seconds(300));
  EXPECT_EQ(ledger_.ExpireReservations(), 1u);
  // Seen again unchanged (resync): the stamp is old, so it stays released.
  ASSERT_TRUE(ledger_.UpsertPod(p).ok());
  EXPECT_EQ(ledger_.pod_count(), 0u);
  // Bound later: held again, without expiry.
  p.node_name = "node-a";
  ASSERT_TRUE(ledger_.UpsertPod(p).ok());
  EXPECT_EQ(ledger_.FindPod("p")->state, PodState::kBound);
}

TEST_F(LedgerTest, NodeRegistrationChangesReapplyPods) {
  // Pods seen before their node registers are applied when it does.
  ASSERT_TRUE(ledger_.UpsertPod(Pod("p", "node-a", "node-a-gpu1,NVIDIA,3000,30:;")).ok());
  TwoGpuNode();
  EXPECT_EQ(Dev("node-a", 1).used_mem, 3000);
  // Re-registration without the device, then with it again.
  ASSERT_TRUE(ledger_.UpsertNode(MakeNode("node-a", {Gpu("node-a-gpu0", 0, 16384)})).ok());
  EXPECT_EQ(ledger_.nodes()[ledger_.FindNode("node-a")].devices.size(), 1u);
  EXPECT_EQ(Dev("node-a", 0).used_mem, 0);
  TwoGpuNode();
  EXPECT_EQ(Dev("node-a", 1).used_mem, 3000);
  EXPECT_TRUE(ledger_.CheckConsistency().ok());
  ledger_.RemoveNode("node-a");
  EXPECT_FALSE(ledger_.nodes()[ledger_.FindNode("node-a")].registered);
  TwoGpuNode();
  EXPECT_EQ(Dev("node-a", 1).used_mem, 3000);
}

TEST_F(LedgerTest, BadRegistrationLeavesNodeWithoutDevices) {
  TwoGpuNode();
  NodeObject bad;
  bad.name = "node-a";
  bad.annotations["hami.io/node-nvidia-register"] = "[{\"id\":";
  Status s = ledger_.UpsertNode(bad);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("node-a"), std::string::npos);
  EXPECT_FALSE(ledger_.nodes()[ledger_.FindNode("node-a")].registered);
  // Reported again on the next update (not cached as done).
  EXPECT_FALSE(ledger_.UpsertNode(bad).ok());
}

TEST_F(LedgerTest, CordonAndNodePolicies) {
  device::Annotations extra;
  extra["hami.io/device-cordon"] = " node-a-gpu1 , unknown";
  extra["hami.io/node-scheduler-policy"] = "spread";
  extra["hami.io/gpu-scheduler-policy"] = "binpack";
  ASSERT_TRUE(
      ledger_
          .UpsertNode(MakeNode("node-a",
                               {Gpu("node-a-gpu0", 0, 16384), Gpu("node-a-gpu1", 1, 16384)}, extra))
          .ok());
  EXPECT_FALSE(Dev("node-a", 0).cordoned);
  EXPECT_TRUE(Dev("node-a", 1).cordoned);
  const LedgerNode& n = ledger_.nodes()[ledger_.FindNode("node-a")];
  EXPECT_TRUE(n.has_node_policy);
  EXPECT_EQ(n.node_policy, NodePolicy::kSpread);
  EXPECT_TRUE(n.has_gpu_policy);
  EXPECT_EQ(n.gpu_policy.ToString(), "binpack");
}

TEST_F(LedgerTest, PairScores) {
  device::Annotations extra;
  extra["hami.io/node-nvidia-score"] = R"([{"uuid":"node-a-gpu0","score":{"node-a-gpu1":200}}])";
  ASSERT_TRUE(
      ledger_
          .UpsertNode(MakeNode("node-a",
                               {Gpu("node-a-gpu0", 0, 16384), Gpu("node-a-gpu1", 1, 16384)}, extra))
          .ok());
  const LedgerNode& n = ledger_.nodes()[ledger_.FindNode("node-a")];
  EXPECT_EQ(n.PairScore(0, 1), 200);
  EXPECT_EQ(n.PairScore(1, 0), 200);
  extra["hami.io/node-nvidia-score"] = "{garbage";
  Status s = ledger_.UpsertNode(
      MakeNode("node-a", {Gpu("node-a-gpu0", 0, 16384), Gpu("node-a-gpu1", 1, 16384)}, extra));
  EXPECT_FALSE(s.ok());
  EXPECT_TRUE(ledger_.nodes()[ledger_.FindNode("node-a")].registered);  // devices kept
  EXPECT_EQ(ledger_.nodes()[ledger_.FindNode("node-a")].PairScore(0, 1), 0);
}

TEST_F(LedgerTest, MigReservationsAndAnomalies) {
  device::DeviceInfo mig = Gpu("mig-gpu", 0, 40960, "NVIDIA A100-SXM4-40GB");
  mig.mode = "mig";
  mig.mig_profiles = {device::MigProfile{"1g.5gb", 4864, 14, 1, {{0, 1}, {1, 1}}}};
  ASSERT_TRUE(ledger_.UpsertNode(MakeNode("node-m", {mig, Gpu("plain", 1, 16384)})).ok());
  PodObject p = Pod("p", "node-m", "mig-gpu,NVIDIA,4864,14:;");
  p.annotations["hami.io/vgpu-mig-allocations"] =
      R"([{"containerIndex":0,"deviceIndex":0,"gpuUUID":"mig-gpu","profile":"1g.5gb","placement":{"start":1,"size":1}}])";
  ASSERT_TRUE(ledger_.UpsertPod(p).ok());
  const LedgerNode& n = ledger_.nodes()[ledger_.FindNode("node-m")];
  ASSERT_TRUE(n.mig);
  ASSERT_EQ(n.mig->in_use[0].size(), 1u);
  EXPECT_EQ(n.mig->in_use[0][0].placement.start, 1u);
  EXPECT_TRUE(Dev("node-m", 0).Healthy());
  // MIG device used without reservation: unhealthy in the view.
  ASSERT_TRUE(ledger_.UpsertPod(Pod("q", "node-m", "mig-gpu,NVIDIA,100,0:;")).ok());
  EXPECT_FALSE(Dev("node-m", 0).Healthy());
  ledger_.RemovePod("q");
  EXPECT_TRUE(Dev("node-m", 0).Healthy());
  ledger_.RemovePod("p");
  EXPECT_TRUE(n.mig->in_use[0].empty());
}

TEST_F(LedgerTest, OverCommitFromForeignAnnotationsIsReported) {
  TwoGpuNode();
  ASSERT_TRUE(ledger_.UpsertPod(Pod("p", "node-a", "node-a-gpu0,NVIDIA,16000,0:;")).ok());
  ASSERT_TRUE(ledger_.UpsertPod(Pod("q", "node-a", "node-a-gpu0,NVIDIA,16000,0:;")).ok());
  std::vector<OverCommit> oc = ledger_.OverCommitted();
  ASSERT_EQ(oc.size(), 1u);
  EXPECT_EQ(oc[0].uuid, "node-a-gpu0");
  EXPECT_EQ(oc[0].used_mem, 32000);
}

// An unbound pod's placement is a claim that a scheduler may have given up: it is counted only
// where it fits, and a bound pod (what runs) displaces such claims from a device it needs.
// (Chaos seed 1002: a restarted scheduler counted a pending pod's leftover placement on a card
// already full, 18,432 MiB on 16,384.)
TEST_F(LedgerTest, UnboundPlacementsCountOnlyWhereTheyFitAndBoundPodsDisplaceThem) {
  TwoGpuNode();
  ASSERT_TRUE(ledger_.UpsertPod(Pod("bound", "node-a", "node-a-gpu0,NVIDIA,12000,0:;")).ok());
  Status s = ledger_.UpsertPod(Pod("late", "node-a", "node-a-gpu0,NVIDIA,6000,0:;", false));
  EXPECT_EQ(s.code(), StatusCode::kFailedPrecondition) << s.ToString();
  EXPECT_NE(s.message().find("pod ns/pod-late: its placement on node-a would over-commit "
                             "node-a-gpu0"),
            std::string::npos)
      << s.ToString();
  EXPECT_EQ(ledger_.FindPod("late"), nullptr);
  EXPECT_EQ(Dev("node-a", 0).used_mem, 12000);
  // One that fits is counted, reserved.
  ASSERT_TRUE(ledger_.UpsertPod(Pod("fits", "node-a", "node-a-gpu0,NVIDIA,4000,0:;", false)).ok());
  ASSERT_NE(ledger_.FindPod("fits"), nullptr);
  EXPECT_EQ(ledger_.FindPod("fits")->state, PodState::kReserved);

  // The other order: claims first (a rebuild lists pods in any order), then the bound pod.
  Ledger rebuilt(vendors_, clock_);
  ASSERT_TRUE(rebuilt
                  .UpsertNode(MakeNode("node-a", {Gpu("node-a-gpu0", 0, 16384),
                                                  Gpu("node-a-gpu1", 1, 16384, "T4", 1)}))
                  .ok());
  ASSERT_TRUE(rebuilt.UpsertPod(Pod("c1", "node-a", "node-a-gpu0,NVIDIA,6000,0:;", false)).ok());
  clock_.Advance(std::chrono::seconds(1));  // c2 is the newer claim
  ASSERT_TRUE(rebuilt.UpsertPod(Pod("c2", "node-a", "node-a-gpu0,NVIDIA,6000,0:;", false)).ok());
  std::vector<std::string> dropped;
  ASSERT_TRUE(rebuilt.UpsertPod(Pod("b", "node-a", "node-a-gpu0,NVIDIA,8000,0:;"), &dropped).ok());
  EXPECT_EQ(dropped, std::vector<std::string>{"ns/pod-c2"});
  EXPECT_NE(rebuilt.FindPod("c1"), nullptr);
  EXPECT_EQ(rebuilt.FindPod("c2"), nullptr);
  EXPECT_TRUE(rebuilt.OverCommitted().empty());
  EXPECT_TRUE(rebuilt.CheckConsistency().ok());
}

TEST_F(LedgerTest, FingerprintIndependentOfOrder) {
  FakeClock clock2;
  Ledger other(vendors_, clock2);
  PodObject p1 = Pod("p1", "node-a", "node-a-gpu0,NVIDIA,3000,30:;");
  PodObject p2 = Pod("p2", "node-b", "node-b-gpu1,NVIDIA,1000,0:;");
  NodeObject a = MakeNode("node-a", {Gpu("node-a-gpu0", 0, 16384), Gpu("node-a-gpu1", 1, 16384)});
  NodeObject b = MakeNode("node-b", {Gpu("node-b-gpu0", 0, 16384), Gpu("node-b-gpu1", 1, 16384)});
  ASSERT_TRUE(ledger_.UpsertNode(a).ok());
  ASSERT_TRUE(ledger_.UpsertPod(p1).ok());
  ASSERT_TRUE(ledger_.UpsertNode(b).ok());
  ASSERT_TRUE(ledger_.UpsertPod(p2).ok());
  ASSERT_TRUE(other.UpsertPod(p2).ok());
  ASSERT_TRUE(other.UpsertPod(p1).ok());
  ASSERT_TRUE(other.UpsertNode(b).ok());
  ASSERT_TRUE(other.UpsertNode(a).ok());
  EXPECT_EQ(ledger_.CanonicalDump(), other.CanonicalDump());
  EXPECT_EQ(ledger_.Fingerprint(), other.Fingerprint());
  other.RemovePod("p2");
  EXPECT_NE(ledger_.Fingerprint(), other.Fingerprint());
  EXPECT_GT(ledger_.MemoryBytes(), 0u);
}

}  // namespace
}  // namespace hami::scheduler
