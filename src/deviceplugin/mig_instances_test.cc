// MigInstances on the in-memory MIG driver: ownership by pod, container and device; reclaim that
// never blocks anyone; the state file across a restart; adoption and foreign instances.
#include "deviceplugin/mig_instances.h"

#include <gtest/gtest.h>

#include <fstream>

#include "common/file_util.h"
#include "deviceplugin/fake_mig_driver.h"
#include "k8s/test_util.h"

namespace hami::deviceplugin {
namespace {

constexpr const char* kGpu = "GPU-0";

// The A100-80GB's base profiles as its driver lists them (sizes in memory slices).
std::vector<MigProfileSpec> A100Profiles() {
  return {{0, "1g.10gb", 1, 7, 9728, 14, {{0, 1}, {1, 1}, {2, 1}, {3, 1}, {4, 1}, {5, 1}, {6, 1}}},
          {1, "2g.20gb", 2, 3, 19968, 28, {{0, 2}, {2, 2}, {4, 2}}},
          {2, "3g.40gb", 3, 2, 40192, 42, {{0, 4}, {4, 4}}},
          {7, "1g.10gb+me", 1, 1, 9728, 14,
           {{0, 1}, {1, 1}, {2, 1}, {3, 1}, {4, 1}, {5, 1}, {6, 1}}}};
}

class MigInstancesTest : public ::testing::Test {
 protected:
  MigInstancesTest() { driver_.AddGpu(kGpu, A100Profiles()); }

  // What the driver has now, as discovery would report it.
  Inventory Now() const { return driver_.Discovered(); }
  std::string StateFile() const { return dir_.path() + "/mig-instances.json"; }

