#include "sim/gpu/visibility.h"

#include <gtest/gtest.h>

namespace hami::sim {
namespace {

const std::vector<std::string> kUuids = {"GPU-aaaa0000-0000-0000-0000-000000000000",
                                         "GPU-bbbb0000-0000-0000-0000-000000000000",
                                         "GPU-bbbc0000-0000-0000-0000-000000000000"};

TEST(NvidiaVisibleTest, AllNoneAndLists) {
  std::vector<std::string> w;
  EXPECT_EQ(ResolveNvidiaVisible(nullptr, kUuids, &w), (std::vector<int>{0, 1, 2}));
  EXPECT_EQ(ResolveNvidiaVisible("all", kUuids, &w), (std::vector<int>{0, 1, 2}));
  EXPECT_TRUE(ResolveNvidiaVisible("none", kUuids, &w).empty());
  EXPECT_EQ(ResolveNvidiaVisible("2, 0", kUuids, &w), (std::vector<int>{2, 0}));
  EXPECT_EQ(ResolveNvidiaVisible(kUuids[1].c_str(), kUuids, &w), (std::vector<int>{1}));
  EXPECT_TRUE(w.empty());
  EXPECT_EQ(ResolveNvidiaVisible("7,1", kUuids, &w), (std::vector<int>{1}));
  EXPECT_EQ(w.size(), 1u);
}

TEST(CudaVisibleTest, OrdinalsUuidsAndPrefixes) {
  std::vector<std::string> w;
  std::vector<int> base = {0, 1, 2};
  EXPECT_EQ(ResolveCudaVisible(nullptr, base, kUuids, &w), base);
  EXPECT_EQ(ResolveCudaVisible("1", base, kUuids, &w), (std::vector<int>{1}));
  EXPECT_EQ(ResolveCudaVisible("2,0", base, kUuids, &w), (std::vector<int>{2, 0}));
  EXPECT_EQ(ResolveCudaVisible("GPU-aaaa", base, kUuids, &w), (std::vector<int>{0}));
  EXPECT_EQ(ResolveCudaVisible(kUuids[2].c_str(), base, kUuids, &w), (std::vector<int>{2}));
  EXPECT_TRUE(ResolveCudaVisible("", base, kUuids, &w).empty());
  EXPECT_TRUE(ResolveCudaVisible("-1", base, kUuids, &w).empty());
}

TEST(CudaVisibleTest, StopsAtFirstBadEntry) {
  std::vector<std::string> w;
  std::vector<int> base = {0, 1, 2};
  EXPECT_EQ(ResolveCudaVisible("1,9,0", base, kUuids, &w), (std::vector<int>{1}));
  EXPECT_EQ(ResolveCudaVisible("0,GPU-bbb", base, kUuids, &w), (std::vector<int>{0}));  // ambiguous
  EXPECT_EQ(ResolveCudaVisible("0,0", base, kUuids, &w), (std::vector<int>{0}));
}

TEST(CudaVisibleTest, OrdinalsAreRelativeToTheContainerView) {
  std::vector<std::string> w;
  std::vector<int> base = {2};  // NVIDIA_VISIBLE_DEVICES=2
  EXPECT_EQ(ResolveCudaVisible("0", base, kUuids, &w), (std::vector<int>{2}));
  EXPECT_TRUE(ResolveCudaVisible("GPU-aaaa", base, kUuids, &w).empty());
}

}  // namespace
}  // namespace hami::sim
