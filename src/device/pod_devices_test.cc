#include "device/pod_devices.h"

#include <gtest/gtest.h>

namespace hami::device {
namespace {

ContainerDevice Dev(const char* uuid, int32_t mem, int32_t cores) {
  ContainerDevice d;
  d.uuid = uuid;
  d.type = "NVIDIA";
  d.mem_mib = mem;
  d.cores = cores;
  return d;
}

// Upstream's documented example: three containers, the second without devices.
constexpr char kUpstream[] = "GPU-a,NVIDIA,3000,30:GPU-b,NVIDIA,3000,30:;;GPU-a,NVIDIA,5000,0:;";

TEST(PodDevices, DecodesUpstreamExample) {
  Result<PodSingleDevice> r = DecodePodSingleDevice(kUpstream);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ(r->size(), 3u);
  EXPECT_EQ((*r)[0], (ContainerDevices{Dev("GPU-a", 3000, 30), Dev("GPU-b", 3000, 30)}));
  EXPECT_TRUE((*r)[1].empty());
  EXPECT_EQ((*r)[2], (ContainerDevices{Dev("GPU-a", 5000, 0)}));
  EXPECT_EQ((*r)[2][0].index, -1);  // not on the wire
  EXPECT_EQ(EncodePodSingleDevice(*r), kUpstream);
}

TEST(PodDevices, ConsumedEntryReencodesEmpty) {
  PodSingleDevice pod = *DecodePodSingleDevice(kUpstream);
  pod[0].clear();
  EXPECT_EQ(EncodePodSingleDevice(pod), ";;GPU-a,NVIDIA,5000,0:;");
  EXPECT_EQ(DecodePodSingleDevice(";;GPU-a,NVIDIA,5000,0:;")->size(), 3u);
}

TEST(PodDevices, EntryCountsFollowTerminators) {
  EXPECT_EQ(DecodePodSingleDevice("")->size(), 0u);
  EXPECT_EQ(DecodePodSingleDevice(";")->size(), 1u);
  EXPECT_EQ(DecodePodSingleDevice(";;;")->size(), 3u);
  // An unterminated last entry still counts.
  Result<PodSingleDevice> r = DecodePodSingleDevice("GPU-a,NVIDIA,1,2:");
  ASSERT_TRUE(r.ok());
  ASSERT_EQ(r->size(), 1u);
  EXPECT_EQ((*r)[0].size(), 1u);
  EXPECT_EQ(EncodePodSingleDevice({}), "");
  EXPECT_EQ(EncodePodSingleDevice({{}, {}}), ";;");
}

TEST(PodDevices, UpstreamLeniency) {
  // Extra fields ignored; segments without a comma skipped; trailing ':' optional.
  Result<ContainerDevices> r =
      DecodeContainerDevices("GPU-a,NVIDIA,1,2,extra:junk:GPU-b,NVIDIA,3,4");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(*r, (ContainerDevices{Dev("GPU-a", 1, 2), Dev("GPU-b", 3, 4)}));
  // Legacy MIG ids carry brackets inside the UUID field.
  EXPECT_EQ((*DecodeContainerDevices("GPU-a[1-2],NVIDIA,10,0:"))[0].uuid, "GPU-a[1-2]");
}

TEST(PodDevices, RejectsMalformedEntries) {
  const char* cases[][2] = {
      {"GPU-a,NVIDIA,1:;", "container 0: device 0: expected UUID,TYPE,MEM,CORES"},
      {";GPU-a,NVIDIA,-1,0:;", "container 1: device 0: memory \"-1\""},
      {"GPU-a,NVIDIA,1,x:;", "cores \"x\": not an integer"},
      {"GPU-a,NVIDIA,2147483648,0:;", "out of range"},
      {",NVIDIA,1,1:;", "empty device UUID"},
      {"GPU-a,,1,1:;", "empty device type"},
      {"GPU-a,NVIDIA,1.5,1:;", "not an integer"},
  };
  for (const auto& c : cases) {
    Result<PodSingleDevice> r = DecodePodSingleDevice(c[0]);
    ASSERT_FALSE(r.ok()) << c[0];
    EXPECT_NE(r.status().message().find(c[1]), std::string::npos)
        << c[0] << " -> " << r.status().message();
  }
}

TEST(PodDevices, PaddingAndAlignment) {
  PodSingleDevice pod = {{Dev("GPU-a", 1, 1)}};
  EXPECT_FALSE(CheckAligned(pod, 3).ok());
  PadToContainers(&pod, 3);
  EXPECT_TRUE(CheckAligned(pod, 3).ok());
  EXPECT_EQ(EncodePodSingleDevice(pod), "GPU-a,NVIDIA,1,1:;;;");
  PadToContainers(&pod, 1);  // never shrinks
  EXPECT_EQ(pod.size(), 3u);
}

}  // namespace
}  // namespace hami::device
