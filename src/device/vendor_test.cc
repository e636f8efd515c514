#include "device/vendor.h"

#include <gtest/gtest.h>

#include "device/node_registration.h"
#include "device/nvidia/nvidia_vendor.h"
#include "device/request.h"

namespace hami::device {
namespace {

// A second vendor written the way future vendor modules will be: keys, names and a request rule.
class FakeVendor final : public Vendor {
 public:
  FakeVendor() {
    names_.count = "example.com/npu";
    keys_.node_register = "hami.io/node-fake-register";
    keys_.node_handshake = "hami.io/node-handshake-fake";
    keys_.to_allocate = "hami.io/fake-devices-to-allocate";
    keys_.allocated = "hami.io/fake-devices-allocated";
  }
  std::string_view Key() const override { return "FAKE"; }
  const ResourceNames& resource_names() const override { return names_; }
  const VendorAnnotationKeys& annotation_keys() const override { return keys_; }
  Result<std::optional<ContainerRequest>> ParseRequest(const ContainerResources& c) const override {
    HAMI_ASSIGN_OR_RETURN(std::optional<int64_t> n, ReadIntegerResource(c, names_.count, 0, 64));
    if (!n || *n == 0) return std::optional<ContainerRequest>();
    ContainerRequest r;
    r.vendor = "FAKE";
    r.count = static_cast<int32_t>(*n);
    r.mem_percent = 100;
    return std::optional<ContainerRequest>(r);
  }

 private:
  ResourceNames names_;
  VendorAnnotationKeys keys_;
};

VendorRegistry TwoVendors() {
  Result<VendorRegistry> reg = VendorRegistry::FromConfig(DefaultDeviceConfig());
  EXPECT_TRUE(reg.ok());
  EXPECT_TRUE(reg->Add(std::make_unique<FakeVendor>()).ok());
  return std::move(reg).value();
}

ContainerResources Ctr(const char* name, std::map<std::string, std::string, std::less<>> limits) {
  ContainerResources c;
  c.name = name;
  c.limits = std::move(limits);
  return c;
}

TEST(VendorRegistry, FromConfigAndOrdering) {
  Result<VendorRegistry> none = VendorRegistry::FromConfig(DeviceConfig{});
  ASSERT_TRUE(none.ok());
  EXPECT_TRUE(none->vendors().empty());

  VendorRegistry reg = TwoVendors();
  ASSERT_EQ(reg.vendors().size(), 2u);
  EXPECT_EQ(reg.vendors()[0]->Key(), "FAKE");  // key order
  EXPECT_EQ(reg.vendors()[1]->Key(), "NVIDIA");
  EXPECT_NE(reg.Find("NVIDIA"), nullptr);
  EXPECT_EQ(reg.Find("AMD"), nullptr);
  Status dup = reg.Add(std::make_unique<FakeVendor>());
  EXPECT_EQ(dup.code(), StatusCode::kAlreadyExists);

  DeviceConfig bad = DefaultDeviceConfig();
  bad.nvidia->device_split_count = 0;
  EXPECT_FALSE(VendorRegistry::FromConfig(bad).ok());
}

TEST(VendorRegistry, PodRequestsInitContainersFirst) {
  VendorRegistry reg = TwoVendors();
  PodResources pod;
  pod.init_containers.push_back(
      Ctr("init", {{"nvidia.com/gpu", "1"}, {"nvidia.com/gpumem", "500"}}));
  pod.containers.push_back(Ctr("cpu-only", {{"cpu", "1"}}));
  pod.containers.push_back(Ctr("both", {{"nvidia.com/gpu", "2"}, {"example.com/npu", "1"}}));
  Result<PodRequests> r = ParsePodRequests(reg, pod);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->init_count, 1u);
  ASSERT_EQ(r->containers.size(), 3u);
  ASSERT_EQ(r->containers[0].size(), 1u);
  EXPECT_EQ(r->containers[0][0].mem_mib, 500);
  EXPECT_TRUE(r->containers[1].empty());
  ASSERT_EQ(r->containers[2].size(), 2u);
  EXPECT_EQ(r->containers[2][0].vendor, "FAKE");
  EXPECT_EQ(r->containers[2][1].vendor, "NVIDIA");
  EXPECT_FALSE(r->Empty());

  pod.containers.push_back(Ctr("broken", {{"nvidia.com/gpu", "x"}}));
  Result<PodRequests> bad = ParsePodRequests(reg, pod);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("container \"broken\""), std::string::npos);
}

