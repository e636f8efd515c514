#include "k8s/work_queue.h"

#include <algorithm>

namespace hami::k8s {

WorkQueue::WorkQueue(const Clock& clock, WorkQueueOptions options)
    : clock_(clock), options_(options) {}

void WorkQueue::AddLocked(const std::string& key) {
  if (shutting_down_ || !dirty_.insert(key).second) return;
  // A key a worker holds goes back to the queue at its Done.
  if (processing_.count(key) == 0) queue_.push_back(key);
}

void WorkQueue::Add(const std::string& key) {
  {
    MutexLock lock(mu_);
    AddLocked(key);
  }
  cv_.notify_one();
}

bool WorkQueue::AddAfter(const std::string& key, Duration delay) {
  if (delay <= Duration::zero()) {
    bool fresh;
    {
      MutexLock lock(mu_);
      fresh = !shutting_down_ && dirty_.count(key) == 0 && due_.count(key) == 0;
      AddLocked(key);
    }
    cv_.notify_one();
    return fresh;
  }
  bool fresh = false, earliest = false;
  {
    MutexLock lock(mu_);
    if (shutting_down_) return false;
    const MonoTime when = clock_.Now() + delay;
    auto it = due_.find(key);
    if (it != due_.end()) {
      if (it->second <= when) return false;  // an earlier delay already stands
      auto [lo, hi] = by_due_.equal_range(it->second);
      for (auto b = lo; b != hi; ++b) {
        if (b->second == key) {
          by_due_.erase(b);
          break;
        }
      }
      it->second = when;
    } else {
      fresh = dirty_.count(key) == 0;
      due_.emplace(key, when);
    }
    earliest = by_due_.empty() || when < by_due_.begin()->first;
    by_due_.emplace(when, key);
  }
  // Only a new earliest time changes when a waiting Get must wake (one wake-up per batch of
  // keys due together, not one per key).
  if (earliest) cv_.notify_all();
  return fresh;
}

void WorkQueue::AddRateLimited(const std::string& key) {
  Duration delay;
  {
    MutexLock lock(mu_);
    const int n = failures_[key]++;
    delay = options_.base_delay;
    for (int i = 0; i < n && delay < options_.max_delay; ++i) delay *= 2;
    delay = std::min(delay, options_.max_delay);
  }
  AddAfter(key, delay);
}

void WorkQueue::Forget(const std::string& key) {
  MutexLock lock(mu_);
  failures_.erase(key);
}

int WorkQueue::NumRequeues(const std::string& key) const {
  MutexLock lock(mu_);
  auto it = failures_.find(key);
  return it == failures_.end() ? 0 : it->second;
}

void WorkQueue::PromoteDueLocked() {
  const MonoTime now = clock_.Now();
  while (!by_due_.empty() && by_due_.begin()->first <= now) {
    std::string key = std::move(by_due_.begin()->second);
    by_due_.erase(by_due_.begin());
    due_.erase(key);
    AddLocked(key);
  }
}

bool WorkQueue::PopLocked(std::string* key) {
  PromoteDueLocked();
  if (queue_.empty()) return false;
  *key = std::move(queue_.front());
  queue_.pop_front();
  dirty_.erase(*key);
  processing_.insert(*key);
  return true;
}

bool WorkQueue::Get(std::string* key) {
  UniqueLock lock(mu_);
  for (;;) {
    if (shutting_down_) return false;
    if (PopLocked(key)) return true;
    if (by_due_.empty()) {
      cv_.wait(lock.native());
    } else {
      clock_.WaitUntil(cv_, lock.native(), by_due_.begin()->first);
    }
  }
}

bool WorkQueue::TryGet(std::string* key) {
  MutexLock lock(mu_);
  if (shutting_down_) return false;
  return PopLocked(key);
}

void WorkQueue::Done(const std::string& key) {
  bool again = false;
  {
    MutexLock lock(mu_);
    processing_.erase(key);
    if (dirty_.count(key) > 0 && !shutting_down_) {
      queue_.push_back(key);
      again = true;
    }
  }
  if (again) cv_.notify_one();
}

void WorkQueue::ShutDown() {
  {
    MutexLock lock(mu_);
    shutting_down_ = true;
    due_.clear();
    by_due_.clear();
  }
  cv_.notify_all();
}

size_t WorkQueue::Len() const {
  MutexLock lock(mu_);
  return queue_.size();
}

size_t WorkQueue::Delayed() const {
  MutexLock lock(mu_);
  return due_.size();
}

}  // namespace hami::k8s
