// The registrar on fakes: a scripted API server (FakeTransport), the in-memory GPU driver and a
// fake clock, its queue stepped on the test's thread.
#include "deviceplugin/registrar.h"

#include <gtest/gtest.h>

#include "device/node_registration.h"
#include "deviceplugin/fake_gpu_driver.h"
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
  uint64_t gen = r.MigDevices("nvidia.com/mig-1g.10gb", 0, std::chrono::milliseconds(0), &list);
  EXPECT_EQ(Ids(list), (std::vector<std::string>{"MIG-a", "MIG-b"}));
  EXPECT_EQ(list[0].gpu, kGpu1);
  EXPECT_EQ(list[0].numa_node, -1);  // topology only with enableNumaTopology
  r.MigDevices("nvidia.com/mig-7g.80gb", 0, std::chrono::milliseconds(0), &list);
  EXPECT_TRUE(list.empty());

  // An XID in one instance: that instance only. One on the GPU: every instance on it.
  r.MarkUnhealthy({"MIG-b"}, "XID 79");  // GPU 0's registration is unchanged: no patch
  EXPECT_NE(r.MigDevices("nvidia.com/mig-1g.10gb", gen, std::chrono::milliseconds(0), &list),
            gen);
  EXPECT_EQ(Ids(list), (std::vector<std::string>{"MIG-a", "MIG-b!"}));
  r.MarkUnhealthy({kGpu1}, "XID 48");
  r.MigDevices("nvidia.com/mig-3g.40gb", 0, std::chrono::milliseconds(0), &list);
  EXPECT_EQ(Ids(list), (std::vector<std::string>{"MIG-c!"}));
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
  r.MigDevices("nvidia.com/mig-1g.10gb", 0, std::chrono::milliseconds(0), &list);
  EXPECT_EQ(Ids(list), (std::vector<std::string>{"MIG-b"}));
  // 2g.20gb was not there at Start: no socket serves it, so it is not listed (a warning says
  // to restart the plugin).
  EXPECT_EQ(r.MigResourceNames().size(), 2u);
  r.MigDevices("nvidia.com/mig-2g.20gb", 0, std::chrono::milliseconds(0), &list);
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

}  // namespace
}  // namespace hami::deviceplugin
