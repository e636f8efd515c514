// The registrar on fakes: a scripted API server (FakeTransport), the in-memory GPU driver and a
// fake clock, its queue stepped on the test's thread.
#include "deviceplugin/registrar.h"

#include <gtest/gtest.h>

#include "device/node_registration.h"
#include "deviceplugin/fake_gpu_driver.h"
#include "deviceplugin/fake_mig_driver.h"
#include "k8s/object.h"
#include "k8s/test_util.h"

namespace hami::deviceplugin {
namespace {

using k8s::FakeTransport;
using k8s::testing::FakeClient;

constexpr const char* kGpu0 = "GPU-bbbbbbbb-0000-4000-8000-000000000000";
constexpr const char* kGpu1 = "GPU-bbbbbbbb-0000-4000-8000-000000000001";
constexpr const char* kNodeUrl = "/api/v1/nodes/node-a";

Inventory Gpus(int n) {
  Inventory inv;
  for (int i = 0; i < n; ++i) {
    GpuInfo g;
    g.index = static_cast<uint32_t>(i);
    g.uuid = i == 0 ? kGpu0 : kGpu1;
    g.name = "NVIDIA A100-SXM4-80GB";
    g.memory_bytes = uint64_t{80} << 30;
    inv.gpus.push_back(g);
  }
  return inv;
}

class RegistrarTest : public ::testing::Test {
 protected:
  RegistrarTest() : driver_(Gpus(2)) {
    options_.node_name = "node-a";
    options_.settings.device_split_count = 4;
    options_.register_interval = std::chrono::seconds(30);
    options_.retry_interval = std::chrono::seconds(5);
    options_.health_wait_slice = std::chrono::milliseconds(1);
  }

  Registrar& Start(bool first_patch_ok = true) {
    fc_.fake->Push("PATCH", kNodeUrl,
                   first_patch_ok ? FakeTransport::Json(200, "{}")
                                  : FakeTransport::Json(403, R"({"reason":"Forbidden"})"));
    registrar_ = std::make_unique<Registrar>(*fc_.client, driver_, options_, fc_.clock);
    EXPECT_TRUE(registrar_->Start(Registrar::Drive::kSteps).ok());
    return *registrar_;
  }

  // The node patches made so far.
  std::vector<k8s::HttpRequest> Patches() const {
    std::vector<k8s::HttpRequest> out;
    for (const k8s::HttpRequest& r : fc_.fake->requests()) {
      if (r.method == "PATCH" && r.url.find(kNodeUrl) != std::string::npos) out.push_back(r);
    }
    return out;
  }

  // The registration a patch wrote.
  static std::vector<device::DeviceInfo> Written(const k8s::HttpRequest& patch) {
    k8s::Object body = *k8s::ParseObject(patch.body);
    std::string text = body["metadata"]["annotations"]["hami.io/node-nvidia-register"];
    return device::DecodeNodeDevices(text).value();
  }

