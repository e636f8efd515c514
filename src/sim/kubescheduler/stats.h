// Counters and latency histograms the simulated kube-scheduler exposes to tests and benchmarks.
//
//   LatencyHistogram h;
//   h.Record(std::chrono::microseconds(1500));
//   h.count(); h.Mean(); h.Quantile(0.99);   // quantiles are bucket upper bounds
//
// Thread safety: plain values; the scheduler fills them under its own lock and hands out copies.
#pragma once

#include <array>
#include <chrono>
#include <cstdint>

#include "sim/kubescheduler/scheduling_queue.h"

namespace hami::sim {

// Fixed exponential buckets (upper bounds 100us * 2^i, i = 0..19, about 52 s, then +Inf), so that
// snapshots can be merged and compared without allocation.
class LatencyHistogram {
 public:
  static constexpr int kBuckets = 21;
  using Duration = std::chrono::nanoseconds;

  void Record(Duration d);
  uint64_t count() const { return count_; }
  Duration total() const { return total_; }
  Duration max() const { return max_; }
  Duration Mean() const;
  // The upper bound of the bucket holding the q-quantile (max() for the +Inf bucket); 0 if empty.
  Duration Quantile(double q) const;
  static Duration BucketUpperBound(int i);
  const std::array<uint64_t, kBuckets>& buckets() const { return buckets_; }

 private:
  uint64_t count_ = 0;
  Duration total_{0};
  Duration max_{0};
  std::array<uint64_t, kBuckets> buckets_{};
};

struct KubeSchedulerStats {
  uint64_t cycles = 0;            // scheduling cycles started (all attempts of all pods)
  uint64_t scheduled = 0;         // pods bound
  uint64_t unschedulable = 0;     // cycles that ended with no feasible node
  uint64_t errors = 0;            // cycles that ended in an error (extender, API, binding)
  uint64_t binding_failures = 0;  // the part of `errors` that failed at binding
  uint64_t dropped = 0;           // cycles abandoned because the pod vanished or was bound
  uint64_t extender_filter_calls = 0;
  uint64_t extender_filter_errors = 0;  // transport, HTTP or result errors (ignorable included)
  uint64_t extender_bind_calls = 0;
  uint64_t extender_bind_errors = 0;
  uint64_t api_bind_calls = 0;          // bindings created by the driver itself
  uint64_t events_failed = 0;           // events the API server refused (never fatal)
  LatencyHistogram filter_latency;      // one extender filter call
  LatencyHistogram bind_latency;        // one binding (extender or API)
  LatencyHistogram cycle_latency;       // one scheduling cycle, pop to decision
  LatencyHistogram scheduling_latency;  // first seen pending -> bound
  QueueSizes queue;                     // at the time of the snapshot

  uint64_t failed_attempts() const { return unschedulable + errors; }
};

}  // namespace hami::sim
