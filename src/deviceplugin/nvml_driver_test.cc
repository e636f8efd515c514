// NvmlDriver against the simulated driver (build/sim on LD_LIBRARY_PATH, set by CTest): the same
// dlopen path a real node takes.
#include "deviceplugin/nvml_driver.h"

#include <gtest/gtest.h>

#include <dlfcn.h>
#include <signal.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>

#include "common/subprocess.h"
#include "deviceplugin/mig_resources.h"
#include "nvml/abi.h"

namespace hami::deviceplugin {
namespace {

constexpr const char* kConfig = R"(
driver_version = 550.54.15
[device]
name = NVIDIA A100-SXM4-80GB
uuid = GPU-11111111-0000-4000-8000-000000000000
memory = 80Gi
numa_node = 0
pci_bus_id = 00000000:07:00.0
nvlink = 1:12
[device]
name = NVIDIA A100-SXM4-80GB
uuid = GPU-11111111-0000-4000-8000-000000000001
memory = 80Gi
numa_node = 1
pci_bus_id = 00000000:0F:00.0
nvlink = 0:12
[device]
name = Tesla T4
uuid = GPU-11111111-0000-4000-8000-000000000002
memory = 16Gi
numa_node = 1
pcie_switch = 3
pci_bus_id = 00000000:47:00.0
)";

class NvmlDriverTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    char tmpl[] = "/tmp/nvml-driver-test-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    std::ofstream(dir_ + "/sim.conf") << kConfig;
    setenv("HAMI_SIM_CONFIG", (dir_ + "/sim.conf").c_str(), 1);
    setenv("HAMI_SIM_STATE", (dir_ + "/state").c_str(), 1);
  }
  static void TearDownTestSuite() { std::filesystem::remove_all(dir_); }
  static std::string dir_;
};
std::string NvmlDriverTest::dir_;

TEST_F(NvmlDriverTest, DiscoversIdentityMemoryNumaAndLinks) {
  Result<std::unique_ptr<NvmlDriver>> d = NvmlDriver::Open({});
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  Result<Inventory> inv = (*d)->Discover();
  ASSERT_TRUE(inv.ok()) << inv.status().ToString();
  EXPECT_EQ(inv->driver_version, "550.54.15");
  ASSERT_EQ(inv->gpus.size(), 3u);
  EXPECT_EQ(inv->gpus[0].uuid, "GPU-11111111-0000-4000-8000-000000000000");
  EXPECT_EQ(inv->gpus[0].name, "NVIDIA A100-SXM4-80GB");
  EXPECT_EQ(inv->gpus[0].memory_bytes, uint64_t{80} << 30);
  EXPECT_EQ(inv->gpus[1].numa_node, 1);
  EXPECT_EQ(inv->gpus[2].index, 2u);
  EXPECT_EQ(inv->gpus[2].memory_bytes, uint64_t{16} << 30);
  EXPECT_EQ(inv->gpus[2].pci_bus_id, "00000000:47:00.0");
  EXPECT_FALSE(inv->gpus[0].mig_enabled);
  ASSERT_EQ(inv->pairs.size(), 3u);
  EXPECT_EQ(inv->pairs[0], (GpuPair{0, 1, 50, 12, false}));  // NUMA 0 and 1: across CPUs
  EXPECT_EQ(inv->pairs[1].nvlinks, 0);
  EXPECT_EQ(inv->pairs[2].p2p_level, 40);  // both on NUMA node 1
}

TEST_F(NvmlDriverTest, SysfsNumaNodeWinsForNvidiaFunctionsOnly) {
  std::string sys = dir_ + "/sys";
  auto fake = [&](const std::string& pci, const std::string& vendor, const std::string& numa) {
    std::string d = sys + "/bus/pci/devices/" + pci;
    std::filesystem::create_directories(d);
    std::ofstream(d + "/vendor") << vendor << "\n";
    std::ofstream(d + "/numa_node") << numa << "\n";
  };
  fake("0000:07:00.0", "0x10de", "3");  // the A100 at 07: sysfs says node 3
  fake("0000:0f:00.0", "0x1af4", "0");  // something else sits at 0F (a VM's virtio device)
  Result<std::unique_ptr<NvmlDriver>> d = NvmlDriver::Open({.sysfs_root = sys});
  ASSERT_TRUE(d.ok());
  Result<Inventory> inv = (*d)->Discover();
  ASSERT_TRUE(inv.ok());
  EXPECT_EQ(inv->gpus[0].numa_node, 3);
  EXPECT_EQ(inv->gpus[1].numa_node, 1);  // from NVML, not from the foreign device
}

