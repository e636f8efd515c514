// Dynamic MIG under Volcano: VolcanoAllocator in operating mode mig on a scripted API server and
// the in-memory MIG driver. The slots Volcano's scheduler writes (`GPU-<uuid>[<group>-<pos>]`,
// golden values as its v1.12+ scheduler writes them) become MIG devices at the group's layout.
#include "deviceplugin/volcano_mig_allocate.h"

#include <gtest/gtest.h>

#include "device/mig_allocation.h"
#include "deviceplugin/fake_mig_driver.h"
#include "deviceplugin/volcano_allocator.h"
#include "k8s/object.h"
#include "k8s/test_util.h"

namespace hami::deviceplugin {
namespace {

using k8s::FakeTransport;

constexpr const char* kGpu = "GPU-aaaaaaaa-0000-4000-8000-000000000000";
constexpr const char* kPodsUrl = "/api/v1/pods";
constexpr const char* kNodeUrl = "/api/v1/nodes/node-a";

std::string PodUrl(const std::string& name) { return "/api/v1/namespaces/default/pods/" + name; }

// An A100-80GB's profiles as its driver lists them (ids as NVML's).
std::vector<MigProfileSpec> A100Profiles() {
  return {{19, "1g.10gb", 1, 7, 9728, 14, {{0, 1}, {1, 1}, {2, 1}, {3, 1}, {4, 1}, {5, 1}, {6, 1}}},
          {14, "2g.20gb", 2, 3, 19968, 28, {{0, 2}, {2, 2}, {4, 2}}},
          {9, "3g.40gb", 3, 2, 40192, 42, {{0, 4}, {4, 4}}},
          {0, "7g.80gb", 7, 1, 80384, 98, {{0, 8}}}};
}

// Volcano's shipped geometries for the A100-80GB.
std::vector<device::KnownMigGeometry> Geometries() {
  return {{.models = {"A100-SXM4-80GB"},
           .groups = {{"group1", {{"1g.10gb", 9728, 7}}},
                      {"group2", {{"2g.20gb", 19968, 3}, {"1g.10gb", 9728, 1}}},
                      {"group3", {{"3g.40gb", 40192, 2}}}}}};
}

k8s::Object Container(const std::string& name) {
  return {{"name", name}, {"resources", {{"limits", {{"volcano.sh/vgpu-number", "1"}}}}}};
}

// A pod as Volcano's scheduler leaves it: `to_allocate` its device record.
k8s::Object Pod(const std::string& name, const std::string& to_allocate, int containers = 1,
                const std::string& rv = "11") {
  k8s::Object p;
  p["metadata"] = {{"name", name}, {"namespace", "default"}, {"uid", "uid-" + name},
                   {"resourceVersion", rv}};
  k8s::Object& a = p["metadata"]["annotations"];
  a["volcano.sh/vgpu-node"] = "node-a";
  a["volcano.sh/vgpu-time"] = "100";
  a["volcano.sh/vgpu-ids-new"] = to_allocate;
  a["volcano.sh/devices-to-allocate"] = to_allocate;
  a["volcano.sh/bind-phase"] = "allocating";
  a["volcano.sh/vgpu-mode"] = "mig";
  p["spec"]["nodeName"] = "node-a";
  for (int i = 0; i < containers; ++i) {
    p["spec"]["containers"].push_back(Container("c" + std::to_string(i)));
  }
  p["status"]["phase"] = "Pending";
  return p;
}

PodView View(const std::string& name) {
  PodView v;
  v.ns = "default";
  v.name = name;
  v.uid = "uid-" + name;
  v.containers.resize(1);
  v.containers[0].name = "c0";
  return v;
}

std::string List(std::vector<k8s::Object> pods) { return k8s::Object{{"items", pods}}.dump(); }

std::string Slot(const std::string& group_pos, int mem) {
  return std::string(kGpu) + "[" + group_pos + "]," + "NVIDIA," + std::to_string(mem) + ",0:";
}

class VolcanoMigTest : public ::testing::Test {
 protected:
  VolcanoMigTest() : instances_(driver_, "") {
    driver_.AddGpu(kGpu, A100Profiles());
    options_.node_name = "node-a";
    options_.allocation.hook_path = dir_.path() + "/hook";
    options_.allocation.operating_mode = device::OperatingMode::kMig;
    options_.mig = Source();
    allocator_ = std::make_unique<VolcanoAllocator>(*fc_.client, options_, [] {
      ReplicaMap m;
      for (int i = 0; i < 7; ++i) m[std::string(kGpu) + "-" + std::to_string(i)] = kGpu;
      return m;
    });
  }
  VolcanoMigSource Source() {
    return {.geometries = Geometries(),
            .gpu_name = [](const std::string& gpu) -> std::optional<std::string> {
              if (gpu == kGpu) return "NVIDIA A100-SXM4-80GB";
              return std::nullopt;
            },
            .profiles = [this](const std::string& gpu)
                -> Result<std::vector<device::MigProfile>> {
              HAMI_ASSIGN_OR_RETURN(std::vector<MigProfileSpec> specs, driver_.MigProfiles(gpu));
              std::vector<device::MigProfile> out;
              for (const MigProfileSpec& s : specs) {
                out.push_back({s.name, static_cast<int32_t>(s.memory_mib), 0, s.slice_count,
                               s.placements});
              }
              return out;
            },
            .instances = &instances_,
            .finished = [this](const MigInstance& i) { return finished_.count(i.owner.pod_uid); }};
  }
  Result<std::vector<ContainerAllocation>> Allocate() {
    return allocator_->Allocate({{std::string(kGpu) + "-0"}});
  }
  k8s::Object Body(size_t i) const { return *k8s::ParseObject(fc_.fake->requests().at(i).body); }
  // The body of the last PATCH of pod `name`.
  k8s::Object LastPodPatch(const std::string& name) const {
    std::vector<k8s::HttpRequest> all = fc_.fake->requests();
    for (auto r = all.rbegin(); r != all.rend(); ++r) {
      if (r->method == "PATCH" && r->url.find(PodUrl(name)) != std::string::npos) {
        return *k8s::ParseObject(r->body);
      }
    }
    return k8s::Object::object();
  }

