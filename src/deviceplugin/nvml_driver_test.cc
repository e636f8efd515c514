// NvmlDriver against the simulated driver (build/sim on LD_LIBRARY_PATH, set by CTest): the same
// dlopen path a real node takes.
#include "deviceplugin/nvml_driver.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "common/subprocess.h"

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

TEST(NvmlDriverOpen, AMissingLibraryIsAClearError) {
  Result<std::unique_ptr<NvmlDriver>> d = NvmlDriver::Open({.library = "libnvidia-ml-nope.so.1"});
  EXPECT_EQ(d.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(d.status().message().find("libnvidia-ml-nope.so.1"), std::string::npos);
  EXPECT_NE(d.status().message().find("is the NVIDIA driver installed"), std::string::npos);
}

}  // namespace
}  // namespace hami::deviceplugin