  k8s::testing::TempDir dir_;
  FakeMigDriver driver_;
};

TEST_F(MigInstancesTest, EnsureIsIdempotentPerOwner) {
  MigInstances m(driver_, "");
  Result<MigInstance> a = m.Ensure({"uid-a", 0, 0}, "default/a", kGpu, "1g.10gb", {6, 1});
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  EXPECT_EQ(a->device.uuid.rfind("MIG-", 0), 0u);
  Result<MigInstance> again = m.Ensure({"uid-a", 0, 0}, "default/a", kGpu, "1g.10gb", {6, 1});
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->device, a->device);  // kubelet retried: the same instance, not a second one
  EXPECT_EQ(driver_.creates(), 1);
  // The same owner with another reservation is a contradiction, not a second instance.
  EXPECT_EQ(m.Ensure({"uid-a", 0, 0}, "default/a", kGpu, "2g.20gb", {0, 2}).status().code(),
            StatusCode::kFailedPrecondition);
  // Another device of the same container is another owner.
  ASSERT_TRUE(m.Ensure({"uid-a", 0, 1}, "default/a", kGpu, "1g.10gb+me", {5, 1}).ok());
  EXPECT_EQ(driver_.Instances(kGpu)[1].profile_id, 7u);  // resolved by name, not by "1g"
}

TEST_F(MigInstancesTest, EnsureExplainsEveryRefusal) {
  MigInstances m(driver_, "");
  ASSERT_TRUE(m.Ensure({"uid-a", 0, 0}, "default/a", kGpu, "3g.40gb", {4, 4}).ok());
  Status overlap = m.Ensure({"uid-b", 0, 0}, "default/b", kGpu, "1g.10gb", {5, 1}).status();
  EXPECT_EQ(overlap.code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(overlap.message().find("default/a"), std::string::npos) << overlap.message();
  Status bad_start = m.Ensure({"uid-b", 0, 0}, "default/b", kGpu, "3g.40gb", {2, 4}).status();
  EXPECT_EQ(bad_start.code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(m.Ensure({"uid-b", 0, 0}, "default/b", kGpu, "4g.40gb", {0, 4}).status().code(),
            StatusCode::kNotFound);
  driver_.AddGpu("GPU-off", A100Profiles(), /*enabled=*/false);
  Status off = m.Ensure({"uid-b", 0, 0}, "default/b", "GPU-off", "1g.10gb", {0, 1}).status();
  EXPECT_EQ(off.code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(off.message().find("not enabled"), std::string::npos);
  EXPECT_EQ(driver_.creates(), 1);
}

TEST_F(MigInstancesTest, ReconcileKeepsBusyInstancesWithoutBlockingOthers) {
  MigInstances m(driver_, "");
  MigInstance a = m.Ensure({"uid-a", 0, 0}, "default/a", kGpu, "1g.10gb", {6, 1}).value();
  MigInstance b = m.Ensure({"uid-b", 0, 0}, "default/b", kGpu, "1g.10gb", {5, 1}).value();
  driver_.SetBusy(a.device.uuid, true);  // pod a is terminating; its process still runs
  MigInstances::ReconcileResult r = m.Reconcile({}, m.Generation());
  EXPECT_EQ(r.destroyed, 1);
  EXPECT_EQ(r.in_use, std::vector<std::string>{a.device.uuid});
  EXPECT_TRUE(r.failed.empty());
  // A new pod is served meanwhile, on any free placement.
  ASSERT_TRUE(m.Ensure({"uid-c", 0, 0}, "default/c", kGpu, "1g.10gb", {5, 1}).ok());
  driver_.SetBusy(a.device.uuid, false);
  r = m.Reconcile({"uid-c"}, m.Generation());
  EXPECT_EQ(r.destroyed, 1);
  EXPECT_TRUE(r.in_use.empty());
  ASSERT_EQ(m.Snapshot().size(), 1u);
  EXPECT_EQ(m.Snapshot()[0].owner.pod_uid, "uid-c");
  EXPECT_EQ(driver_.Instances(kGpu).size(), 1u);
  (void)b;
}

TEST_F(MigInstancesTest, AnInstanceMadeAfterThePodListIsNotReclaimedByIt) {
  MigInstances m(driver_, "");
  const uint64_t listed = m.Generation();  // the reconcile pass lists the pods now...
  ASSERT_TRUE(m.Ensure({"uid-new", 0, 0}, "default/new", kGpu, "1g.10gb", {6, 1}).ok());
  // ...and a pod bound after that list was allocated meanwhile: it is not in the list.
  EXPECT_EQ(m.Reconcile({}, listed).destroyed, 0);
  EXPECT_EQ(driver_.Instances(kGpu).size(), 1u);
  EXPECT_EQ(m.Reconcile({}, m.Generation()).destroyed, 1);  // the next pass knows better
}

TEST_F(MigInstancesTest, AFinishedPodsInstanceInTheWayIsDestroyedFirst) {
  MigInstances m(driver_, "");
  MigInstance old = m.Ensure({"uid-old", 0, 0}, "default/old", kGpu, "1g.10gb", {6, 1}).value();
  // The scheduler gave the placement to a new pod as soon as the old one finished, before the
  // periodic reclaim ran.
  auto running = [](const MigInstance&) { return false; };
  auto finished = [&](const MigInstance& i) { return i.owner.pod_uid == "uid-old"; };
  EXPECT_EQ(m.Ensure({"uid-new", 0, 0}, "default/new", kGpu, "1g.10gb", {6, 1}, nullptr, running)
                .status()
                .code(),
            StatusCode::kFailedPrecondition);
  driver_.SetBusy(old.device.uuid, true);  // its process has not exited yet
  Status busy =
      m.Ensure({"uid-new", 0, 0}, "default/new", kGpu, "1g.10gb", {6, 1}, nullptr, finished)
          .status();
  EXPECT_NE(busy.message().find("in use"), std::string::npos) << busy.message();
  driver_.SetBusy(old.device.uuid, false);
  bool created = false;
  Result<MigInstance> fresh =
      m.Ensure({"uid-new", 0, 0}, "default/new", kGpu, "1g.10gb", {6, 1}, &created, finished);
  ASSERT_TRUE(fresh.ok()) << fresh.status().ToString();
  EXPECT_TRUE(created);
  ASSERT_EQ(driver_.Instances(kGpu).size(), 1u);
  EXPECT_EQ(driver_.Instances(kGpu)[0].device, fresh->device);
}

TEST_F(MigInstancesTest, ARestartedPluginKnowsWhatItMade) {
  {
    MigInstances m(driver_, StateFile());
    ASSERT_TRUE(m.Load(Now()).ok());  // no file yet: nothing known
    ASSERT_TRUE(m.Ensure({"uid-a", 0, 0}, "default/a", kGpu, "1g.10gb", {6, 1}).ok());
    ASSERT_TRUE(m.Ensure({"uid-b", 1, 0}, "default/b", kGpu, "2g.20gb", {0, 2}).ok());
  }
  MigInstances restarted(driver_, StateFile());
  ASSERT_TRUE(restarted.Load(Now()).ok());
  ASSERT_EQ(restarted.Snapshot().size(), 2u);
  EXPECT_TRUE(restarted.Foreign(Now()).empty());
  // Pod b was deleted while the plugin was down: its instance is ours, so it is reclaimed.
  EXPECT_EQ(restarted.Reconcile({"uid-a"}, restarted.Generation()).destroyed, 1);
  EXPECT_EQ(driver_.Instances(kGpu).size(), 1u);
  // An instance destroyed behind the plugin's back is forgotten at the next start.
  ASSERT_TRUE(driver_.DestroyMigDevice(kGpu, driver_.Instances(kGpu)[0].device.gi_id, 0).ok());
  MigInstances again(driver_, StateFile());
  ASSERT_TRUE(again.Load(Now()).ok());
  EXPECT_TRUE(again.Snapshot().empty());
}

TEST_F(MigInstancesTest, AdoptionSkipsWhatItCannotTakeAndGoesOn) {
  // Made by an earlier plugin that kept no state file; the pods' annotations name them.
  CreatedMigDevice x = driver_.CreateMigDevice(kGpu, 0, {6, 1}).value();
  CreatedMigDevice y = driver_.CreateMigDevice(kGpu, 0, {5, 1}).value();
  CreatedMigDevice z = driver_.CreateMigDevice(kGpu, 1, {0, 2}).value();  // an operator's
  MigInstances m(driver_, StateFile());
  ASSERT_TRUE(m.Load(Now()).ok());
  std::vector<MigInstance> wanted = {
      {{"uid-gone", 0, 0}, "default/gone", kGpu, "1g.10gb", {4, 1}, {"MIG-nope", 9, 0}},
      {{"uid-x", 0, 0}, "default/x", kGpu, "1g.10gb", {6, 1}, x},
      {{"uid-y", 0, 0}, "default/y", kGpu, "1g.10gb", {5, 1}, y}};
  EXPECT_EQ(m.Adopt(wanted, Now()), 2);  // the missing one first does not stop the rest
  std::vector<ForeignMig> foreign = m.Foreign(Now());
  ASSERT_EQ(foreign.size(), 1u);
  EXPECT_EQ(foreign[0].device.uuid, z.uuid);
  // Foreign instances are never destroyed: reconciling with no pod active leaves z.
  EXPECT_EQ(m.Reconcile({}, m.Generation()).destroyed, 2);
  ASSERT_EQ(driver_.Instances(kGpu).size(), 1u);
  EXPECT_EQ(driver_.Instances(kGpu)[0].device, z);
}

TEST_F(MigInstancesTest, ReleaseAndABrokenStateFile) {
  MigInstances m(driver_, StateFile());
  ASSERT_TRUE(m.Ensure({"uid-a", 0, 0}, "default/a", kGpu, "1g.10gb", {6, 1}).ok());
  ASSERT_TRUE(m.Release({"uid-a", 0, 0}).ok());
  EXPECT_TRUE(driver_.Instances(kGpu).empty());
  EXPECT_TRUE(m.Release({"uid-a", 0, 0}).ok());  // nothing held: nothing to do
  std::ofstream(StateFile()) << "{\"instances\":[{\"podUID\":1}]}";
  MigInstances broken(driver_, StateFile());
  Status s = broken.Load(Now());
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find(StateFile()), std::string::npos);
  EXPECT_TRUE(ReadFileToString(StateFile()).ok());  // kept for the operator to look at
}

TEST(MigInstancesCodec, RoundTripsAndRefusesRepeats) {
  std::vector<MigInstance> list = {
      {{"uid-a", 1, 2}, "ns/a", "GPU-0", "2g.20gb", {2, 2}, {"MIG-1", 3, 0}}};
  Result<std::vector<MigInstance>> back = DecodeMigInstances(EncodeMigInstances(list));
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(*back, list);
  list.push_back(list[0]);
  EXPECT_FALSE(DecodeMigInstances(EncodeMigInstances(list)).ok());
  EXPECT_FALSE(DecodeMigInstances("not json").ok());
  EXPECT_FALSE(DecodeMigInstances("{\"instances\":[{}]}").ok());
}

}  // namespace
}  // namespace hami::deviceplugin
