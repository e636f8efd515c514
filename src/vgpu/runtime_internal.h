// Internals that runtime.cc (start-up, devices, memory, launches) and sm_controller.cc (the SM
// controller thread) share; the hooks use runtime.h instead.
//
// Thread safety: every function here may be called from any thread. The clock helpers take no
// lock and allocate nothing, so the launch path may use them.
#pragma once

#include <errno.h>
#include <stdint.h>
#include <time.h>

#include "vgpu/runtime.h"

namespace hami::vgpu {

// CLOCK_MONOTONIC in nanoseconds: the clock of the launch gate and of the controller's tick.
inline int64_t MonoNs() {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

// Sleeps until CLOCK_MONOTONIC reads `deadline_ns`; a signal does not cut the sleep short.
inline void SleepUntilMono(int64_t deadline_ns) {
  struct timespec ts;
  ts.tv_sec = deadline_ns / 1'000'000'000;
  ts.tv_nsec = deadline_ns % 1'000'000'000;
  while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, nullptr) == EINTR) {
  }
}

// Re-derives Rt().launch_gate (does any device have an SM limit to enforce?) from the region's
// current limits, and records in seen_config_gen which region configuration it reflects.
void RefreshLaunchGate();

// The SM controller thread's body (sm_controller.cc), for StartWatcher's pthread_create. Never
// returns; Rt().region must be set before the thread starts.
void* WatcherMain(void*);

}  // namespace hami::vgpu
