// Process identity for the sim's lazy reclaim of dead processes' memory.
//
// A pid alone is not an identity (pids are reused), so the sim records (pid, start time) where
// start time is field 22 of /proc/<pid>/stat (clock ticks since boot). A recorded process is
// alive only if that pid exists, is not a zombie, and still has the same start time.
//
// Thread safety: thread-safe (reads procfs only).
#pragma once

#include <stdint.h>
#include <sys/types.h>

namespace hami::sim {

// Opaque non-zero start-time token of `pid` (derived from the stat start time), or 0 if it does
// not exist or has already exited (zombie).
uint64_t ProcessStartTime(pid_t pid);

// True if the process recorded as (pid, start_time) is still running.
bool ProcessAlive(pid_t pid, uint64_t start_time);

}  // namespace hami::sim
