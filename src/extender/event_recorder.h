// EventRecorder: posts Kubernetes Events (FilteringFailed, BindingSucceed, ...) from a background
// thread, so a slow or failing API server never delays a filter or bind answer.
//
// The queue is bounded: when it is full new events are dropped and counted (events are advisory;
// the decision itself is always in the scheduler's log). Stop() drains what is queued, then
// joins.
//
// Thread safety: Record() from any thread; Start/Stop from the owner.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <mutex>
#include <thread>

#include "common/thread_annotations.h"
#include "k8s/rest_client.h"
#include "k8s/typed.h"

namespace hami::extender {

class EventRecorder {
 public:
  EventRecorder(k8s::RestClient& client, size_t max_queued = 10000);
  ~EventRecorder();
  EventRecorder(const EventRecorder&) = delete;
  EventRecorder& operator=(const EventRecorder&) = delete;

  void Start();
  void Stop();
  void Record(k8s::EventSpec event);

  uint64_t posted() const;
  uint64_t dropped() const;
  uint64_t failed() const;

 private:
  void Run();

  k8s::RestClient& client_;
  const size_t max_queued_;
  mutable Mutex mu_;
  std::condition_variable cv_;
  std::deque<k8s::EventSpec> queue_ GUARDED_BY(mu_);
  bool stopping_ GUARDED_BY(mu_) = false;
  uint64_t posted_ GUARDED_BY(mu_) = 0;
  uint64_t dropped_ GUARDED_BY(mu_) = 0;
  uint64_t failed_ GUARDED_BY(mu_) = 0;
  std::thread thread_;
};

}  // namespace hami::extender
