#include "sim/gpu/sm_timeline.h"

#include <gtest/gtest.h>

#include <memory>
#include <vector>

namespace hami::sim {
namespace {

constexpr uint64_t kMs = 1000000;

class RecordingSink : public BusySink {
 public:
  void Busy(uint64_t start_ns, uint64_t end_ns) override { total += end_ns - start_ns; }
  uint64_t total = 0;
};

TEST(ScheduleBlocksTest, HalfGridOccupiesHalfTheSms) {
  std::vector<uint64_t> free(108, 0);
  RecordingSink sink;
  uint64_t end = ScheduleBlocks(free.data(), 108, 10 * kMs, 54, kMs, &sink);
  EXPECT_EQ(end, 11 * kMs);
  EXPECT_EQ(sink.total, 54 * kMs);
  int busy = 0;
  for (uint64_t f : free) busy += f == 11 * kMs;
  EXPECT_EQ(busy, 54);
}

TEST(ScheduleBlocksTest, LargeGridsRunInWaves) {
  std::vector<uint64_t> free(108, 0);
  RecordingSink sink;
  // 3 full waves plus 10 blocks: 4 waves.
  uint64_t end = ScheduleBlocks(free.data(), 108, 0, 3 * 108 + 10, kMs, &sink);
  EXPECT_EQ(end, 4 * kMs);
  EXPECT_EQ(sink.total, (3 * 108 + 10) * kMs);
}

TEST(ScheduleBlocksTest, HugeGridIsCheap) {
  std::vector<uint64_t> free(108, 0);
  uint64_t end = ScheduleBlocks(free.data(), 108, 0, 108ull * 1000000, 1000, nullptr);
  EXPECT_EQ(end, 1000000ull * 1000);
}

TEST(ScheduleBlocksTest, BackToBackHalfKernelsAlternateSmHalves) {
  std::vector<uint64_t> free(108, 0);
  uint64_t tail = 0;
  for (int i = 0; i < 10; ++i) tail = ScheduleBlocks(free.data(), 108, tail, 54, kMs, nullptr);
  EXPECT_EQ(tail, 10 * kMs);  // one stream: serialised, 1 ms each
}

TEST(ScheduleBlocksTest, SecondProcessWaitsForBusySms) {
  std::vector<uint64_t> free(4, 0);
  uint64_t a = ScheduleBlocks(free.data(), 4, 0, 4, 5 * kMs, nullptr);
  uint64_t b = ScheduleBlocks(free.data(), 4, 0, 2, 5 * kMs, nullptr);
  EXPECT_EQ(a, 5 * kMs);
  EXPECT_EQ(b, 10 * kMs);
}

TEST(ScheduleBlocksTest, EarlierFreeSmsAreUsedFirst) {
  std::vector<uint64_t> free = {0, 3 * kMs, 0, 7 * kMs};
  RecordingSink sink;
  uint64_t end = ScheduleBlocks(free.data(), 4, kMs, 3, 2 * kMs, &sink);
  // Two blocks start at 1 ms on SM0 and SM2; the third starts at 3 ms (ties broken by index).
  EXPECT_EQ(end, 5 * kMs);
  EXPECT_EQ(sink.total, 6 * kMs);
  EXPECT_EQ(free[0], 5 * kMs);
  EXPECT_EQ(free[1], 3 * kMs);
  EXPECT_EQ(free[2], 3 * kMs);
  EXPECT_EQ(free[3], 7 * kMs);  // never chosen: it frees up last
}

TEST(UtilRingTest, ExactBucketsAndProRataEdges) {
  auto ring = std::make_unique<UtilRing>();
  const uint64_t base = 1000 * kMs;
  RingAddBusy(ring.get(), base, base + 10 * kMs);  // 10 ms busy on one SM
  EXPECT_DOUBLE_EQ(RingBusyNs(*ring, base, base + 10 * kMs), 10.0 * kMs);
  EXPECT_DOUBLE_EQ(RingBusyNs(*ring, base - 5 * kMs, base + 20 * kMs), 10.0 * kMs);
  // Half of the first bucket.
  EXPECT_DOUBLE_EQ(RingBusyNs(*ring, base, base + kMs / 2), kMs / 2.0);
  // An unaligned interval counts exactly from its start.
  RingAddBusy(ring.get(), base + 100 * kMs + kMs / 3, base + 102 * kMs);
  EXPECT_NEAR(RingBusyNs(*ring, base + 100 * kMs, base + 103 * kMs), 2 * kMs - kMs / 3, 1.0);
  EXPECT_DOUBLE_EQ(RingBusyNs(*ring, base + 20 * kMs, base + 30 * kMs), 0.0);
}

TEST(UtilRingTest, WorkEndingInsideABucketIsNotSmearedPastItsEnd) {
  auto ring = std::make_unique<UtilRing>();
  const uint64_t base = 2000 * kMs;
  RingAddBusy(ring.get(), base + kMs / 10, base + 3 * kMs / 10);  // 0.1 .. 0.3 ms
  EXPECT_DOUBLE_EQ(RingBusyNs(*ring, base + kMs / 2, base + kMs), 0.0);
  EXPECT_DOUBLE_EQ(RingBusyNs(*ring, base, base + kMs / 5), kMs / 10.0);
}

TEST(UtilRingTest, StaleSlotsAreNotCounted) {
  auto ring = std::make_unique<UtilRing>();
  RingAddBusy(ring.get(), 0, kMs);
  const uint64_t later = static_cast<uint64_t>(kRingBuckets) * kBucketNs;
  EXPECT_DOUBLE_EQ(RingBusyNs(*ring, later, later + kMs), 0.0);
  RingAddBusy(ring.get(), later, later + kMs / 4);
  EXPECT_DOUBLE_EQ(RingBusyNs(*ring, later, later + kMs), kMs / 4.0);
}

}  // namespace
}  // namespace hami::sim
