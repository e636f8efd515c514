#include "scheduler/event_recorder.h"

#include "common/log.h"
#include "common/thread_name.h"
#include "k8s/object.h"

namespace hami::scheduler {

EventRecorder::EventRecorder(k8s::RestClient& client, size_t max_queued)
    : client_(client), max_queued_(max_queued) {}

EventRecorder::~EventRecorder() { Stop(); }

void EventRecorder::Start() {
  std::lock_guard<std::mutex> lock(mu_);
  if (thread_.joinable()) return;
  stopping_ = false;
  thread_ = std::thread([this] {
    SetCurrentThreadName("events");
    Run();
  });
}

void EventRecorder::Stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void EventRecorder::Record(k8s::EventSpec event) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (queue_.size() >= max_queued_) {
      ++dropped_;
      return;
    }
    queue_.push_back(std::move(event));
  }
  cv_.notify_one();
}

void EventRecorder::Run() {
  for (;;) {
    k8s::EventSpec ev;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
      if (queue_.empty()) return;  // stopping and drained
      ev = std::move(queue_.front());
      queue_.pop_front();
    }
    Result<k8s::WriteAck> r = k8s::CreateEvent(client_, ev);
    std::lock_guard<std::mutex> lock(mu_);
    if (r.ok()) {
      ++posted_;
    } else {
      ++failed_;
      if (failed_ == 1 || failed_ % 1000 == 0) {
        HAMI_LOG(Warning) << "event " << ev.reason << " not posted (" << failed_
                          << " failures so far): " << r.status().ToString();
      }
    }
  }
}

uint64_t EventRecorder::posted() const {
  std::lock_guard<std::mutex> lock(mu_);
  return posted_;
}
uint64_t EventRecorder::dropped() const {
  std::lock_guard<std::mutex> lock(mu_);
  return dropped_;
}
uint64_t EventRecorder::failed() const {
  std::lock_guard<std::mutex> lock(mu_);
  return failed_;
}

}  // namespace hami::scheduler
