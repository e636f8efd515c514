// Clock and Cancellation: the one source of time and of "stop now" for the whole tree (API client,
// scheduler engine and service, device plugin, simulators).
//
// Everything that waits (rate limiting, retry backoff, informer and leader-election loops) waits
// through Clock::Sleep, and everything that reads the time reads it here (reservation ages and
// handshakes in Unix seconds through NowUnixSeconds), so tests inject a FakeClock whose Sleep
// advances virtual time at once and records what was asked; nothing in the tests depends on
// wall-clock speed.
//
//   RealClock clock;
//   Cancellation stop;
//   if (clock.Sleep(std::chrono::seconds(2), &stop)) return;  // cancelled while waiting
//
// Thread safety: RealClock and FakeClock are safe to share between threads. Cancellation is safe
// to Cancel() from any thread while others wait on it.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <vector>

#include "common/thread_annotations.h"

namespace hami {

using Duration = std::chrono::nanoseconds;
using MonoTime = std::chrono::steady_clock::time_point;
using WallTime = std::chrono::system_clock::time_point;

// A one-shot stop signal shared between a controller and the loops it runs.
class Cancellation {
 public:
  Cancellation() = default;
  ~Cancellation();
  Cancellation(const Cancellation&) = delete;
  Cancellation& operator=(const Cancellation&) = delete;

  void Cancel();
  bool cancelled() const { return cancelled_.load(std::memory_order_acquire); }
  // Waits up to `d` of real time; true when cancelled (before or during the wait).
  bool WaitFor(Duration d) const;
  // A descriptor that polls readable (POLLIN) once Cancel() has been called, for code that waits
  // in poll(2) on sockets and must end at once when cancelled (the API client's reads). Made on
  // first use, owned by the Cancellation (valid until it is destroyed); -1 if the kernel refused
  // an eventfd, and the caller then falls back to looking at cancelled() now and then.
  int WakeFd() const;

 private:
  std::atomic<bool> cancelled_{false};
  // Orders Cancel's store before the notify against a waiter's check, so a wake-up is never lost;
  // guards the wake descriptor.
  mutable Mutex mu_;
  mutable std::condition_variable cv_;
  mutable int wake_fd_ GUARDED_BY(mu_) = -1;
};

class Clock {
 public:
  virtual ~Clock() = default;
  // Monotonic time for intervals (rate limits, expiry observed locally).
  virtual MonoTime Now() const = 0;
  // Calendar time for timestamps written into objects (Lease renewTime, Event timestamps).
  virtual WallTime WallNow() const = 0;
  // Waits `d`; returns true when `cancel` (may be null) fired first.
  virtual bool Sleep(Duration d, const Cancellation* cancel) = 0;
  // Waits on `cv` (with `lock` held, as condition_variable::wait_until) until notified or until
  // this clock reads `deadline`. May return early (spuriously), so callers loop on their
  // predicate and deadline. A FakeClock's deadline passes only when the test advances it: there
  // each call waits at most 1 ms of real time, so waiters notice an Advance at once.
  virtual void WaitUntil(std::condition_variable& cv, std::unique_lock<std::mutex>& lock,
                         MonoTime deadline) const = 0;
  // WallNow in whole Unix seconds (the resolution of HAMi's time annotations).
  int64_t NowUnixSeconds() const {
    return std::chrono::duration_cast<std::chrono::seconds>(WallNow().time_since_epoch()).count();
  }
};

class RealClock final : public Clock {
 public:
  MonoTime Now() const override { return std::chrono::steady_clock::now(); }
  WallTime WallNow() const override { return std::chrono::system_clock::now(); }
  bool Sleep(Duration d, const Cancellation* cancel) override;
  void WaitUntil(std::condition_variable& cv, std::unique_lock<std::mutex>& lock,
                 MonoTime deadline) const override {
    cv.wait_until(lock, deadline);
  }
};

// Virtual time. Sleep advances both clocks by the requested amount immediately (unless already
// cancelled) and records it, so code under test runs at full speed.
class FakeClock final : public Clock {
 public:
  FakeClock();                               // 2024-01-01T00:00:00Z
  explicit FakeClock(int64_t unix_seconds);  // wall time starting there
  MonoTime Now() const override;
  WallTime WallNow() const override;
  bool Sleep(Duration d, const Cancellation* cancel) override;
  void WaitUntil(std::condition_variable& cv, std::unique_lock<std::mutex>& lock,
                 MonoTime deadline) const override;

  void Advance(Duration d);
  // Every duration passed to Sleep, in order.
  std::vector<Duration> sleeps() const;
  Duration total_slept() const;

 private:
  mutable Mutex mu_;
  MonoTime mono_ GUARDED_BY(mu_);
  WallTime wall_ GUARDED_BY(mu_);
  std::vector<Duration> sleeps_ GUARDED_BY(mu_);
};

}  // namespace hami