TEST(VendorRegistry, NodeRegistrationFromAnnotations) {
  VendorRegistry reg = TwoVendors();
  const Vendor* nv = reg.Find("NVIDIA");
  Annotations node = {{"hami.io/node-nvidia-register",
                       "GPU-03f69c50-207a-2038-9b45-23cac89cb67d,10,46068,100,NVIDIA-NVIDIA A40,0,"
                       "true:GPU-1afede84-4e70-2174-49af-f07ebb94d1ae,10,46068,100,NVIDIA-NVIDIA "
                       "A40,0,true:"}};
  Result<std::vector<DeviceInfo>> devs = DecodeAnnotatedNode(*nv, node);
  ASSERT_TRUE(devs.ok()) << devs.status().ToString();
  ASSERT_EQ(devs->size(), 2u);
  EXPECT_EQ((*devs)[0].vendor, "NVIDIA");

  Annotations rewritten;
  nv->EncodeNodeDevices(*devs, &rewritten);
  EXPECT_EQ(rewritten.at("hami.io/node-nvidia-register").front(), '[');
  EXPECT_EQ(*DecodeAnnotatedNode(*nv, rewritten), *devs);

  EXPECT_EQ(DecodeAnnotatedNode(*nv, {}).status().code(), StatusCode::kNotFound);
  Result<std::vector<DeviceInfo>> bad =
      DecodeAnnotatedNode(*nv, {{"hami.io/node-nvidia-register", "garbage"}});
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("hami.io/node-nvidia-register: "), std::string::npos);
}

TEST(VendorRegistry, MultiVendorPodDevicesAreIndexAligned) {
  VendorRegistry reg = TwoVendors();
  PodDevices pd;
  pd["NVIDIA"] = {{}, {{"GPU-a", "NVIDIA", 3000, 30, 0}}};  // 2 of 3 containers listed
  pd["FAKE"] = {{{"NPU-1", "FAKE", 1024, 0, 0}}};           // 1 of 3 containers listed
  Annotations pod = {{"unrelated", "x"}};
  ASSERT_TRUE(EncodePodDevices(reg, pd, 3, &pod).ok());
  EXPECT_EQ(pod.at("hami.io/vgpu-devices-to-allocate"), ";GPU-a,NVIDIA,3000,30:;;");
  EXPECT_EQ(pod.at("hami.io/vgpu-devices-allocated"), ";GPU-a,NVIDIA,3000,30:;;");
  EXPECT_EQ(pod.at("hami.io/fake-devices-allocated"), "NPU-1,FAKE,1024,0:;;;");

  Result<PodDevices> back = DecodePodDevices(reg, pod, PodDeviceList::kAllocated);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  ASSERT_EQ(back->size(), 2u);
  EXPECT_EQ(back->at("NVIDIA").size(), 3u);
  EXPECT_EQ(back->at("FAKE").size(), 3u);
  EXPECT_EQ(back->at("NVIDIA")[1][0].uuid, "GPU-a");
  EXPECT_TRUE(back->at("FAKE")[2].empty());

  // Only vendors that have the annotation appear.
  Result<PodDevices> only =
      DecodePodDevices(reg, {{"hami.io/vgpu-devices-to-allocate", "GPU-a,NVIDIA,1,1:;"}},
                       PodDeviceList::kToAllocate);
  ASSERT_TRUE(only.ok());
  EXPECT_EQ(only->size(), 1u);
  EXPECT_EQ(only->count("NVIDIA"), 1u);

  Result<PodDevices> broken = DecodePodDevices(
      reg, {{"hami.io/vgpu-devices-allocated", "GPU-a,NVIDIA,x,1:;"}}, PodDeviceList::kAllocated);
  ASSERT_FALSE(broken.ok());
  EXPECT_NE(broken.status().message().find("hami.io/vgpu-devices-allocated: container 0"),
            std::string::npos);

  EXPECT_FALSE(EncodePodDevices(reg, pd, 1, &pod).ok());  // longer than the pod
  PodDevices unknown = {{"AMD", {{}}}};
  EXPECT_FALSE(EncodePodDevices(reg, unknown, 1, &pod).ok());
}

TEST(ChooseByGroup, SmallestGroupThatHoldsTheRequestElseTheBiggestFirst) {
  // Candidates in the engine's order: groups 1 (three devices), 2 (two), 3 (one).
  std::vector<DeviceCandidate> c = {{0, true, {}, 1}, {4, true, {}, 2}, {1, true, {}, 1},
                                    {5, true, {}, 2}, {2, true, {}, 1}, {8, true, {}, 3}};
  auto picked = [&](int32_t need) {
    std::vector<uint32_t> out;
    for (size_t p : ChooseByGroup(c, need).picked) out.push_back(c[p].index);
    return out;
  };
  EXPECT_EQ(picked(1), (std::vector<uint32_t>{8}));           // the single device's group
  EXPECT_EQ(picked(2), (std::vector<uint32_t>{4, 5}));        // the pair, keeping the three
  EXPECT_EQ(picked(3), (std::vector<uint32_t>{0, 1, 2}));     // only group 1 holds three
  EXPECT_EQ(picked(4), (std::vector<uint32_t>{0, 1, 2, 4}));  // biggest groups first
  EXPECT_TRUE(picked(7).empty());
  EXPECT_FALSE(ChooseByGroup(c, 7).topology_mismatch);
  // A candidate without a group: the engine's order.
  c[1].group = 0;
  EXPECT_EQ(picked(2), (std::vector<uint32_t>{0, 4}));
}

}  // namespace
}  // namespace hami::device
