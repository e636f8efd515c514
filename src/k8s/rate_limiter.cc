#include "k8s/rate_limiter.h"

#include <algorithm>

namespace hami::k8s {

RateLimiter::RateLimiter(double qps, int burst, Clock& clock)
    : qps_(qps),
      burst_(std::max(1, burst)),
      clock_(clock),
      tokens_(std::max(1, burst)),
      last_(clock.Now()) {}

Duration RateLimiter::Reserve() {
  if (qps_ <= 0) return Duration(0);
  MutexLock lock(mu_);
  MonoTime now = clock_.Now();
  if (now > last_) {
    double elapsed = std::chrono::duration<double>(now - last_).count();
    tokens_ = std::min(burst_, tokens_ + elapsed * qps_);
    last_ = now;
  }
  tokens_ -= 1;
  if (tokens_ >= 0) return Duration(0);
  return std::chrono::duration_cast<Duration>(std::chrono::duration<double>(-tokens_ / qps_));
}

bool RateLimiter::Accept(const Cancellation* cancel) {
  Duration wait = Reserve();
  if (wait.count() <= 0) return cancel != nullptr && cancel->cancelled();
  return clock_.Sleep(wait, cancel);
}

}  // namespace hami::k8s
