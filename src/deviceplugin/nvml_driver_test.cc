// NvmlDriver against the simulated driver (build/sim on LD_LIBRARY_PATH, set by CTest): the same
// dlopen path a real node takes.
#include "deviceplugin/nvml_driver.h"

#include <gtest/gtest.h>

#include <dlfcn.h>

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

// The simulated driver's MIG calls that create and destroy instances, which the plugin never
// makes (static MIG only reads): resolved from the same library the driver under test loads.
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

TEST(NvmlDriverOpen, AMissingLibraryIsAClearError) {
  Result<std::unique_ptr<NvmlDriver>> d = NvmlDriver::Open({.library = "libnvidia-ml-nope.so.1"});
  EXPECT_EQ(d.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(d.status().message().find("libnvidia-ml-nope.so.1"), std::string::npos);
  EXPECT_NE(d.status().message().find("is the NVIDIA driver installed"), std::string::npos);
}

}  // namespace
}  // namespace hami::deviceplugin
