// Time helpers for the simulated driver.
//
// Simulated GPU time is CLOCK_MONOTONIC nanoseconds, which every process on the node shares, so
// completion times booked by one process are meaningful to all others. NVML reports wall-clock
// microseconds; RealtimeFromMonotonic converts between the two at the current offset.
//
// Thread safety: all functions are thread-safe.
#pragma once

#include <stdint.h>
#include <time.h>

namespace hami::sim {

inline uint64_t MonotonicNs() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
}

inline uint64_t RealtimeNs() {
  timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
}

// Blocks the calling thread until CLOCK_MONOTONIC reaches `deadline_ns` (returns at once if it
// already has). This is how synchronisation calls wait for simulated work to finish.
inline void SleepUntilMonotonic(uint64_t deadline_ns) {
  timespec ts;
  ts.tv_sec = static_cast<time_t>(deadline_ns / 1000000000ull);
  ts.tv_nsec = static_cast<long>(deadline_ns % 1000000000ull);
  while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, nullptr) != 0) {
  }
}

}  // namespace hami::sim
