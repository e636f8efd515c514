// StopSignals: how a service's main thread waits for its stop (and reload) signals.
//
// Constructed first thing in main, before any thread starts: it blocks SIGINT, SIGTERM and any
// extra signals in the calling thread, so every thread started later inherits the mask and the
// signals stay pending until Wait() takes them synchronously. No handler runs, so nothing races
// the shutdown sequence that follows Wait().
//
//   hami::StopSignals signals({SIGHUP});
//   ... start servers and threads ...
//   while (signals.Wait() == SIGHUP) Reload();
//   ... stop in reverse order ...
//
// The destructor restores the mask the calling thread had before (for tests; a main returns).
//
// Thread safety: construct, Wait and destroy on one thread.
#pragma once

#include <signal.h>

#include <initializer_list>

namespace hami {

class StopSignals {
 public:
  explicit StopSignals(std::initializer_list<int> extra = {});
  ~StopSignals();
  StopSignals(const StopSignals&) = delete;
  StopSignals& operator=(const StopSignals&) = delete;

  // Blocks until one of the signals is pending; takes it and returns its number.
  int Wait();

 private:
  sigset_t set_;
  sigset_t previous_;
};

}  // namespace hami
