#include "common/stop_signals.h"

#include <pthread.h>

namespace hami {

StopSignals::StopSignals(std::initializer_list<int> extra) {
  sigemptyset(&set_);
  sigaddset(&set_, SIGINT);
  sigaddset(&set_, SIGTERM);
  for (int sig : extra) sigaddset(&set_, sig);
  pthread_sigmask(SIG_BLOCK, &set_, &previous_);
}

StopSignals::~StopSignals() { pthread_sigmask(SIG_SETMASK, &previous_, nullptr); }

int StopSignals::Wait() {
  for (;;) {
    int sig = 0;
    // sigwait only fails for an invalid set, which the constructor cannot build.
    if (sigwait(&set_, &sig) == 0) return sig;
  }
}

}  // namespace hami
