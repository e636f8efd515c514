#include "extender/event_recorder.h"

#include <chrono>
#include <string>
#include <vector>

#include "common/log.h"
#include "common/thread_name.h"
#include "k8s/object.h"

namespace hami::extender {

EventRecorder::EventRecorder(k8s::RestClient& client, size_t max_queued)
    : client_(client), max_queued_(max_queued) {}

EventRecorder::~EventRecorder() { Stop(); }

void EventRecorder::Start() {
  MutexLock lock(mu_);
  if (thread_.joinable()) return;
  stopping_ = false;
  thread_ = std::thread([this] {
    SetCurrentThreadName("events");
    Run();
  });
}

void EventRecorder::Stop() {
  {
    MutexLock lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

namespace {
// Events go out in batches of up to kBatch, pipelined on one connection (one round trip and one
// wake-up per batch instead of per event). After the first event of a batch the recorder waits up
// to kGather for more: events are advisory, and 10 ms is invisible to a reader of
// `kubectl describe pod`.
constexpr size_t kBatch = 64;
constexpr auto kGather = std::chrono::milliseconds(10);
}  // namespace

void EventRecorder::Record(k8s::EventSpec event) {
  bool wake;
  {
    MutexLock lock(mu_);
    if (queue_.size() >= max_queued_) {
      ++dropped_;
      return;
    }
    queue_.push_back(std::move(event));
    // The recorder waits for a first event, then for a full batch: nothing else needs a wake-up.
    wake = queue_.size() == 1 || queue_.size() == kBatch;
  }
  if (wake) cv_.notify_one();
}

void EventRecorder::Run() {
  std::vector<k8s::EventSpec> batch;
  for (;;) {
    batch.clear();
    {
      UniqueLock lock(mu_);
      cv_.wait(lock.native(), [&]() REQUIRES(mu_) { return stopping_ || !queue_.empty(); });
      if (queue_.empty()) return;  // stopping and drained
      cv_.wait_for(lock.native(), kGather,
                   [&]() REQUIRES(mu_) { return stopping_ || queue_.size() >= kBatch; });
      while (!queue_.empty() && batch.size() < kBatch) {
        batch.push_back(std::move(queue_.front()));
        queue_.pop_front();
      }
    }
    std::vector<Result<k8s::WriteAck>> results = k8s::CreateEvents(client_, batch);
    MutexLock lock(mu_);
    for (size_t i = 0; i < batch.size(); ++i) {
      if (i < results.size() && results[i].ok()) {
        ++posted_;
        continue;
      }
      ++failed_;
      if (failed_ == 1 || failed_ % 1000 == 0) {
        HAMI_LOG(Warning) << "event " << batch[i].reason << " not posted (" << failed_
                          << " failures so far): "
                          << (i < results.size() ? results[i].status().ToString()
                                                 : std::string("no result"));
      }
    }
  }
}

uint64_t EventRecorder::posted() const {
  MutexLock lock(mu_);
  return posted_;
}
uint64_t EventRecorder::dropped() const {
  MutexLock lock(mu_);
  return dropped_;
}
uint64_t EventRecorder::failed() const {
  MutexLock lock(mu_);
  return failed_;
}

}  // namespace hami::extender
