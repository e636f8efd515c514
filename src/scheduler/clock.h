// Clock: the scheduler's only source of time, injected so that reservation expiry is testable.
//
// Times are Unix seconds: the resolution of `hami.io/vgpu-time`, the annotation a reservation's age
// is read from, and plenty for expiry measured in minutes.
//
// Thread safety: SystemClock is stateless; FakeClock is a plain value for single-threaded tests.
#pragma once

#include <chrono>
#include <cstdint>

namespace hami::scheduler {

class Clock {
 public:
  virtual ~Clock() = default;
  virtual int64_t NowUnixSeconds() const = 0;
};

class SystemClock final : public Clock {
 public:
  int64_t NowUnixSeconds() const override {
    return std::chrono::duration_cast<std::chrono::seconds>(
               std::chrono::system_clock::now().time_since_epoch())
        .count();
  }
};

class FakeClock final : public Clock {
 public:
  explicit FakeClock(int64_t now = 1'700'000'000) : now_(now) {}
  int64_t NowUnixSeconds() const override { return now_; }
  void Set(int64_t now) { now_ = now; }
  void Advance(int64_t seconds) { now_ += seconds; }

 private:
  int64_t now_;
};

}  // namespace hami::scheduler
