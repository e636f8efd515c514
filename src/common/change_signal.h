// ChangeSignal: how a thread waits for a condition that other threads bring about, without
// sleeping and looking again. Whoever changes state a waiter may be waiting for calls Notify()
// after the change; WaitUntil evaluates its condition at once and again after each Notify(), and
// gives up only at its deadline.
//
//   ChangeSignal changed;                                  // owned beside the state
//   ... { MutexLock l(mu_); ++stats_.published; } changed.Notify();   // writer, lock released
//   bool ok = changed.WaitUntil([&] { return stats().published >= 2; }, std::chrono::seconds(10));
//
// No change is missed: WaitUntil notes the generation before it evaluates the condition and waits
// only while no Notify() came since, so a change made during an evaluation causes another one.
// The condition runs with no lock of the signal held (it may read state under its owner's locks,
// even cause Notify()s). A false answer means `timeout` passed with the condition false after the
// last Notify(): the deadline bounds a wait that failed, it never decides one.
//
// Thread safety: every member may be called from any thread.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>

#include "common/thread_annotations.h"

namespace hami {

class ChangeSignal {
 public:
  ChangeSignal() = default;
  ChangeSignal(const ChangeSignal&) = delete;
  ChangeSignal& operator=(const ChangeSignal&) = delete;

  void Notify() EXCLUDES(mu_) {
    {
      MutexLock lock(mu_);
      ++generation_;
    }
    cv_.notify_all();
  }

  // True once `done()` holds; false when `timeout` (real time) passes without it holding.
  bool WaitUntil(const std::function<bool()>& done, std::chrono::milliseconds timeout)
      EXCLUDES(mu_) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    for (;;) {
      uint64_t seen;
      {
        MutexLock lock(mu_);
        seen = generation_;
      }
      if (done()) return true;
      UniqueLock lock(mu_);
      if (!cv_.wait_until(lock.native(), deadline,
                          [&]() REQUIRES(mu_) { return generation_ != seen; })) {
        return false;
      }
    }
  }

 private:
  Mutex mu_;
  std::condition_variable cv_;
  uint64_t generation_ GUARDED_BY(mu_) = 0;
};

}  // namespace hami
