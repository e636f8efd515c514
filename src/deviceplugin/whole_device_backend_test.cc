// WholeDeviceBackend on a scripted device list: what kubelet's calls get for a mixed-strategy MIG
// resource (and, alike, for whole GPUs).
#include "deviceplugin/whole_device_backend.h"

#include <gtest/gtest.h>

namespace hami::deviceplugin {
namespace {

class WholeDeviceBackendTest : public ::testing::Test {
 protected:
  WholeDeviceBackend Backend(AllocationSettings settings = {}) {
    return WholeDeviceBackend("nvidia.com/mig-1g.10gb", std::move(settings),
                      [this](uint64_t, std::chrono::milliseconds, std::vector<PluginDevice>* out) {
                        *out = devices_;
                        return uint64_t{1};
                      });
  }
  std::vector<PluginDevice> devices_ = {{"MIG-a", "GPU-0", true, -1},
                                        {"MIG-b", "GPU-0", true, -1},
                                        {"MIG-c", "GPU-1", false, -1}};
};

TEST_F(WholeDeviceBackendTest, AllocateHandsOverTheInstancesKubeletChose) {
  WholeDeviceBackend b = Backend();
  EXPECT_EQ(b.ResourceName(), "nvidia.com/mig-1g.10gb");
  Result<std::vector<ContainerAllocation>> r = b.Allocate({{"MIG-b"}, {"MIG-a", "MIG-c"}});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ(r->size(), 2u);
  EXPECT_EQ((*r)[0].envs.at("NVIDIA_VISIBLE_DEVICES"), "MIG-b");
  EXPECT_EQ((*r)[1].envs.at("NVIDIA_VISIBLE_DEVICES"), "MIG-a,MIG-c");
  EXPECT_EQ((*r)[0].envs.size(), 1u);  // no libvgpu quotas: the instance is the limit
  EXPECT_TRUE((*r)[0].mounts.empty());
  EXPECT_EQ(b.allocations(), 2u);
}

TEST_F(WholeDeviceBackendTest, AnInstanceThatIsGoneIsRefusedByName) {
  WholeDeviceBackend b = Backend();
  devices_.erase(devices_.begin());  // MIG-a destroyed since kubelet listed it
  Result<std::vector<ContainerAllocation>> r = b.Allocate({{"MIG-b"}, {"MIG-a"}});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(r.status().message().find("MIG-a"), std::string::npos);
  EXPECT_EQ(b.allocations(), 0u);  // all or nothing
}

TEST_F(WholeDeviceBackendTest, PreferredAllocationKeepsMustIncludeAndListOrder) {
  WholeDeviceBackend b = Backend();
  std::vector<std::vector<std::string>> p =
      b.PreferredAllocation({{{"MIG-a", "MIG-b", "MIG-c"}, {"MIG-c"}, 2},
                             {{"MIG-a", "MIG-b"}, {}, 1}});
  ASSERT_EQ(p.size(), 2u);
  EXPECT_EQ(p[0], (std::vector<std::string>{"MIG-c", "MIG-a"}));
  EXPECT_EQ(p[1], (std::vector<std::string>{"MIG-a"}));
}

}  // namespace
}  // namespace hami::deviceplugin
