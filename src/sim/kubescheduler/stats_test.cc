// LatencyHistogram: counts, mean, max and bucket-bound quantiles.
#include "sim/kubescheduler/stats.h"

#include <gtest/gtest.h>

namespace hami::sim {
namespace {

using std::chrono::microseconds;
using std::chrono::milliseconds;

TEST(LatencyHistogramTest, Empty) {
  LatencyHistogram h;
  EXPECT_EQ(h.count(), 0u);
  EXPECT_EQ(h.Mean(), LatencyHistogram::Duration::zero());
  EXPECT_EQ(h.Quantile(0.99), LatencyHistogram::Duration::zero());
}

TEST(LatencyHistogramTest, RecordsAndReportsQuantiles) {
  LatencyHistogram h;
  for (int i = 0; i < 99; ++i) h.Record(microseconds(50));  // first bucket (<= 100us)
  h.Record(milliseconds(30));                               // bucket <= 51.2ms
  EXPECT_EQ(h.count(), 100u);
  EXPECT_EQ(h.max(), milliseconds(30));
  EXPECT_EQ(h.total(), microseconds(99 * 50) + milliseconds(30));
  EXPECT_EQ(h.Mean(), std::chrono::nanoseconds(349500));
  EXPECT_EQ(h.Quantile(0.5), microseconds(100));
  EXPECT_EQ(h.Quantile(0.99), microseconds(100));
  EXPECT_EQ(h.Quantile(1.0), milliseconds(30));  // capped by the observed maximum
  EXPECT_EQ(h.buckets()[0], 99u);
}

TEST(LatencyHistogramTest, OverflowBucketAndNegativeValues) {
  LatencyHistogram h;
  h.Record(std::chrono::seconds(120));
  h.Record(microseconds(-5));
  EXPECT_EQ(h.buckets()[LatencyHistogram::kBuckets - 1], 1u);
  EXPECT_EQ(h.buckets()[0], 1u);
  EXPECT_EQ(h.Quantile(1.0), std::chrono::seconds(120));
  EXPECT_EQ(LatencyHistogram::BucketUpperBound(0), microseconds(100));
  EXPECT_EQ(LatencyHistogram::BucketUpperBound(1), microseconds(200));
}

}  // namespace
}  // namespace hami::sim
