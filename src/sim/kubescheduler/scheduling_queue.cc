#include "sim/kubescheduler/scheduling_queue.h"

#include <algorithm>
#include <vector>

namespace hami::sim {

SchedulingQueue::SchedulingQueue(hami::Clock& clock, SchedulingQueueOptions options)
    : clock_(clock), options_(options) {}

std::chrono::milliseconds SchedulingQueue::BackoffFor(int attempts) const {
  std::chrono::milliseconds d = options_.initial_backoff;
  for (int i = 1; i < attempts && d < options_.max_backoff; ++i) d *= 2;
  return std::min(d, options_.max_backoff);
}

void SchedulingQueue::Unlink(Map::iterator it) {
  Entry& e = it->second;
  switch (e.state) {
    case State::kActive:
      active_.erase(e.active_seq);
      break;
    case State::kBackoff:
      backoff_.erase({e.backoff_until, it->first});
      break;
    case State::kUnschedulable:
      unschedulable_.erase({e.unschedulable_since, it->first});
      break;
    case State::kNone:
    case State::kInFlight:
    case State::kAssumed:
      break;
  }
}

void SchedulingQueue::ToActive(Map::iterator it) {
  Unlink(it);
  it->second.state = State::kActive;
  it->second.active_seq = next_seq_++;
  active_.emplace(it->second.active_seq, it->first);
  cv_.notify_one();
}

void SchedulingQueue::ToBackoff(Map::iterator it) {
  Unlink(it);
  Entry& e = it->second;
  e.state = State::kBackoff;
  e.backoff_until = e.last_failure + BackoffFor(e.attempts);
  backoff_.emplace(e.backoff_until, it->first);
  // A sleeping Pop() must recompute its deadline.
  cv_.notify_one();
}

void SchedulingQueue::Requeue(Map::iterator it, hami::MonoTime now) {
  Entry& e = it->second;
  if (e.attempts > 0 && now < e.last_failure + BackoffFor(e.attempts)) {
    ToBackoff(it);
  } else {
    ToActive(it);
  }
}

void SchedulingQueue::AddOrUpdate(const std::string& key, bool changed) {
  MutexLock lock(mu_);
  if (closed_) return;
  hami::MonoTime now = clock_.Now();
  auto it = pods_.find(key);
  if (it == pods_.end()) {
    it = pods_.emplace(key, Entry{}).first;
    it->second.first_seen = now;
    ToActive(it);
    return;
  }
  Entry& e = it->second;
  switch (e.state) {
    case State::kNone:
    case State::kActive:
    case State::kBackoff:
      break;
    case State::kUnschedulable:
      if (changed) Requeue(it, now);
      break;
    case State::kInFlight:
      if (e.deleted_in_flight) {
        e.deleted_in_flight = false;
        e.recreated_in_flight = true;
      } else if (changed) {
        e.updated_in_flight = true;
      }
      break;
    case State::kAssumed:
      // Our binding has not shown up yet; give it assumed_ttl before scheduling the pod again.
      if (now >= e.assumed_at + options_.assumed_ttl) ToActive(it);
      break;
  }
}

void SchedulingQueue::Delete(const std::string& key) {
  MutexLock lock(mu_);
  auto it = pods_.find(key);
  if (it == pods_.end()) return;
  if (it->second.state == State::kInFlight) {
    it->second.deleted_in_flight = true;
    return;
  }
  Unlink(it);
  pods_.erase(it);
}

void SchedulingQueue::MoveAllToActiveOrBackoff() {
  MutexLock lock(mu_);
  ++moves_;
  hami::MonoTime now = clock_.Now();
  std::vector<std::string> keys;
  keys.reserve(unschedulable_.size());
  for (const auto& [since, key] : unschedulable_) keys.push_back(key);
  for (const std::string& key : keys) Requeue(pods_.find(key), now);
}

void SchedulingQueue::Flush(hami::MonoTime now) {
  while (!backoff_.empty() && backoff_.begin()->first <= now) {
    ToActive(pods_.find(backoff_.begin()->second));
  }
  while (!unschedulable_.empty() &&
         unschedulable_.begin()->first + options_.unschedulable_timeout <= now) {
    Requeue(pods_.find(unschedulable_.begin()->second), now);
  }
}

hami::MonoTime SchedulingQueue::NextDeadline() const {
  hami::MonoTime next = hami::MonoTime::max();
  if (!backoff_.empty()) next = std::min(next, backoff_.begin()->first);
  if (!unschedulable_.empty()) {
    next = std::min(next, unschedulable_.begin()->first + options_.unschedulable_timeout);
  }
  return next;
}

std::optional<QueuedPod> SchedulingQueue::PopLocked(hami::MonoTime now) {
  Flush(now);
  if (paused_ || active_.empty()) return std::nullopt;
  auto it = pods_.find(active_.begin()->second);
  active_.erase(active_.begin());
  Entry& e = it->second;
  e.state = State::kInFlight;
  e.attempts++;
  e.popped_moves = moves_;
  e.updated_in_flight = false;
  e.deleted_in_flight = false;
  e.recreated_in_flight = false;
  return QueuedPod{it->first, e.attempts, e.first_seen};
}

std::optional<QueuedPod> SchedulingQueue::TryPop() {
  MutexLock lock(mu_);
  if (closed_) return std::nullopt;
  return PopLocked(clock_.Now());
}

std::optional<QueuedPod> SchedulingQueue::Pop(const hami::Cancellation* cancel) {
  UniqueLock lock(mu_);
  while (true) {
    if (closed_ || (cancel != nullptr && cancel->cancelled())) return std::nullopt;
    hami::MonoTime now = clock_.Now();
    if (std::optional<QueuedPod> p = PopLocked(now)) return p;
    // Sleep until the next backoff/unschedulable deadline, in slices so that a cancellation
    // (which cannot notify this condition variable) and a fake clock are both noticed.
    auto wait = std::chrono::duration_cast<std::chrono::nanoseconds>(options_.max_wait_slice);
    hami::MonoTime next = NextDeadline();
    if (next != hami::MonoTime::max()) {
      wait = std::clamp(std::chrono::duration_cast<std::chrono::nanoseconds>(next - now),
                        std::chrono::nanoseconds(0), wait);
    }
    cv_.wait_for(lock.native(), wait);
  }
}

void SchedulingQueue::Done(const std::string& key, CycleOutcome outcome) {
  MutexLock lock(mu_);
  auto it = pods_.find(key);
  if (it == pods_.end() || it->second.state != State::kInFlight) return;
  Entry& e = it->second;
  hami::MonoTime now = clock_.Now();
  if (e.recreated_in_flight && !closed_) {
    e = Entry{};
    e.first_seen = now;
    ToActive(it);
    return;
  }
  if (e.deleted_in_flight || outcome == CycleOutcome::kDropped || closed_) {
    pods_.erase(it);
    return;
  }
  switch (outcome) {
    case CycleOutcome::kScheduled:
      e.state = State::kAssumed;
      e.assumed_at = now;
      break;
    case CycleOutcome::kError:
      e.last_failure = now;
      ToBackoff(it);
      break;
    case CycleOutcome::kUnschedulable:
      e.last_failure = now;
      if (e.updated_in_flight || moves_ != e.popped_moves) {
        ToBackoff(it);
      } else {
        e.state = State::kUnschedulable;
        e.unschedulable_since = now;
        unschedulable_.emplace(now, key);
      }
      break;
    case CycleOutcome::kDropped:
      break;
  }
}

void SchedulingQueue::Close() {
  MutexLock lock(mu_);
  closed_ = true;
  cv_.notify_all();
}

void SchedulingQueue::SetPaused(bool paused) {
  MutexLock lock(mu_);
  paused_ = paused;
  cv_.notify_all();
}

QueueSizes SchedulingQueue::Sizes() const {
  MutexLock lock(mu_);
  QueueSizes s;
  s.active = active_.size();
  s.backoff = backoff_.size();
  s.unschedulable = unschedulable_.size();
  for (const auto& [key, e] : pods_) {
    if (e.state == State::kInFlight) ++s.in_flight;
    if (e.state == State::kAssumed) ++s.assumed;
  }
  return s;
}

int SchedulingQueue::Attempts(const std::string& key) const {
  MutexLock lock(mu_);
  auto it = pods_.find(key);
  return it == pods_.end() ? 0 : it->second.attempts;
}

}  // namespace hami::sim
