#include "sim/kubescheduler/stats.h"

#include <algorithm>
#include <cmath>

namespace hami::sim {

LatencyHistogram::Duration LatencyHistogram::BucketUpperBound(int i) {
  if (i >= kBuckets - 1) return Duration::max();
  return std::chrono::microseconds(100) * (int64_t{1} << i);
}

void LatencyHistogram::Record(Duration d) {
  if (d < Duration::zero()) d = Duration::zero();
  ++count_;
  total_ += d;
  max_ = std::max(max_, d);
  int i = 0;
  while (i < kBuckets - 1 && d > BucketUpperBound(i)) ++i;
  ++buckets_[i];
}

LatencyHistogram::Duration LatencyHistogram::Mean() const {
  if (count_ == 0) return Duration::zero();
  return total_ / static_cast<int64_t>(count_);
}

LatencyHistogram::Duration LatencyHistogram::Quantile(double q) const {
  if (count_ == 0) return Duration::zero();
  q = std::clamp(q, 0.0, 1.0);
  auto rank = static_cast<uint64_t>(std::ceil(q * static_cast<double>(count_)));
  rank = std::max<uint64_t>(rank, 1);
  uint64_t seen = 0;
  for (int i = 0; i < kBuckets; ++i) {
    seen += buckets_[i];
    if (seen >= rank) return i == kBuckets - 1 ? max_ : std::min(BucketUpperBound(i), max_);
  }
  return max_;
}

}  // namespace hami::sim
