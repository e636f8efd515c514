#include "sim/gpu/visibility.h"

#include <gtest/gtest.h>

namespace hami::sim {
namespace {

const std::vector<std::string> kUuids = {"GPU-aaaa0000-0000-0000-0000-000000000000",
                                         "GPU-bbbb0000-0000-0000-0000-000000000000",
                                         "GPU-bbbc0000-0000-0000-0000-000000000000"};
// Two MIG devices on GPU 1 (GI 1 and GI 2), one on GPU 2, in NVML's order per GPU.
const std::vector<MigDeviceName> kMigs = {
    {1, 1, 0, "MIG-11110000-0000-0000-0000-000000000000"},
    {1, 2, 0, "MIG-22220000-0000-0000-0000-000000000000"},
    {2, 0, 0, "MIG-22230000-0000-0000-0000-000000000000"}};

// Physical indices of whole-GPU entries; -1 for a MIG entry (so lists read at a glance).
std::vector<int> Whole(const std::vector<VisibleDevice>& v) {
  std::vector<int> out;
  for (const VisibleDevice& d : v) out.push_back(d.mig < 0 ? d.phys : -1);
  return out;
}

std::vector<VisibleDevice> Gpus(std::vector<int> phys) {
  std::vector<VisibleDevice> out;
  for (int p : phys) out.push_back(VisibleDevice{p, -1});
  return out;
}

TEST(NvidiaVisibleTest, AllNoneAndLists) {
  std::vector<std::string> w;
  EXPECT_EQ(Whole(ResolveNvidiaVisible(nullptr, kUuids, kMigs, &w)), (std::vector<int>{0, 1, 2}));
  EXPECT_EQ(Whole(ResolveNvidiaVisible("all", kUuids, kMigs, &w)), (std::vector<int>{0, 1, 2}));
  EXPECT_TRUE(ResolveNvidiaVisible("none", kUuids, kMigs, &w).empty());
  EXPECT_EQ(Whole(ResolveNvidiaVisible("2, 0", kUuids, kMigs, &w)), (std::vector<int>{2, 0}));
  EXPECT_EQ(Whole(ResolveNvidiaVisible(kUuids[1].c_str(), kUuids, kMigs, &w)),
            (std::vector<int>{1}));
  EXPECT_TRUE(w.empty());
  EXPECT_EQ(Whole(ResolveNvidiaVisible("7,1", kUuids, kMigs, &w)), (std::vector<int>{1}));
  EXPECT_EQ(w.size(), 1u);
}

TEST(NvidiaVisibleTest, MigDevicesByUuidAndIndexPair) {
  std::vector<std::string> w;
  std::string env = kMigs[1].uuid;
  EXPECT_EQ(ResolveNvidiaVisible(env.c_str(), kUuids, kMigs, &w),
            (std::vector<VisibleDevice>{{1, 1}}));
  // "1:0" is GPU 1's first MIG device; a mix with whole GPUs keeps the order given.
  env = "1:0,0," + kMigs[2].uuid + "," + kMigs[1].uuid;
  EXPECT_EQ(ResolveNvidiaVisible(env.c_str(), kUuids, kMigs, &w),
            (std::vector<VisibleDevice>{{1, 0}, {0, -1}, {2, 2}, {1, 1}}));
  EXPECT_TRUE(w.empty());
  // Repeats are dropped, as for GPUs.
  env = kMigs[0].uuid + ",1:0";
  EXPECT_EQ(ResolveNvidiaVisible(env.c_str(), kUuids, kMigs, &w).size(), 1u);
}

TEST(NvidiaVisibleTest, AMigDeviceThatIsGoneIsSkippedWithAWarning) {
  std::vector<std::string> w;
  std::string env = "MIG-99990000-0000-0000-0000-000000000000,1:2,0:0," + kMigs[0].uuid;
  EXPECT_EQ(ResolveNvidiaVisible(env.c_str(), kUuids, kMigs, &w),
            (std::vector<VisibleDevice>{{1, 0}}));
  ASSERT_EQ(w.size(), 3u);
  EXPECT_NE(w[0].find("no MIG device 'MIG-9999"), std::string::npos) << w[0];
  EXPECT_NE(w[1].find("'1:2'"), std::string::npos) << w[1];
  // The legacy MIG-GPU-<uuid>/<gi>/<ci> form is not understood.
  w.clear();
  EXPECT_TRUE(ResolveNvidiaVisible("MIG-GPU-bbbb0000-0000-0000-0000-000000000000/1/0", kUuids,
                                   kMigs, &w)
                  .empty());
  EXPECT_EQ(w.size(), 1u);
}

TEST(NvidiaVisibleTest, NvmlListsEachParentGpuOnce) {
  EXPECT_EQ(NvmlGpus({{1, 1}, {0, -1}, {1, 0}, {2, 2}}), (std::vector<int>{1, 0, 2}));
  EXPECT_TRUE(NvmlGpus({}).empty());
}

TEST(CudaVisibleTest, OrdinalsUuidsAndPrefixes) {
  std::vector<std::string> w;
  std::vector<VisibleDevice> base = Gpus({0, 1, 2});
  EXPECT_EQ(ResolveCudaVisible(nullptr, base, kUuids, kMigs, &w), base);
  EXPECT_EQ(Whole(ResolveCudaVisible("1", base, kUuids, kMigs, &w)), (std::vector<int>{1}));
  EXPECT_EQ(Whole(ResolveCudaVisible("2,0", base, kUuids, kMigs, &w)), (std::vector<int>{2, 0}));
  EXPECT_EQ(Whole(ResolveCudaVisible("GPU-aaaa", base, kUuids, kMigs, &w)),
            (std::vector<int>{0}));
  EXPECT_EQ(Whole(ResolveCudaVisible(kUuids[2].c_str(), base, kUuids, kMigs, &w)),
            (std::vector<int>{2}));
  EXPECT_TRUE(ResolveCudaVisible("", base, kUuids, kMigs, &w).empty());
  EXPECT_TRUE(ResolveCudaVisible("-1", base, kUuids, kMigs, &w).empty());
}

TEST(CudaVisibleTest, MigPrefixesMatchMigDevicesOnly) {
  std::vector<std::string> w;
  std::vector<VisibleDevice> base = {{1, 0}, {1, -1}, {1, 1}};
  EXPECT_EQ(ResolveCudaVisible("MIG-2222", base, kUuids, kMigs, &w),
            (std::vector<VisibleDevice>{{1, 1}}));
  EXPECT_EQ(ResolveCudaVisible("GPU-bbbb,0", base, kUuids, kMigs, &w),
            (std::vector<VisibleDevice>{{1, -1}, {1, 0}}));
  // MIG-2223 is not in the container's view.
  EXPECT_TRUE(ResolveCudaVisible("MIG-2223", base, kUuids, kMigs, &w).empty());
}

TEST(CudaVisibleTest, StopsAtFirstBadEntry) {
  std::vector<std::string> w;
  std::vector<VisibleDevice> base = Gpus({0, 1, 2});
  EXPECT_EQ(Whole(ResolveCudaVisible("1,9,0", base, kUuids, kMigs, &w)), (std::vector<int>{1}));
  EXPECT_EQ(Whole(ResolveCudaVisible("0,GPU-bbb", base, kUuids, kMigs, &w)),
            (std::vector<int>{0}));  // ambiguous
  EXPECT_EQ(Whole(ResolveCudaVisible("0,0", base, kUuids, kMigs, &w)), (std::vector<int>{0}));
}

TEST(CudaVisibleTest, OrdinalsAreRelativeToTheContainerView) {
  std::vector<std::string> w;
  std::vector<VisibleDevice> base = Gpus({2});  // NVIDIA_VISIBLE_DEVICES=2
  EXPECT_EQ(Whole(ResolveCudaVisible("0", base, kUuids, kMigs, &w)), (std::vector<int>{2}));
  EXPECT_TRUE(ResolveCudaVisible("GPU-aaaa", base, kUuids, kMigs, &w).empty());
}

}  // namespace
}  // namespace hami::sim
