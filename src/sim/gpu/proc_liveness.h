// Process identity for the sim's lazy reclaim of dead processes' memory.
//
// A pid alone is not an identity (pids are reused), so the sim records (pid, start time) where
// start time is field 22 of /proc/<pid>/stat (clock ticks since boot). A recorded process is
// alive only if that pid exists, is not a zombie, and still has the same start time.
//
// Like a real driver, which lives in the kernel and reports every process by its PID in the
// host's namespace, the simulated driver keys processes by host PID. A process inside a PID
// namespace of its own (a container) cannot see its host PID through its own /proc, so whoever
// starts such a process may hand it the host's procfs as an open directory descriptor in
// HAMI_SIM_HOST_PROC_FD (the simulator's stand-in for the kernel's view), or a container runtime
// may mount the host's procfs into the container and name that folder in HAMI_SIM_HOST_PROC;
// every PID and liveness question of the simulated driver is then asked there. Without either,
// the process's /proc is used.
//
// Thread safety: thread-safe (reads procfs only).
#pragma once

#include <stdint.h>
#include <sys/types.h>

namespace hami::sim {

// Opaque non-zero start-time token of `pid` (derived from the stat start time), or 0 if it does
// not exist or has already exited (zombie).
uint64_t ProcessStartTime(pid_t pid);

// The calling process's PID as the simulated driver reports it (see above).
pid_t SimSelfPid();

// True if the process recorded as (pid, start_time) is still running.
bool ProcessAlive(pid_t pid, uint64_t start_time);

}  // namespace hami::sim
