#include "sim/gpu/sm_timeline.h"

#include <algorithm>

namespace hami::sim {

void RingAddBusy(UtilRing* ring, uint64_t start_ns, uint64_t end_ns) {
  while (start_ns < end_ns) {
    uint64_t idx = start_ns / kBucketNs;
    uint64_t bucket_end = (idx + 1) * kBucketNs;
    uint64_t piece_end = std::min(end_ns, bucket_end);
    UtilBucket& b = ring->buckets[idx % kRingBuckets];
    const uint64_t bucket_start = idx * kBucketNs;
    const auto first = static_cast<uint32_t>(start_ns - bucket_start);
    const auto last = static_cast<uint32_t>(piece_end - bucket_start);
    if (b.tag != idx + 1) {
      b.tag = idx + 1;
      b.busy_ns = 0;
      b.first_ns = first;
      b.last_ns = last;
    }
    b.first_ns = std::min(b.first_ns, first);
    b.last_ns = std::max(b.last_ns, last);
    b.busy_ns += piece_end - start_ns;
    start_ns = piece_end;
  }
}

double RingBusyNs(const UtilRing& ring, uint64_t from_ns, uint64_t to_ns) {
  if (to_ns <= from_ns) return 0.0;
  const uint64_t span = static_cast<uint64_t>(kRingBuckets - 1) * kBucketNs;
  if (to_ns - from_ns > span) from_ns = to_ns - span;
  double total = 0.0;
  uint64_t first = from_ns / kBucketNs;
  uint64_t last = (to_ns - 1) / kBucketNs;
  for (uint64_t idx = first; idx <= last; ++idx) {
    const UtilBucket& b = ring.buckets[idx % kRingBuckets];
    if (b.tag != idx + 1 || b.busy_ns == 0) continue;
    // The part of the bucket's busy span [first, last] inside the window.
    const uint64_t span_lo = idx * kBucketNs + b.first_ns;
    const uint64_t span_hi = idx * kBucketNs + b.last_ns;
    const uint64_t lo = std::max(span_lo, from_ns);
    const uint64_t hi = std::min(span_hi, to_ns);
    if (hi <= lo) continue;
    if (lo == span_lo && hi == span_hi) {
      total += static_cast<double>(b.busy_ns);
    } else {
      total += static_cast<double>(b.busy_ns) * static_cast<double>(hi - lo) /
               static_cast<double>(span_hi - span_lo);
    }
  }
  return total;
}

uint64_t ScheduleBlocks(uint64_t* sm_free, int sm_count, uint64_t t0_ns, uint64_t blocks,
                        uint64_t duration_ns, BusySink* sink) {
  if (blocks == 0 || duration_ns == 0 || sm_count <= 0) return t0_ns;
  const unsigned __int128 d = duration_ns;
  const unsigned __int128 b = blocks;
  // Greedy list scheduling with equal durations picks the `blocks` earliest start slots among
  // the per-SM progressions f_j, f_j + d, f_j + 2d, ... (f_j = max(sm_free[j], t0)). Find the
  // time T of the last chosen slot by binary search on the count of slots starting at or
  // before T, then hand each SM its slots.
  uint64_t lo = UINT64_MAX, hi = 0;
  for (int j = 0; j < sm_count; ++j) {
    uint64_t f = std::max(sm_free[j], t0_ns);
    lo = std::min(lo, f);
    hi = std::max(hi, f);
  }
  auto slots_le = [&](unsigned __int128 t) {
    unsigned __int128 n = 0;
    for (int j = 0; j < sm_count; ++j) {
      unsigned __int128 f = std::max(sm_free[j], t0_ns);
      if (t >= f) n += (t - f) / d + 1;
    }
    return n;
  };
  unsigned __int128 left = lo;
  unsigned __int128 right = static_cast<unsigned __int128>(hi) +
                            ((b + static_cast<unsigned>(sm_count) - 1) / sm_count) * d;
  while (left < right) {
    unsigned __int128 mid = left + (right - left) / 2;
    if (slots_le(mid) >= b) {
      right = mid;
    } else {
      left = mid + 1;
    }
  }
  const unsigned __int128 t = left;
  unsigned __int128 given = 0;
  uint64_t counts_storage[1024];
  uint64_t* counts = counts_storage;
  int n = std::min(sm_count, 1024);
  for (int j = 0; j < n; ++j) {
    unsigned __int128 f = std::max(sm_free[j], t0_ns);
    // Slots strictly before t.
    counts[j] = t > f ? static_cast<uint64_t>((t - f - 1) / d + 1) : 0;
    given += counts[j];
  }
  for (int j = 0; j < n && given < b; ++j) {
    unsigned __int128 f = std::max(sm_free[j], t0_ns);
    if (t >= f && (t - f) % d == 0) {
      ++counts[j];
      ++given;
    }
  }
  uint64_t done = t0_ns;
  for (int j = 0; j < n; ++j) {
    if (counts[j] == 0) continue;
    uint64_t start = std::max(sm_free[j], t0_ns);
    uint64_t end = start + counts[j] * duration_ns;
    if (sink != nullptr) sink->Busy(start, end);
    sm_free[j] = end;
    done = std::max(done, end);
  }
  return done;
}

}  // namespace hami::sim
