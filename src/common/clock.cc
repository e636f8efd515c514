#include "common/clock.h"

#include <sys/eventfd.h>
#include <unistd.h>

#include <cstdint>
#include <thread>

namespace hami {

Cancellation::~Cancellation() {
  MutexLock lock(mu_);
  if (wake_fd_ >= 0) ::close(wake_fd_);
}

void Cancellation::Cancel() {
  {
    MutexLock lock(mu_);
    cancelled_.store(true, std::memory_order_release);
    if (wake_fd_ >= 0) {
      uint64_t one = 1;
      // The counter cannot overflow from ones (eventfd saturates far above), and a failed write
      // only leaves pollers to their own timeouts.
      [[maybe_unused]] ssize_t w = ::write(wake_fd_, &one, sizeof one);
    }
  }
  cv_.notify_all();
}

int Cancellation::WakeFd() const {
  MutexLock lock(mu_);
  if (wake_fd_ < 0) {
    wake_fd_ = ::eventfd(cancelled() ? 1 : 0, EFD_CLOEXEC | EFD_NONBLOCK);
  }
  return wake_fd_;
}

bool Cancellation::WaitFor(Duration d) const {
  UniqueLock lock(mu_);
  return cv_.wait_for(lock.native(), d, [this] { return cancelled(); });
}

bool RealClock::Sleep(Duration d, const Cancellation* cancel) {
  if (cancel != nullptr) return cancel->WaitFor(d);
  std::this_thread::sleep_for(d);
  return false;
}

FakeClock::FakeClock()
    // A fixed, recognisable epoch: 2024-01-01T00:00:00Z.
    : mono_(MonoTime(std::chrono::hours(1000))),
      wall_(WallTime(std::chrono::seconds(1704067200))) {}

FakeClock::FakeClock(int64_t unix_seconds)
    : mono_(MonoTime(std::chrono::hours(1000))),
      wall_(WallTime(std::chrono::seconds(unix_seconds))) {}

MonoTime FakeClock::Now() const {
  MutexLock lock(mu_);
  return mono_;
}

WallTime FakeClock::WallNow() const {
  MutexLock lock(mu_);
  return wall_;
}

void FakeClock::WaitUntil(std::condition_variable& cv, std::unique_lock<std::mutex>& lock,
                          MonoTime deadline) const {
  if (Now() >= deadline) return;
  cv.wait_for(lock, std::chrono::milliseconds(1));
}

bool FakeClock::Sleep(Duration d, const Cancellation* cancel) {
  if (cancel != nullptr && cancel->cancelled()) return true;
  MutexLock lock(mu_);
  sleeps_.push_back(d);
  mono_ += d;
  wall_ += std::chrono::duration_cast<WallTime::duration>(d);
  return false;
}

void FakeClock::Advance(Duration d) {
  MutexLock lock(mu_);
  mono_ += d;
  wall_ += std::chrono::duration_cast<WallTime::duration>(d);
}

std::vector<Duration> FakeClock::sleeps() const {
  MutexLock lock(mu_);
  return sleeps_;
}

Duration FakeClock::total_slept() const {
  MutexLock lock(mu_);
  Duration total{0};
  for (Duration d : sleeps_) total += d;
  return total;
}

}  // namespace hami