TEST_F(NvmlDriverTest, XidEventsNameTheirDevice) {
  Result<std::unique_ptr<NvmlDriver>> d = NvmlDriver::Open({});
  ASSERT_TRUE(d.ok());
  std::vector<std::string> unsupported;
  ASSERT_TRUE((*d)->WatchXids({"GPU-11111111-0000-4000-8000-000000000001"}, &unsupported).ok());
  EXPECT_TRUE(unsupported.empty());
  Result<std::optional<XidEvent>> none = (*d)->WaitXid(std::chrono::milliseconds(10));
  ASSERT_TRUE(none.ok());
  EXPECT_FALSE(none->has_value());
  ProcessResult r = RunProcess(
      {HAMI_SIMCTL_PATH, "--state", dir_ + "/state", "inject-xid", "--device", "1", "--xid", "79"},
      {"HAMI_SIM_CONFIG=" + dir_ + "/sim.conf"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  Result<std::optional<XidEvent>> ev = (*d)->WaitXid(std::chrono::seconds(10));
  ASSERT_TRUE(ev.ok()) << ev.status().ToString();
  ASSERT_TRUE(ev->has_value());
  EXPECT_EQ((*ev)->uuid, "GPU-11111111-0000-4000-8000-000000000001");
  EXPECT_EQ((*ev)->xid, 79u);
}

// The simulated driver's MIG calls that create and destroy instances, for tests that set up
// instances behind the driver's back (as an operator would): resolved from the same library the
// driver under test loads.
struct SimMig {
  SimMig() {
    lib = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
    if (lib == nullptr) return;
    init = reinterpret_cast<decltype(init)>(dlsym(lib, "nvmlInit_v2"));
    by_index = reinterpret_cast<decltype(by_index)>(dlsym(lib, "nvmlDeviceGetHandleByIndex_v2"));
    set_mode = reinterpret_cast<decltype(set_mode)>(dlsym(lib, "nvmlDeviceSetMigMode"));
    profile = reinterpret_cast<decltype(profile)>(
        dlsym(lib, "nvmlDeviceGetGpuInstanceProfileInfo"));
    create_gi = reinterpret_cast<decltype(create_gi)>(dlsym(lib, "nvmlDeviceCreateGpuInstance"));
    create_ci = reinterpret_cast<decltype(create_ci)>(
        dlsym(lib, "nvmlGpuInstanceCreateComputeInstance"));
    destroy_gi = reinterpret_cast<decltype(destroy_gi)>(dlsym(lib, "nvmlGpuInstanceDestroy"));
    destroy_ci = reinterpret_cast<decltype(destroy_ci)>(dlsym(lib, "nvmlComputeInstanceDestroy"));
  }
  bool ok() const {
    return lib != nullptr && init != nullptr && by_index != nullptr && set_mode != nullptr &&
           profile != nullptr && create_gi != nullptr && create_ci != nullptr &&
           destroy_gi != nullptr && destroy_ci != nullptr;
  }
  // Creates a GI of profile enum `gi_enum` on `dev` and in it a CI of `ci_profile`.
  nvmlReturn_t Create(nvmlDevice_t dev, unsigned gi_enum, unsigned ci_profile) {
    nvmlGpuInstanceProfileInfo_t info{};
    nvmlGpuInstance_t gi = nullptr;
    nvmlComputeInstance_t ci = nullptr;
    nvmlReturn_t r = profile(dev, gi_enum, &info);
    if (r == NVML_SUCCESS) r = create_gi(dev, info.id, &gi);
    if (r == NVML_SUCCESS) r = create_ci(gi, ci_profile, &ci);
    if (gi != nullptr) gis.push_back(gi);
    if (ci != nullptr) cis.push_back(ci);
    return r;
  }
  // Creates only a GPU instance of profile enum `gi_enum` (an operator who stopped half way).
  nvmlReturn_t CreateGpuInstanceOnly(nvmlDevice_t dev, unsigned gi_enum) {
    nvmlGpuInstanceProfileInfo_t info{};
    nvmlGpuInstance_t gi = nullptr;
    nvmlReturn_t r = profile(dev, gi_enum, &info);
    if (r == NVML_SUCCESS) r = create_gi(dev, info.id, &gi);
    if (gi != nullptr) gis.push_back(gi);
    return r;
  }
  void DestroyAll() {
    for (nvmlComputeInstance_t ci : cis) destroy_ci(ci);
    for (nvmlGpuInstance_t gi : gis) destroy_gi(gi);
    cis.clear();
    gis.clear();
  }

  void* lib = nullptr;
  decltype(&nvmlInit_v2) init = nullptr;
  decltype(&nvmlDeviceGetHandleByIndex_v2) by_index = nullptr;
  decltype(&nvmlDeviceSetMigMode) set_mode = nullptr;
  decltype(&nvmlDeviceGetGpuInstanceProfileInfo) profile = nullptr;
  decltype(&nvmlDeviceCreateGpuInstance) create_gi = nullptr;
  decltype(&nvmlGpuInstanceCreateComputeInstance) create_ci = nullptr;
  decltype(&nvmlGpuInstanceDestroy) destroy_gi = nullptr;
  decltype(&nvmlComputeInstanceDestroy) destroy_ci = nullptr;
  std::vector<nvmlGpuInstance_t> gis;
  std::vector<nvmlComputeInstance_t> cis;
};

// Upstream's B5: a GPU instance without a compute instance is no MIG device, but discovery
// reports where it sits, so that its place is not offered.
TEST_F(NvmlDriverTest, ReportsGpuInstancesWithoutAComputeInstance) {
  Result<std::unique_ptr<NvmlDriver>> d = NvmlDriver::Open({});
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  SimMig sim;
  ASSERT_TRUE(sim.ok()) << dlerror();
  ASSERT_EQ(sim.init(), NVML_SUCCESS);
  nvmlDevice_t dev = nullptr;
  ASSERT_EQ(sim.by_index(1, &dev), NVML_SUCCESS);
  nvmlReturn_t activation = NVML_SUCCESS;
  ASSERT_EQ(sim.set_mode(dev, NVML_DEVICE_MIG_ENABLE, &activation), NVML_SUCCESS);
  ASSERT_EQ(sim.Create(dev, NVML_GPU_INSTANCE_PROFILE_1_SLICE, 0), NVML_SUCCESS);
  ASSERT_EQ(sim.CreateGpuInstanceOnly(dev, NVML_GPU_INSTANCE_PROFILE_2_SLICE), NVML_SUCCESS);

  Result<Inventory> inv = (*d)->Discover();
  ASSERT_TRUE(inv.ok()) << inv.status().ToString();
  const GpuInfo& g = inv->gpus[1];
  ASSERT_EQ(g.mig_devices.size(), 1u);
  ASSERT_EQ(g.empty_gpu_instances.size(), 1u);
  EXPECT_EQ(g.empty_gpu_instances[0].size, 2u);
  EXPECT_FALSE(g.empty_gpu_instances[0].Overlaps(g.mig_devices[0].gi_placement));
  EXPECT_TRUE(inv->gpus[0].empty_gpu_instances.empty());

  sim.DestroyAll();
  inv = (*d)->Discover();
  ASSERT_TRUE(inv.ok());
  EXPECT_TRUE(inv->gpus[1].mig_devices.empty());
  EXPECT_TRUE(inv->gpus[1].empty_gpu_instances.empty());
  ASSERT_EQ(sim.set_mode(dev, NVML_DEVICE_MIG_DISABLE, &activation), NVML_SUCCESS);
}

TEST_F(NvmlDriverTest, ReportsExistingMigDevicesForTheMixedStrategy) {
  Result<std::unique_ptr<NvmlDriver>> d = NvmlDriver::Open({});
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  SimMig sim;
  ASSERT_TRUE(sim.ok()) << dlerror();
  ASSERT_EQ(sim.init(), NVML_SUCCESS);
  nvmlDevice_t dev = nullptr;
  ASSERT_EQ(sim.by_index(1, &dev), NVML_SUCCESS);
  nvmlReturn_t activation = NVML_SUCCESS;
  ASSERT_EQ(sim.set_mode(dev, NVML_DEVICE_MIG_ENABLE, &activation), NVML_SUCCESS);
  ASSERT_EQ(activation, NVML_SUCCESS);
  // 3g.40gb with a one-slice CI (not offered by mixed), two 1g.10gb, one 1g.10gb+me.
  ASSERT_EQ(sim.Create(dev, NVML_GPU_INSTANCE_PROFILE_3_SLICE, 0), NVML_SUCCESS);
  ASSERT_EQ(sim.Create(dev, NVML_GPU_INSTANCE_PROFILE_1_SLICE, 0), NVML_SUCCESS);
  ASSERT_EQ(sim.Create(dev, NVML_GPU_INSTANCE_PROFILE_1_SLICE, 0), NVML_SUCCESS);
  ASSERT_EQ(sim.Create(dev, NVML_GPU_INSTANCE_PROFILE_1_SLICE_REV1, 0), NVML_SUCCESS);

  Result<Inventory> inv = (*d)->Discover();
  ASSERT_TRUE(inv.ok()) << inv.status().ToString();
  EXPECT_FALSE(inv->gpus[0].mig_enabled);
  EXPECT_TRUE(inv->gpus[0].mig_devices.empty());
  const GpuInfo& g = inv->gpus[1];
  EXPECT_TRUE(g.mig_enabled);
  ASSERT_EQ(g.mig_devices.size(), 4u);
  std::map<std::string, int> profiles;
  for (const MigDeviceInfo& m : g.mig_devices) {
    EXPECT_EQ(m.uuid.rfind("MIG-", 0), 0u) << m.uuid;
    EXPECT_EQ(m.ci_id, 0u);
    ++profiles[MigProfileName(m, *g.memory_bytes)];
    if (m.gi_slices == 1) {
      EXPECT_EQ(m.memory_mib, 9728u);
      EXPECT_EQ(m.sms, 14u);
    }
    if (m.gi_slices == 3) {  // the driver put it at the free placement with the highest start
      EXPECT_EQ(m.gi_profile_id, 9u);
      EXPECT_EQ(m.gi_placement, (device::MigPlacement{4, 4}));
    }
  }
  EXPECT_EQ(profiles, (std::map<std::string, int>{
                          {"1c.3g.40gb", 1}, {"1g.10gb", 2}, {"1g.10gb+me", 1}}));

  Result<MigPlan> plan = PlanMigResources(*inv, MigStrategy::kMixed);
  ASSERT_TRUE(plan.ok());
  ASSERT_EQ(plan->resources.size(), 2u);
  EXPECT_EQ(plan->resources[0].resource, "nvidia.com/mig-1g.10gb");
  EXPECT_EQ(plan->resources[0].device_ids.size(), 2u);
  EXPECT_EQ(plan->resources[1].resource, "nvidia.com/mig-1g.10gb.me");
  EXPECT_EQ(plan->resources[1].socket, "nvidia-mig-1g.10gb.me.sock");
  EXPECT_EQ(plan->warnings.size(), 1u);
  // GPU 0 and the T4 have MIG disabled: single refuses the node.
  EXPECT_EQ(PlanMigResources(*inv, MigStrategy::kSingle).status().code(),
            StatusCode::kFailedPrecondition);

  sim.DestroyAll();
  ASSERT_EQ(sim.set_mode(dev, NVML_DEVICE_MIG_DISABLE, &activation), NVML_SUCCESS);
  inv = (*d)->Discover();
  ASSERT_TRUE(inv.ok());
  EXPECT_FALSE(inv->gpus[1].mig_enabled);
  EXPECT_TRUE(inv->gpus[1].mig_devices.empty());
}

// An XID the driver charges to a MIG instance (hami-simctl inject-xid --gi --ci) names that MIG
// device; one of the whole GPU, of a GPU instance only, or of an instance gone by the time it is
// read does not.
TEST_F(NvmlDriverTest, XidEventsNameTheirMigDevice) {
  Result<std::unique_ptr<NvmlDriver>> d = NvmlDriver::Open({});
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  SimMig sim;
  ASSERT_TRUE(sim.ok()) << dlerror();
  ASSERT_EQ(sim.init(), NVML_SUCCESS);
  nvmlDevice_t dev = nullptr;
  ASSERT_EQ(sim.by_index(0, &dev), NVML_SUCCESS);
  nvmlReturn_t activation = NVML_SUCCESS;
  ASSERT_EQ(sim.set_mode(dev, NVML_DEVICE_MIG_ENABLE, &activation), NVML_SUCCESS);
  ASSERT_EQ(activation, NVML_SUCCESS);
  ASSERT_EQ(sim.Create(dev, NVML_GPU_INSTANCE_PROFILE_3_SLICE, 0), NVML_SUCCESS);  // 1c.3g
  ASSERT_EQ(sim.Create(dev, NVML_GPU_INSTANCE_PROFILE_3_SLICE, 2), NVML_SUCCESS);  // 3g
  Result<Inventory> inv = (*d)->Discover();
  ASSERT_TRUE(inv.ok()) << inv.status().ToString();
  ASSERT_EQ(inv->gpus[0].mig_devices.size(), 2u);
  const MigDeviceInfo& target = inv->gpus[0].mig_devices[1];
  const std::string gi = std::to_string(target.gi_id), ci = std::to_string(target.ci_id);
  const std::string gpu = "GPU-11111111-0000-4000-8000-000000000000";
  ASSERT_TRUE((*d)->WatchXids({gpu}, nullptr).ok());
  auto inject = [&](std::vector<std::string> extra) {
    std::vector<std::string> argv = {HAMI_SIMCTL_PATH, "--state", dir_ + "/state", "inject-xid",
                                     "--device", "0"};
    argv.insert(argv.end(), extra.begin(), extra.end());
    return RunProcess(argv, {"HAMI_SIM_CONFIG=" + dir_ + "/sim.conf"});
  };
  auto next = [&]() -> XidEvent {
    Result<std::optional<XidEvent>> ev = (*d)->WaitXid(std::chrono::seconds(10));
    EXPECT_TRUE(ev.ok() && ev->has_value());
    return ev.ok() && ev->has_value() ? **ev : XidEvent{};
  };
  ASSERT_EQ(inject({"--xid", "43", "--gi", gi, "--ci", ci}).exit_code, 0);
  ASSERT_EQ(inject({"--xid", "31", "--gi", gi}).exit_code, 0);
  ASSERT_EQ(inject({"--xid", "79"}).exit_code, 0);
  XidEvent e = next();
  EXPECT_EQ(e.uuid, gpu);
  EXPECT_EQ(e.xid, 43u);
  EXPECT_EQ(e.mig_uuid, target.uuid);
  EXPECT_EQ(next().mig_uuid, "");  // a GPU instance, no compute instance: no one MIG device
  EXPECT_EQ(next().mig_uuid, "");

  // Instances that do not exist are refused by the injector.
  ProcessResult r = inject({"--xid", "43", "--gi", "13", "--ci", "0"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("no GPU instance 13"), std::string::npos) << r.err;
  r = inject({"--xid", "43", "--gi", gi, "--ci", "5"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("no compute instance 5"), std::string::npos) << r.err;
  EXPECT_EQ(inject({"--xid", "43", "--ci", "0"}).exit_code, 2);

  // Charged to an instance that is gone when the event is read: no MIG device to name.
  ASSERT_EQ(inject({"--xid", "43", "--gi", gi, "--ci", ci}).exit_code, 0);
  sim.DestroyAll();
  e = next();
  EXPECT_EQ(e.xid, 43u);
  EXPECT_EQ(e.mig_uuid, "");
  ASSERT_EQ(sim.set_mode(dev, NVML_DEVICE_MIG_DISABLE, &activation), NVML_SUCCESS);
  EXPECT_EQ(activation, NVML_SUCCESS);
}

// ---- MigDriver (dynamic MIG) on the simulated A100-80GB tables.

constexpr const char* kGpu1 = "GPU-11111111-0000-4000-8000-000000000001";
constexpr const char* kT4 = "GPU-11111111-0000-4000-8000-000000000002";

const MigProfileSpec* Named(const std::vector<MigProfileSpec>& profiles, const std::string& n) {
  for (const MigProfileSpec& p : profiles) {
    if (p.name == n) return &p;
  }
  return nullptr;
}

const MigDeviceInfo* WithUuid(const GpuInfo& g, const std::string& uuid) {
  for (const MigDeviceInfo& m : g.mig_devices) {
    if (m.uuid == uuid) return &m;
  }
  return nullptr;
}

std::vector<device::MigPlacement> Starts(std::vector<uint32_t> starts, uint32_t size) {
  std::vector<device::MigPlacement> out;
  for (uint32_t s : starts) out.push_back({s, size});
  return out;
}

TEST_F(NvmlDriverTest, MigProfilesAreTheDriversVariantsWithTheirPlacements) {
  Result<std::unique_ptr<NvmlDriver>> d = NvmlDriver::Open({});
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  Result<std::vector<MigProfileSpec>> profiles = (*d)->MigProfiles(kGpu1);  // MIG off: listed
  ASSERT_TRUE(profiles.ok()) << profiles.status().ToString();
  std::vector<uint32_t> ids;
  for (const MigProfileSpec& p : *profiles) ids.push_back(p.profile_id);
  EXPECT_EQ(ids, (std::vector<uint32_t>{0, 5, 9, 14, 15, 19, 20}));
  const MigProfileSpec* one = Named(*profiles, "1g.10gb");
  ASSERT_NE(one, nullptr);
  EXPECT_EQ(*one,
            (MigProfileSpec{19, "1g.10gb", 1, 7, 9728, 14, Starts({0, 1, 2, 3, 4, 5, 6}, 1)}));
  const MigProfileSpec* me = Named(*profiles, "1g.10gb+me");
  ASSERT_NE(me, nullptr);
  EXPECT_EQ(me->profile_id, 20u);
  EXPECT_EQ(me->instance_count, 1u);
  const MigProfileSpec* twice = Named(*profiles, "1g.20gb");
  ASSERT_NE(twice, nullptr);
  EXPECT_EQ(*twice, (MigProfileSpec{15, "1g.20gb", 1, 4, 19968, 14, Starts({0, 2, 4, 6}, 2)}));
  const MigProfileSpec* whole = Named(*profiles, "7g.80gb");
  ASSERT_NE(whole, nullptr);
  EXPECT_EQ(*whole, (MigProfileSpec{0, "7g.80gb", 7, 1, 80384, 98, Starts({0}, 8)}));

  EXPECT_EQ((*d)->MigProfiles(kT4).status().code(), StatusCode::kUnimplemented);
  EXPECT_EQ((*d)->GetMigMode(kT4).status().code(), StatusCode::kUnimplemented);
  EXPECT_EQ((*d)->EnableMig(kT4).code(), StatusCode::kUnimplemented);
  EXPECT_EQ((*d)->GetMigMode("GPU-nope").status().code(), StatusCode::kNotFound);
}

TEST_F(NvmlDriverTest, MakesAndDestroysMigDevicesAtThePlacementAsked) {
  Result<std::unique_ptr<NvmlDriver>> d = NvmlDriver::Open({});
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  MigDriver& mig = **d;
  Result<std::vector<MigProfileSpec>> profiles = mig.MigProfiles(kGpu1);
  ASSERT_TRUE(profiles.ok()) << profiles.status().ToString();
  const uint32_t g3 = Named(*profiles, "3g.40gb")->profile_id;
  const uint32_t g1 = Named(*profiles, "1g.10gb")->profile_id;
  Status off = mig.CreateMigDevice(kGpu1, g1, {0, 1}).status();
  EXPECT_EQ(off.code(), StatusCode::kFailedPrecondition) << off.ToString();  // MIG is off

  ASSERT_TRUE(mig.EnableMig(kGpu1).ok());
  EXPECT_EQ(*mig.GetMigMode(kGpu1), (MigModeState{true, true}));
  Result<CreatedMigDevice> a = mig.CreateMigDevice(kGpu1, g3, {4, 4});
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  EXPECT_EQ(a->uuid.rfind("MIG-", 0), 0u);
  EXPECT_EQ(a->gi_id, 2u);  // the driver's id for a 3g at slice 4
  EXPECT_EQ(a->ci_id, 0u);
  Result<CreatedMigDevice> b = mig.CreateMigDevice(kGpu1, g1, {0, 1});
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  Result<Inventory> inv = (*d)->Discover();
  ASSERT_TRUE(inv.ok()) << inv.status().ToString();
  ASSERT_EQ(inv->gpus[1].mig_devices.size(), 2u);
  const MigDeviceInfo* ma = WithUuid(inv->gpus[1], a->uuid);
  ASSERT_NE(ma, nullptr);
  EXPECT_EQ(ma->gi_profile_id, g3);
  EXPECT_EQ(ma->gi_placement, (device::MigPlacement{4, 4}));
  EXPECT_EQ(ma->ci_slices, 3u);  // a compute instance spanning its GPU instance
  const MigDeviceInfo* mb = WithUuid(inv->gpus[1], b->uuid);
  ASSERT_NE(mb, nullptr);
  EXPECT_EQ(mb->gi_profile_id, g1);
  EXPECT_EQ(mb->gi_placement, (device::MigPlacement{0, 1}));
  EXPECT_EQ(mb->gi_id, b->gi_id);

  Status s = mig.CreateMigDevice(kGpu1, Named(*profiles, "4g.40gb")->profile_id, {0, 4}).status();
  EXPECT_EQ(s.code(), StatusCode::kResourceExhausted) << s.ToString();  // overlaps both
  s = mig.CreateMigDevice(kGpu1, g3, {1, 4}).status();
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.ToString();
  EXPECT_NE(s.message().find("placements: 0:4 4:4"), std::string::npos) << s.ToString();
  EXPECT_EQ(mig.CreateMigDevice(kGpu1, 99, {0, 1}).status().code(), StatusCode::kInvalidArgument);
  inv = (*d)->Discover();
  ASSERT_TRUE(inv.ok());
  EXPECT_EQ(inv->gpus[1].mig_devices.size(), 2u);  // the refusals left nothing behind

  ASSERT_TRUE(mig.DestroyMigDevice(kGpu1, a->gi_id, a->ci_id).ok());
  EXPECT_EQ(mig.DestroyMigDevice(kGpu1, a->gi_id, a->ci_id).code(), StatusCode::kNotFound);
  ASSERT_TRUE(mig.DestroyMigDevice(kGpu1, b->gi_id, b->ci_id).ok());
  inv = (*d)->Discover();
  ASSERT_TRUE(inv.ok());
  EXPECT_TRUE(inv->gpus[1].mig_devices.empty());
  ProcessResult r = RunProcess({HAMI_SIMCTL_PATH, "--state", dir_ + "/state", "mig-mode",
                                "--device", "1", "--disable"},
                               {"HAMI_SIM_CONFIG=" + dir_ + "/sim.conf"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
}

// An operator's instance (hami-simctl mig-create) is discovered like the plugin's own; one with
// a process in it is not destroyed until the process is gone.
TEST_F(NvmlDriverTest, AMigDeviceInUseIsNotDestroyed) {
  Result<std::unique_ptr<NvmlDriver>> d = NvmlDriver::Open({});
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  auto simctl = [&](std::vector<std::string> args) {
    args.insert(args.begin(), {HAMI_SIMCTL_PATH, "--state", dir_ + "/state"});
    return RunProcess(args, {"HAMI_SIM_CONFIG=" + dir_ + "/sim.conf"});
  };
  ASSERT_EQ(simctl({"mig-mode", "--device", "1", "--enable"}).exit_code, 0);
  ProcessResult made = simctl({"mig-create", "--device", "1", "--profile", "7g.80gb"});
  ASSERT_EQ(made.exit_code, 0) << made.err;
  const std::string uuid = made.out.substr(0, made.out.find(' '));
  Result<Inventory> inv = (*d)->Discover();
  ASSERT_TRUE(inv.ok());
  const MigDeviceInfo* m = WithUuid(inv->gpus[1], uuid);
  ASSERT_NE(m, nullptr) << made.out;
  EXPECT_EQ(m->gi_profile_id, 0u);
  EXPECT_EQ(m->gi_placement, (device::MigPlacement{0, 8}));
  const MigDeviceInfo seen = *m;

  Subprocess holder({"/bin/sleep", "600"}, {});
  ProcessResult attached =
      simctl({"mig-attach", "--uuid", uuid, "--pid", std::to_string(holder.pid())});
  ASSERT_EQ(attached.exit_code, 0) << attached.err;
  Status busy = (*d)->DestroyMigDevice(kGpu1, seen.gi_id, seen.ci_id);
  EXPECT_EQ(busy.code(), StatusCode::kFailedPrecondition) << busy.ToString();
  EXPECT_NE(busy.message().find("in use"), std::string::npos) << busy.ToString();
  inv = (*d)->Discover();
  ASSERT_TRUE(inv.ok());
  EXPECT_NE(WithUuid(inv->gpus[1], uuid), nullptr);

  holder.Signal(SIGKILL);
  holder.Wait();
  ASSERT_TRUE((*d)->DestroyMigDevice(kGpu1, seen.gi_id, seen.ci_id).ok());
  EXPECT_EQ(simctl({"mig-destroy", "--device", "1", "--gi", "0"}).exit_code, 2);  // gone
  EXPECT_EQ(simctl({"mig-mode", "--device", "1", "--disable"}).exit_code, 0);
}

TEST_F(NvmlDriverTest, EnablingMigThatStaysPendingSaysWhy) {
  Result<std::unique_ptr<NvmlDriver>> d = NvmlDriver::Open({});
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  setenv("HAMI_SIM_MIG_ACTIVATION", "reset_required", 1);  // read at each nvmlDeviceSetMigMode
  Status s = (*d)->EnableMig(kGpu1);
  EXPECT_EQ(s.code(), StatusCode::kFailedPrecondition) << s.ToString();
  EXPECT_NE(s.message().find("a GPU reset is required"), std::string::npos) << s.ToString();
  EXPECT_EQ(*(*d)->GetMigMode(kGpu1), (MigModeState{false, true}));
  setenv("HAMI_SIM_MIG_ACTIVATION", "in_use", 1);
  s = (*d)->EnableMig(kGpu1);
  EXPECT_EQ(s.code(), StatusCode::kFailedPrecondition) << s.ToString();
  EXPECT_NE(s.message().find("the GPU is in use"), std::string::npos) << s.ToString();
  unsetenv("HAMI_SIM_MIG_ACTIVATION");
  ASSERT_TRUE((*d)->EnableMig(kGpu1).ok());  // the GPU is free now
  EXPECT_EQ(*(*d)->GetMigMode(kGpu1), (MigModeState{true, true}));
  ProcessResult r = RunProcess({HAMI_SIMCTL_PATH, "--state", dir_ + "/state", "mig-mode",
                                "--device", "1", "--disable"},
                               {"HAMI_SIM_CONFIG=" + dir_ + "/sim.conf"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
}

TEST(NvmlDriverOpen, AMissingLibraryIsAClearError) {
  Result<std::unique_ptr<NvmlDriver>> d = NvmlDriver::Open({.library = "libnvidia-ml-nope.so.1"});
  EXPECT_EQ(d.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(d.status().message().find("libnvidia-ml-nope.so.1"), std::string::npos);
  EXPECT_NE(d.status().message().find("is the NVIDIA driver installed"), std::string::npos);
}

}  // namespace
}  // namespace hami::deviceplugin