  k8s::testing::TempDir dir_;
  k8s::testing::FakeClient fc_;
  FakeMigDriver driver_;
  MigInstances instances_;
  std::set<std::string> finished_;  // pod UIDs whose pods are over
  VolcanoAllocatorOptions options_;
  std::unique_ptr<VolcanoAllocator> allocator_;
};

// group2's position 3 is its 1g.10gb slot: the instance is made at the layout's slice 6 (the
// three 2g.20gb slots hold 0-5), and the container gets that MIG device and nothing of
// libvgpu.so.
TEST_F(VolcanoMigTest, ASlotBecomesItsMigDeviceAtTheGroupsLayout) {
  fc_.fake->Push("GET", kPodsUrl,
                 FakeTransport::Json(200, List({Pod("p", Slot("group2-3", 9000))})));
  fc_.fake->Push("PATCH", PodUrl("p"), FakeTransport::Json(200, "{}"));
  fc_.fake->Push("PATCH", kNodeUrl, FakeTransport::Json(200, "{}"));
  Result<std::vector<ContainerAllocation>> r = Allocate();
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ(driver_.Instances(kGpu).size(), 1u);
  const FakeMigDriver::Made made = driver_.Instances(kGpu)[0];
  EXPECT_EQ(made.profile_id, 19u);
  EXPECT_EQ(made.placement, (device::MigPlacement{6, 1}));
  const ContainerAllocation& a = (*r)[0];
  EXPECT_EQ(a.envs.at("NVIDIA_VISIBLE_DEVICES"), made.device.uuid);
  EXPECT_EQ(a.envs.count("CUDA_DEVICE_MEMORY_LIMIT_0"), 0u);
  EXPECT_EQ(a.envs.count("CUDA_DEVICE_SM_LIMIT"), 0u);
  EXPECT_TRUE(a.mounts.empty());
  EXPECT_TRUE(a.host_dir.empty());
  k8s::Object patch = Body(1);
  const k8s::Object& anns = patch["metadata"]["annotations"];
  EXPECT_EQ(anns["volcano.sh/devices-to-allocate"], "");
  EXPECT_EQ(anns["volcano.sh/bind-phase"], "success");
  Result<std::vector<device::MigAllocation>> recorded =
      device::DecodeMigAllocations(anns["hami.io/vgpu-mig-allocations"].get<std::string>());
  ASSERT_TRUE(recorded.ok()) << anns.dump();
  ASSERT_EQ(recorded->size(), 1u);
  EXPECT_EQ((*recorded)[0].profile, "1g.10gb");
  EXPECT_EQ((*recorded)[0].placement, (device::MigPlacement{6, 1}));
  ASSERT_TRUE((*recorded)[0].runtime.has_value());
  EXPECT_EQ((*recorded)[0].runtime->mig_uuid, made.device.uuid);
}

// Two containers of one pod, each with a slot of group3: one call each (as kubelet makes them);
// the second keeps the first's record and ends the pod's allocation.
TEST_F(VolcanoMigTest, EachContainerGetsItsOwnSlot) {
  const std::string both = Slot("group3-0", 30000) + ";" + Slot("group3-1", 30000);
  fc_.fake->Push("GET", kPodsUrl, FakeTransport::Json(200, List({Pod("p", both, 2)})));
  fc_.fake->Push("PATCH", PodUrl("p"), FakeTransport::Json(200, "{}"));
  ASSERT_TRUE(Allocate().ok());
  k8s::Object first = Body(1);
  EXPECT_EQ(first["metadata"]["annotations"].count("volcano.sh/bind-phase"), 0u);
  k8s::Object served = Pod("p", ";" + Slot("group3-1", 30000), 2, "12");
  served["metadata"]["annotations"]["hami.io/vgpu-mig-allocations"] =
      first["metadata"]["annotations"]["hami.io/vgpu-mig-allocations"];
  fc_.fake->Push("GET", kPodsUrl, FakeTransport::Json(200, List({served})));
  fc_.fake->Push("PATCH", PodUrl("p"), FakeTransport::Json(200, "{}"));
  fc_.fake->Push("PATCH", kNodeUrl, FakeTransport::Json(200, "{}"));
  Result<std::vector<ContainerAllocation>> second = Allocate();
  ASSERT_TRUE(second.ok()) << second.status().ToString();
  EXPECT_EQ((*second)[0].container_name, "c1");
  std::vector<FakeMigDriver::Made> made = driver_.Instances(kGpu);
  ASSERT_EQ(made.size(), 2u);
  EXPECT_EQ(made[0].placement, (device::MigPlacement{0, 4}));
  EXPECT_EQ(made[1].placement, (device::MigPlacement{4, 4}));
  k8s::Object last = LastPodPatch("p");
  EXPECT_EQ(last["metadata"]["annotations"]["volcano.sh/bind-phase"], "success");
  Result<std::vector<device::MigAllocation>> all = device::DecodeMigAllocations(
      last["metadata"]["annotations"]["hami.io/vgpu-mig-allocations"].get<std::string>());
  ASSERT_TRUE(all.ok());
  ASSERT_EQ(all->size(), 2u);
  EXPECT_EQ((*all)[0].container_index, 0);
  EXPECT_EQ((*all)[1].container_index, 1);
  EXPECT_EQ((*all)[1].runtime->mig_uuid, made[1].device.uuid);
}

// A retried Allocate gets the instance the first call made; a slot whose place a finished pod's
// instance still holds gets it once that instance is destroyed.
TEST_F(VolcanoMigTest, RetriesReuseAndFinishedPodsMakeRoom) {
  PodView pod = View("p");
  device::ContainerDevices slot(1);
  slot[0].uuid = std::string(kGpu) + "[group1-2]";
  slot[0].mem_mib = 9000;
  std::vector<MigOwner> made;
  VolcanoMigSource source = Source();
  Result<std::vector<device::MigAllocation>> once =
      RealiseVolcanoMigSlots(pod, 0, slot, 1, source, &made);
  ASSERT_TRUE(once.ok()) << once.status().ToString();
  EXPECT_EQ(made.size(), 1u);
  Result<std::vector<device::MigAllocation>> twice =
      RealiseVolcanoMigSlots(pod, 0, slot, 1, source, &made);
  ASSERT_TRUE(twice.ok());
  EXPECT_EQ(made.size(), 1u);  // nothing new made
  EXPECT_EQ(*once, *twice);
  EXPECT_EQ(driver_.creates(), 1);

  PodView next = View("q");
  Status blocked = RealiseVolcanoMigSlots(next, 0, slot, 1, source, &made).status();
  EXPECT_EQ(blocked.code(), StatusCode::kFailedPrecondition) << blocked.ToString();
  finished_.insert("uid-p");
  Result<std::vector<device::MigAllocation>> after =
      RealiseVolcanoMigSlots(next, 0, slot, 1, Source(), &made);
  ASSERT_TRUE(after.ok()) << after.status().ToString();
  ASSERT_EQ(driver_.Instances(kGpu).size(), 1u);
  EXPECT_EQ(driver_.Instances(kGpu)[0].device.uuid, (*after)[0].runtime->mig_uuid);
}

// What cannot be served is refused, naming the container and the reason; the pod is marked
// failed and nothing is left on the GPU.
TEST_F(VolcanoMigTest, SlotsThatCannotBeServedAreRefusedWithTheReason) {
  for (auto [entry, why] : std::vector<std::pair<std::string, std::string>>{
           {Slot("group9-0", 1000), "group \"group9\" is not one of NVIDIA A100-SXM4-80GB's"},
           {Slot("group1-7", 1000), "position 7 is past group group1's 7 slots"},
           {Slot("group1-0", 12000),
            "its 1g.10gb has 9728 MiB, less than the 12000 MiB asked for"},
           {"GPU-bbbbbbbb-0000-4000-8000-000000000000[group1-0],NVIDIA,1000,0:",
            "is not one of this node's"},
           {std::string(kGpu) + ",NVIDIA,1000,0:", "(want <GPU UUID>[<group>-<position>])"},
       }) {
    fc_.fake->Push("GET", kPodsUrl, FakeTransport::Json(200, List({Pod("p", entry)})));
    fc_.fake->Push("PATCH", PodUrl("p"), FakeTransport::Json(200, "{}"));  // bind phase failed
    Result<std::vector<ContainerAllocation>> r = Allocate();
    ASSERT_FALSE(r.ok()) << entry;
    EXPECT_EQ(r.status().code(), StatusCode::kFailedPrecondition) << r.status().ToString();
    EXPECT_NE(r.status().message().find("pod default/p container c0: "), std::string::npos)
        << r.status().message();
    EXPECT_NE(r.status().message().find(why), std::string::npos) << r.status().message();
    const k8s::Object failed = LastPodPatch("p");
    EXPECT_EQ(failed["metadata"]["annotations"]["volcano.sh/bind-phase"], "failed") << entry;
    EXPECT_TRUE(driver_.Instances(kGpu).empty());
  }
}

// The pod's final write fails for good: the MIG device made for it is destroyed again.
TEST_F(VolcanoMigTest, AFailedWriteDestroysTheDeviceItMade) {
  fc_.fake->Push("GET", kPodsUrl,
                 FakeTransport::Json(200, List({Pod("p", Slot("group1-0", 100))})));
  fc_.fake->Push("PATCH", PodUrl("p"), FakeTransport::Json(500, R"({"message":"etcd down"})"));
  Result<std::vector<ContainerAllocation>> r = Allocate();
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("recording the allocation on the pod failed"),
            std::string::npos)
      << r.status().message();
  EXPECT_EQ(driver_.creates(), 1);
  EXPECT_TRUE(driver_.Instances(kGpu).empty());
}

}  // namespace
}  // namespace hami::deviceplugin