  FakeClient fc_;
  FakeGpuDriver driver_;
  RegistrarOptions options_;
  std::unique_ptr<Registrar> registrar_;
};

TEST_F(RegistrarTest, StartPublishesTheRegistrationOnce) {
  Registrar& r = Start();
  std::vector<k8s::HttpRequest> patches = Patches();
  ASSERT_EQ(patches.size(), 1u);
  std::vector<device::DeviceInfo> devs = Written(patches[0]);
  ASSERT_EQ(devs.size(), 2u);
  EXPECT_EQ(devs[0].id, kGpu0);
  EXPECT_EQ(devs[0].count, 4);
  EXPECT_EQ(r.stats().registrations_published, 1u);
  std::vector<PluginDevice> list;
  r.Devices(0, std::chrono::milliseconds(0), &list);
  EXPECT_EQ(list.size(), 8u);
  EXPECT_EQ(r.Replicas().at(std::string(kGpu1) + "-3"), kGpu1);
}

// Held until the kubelet has the plugin's sockets: no pass publishes, not even one forced by an
// unhealthy GPU; Publish() then writes what is known now, once.
TEST_F(RegistrarTest, AHeldRegistrationIsPublishedOnlyWhenReleased) {
  options_.publish_at_start = false;
  registrar_ = std::make_unique<Registrar>(*fc_.client, driver_, options_, fc_.clock);
  ASSERT_TRUE(registrar_->Start(Registrar::Drive::kSteps).ok());
  Registrar& r = *registrar_;
  EXPECT_TRUE(Patches().empty());
  std::vector<PluginDevice> list;
  r.Devices(0, std::chrono::milliseconds(0), &list);
  EXPECT_EQ(list.size(), 8u);  // the kubelet's list is there from the start
  fc_.clock.Advance(std::chrono::seconds(30));
  ASSERT_TRUE(r.Step());
  r.MarkUnhealthy({kGpu0}, "test");
  ASSERT_TRUE(r.Step());
  EXPECT_TRUE(Patches().empty());
  EXPECT_EQ(r.stats().registrations_published, 0u);

  fc_.fake->Push("PATCH", kNodeUrl, FakeTransport::Json(200, "{}"));
  r.Publish();
  ASSERT_TRUE(r.Step());
  ASSERT_EQ(Patches().size(), 1u);
  std::vector<device::DeviceInfo> devs = Written(Patches()[0]);
  ASSERT_EQ(devs.size(), 2u);
  EXPECT_FALSE(devs[0].health);  // what was learnt while held
  r.Publish();                   // a second release changes nothing
  EXPECT_FALSE(r.Step());
  EXPECT_EQ(r.stats().registrations_published, 1u);
}

TEST_F(RegistrarTest, AnUnchangedRegistrationIsNotWrittenAgain) {
  Registrar& r = Start();
  EXPECT_FALSE(r.Step());  // nothing is due before register_interval
  for (int pass = 1; pass <= 3; ++pass) {
    fc_.clock.Advance(std::chrono::seconds(29));
    EXPECT_FALSE(r.Step()) << pass;
    fc_.clock.Advance(std::chrono::seconds(1));
    ASSERT_TRUE(r.Step()) << pass;
    EXPECT_EQ(r.stats().refreshes, static_cast<uint64_t>(pass));
    EXPECT_EQ(Patches().size(), 1u) << pass;
  }
}

TEST_F(RegistrarTest, AChangedInventoryIsPublishedAtTheNextPass) {
  Registrar& r = Start();
  driver_.SetInventory(Gpus(1));
  fc_.fake->Push("PATCH", kNodeUrl, FakeTransport::Json(200, "{}"));
  fc_.clock.Advance(std::chrono::seconds(30));
  ASSERT_TRUE(r.Step());
  ASSERT_EQ(Patches().size(), 2u);
  EXPECT_EQ(Written(Patches()[1]).size(), 1u);
  std::vector<PluginDevice> list;
  r.Devices(0, std::chrono::milliseconds(0), &list);
  EXPECT_EQ(list.size(), 4u);
}

TEST_F(RegistrarTest, AFailedPublicationIsRetriedAfterTheRetryInterval) {
  Registrar& r = Start(/*first_patch_ok=*/false);
  EXPECT_EQ(r.stats().registrations_published, 0u);
  fc_.clock.Advance(std::chrono::seconds(4));
  EXPECT_FALSE(r.Step());
  fc_.fake->Push("PATCH", kNodeUrl, FakeTransport::Json(403, R"({"reason":"Forbidden"})"));
  fc_.clock.Advance(std::chrono::seconds(1));
  ASSERT_TRUE(r.Step());  // fails again: the next try is retry_interval away, not 30 s
  EXPECT_EQ(Patches().size(), 2u);
  fc_.fake->Push("PATCH", kNodeUrl, FakeTransport::Json(200, "{}"));
  fc_.clock.Advance(std::chrono::seconds(5));
  ASSERT_TRUE(r.Step());
  EXPECT_EQ(Patches().size(), 3u);
  EXPECT_EQ(r.stats().registrations_published, 1u);
  fc_.clock.Advance(std::chrono::seconds(5));
  EXPECT_FALSE(r.Step());  // back on register_interval
}

TEST_F(RegistrarTest, AnUnhealthyGpuIsPublishedAtOnce) {
  Registrar& r = Start();
  std::vector<PluginDevice> list;
  const uint64_t before = r.Devices(0, std::chrono::milliseconds(0), &list);
  fc_.fake->Push("PATCH", kNodeUrl, FakeTransport::Json(200, "{}"));
  r.MarkUnhealthy({kGpu1}, "XID 79");
  r.MarkUnhealthy({kGpu1}, "XID 79");  // already known: nothing more to publish
  ASSERT_TRUE(r.Step());
  EXPECT_FALSE(r.Step());
  ASSERT_EQ(Patches().size(), 2u);
  std::vector<device::DeviceInfo> devs = Written(Patches()[1]);
  ASSERT_EQ(devs.size(), 2u);
  EXPECT_TRUE(devs[0].health);
  EXPECT_FALSE(devs[1].health);
  EXPECT_NE(r.Devices(before, std::chrono::milliseconds(0), &list), before);
}

TEST_F(RegistrarTest, RefusesMigModeAndANodeWithNothingToServe) {
  options_.settings.operating_mode = device::OperatingMode::kMig;
  Registrar mig(*fc_.client, driver_, options_, fc_.clock);
  Status s = mig.Start(Registrar::Drive::kSteps);
  EXPECT_EQ(s.code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(s.message().find("mig"), std::string::npos) << s.message();

  options_.settings.operating_mode = device::OperatingMode::kHamiCore;
  FakeGpuDriver empty{Inventory{}};
  Registrar none(*fc_.client, empty, options_, fc_.clock);
  s = none.Start(Registrar::Drive::kSteps);
  EXPECT_EQ(s.code(), StatusCode::kFailedPrecondition);
  EXPECT_TRUE(fc_.fake->requests().empty());
}

// GPU 1 in MIG mode: two 1g.10gb instances and one 3g.40gb.
Inventory MixedNode() {
  Inventory inv = Gpus(2);
  GpuInfo& g = inv.gpus[1];
  g.mig_enabled = true;
  g.numa_node = 1;
  g.mig_devices = {{"MIG-a", 7, 0, 1, 1, 9728, 14, false, 0, {}},
                   {"MIG-b", 8, 0, 1, 1, 9728, 14, false, 0, {}},
                   {"MIG-c", 2, 0, 3, 3, 40192, 42, false, 0, {}}};
  return inv;
}

std::vector<std::string> Ids(const std::vector<PluginDevice>& list) {
  std::vector<std::string> out;
  for (const PluginDevice& d : list) out.push_back(d.id + (d.healthy ? "" : "!"));
  return out;
}

TEST_F(RegistrarTest, MixedStrategyListsEachProfileAndFollowsHealth) {
  driver_.SetInventory(MixedNode());
  options_.mig_strategy = MigStrategy::kMixed;
  Registrar& r = Start();
  EXPECT_EQ(Written(Patches()[0]).size(), 1u);  // GPU 0 alone is shared as vGPUs
  EXPECT_EQ(r.MigResourceNames(),
            (std::vector<std::string>{"nvidia.com/mig-1g.10gb", "nvidia.com/mig-3g.40gb"}));
  std::vector<PluginDevice> list;
  uint64_t gen =
      r.ResourceDevices("nvidia.com/mig-1g.10gb", 0, std::chrono::milliseconds(0), &list);
  EXPECT_EQ(Ids(list), (std::vector<std::string>{"MIG-a", "MIG-b"}));
  EXPECT_EQ(list[0].gpu, kGpu1);
  EXPECT_EQ(list[0].numa_node, -1);  // topology only with enableNumaTopology
  r.ResourceDevices("nvidia.com/mig-7g.80gb", 0, std::chrono::milliseconds(0), &list);
  EXPECT_TRUE(list.empty());

  // An XID in one instance: that instance only. One on the GPU: every instance on it.
  r.MarkUnhealthy({"MIG-b"}, "XID 79");  // GPU 0's registration is unchanged: no patch
  EXPECT_NE(r.ResourceDevices("nvidia.com/mig-1g.10gb", gen, std::chrono::milliseconds(0), &list),
            gen);
  EXPECT_EQ(Ids(list), (std::vector<std::string>{"MIG-a", "MIG-b!"}));
  r.MarkUnhealthy({kGpu1}, "XID 48");
  r.ResourceDevices("nvidia.com/mig-3g.40gb", 0, std::chrono::milliseconds(0), &list);
  EXPECT_EQ(Ids(list), (std::vector<std::string>{"MIG-c!"}));
}

// B13's "no recovery": a faulted instance is recovered by replacing it. The operator destroys it
// and makes a new one in its place; the new device has a UUID of its own and is offered healthy
// at the next pass, while the mark stays with the UUID that faulted.
TEST_F(RegistrarTest, AFaultedInstanceReplacedByTheOperatorIsOfferedHealthy) {
  driver_.SetInventory(MixedNode());
  options_.mig_strategy = MigStrategy::kMixed;
  Registrar& r = Start();
  r.MarkUnhealthy({"MIG-b"}, "XID 94");
  std::vector<PluginDevice> list;
  r.ResourceDevices("nvidia.com/mig-1g.10gb", 0, std::chrono::milliseconds(0), &list);
  EXPECT_EQ(Ids(list), (std::vector<std::string>{"MIG-a", "MIG-b!"}));
  Inventory later = MixedNode();
  for (MigDeviceInfo& m : later.gpus[1].mig_devices) {
    if (m.uuid == "MIG-b") m.uuid = "MIG-e";  // same place and profile, a new device
  }
  driver_.SetInventory(later);
  fc_.clock.Advance(std::chrono::seconds(30));
  ASSERT_TRUE(r.Step());
  while (r.Step()) {
  }
  r.ResourceDevices("nvidia.com/mig-1g.10gb", 0, std::chrono::milliseconds(0), &list);
  EXPECT_EQ(Ids(list), (std::vector<std::string>{"MIG-a", "MIG-e"}));
}

TEST_F(RegistrarTest, MixedStrategyFollowsInstancesWithinTheProfilesItStartedWith) {
  driver_.SetInventory(MixedNode());
  options_.mig_strategy = MigStrategy::kMixed;
  Registrar& r = Start();
  Inventory later = MixedNode();
  later.gpus[1].mig_devices.erase(later.gpus[1].mig_devices.begin());      // MIG-a destroyed
  // A new profile.
  later.gpus[1].mig_devices.push_back({"MIG-d", 1, 0, 2, 2, 19968, 28, false, 0, {}});
  driver_.SetInventory(later);
  fc_.clock.Advance(std::chrono::seconds(30));
  ASSERT_TRUE(r.Step());
  std::vector<PluginDevice> list;
  r.ResourceDevices("nvidia.com/mig-1g.10gb", 0, std::chrono::milliseconds(0), &list);
  EXPECT_EQ(Ids(list), (std::vector<std::string>{"MIG-b"}));
  // 2g.20gb was not there at Start: no socket serves it, so it is not listed (a warning says
  // to restart the plugin).
  EXPECT_EQ(r.MigResourceNames().size(), 2u);
  r.ResourceDevices("nvidia.com/mig-2g.20gb", 0, std::chrono::milliseconds(0), &list);
  EXPECT_TRUE(list.empty());
}

TEST_F(RegistrarTest, MigStrategiesOnANodeWhoseGpusAreAllMig) {
  Inventory inv = MixedNode();
  inv.gpus.erase(inv.gpus.begin());
  driver_.SetInventory(inv);
  {
    options_.mig_strategy = MigStrategy::kNone;  // nothing left to serve
    Registrar none(*fc_.client, driver_, options_, fc_.clock);
    EXPECT_EQ(none.Start(Registrar::Drive::kSteps).code(), StatusCode::kFailedPrecondition);
  }
  {
    options_.mig_strategy = MigStrategy::kSingle;  // two profiles: refused, naming them
    Registrar single(*fc_.client, driver_, options_, fc_.clock);
    Status s = single.Start(Registrar::Drive::kSteps);
    EXPECT_EQ(s.code(), StatusCode::kFailedPrecondition);
    EXPECT_NE(s.message().find("more than one MIG device type"), std::string::npos) << s.message();
  }
  inv.gpus[0].mig_devices.pop_back();  // two 1g.10gb instances: single takes them
  driver_.SetInventory(inv);
  options_.mig_strategy = MigStrategy::kSingle;
  Registrar& r = Start();
  std::vector<device::DeviceInfo> devs = Written(Patches()[0]);
  ASSERT_EQ(devs.size(), 2u);
  EXPECT_EQ(devs[0].id, "MIG-a");
  EXPECT_EQ(devs[0].count, 1);
  EXPECT_EQ(devs[0].devmem, 9728);
  EXPECT_EQ(r.Replicas().at("MIG-b-0"), "MIG-b");
  EXPECT_TRUE(r.MigResourceNames().empty());  // single serves them as nvidia.com/gpu
}

// ---- Dynamic MIG (operating mode mig): what the registrar does to the GPUs and publishes.

constexpr const char* kGpu2 = "GPU-bbbbbbbb-0000-4000-8000-000000000002";

// A MIG driver on which turning MIG on stays pending (a GPU reset is required) for the GPUs
// named, and which records every GPU it was asked to turn MIG on for; the rest is the fake's.
// Single-threaded use (the registrar's driver calls run on the test's thread).
class PendingEnableMigDriver final : public MigDriver {
 public:
  PendingEnableMigDriver(FakeMigDriver& fake, std::set<std::string> stuck)
      : fake_(fake), stuck_(std::move(stuck)) {}
  const std::vector<std::string>& enabled_asked() const { return asked_; }

  Result<MigModeState> GetMigMode(const std::string& gpu) override {
    if (pending_.count(gpu)) return MigModeState{false, true};
    return fake_.GetMigMode(gpu);
  }
  Status EnableMig(const std::string& gpu) override {
    asked_.push_back(gpu);
    if (!stuck_.count(gpu)) return fake_.EnableMig(gpu);
    pending_.insert(gpu);
    return FailedPreconditionError("MIG mode change pending: a GPU reset is required");
  }
  Result<std::vector<MigProfileSpec>> MigProfiles(const std::string& gpu) override {
    return fake_.MigProfiles(gpu);
  }
  Result<CreatedMigDevice> CreateMigDevice(const std::string& gpu, uint32_t profile_id,
                                           device::MigPlacement placement) override {
    return fake_.CreateMigDevice(gpu, profile_id, placement);
  }
  Status DestroyMigDevice(const std::string& gpu, uint32_t gi_id, uint32_t ci_id) override {
    return fake_.DestroyMigDevice(gpu, gi_id, ci_id);
  }

 private:
  FakeMigDriver& fake_;
  const std::set<std::string> stuck_;
  std::set<std::string> pending_;
  std::vector<std::string> asked_;
};

// The A100-80GB's profiles as its driver names them, "+me" variant included.
std::vector<MigProfileSpec> A100MigProfiles() {
  std::vector<device::MigPlacement> ones = {{0, 1}, {1, 1}, {2, 1}, {3, 1},
                                            {4, 1}, {5, 1}, {6, 1}};
  return {{19, "1g.10gb", 1, 7, 9728, 14, ones},
          {20, "1g.10gb+me", 1, 1, 9728, 14, ones},
          {14, "2g.20gb", 2, 3, 19968, 28, {{0, 2}, {2, 2}, {4, 2}}},
          {9, "3g.40gb", 3, 2, 40192, 42, {{0, 4}, {4, 4}}},
          {0, "7g.80gb", 7, 1, 80384, 98, {{0, 8}}}};
}

class DynamicMigRegistrarTest : public RegistrarTest {
 protected:
  DynamicMigRegistrarTest() : instances_(mig_, "") {
    options_.settings.operating_mode = device::OperatingMode::kMig;
    options_.mig_allowlist = device::DefaultMigProfileAllowlist();
    options_.mig_instances = &instances_;
  }
  // The GPUs as discovery sees them now (MIG mode and MIG devices from the MIG driver), each
  // an A100-80GB.
  Inventory FromMigDriver() const {
    Inventory inv = mig_.Discovered();
    for (size_t i = 0; i < inv.gpus.size(); ++i) {
      inv.gpus[i].index = static_cast<uint32_t>(i);
      inv.gpus[i].name = "NVIDIA A100-SXM4-80GB";
      inv.gpus[i].memory_bytes = uint64_t{80} << 30;
    }
    return inv;
  }
  static const device::MigProfile* Profile(const device::DeviceInfo& d, const std::string& n) {
    for (const device::MigProfile& p : d.mig_profiles) {
      if (p.name == n) return &p;
    }
    return nullptr;
  }

  FakeMigDriver mig_;
  MigInstances instances_;
};

// Upstream's B7: its startup turns MIG on and wipes every idle GPU, those hidden by
// filterdevices included, stops at the first GPU that fails, and leaves a GPU whose change is
// pending advertised as healthy. Here MIG is turned on only for the GPUs served, a change that
// stays pending registers that GPU unhealthy and the next GPU is still served, and nothing is
// made or destroyed at start. A node in another operating mode has no GPU's MIG mode changed.
TEST_F(DynamicMigRegistrarTest, TurnsMigOnOnlyOnServedGpusAndReportsAPendingChange) {
  for (const char* gpu : {kGpu0, kGpu1, kGpu2}) mig_.AddGpu(gpu, A100MigProfiles(), false);
  PendingEnableMigDriver mig(mig_, {kGpu0});
  options_.mig_driver = &mig;
  options_.settings.filter_devices.uuids = {kGpu1};
  driver_.SetInventory(FromMigDriver());
  Start();

  EXPECT_EQ(mig.enabled_asked(), (std::vector<std::string>{kGpu0, kGpu2}));
  EXPECT_EQ(*mig_.GetMigMode(kGpu1), (MigModeState{false, false}));  // filtered: untouched
  EXPECT_EQ(*mig_.GetMigMode(kGpu2), (MigModeState{true, true}));
  EXPECT_EQ(mig_.creates(), 0);
  std::vector<device::DeviceInfo> devs = Written(Patches().at(0));
  ASSERT_EQ(devs.size(), 2u);
  EXPECT_EQ(devs[0].id, kGpu0);
  EXPECT_EQ(devs[0].mode, "mig");
  EXPECT_FALSE(devs[0].health);  // the reset it needs is reported, not hidden until Allocate
  EXPECT_EQ(devs[1].id, kGpu2);
  EXPECT_TRUE(devs[1].health);
  EXPECT_EQ(devs[1].mig_profiles.size(), 4u);  // the allowlist's four, "7g.79gb" as 7g.80gb

  // A later pass reads the mode again but asks for no change.
  fc_.clock.Advance(std::chrono::seconds(30));
  ASSERT_TRUE(registrar_->Step());
  EXPECT_EQ(mig.enabled_asked().size(), 2u);

  // Operating mode hami-core with the same driver at hand: no GPU's MIG mode is touched.
  options_.settings.operating_mode = device::OperatingMode::kHamiCore;
  options_.settings.filter_devices = {};
  PendingEnableMigDriver untouched(mig_, {});
  options_.mig_driver = &untouched;
  driver_.SetInventory(Gpus(2));
  fc_.fake->Push("PATCH", kNodeUrl, FakeTransport::Json(200, "{}"));
  Registrar core(*fc_.client, driver_, options_, fc_.clock);
  ASSERT_TRUE(core.Start(Registrar::Drive::kSteps).ok());
  EXPECT_TRUE(untouched.enabled_asked().empty());
  EXPECT_EQ(*mig_.GetMigMode(kGpu1), (MigModeState{false, false}));
}

// Upstream's B5 and B14, and B13 for dynamic MIG. A MIG device no pod owns (an operator's
// "+me" instance, a profile upstream's reset cannot even see) is neither destroyed nor reused:
// its placement is left out of what the GPU registers, while the pods' own instances are not
// (the scheduler knows those from the pods). The GPU is registered although MIG is on (no
// strategy drops it). An XID in one MIG instance leaves the GPU healthy; one of the GPU does
// not.
TEST_F(DynamicMigRegistrarTest, LeavesForeignInstancesAloneAndChargesXidsToTheirInstance) {
  mig_.AddGpu(kGpu0, A100MigProfiles());
  options_.mig_driver = &mig_;
  CreatedMigDevice foreign = mig_.CreateMigDevice(kGpu0, 20, {6, 1}).value();
  Result<MigInstance> pods =
      instances_.Ensure({"uid-a", 0, 0}, "default/a", kGpu0, "1g.10gb", {5, 1});
  ASSERT_TRUE(pods.ok()) << pods.status().ToString();
  driver_.SetInventory(FromMigDriver());
  ASSERT_TRUE(driver_.Discover()->gpus[0].mig_enabled);
  Registrar& r = Start();

  std::vector<device::DeviceInfo> devs = Written(Patches().at(0));
  ASSERT_EQ(devs.size(), 1u);
  EXPECT_EQ(devs[0].id, kGpu0);
  EXPECT_TRUE(devs[0].health);
  const device::MigProfile* one = Profile(devs[0], "1g.10gb");
  ASSERT_NE(one, nullptr);
  EXPECT_EQ(one->placements, (std::vector<device::MigPlacement>{
                                 {0, 1}, {1, 1}, {2, 1}, {3, 1}, {4, 1}, {5, 1}}));
  const device::MigProfile* three = Profile(devs[0], "3g.40gb");
  ASSERT_NE(three, nullptr);
  EXPECT_EQ(three->placements, (std::vector<device::MigPlacement>{{0, 4}}));
  const device::MigProfile* whole = Profile(devs[0], "7g.80gb");
  ASSERT_NE(whole, nullptr);
  EXPECT_TRUE(whole->placements.empty());
  ASSERT_EQ(mig_.Instances(kGpu0).size(), 2u);  // nothing destroyed
  EXPECT_EQ(mig_.Instances(kGpu0)[0].device, foreign);

  r.MarkUnhealthy({pods->device.uuid}, "XID 48");
  r.MarkUnhealthy({foreign.uuid}, "XID 48");
  ASSERT_TRUE(r.Step());
  EXPECT_EQ(Patches().size(), 1u);  // the GPU's registration did not change
  fc_.fake->Push("PATCH", kNodeUrl, FakeTransport::Json(200, "{}"));
  r.MarkUnhealthy({kGpu0}, "XID 79");
  ASSERT_TRUE(r.Step());
  ASSERT_EQ(Patches().size(), 2u);
  EXPECT_FALSE(Written(Patches()[1])[0].health);
}

// Upstream's B5, the half-made case: a GPU instance holding no compute instance is no MIG device,
// but its place is taken; the registration leaves it out, so no pod is reserved there.
TEST_F(DynamicMigRegistrarTest, AnEmptyGpuInstancesPlaceIsLeftOut) {
  mig_.AddGpu(kGpu0, A100MigProfiles());
  options_.mig_driver = &mig_;
  Inventory inv = FromMigDriver();
  inv.gpus[0].empty_gpu_instances = {{4, 4}};  // a 3g.40gb's GPU instance, no compute instance
  driver_.SetInventory(inv);
  Start();
  std::vector<device::DeviceInfo> devs = Written(Patches().at(0));
  ASSERT_EQ(devs.size(), 1u);
  const device::MigProfile* one = Profile(devs[0], "1g.10gb");
  ASSERT_NE(one, nullptr);
  EXPECT_EQ(one->placements,
            (std::vector<device::MigPlacement>{{0, 1}, {1, 1}, {2, 1}, {3, 1}}));
  const device::MigProfile* three = Profile(devs[0], "3g.40gb");
  ASSERT_NE(three, nullptr);
  EXPECT_EQ(three->placements, (std::vector<device::MigPlacement>{{0, 4}}));
  EXPECT_TRUE(mig_.Instances(kGpu0).empty());  // nothing made, nothing destroyed

  // One that appears later is left out only when the next pass still finds it empty (a pass
  // between this plugin's own GPU instance and its compute instance must not block the place).
  inv.gpus[0].empty_gpu_instances.push_back({0, 1});
  driver_.SetInventory(inv);
  fc_.clock.Advance(std::chrono::seconds(30));
  ASSERT_TRUE(registrar_->Step());
  EXPECT_EQ(Patches().size(), 1u);
  fc_.fake->Push("PATCH", kNodeUrl, FakeTransport::Json(200, "{}"));
  fc_.clock.Advance(std::chrono::seconds(30));
  ASSERT_TRUE(registrar_->Step());
  ASSERT_EQ(Patches().size(), 2u);
  devs = Written(Patches()[1]);
  ASSERT_EQ(devs.size(), 1u);
  one = Profile(devs[0], "1g.10gb");
  ASSERT_NE(one, nullptr);
  EXPECT_EQ(one->placements, (std::vector<device::MigPlacement>{{1, 1}, {2, 1}, {3, 1}}));
}

}  // namespace
}  // namespace hami::deviceplugin

namespace hami::deviceplugin {
namespace {

// Volcano's vGPU protocol: the register in Volcano's format with the handshake, the memory and
// cores lists; the handshake written again only when an old scheduler has stamped it.
TEST_F(RegistrarTest, VolcanoPublishesItsRegisterAndAnswersOldSchedulersHandshake) {
  VolcanoSettings v;
  v.memory_factor = 1024;
  options_.volcano = v;
  Registrar& r = Start();
  ASSERT_EQ(Patches().size(), 1u);
  k8s::Object anns = (*k8s::ParseObject(Patches()[0].body))["metadata"]["annotations"];
  EXPECT_FALSE(anns.contains("hami.io/node-nvidia-register"));
  EXPECT_EQ(anns["volcano.sh/node-vgpu-register"],
            std::string(kGpu0) + ",4,80,NVIDIA-NVIDIA A100-SXM4-80GB,true,hami-core:" + kGpu1 +
                ",4,80,NVIDIA-NVIDIA A100-SXM4-80GB,true,hami-core:");
  EXPECT_EQ(anns["volcano.sh/node-vgpu-handshake"], "Reported 2024-01-01 00:00:00 +0000 UTC");
  std::vector<PluginDevice> list;
  r.ResourceDevices("volcano.sh/vgpu-memory", 0, std::chrono::milliseconds(0), &list);
  EXPECT_EQ(list.size(), 160u);  // 80 GiB in 1 GiB units, twice
  EXPECT_EQ(list[0].id, std::string(kGpu0) + "-memory-0");
  r.ResourceDevices("volcano.sh/vgpu-cores", 0, std::chrono::milliseconds(0), &list);
  EXPECT_EQ(list.size(), 200u);

  // A full pass that finds the agent's own report (a new scheduler): one GET, no write.
  k8s::Object node = {{"metadata", {{"name", "node-a"}}}};
  node["metadata"]["annotations"]["volcano.sh/node-vgpu-handshake"] =
      "Reported 2024-01-01 00:00:00 +0000 UTC";
  fc_.fake->Push("GET", kNodeUrl, FakeTransport::Json(200, node.dump()));
  fc_.clock.Advance(std::chrono::seconds(30));
  ASSERT_TRUE(r.Step());
  EXPECT_EQ(Patches().size(), 1u);

  // An old scheduler stamped it: the next pass reports again, and only the handshake changes.
  node["metadata"]["annotations"]["volcano.sh/node-vgpu-handshake"] =
      "Requesting_2024.01.01 00:00:31";
  fc_.fake->Push("GET", kNodeUrl, FakeTransport::Json(200, node.dump()));
  fc_.fake->Push("PATCH", kNodeUrl, FakeTransport::Json(200, "{}"));
  fc_.clock.Advance(std::chrono::seconds(30));
  ASSERT_TRUE(r.Step());
  ASSERT_EQ(Patches().size(), 2u);
  anns = (*k8s::ParseObject(Patches()[1].body))["metadata"]["annotations"];
  EXPECT_EQ(anns["volcano.sh/node-vgpu-handshake"], "Reported 2024-01-01 00:01:00 +0000 UTC");

  // An unhealthy GPU leaves the register (Volcano's scheduler ignores the health field); no
  // handshake read on a publication that is not a full pass.
  fc_.fake->Push("PATCH", kNodeUrl, FakeTransport::Json(200, "{}"));
  r.MarkUnhealthy({kGpu0}, "test");
  ASSERT_TRUE(r.Step());
  ASSERT_EQ(Patches().size(), 3u);
  anns = (*k8s::ParseObject(Patches()[2].body))["metadata"]["annotations"];
  EXPECT_EQ(anns["volcano.sh/node-vgpu-register"],
            std::string(kGpu1) + ",4,80,NVIDIA-NVIDIA A100-SXM4-80GB,true,hami-core:");
  EXPECT_FALSE(anns.contains("volcano.sh/node-vgpu-handshake"));
  r.ResourceDevices("volcano.sh/vgpu-memory", 0, std::chrono::milliseconds(0), &list);
  EXPECT_FALSE(list[0].healthy);
}

TEST_F(RegistrarTest, VolcanoRefusesAMemoryListKubeletWouldDrop) {
  options_.volcano = VolcanoSettings{};  // factor 1: 2 x 81920 IDs
  registrar_ = std::make_unique<Registrar>(*fc_.client, driver_, options_, fc_.clock);
  Status s = registrar_->Start(Registrar::Drive::kSteps);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("set gpuMemoryFactor to 3 or more"), std::string::npos)
      << s.message();
  EXPECT_TRUE(Patches().empty());
}

// Volcano's GPU sharing: no register annotation; the status quantity and the unhealthy IDs are
// written when the node lacks them, checked on full passes, and the IDs follow health at once.
TEST_F(RegistrarTest, VolcanoSharingWritesTheStatusQuantityAndTheUnhealthyIds) {
  VolcanoSettings v;
  v.memory_factor = 1024;
  v.share = device::VolcanoShareMode::kMemory;
  v.handshake = false;
  options_.volcano = v;
  k8s::Object node = {{"metadata", {{"name", "node-a"}}}};
  node["metadata"]["annotations"]["volcano.sh/gpu-unhealthy-ids"] = "1";  // a stale value
  fc_.fake->Push("GET", kNodeUrl, FakeTransport::Json(200, node.dump()));
  fc_.fake->Push("PATCH", kNodeUrl + std::string("/status"), FakeTransport::Json(200, "{}"));
  Registrar& r = Start();
  ASSERT_EQ(Patches().size(), 2u);
  EXPECT_EQ(Patches()[0].body,
            R"({"metadata":{"annotations":{"volcano.sh/gpu-unhealthy-ids":null}}})");
  EXPECT_EQ(Patches()[1].body,
            R"({"status":{"allocatable":{"volcano.sh/gpu-number":"2"},)"
            R"("capacity":{"volcano.sh/gpu-number":"2"}}})");
  std::vector<PluginDevice> list;
  r.ResourceDevices("volcano.sh/gpu-memory", 0, std::chrono::milliseconds(0), &list);
  ASSERT_EQ(list.size(), 160u);
  EXPECT_EQ(list[0].id, "0-0");
  EXPECT_EQ(list[80].id, "1-0");

  // A full pass that finds both in place writes nothing.
  node["metadata"]["annotations"].erase("volcano.sh/gpu-unhealthy-ids");
  node["status"]["capacity"]["volcano.sh/gpu-number"] = "2";
  node["status"]["allocatable"]["volcano.sh/gpu-number"] = "2";
  fc_.fake->Push("GET", kNodeUrl, FakeTransport::Json(200, node.dump()));
  fc_.clock.Advance(std::chrono::seconds(30));
  ASSERT_TRUE(r.Step());
  EXPECT_EQ(Patches().size(), 2u);

  // GPU 1 turns unhealthy: the IDs at once, without reading the node.
  fc_.fake->Push("PATCH", kNodeUrl, FakeTransport::Json(200, "{}"));
  r.MarkUnhealthy({kGpu1}, "test");
  ASSERT_TRUE(r.Step());
  ASSERT_EQ(Patches().size(), 3u);
  EXPECT_EQ(Patches()[2].body,
            R"({"metadata":{"annotations":{"volcano.sh/gpu-unhealthy-ids":"1"}}})");
  r.ResourceDevices("volcano.sh/gpu-memory", 0, std::chrono::milliseconds(0), &list);
  EXPECT_FALSE(list[80].healthy);
  EXPECT_TRUE(list[0].healthy);
}

// Volcano's whole-GPU Jobs: the GPUs listed whole by UUID under nvidia.com/gpu, following
// health, and nothing written on the node (no registration, no Volcano annotation or quantity).
TEST_F(RegistrarTest, VolcanoWholeListsTheGpusAndPublishesNothing) {
  VolcanoSettings v;
  v.whole = true;
  v.handshake = false;
  options_.volcano = v;
  options_.resource_name = "nvidia.com/gpu";
  Registrar& r = Start();
  std::vector<PluginDevice> list;
  r.ResourceDevices("nvidia.com/gpu", 0, std::chrono::milliseconds(0), &list);
  ASSERT_EQ(list.size(), 2u);
  EXPECT_EQ(list[1].id, kGpu1);
  EXPECT_EQ(list[1].gpu, kGpu1);
  r.MarkUnhealthy({kGpu1}, "test");
  fc_.clock.Advance(std::chrono::seconds(30));
  ASSERT_TRUE(r.Step());
  r.ResourceDevices("nvidia.com/gpu", 0, std::chrono::milliseconds(0), &list);
  EXPECT_TRUE(list[0].healthy);
  EXPECT_FALSE(list[1].healthy);
  EXPECT_TRUE(Patches().empty());
}

}  // namespace
}  // namespace hami::deviceplugin
