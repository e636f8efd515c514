// The SM timeline and utilisation rings: the arithmetic at the heart of the simulated GPU.
//
// A device is a set of SMs, each with the time at which it next becomes free. Launching a busy
// kernel of B blocks lasting d ns each, not before t0, books the blocks exactly as a greedy
// scheduler would (each block to the SM that can start it earliest); grids larger than the SM
// count therefore run in waves, and work from every process shares one timeline.
//
// Busy SM-nanoseconds are accumulated in a ring of 1 ms buckets covering ~4 s. Busy time can be
// booked ahead of "now" (launches are asynchronous); readers only count buckets up to the end of
// the window they ask about. Each bucket also remembers the earliest start and latest end of the
// busy time inside it, and an edge bucket only partly inside a window contributes in proportion
// to the window's overlap with that [first, last] span (busy time is assumed uniform within it,
// which is exact for a bucket fully covered by steady work and for work starting or ending in it).
//
// Thread safety: plain data and pure functions; callers serialise access (the shared state does
// so under its process-shared mutex).
#pragma once

#include <stdint.h>

namespace hami::sim {

inline constexpr uint64_t kBucketNs = 1000000;  // 1 ms
inline constexpr int kRingBuckets = 4096;       // 4.096 s of history (and of booked future)

struct UtilBucket {
  uint64_t tag;  // absolute bucket index + 1; 0 = never written
  uint64_t busy_ns;
  uint32_t first_ns;  // earliest busy offset within the bucket
  uint32_t last_ns;   // latest busy end offset within the bucket
};

struct UtilRing {
  UtilBucket buckets[kRingBuckets];
};

// Adds the busy interval [start_ns, end_ns) (one SM) to the ring, split at bucket boundaries.
void RingAddBusy(UtilRing* ring, uint64_t start_ns, uint64_t end_ns);

// Busy SM-nanoseconds recorded in (from_ns, to_ns], edge buckets pro rata (see above). Windows
// longer than the ring are clamped to the ring's span.
double RingBusyNs(const UtilRing& ring, uint64_t from_ns, uint64_t to_ns);

// Receives one contiguous busy interval per SM that got blocks.
class BusySink {
 public:
  virtual ~BusySink() = default;
  virtual void Busy(uint64_t start_ns, uint64_t end_ns) = 0;
};

// Books `blocks` blocks of `duration_ns` on the SMs whose free times are sm_free[0..sm_count),
// none starting before t0_ns, updating sm_free. Returns the completion time of the last block
// (t0_ns when blocks or duration is 0). Cost is O(sm_count * 64) whatever the grid size.
uint64_t ScheduleBlocks(uint64_t* sm_free, int sm_count, uint64_t t0_ns, uint64_t blocks,
                        uint64_t duration_ns, BusySink* sink);

}  // namespace hami::sim
