// RateLimiter: a token bucket bounding client-side request rate (kubeconfig-style QPS and burst).
//
// The bucket starts full (`burst` tokens) and refills at `qps` tokens per second. Each request
// reserves one token; when the bucket is empty the reservation is a debt and the caller sleeps (on
// the injected Clock) until it is repaid, so concurrent callers are served in reservation order.
//
// Thread safety: Accept and Reserve may be called from any thread.
#pragma once

#include <mutex>

#include "common/clock.h"
#include "common/thread_annotations.h"

namespace hami::k8s {

class RateLimiter {
 public:
  // qps <= 0 disables limiting. burst < 1 is treated as 1.
  RateLimiter(double qps, int burst, Clock& clock);
  RateLimiter(const RateLimiter&) = delete;
  RateLimiter& operator=(const RateLimiter&) = delete;

  // Takes a token and returns how long the caller must wait before using it.
  Duration Reserve();
  // Reserve() then sleep; true when `cancel` fired during the wait.
  bool Accept(const Cancellation* cancel = nullptr);

 private:
  const double qps_;
  const double burst_;
  Clock& clock_;
  Mutex mu_;
  double tokens_ GUARDED_BY(mu_);  // negative while callers are waiting
  MonoTime last_ GUARDED_BY(mu_);
};

}  // namespace hami::k8s
