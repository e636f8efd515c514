// SchedulingQueue: the simulated kube-scheduler's queue of pending pods, keyed by "ns/name".
//
// It models kube-scheduler's three sub-queues plus the in-flight and assumed states:
//
//   active         ready to be scheduled, FIFO by the time the pod (re)entered it
//   backoff        failed recently; returns to active when its backoff expires
//                  (initial * 2^(attempts-1), capped at max)
//   unschedulable  no node fitted; waits for a cluster event (MoveAllToActiveOrBackoff: node
//                  added/changed, a bound pod went away) or for unschedulable_timeout, then goes
//                  to backoff if its backoff has not expired yet, else to active
//   in flight      popped by a worker; a pod is in flight in at most one worker at a time and is
//                  never queued twice
//   assumed        bound by us; updates are ignored until the informer reports the binding
//                  (Delete) or assumed_ttl passes
//
// A cycle ends with Done(outcome): kScheduled -> assumed; kError -> backoff; kUnschedulable ->
// unschedulable, or backoff when a cluster event or an update of the pod arrived while it was in
// flight (the event might have made it schedulable, so it must not wait for the next one);
// kDropped -> forgotten. A Delete() while in flight is remembered and wins over the outcome; if
// a pod of the same name is added after that Delete, it enters active as a new pod once the
// cycle of the old one ends.
//
// Time comes from a hami::Clock. Pop() blocks on real time but wakes at least every
// max_wait_slice so that a FakeClock advanced by a test is noticed; TryPop() never blocks.
//
// Thread safety: all methods may be called from any thread.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <utility>

#include "common/clock.h"
#include "common/thread_annotations.h"

namespace hami::sim {

struct SchedulingQueueOptions {
  std::chrono::milliseconds initial_backoff{1000};
  std::chrono::milliseconds max_backoff{10000};
  std::chrono::milliseconds unschedulable_timeout{std::chrono::minutes(5)};
  std::chrono::milliseconds assumed_ttl{std::chrono::seconds(30)};
  std::chrono::milliseconds max_wait_slice{1000};
};

// What a worker gets from Pop().
struct QueuedPod {
  std::string key;
  int attempt = 0;              // 1 for the first cycle of this pod
  hami::MonoTime first_seen{};  // when the pod first entered the queue
};

enum class CycleOutcome { kScheduled, kUnschedulable, kError, kDropped };

struct QueueSizes {
  size_t active = 0;
  size_t backoff = 0;
  size_t unschedulable = 0;
  size_t in_flight = 0;
  size_t assumed = 0;
};

class SchedulingQueue {
 public:
  SchedulingQueue(hami::Clock& clock, SchedulingQueueOptions options);
  SchedulingQueue(const SchedulingQueue&) = delete;
  SchedulingQueue& operator=(const SchedulingQueue&) = delete;

  // A pending pod was added or updated. Unknown pods enter active. `changed` says whether the
  // update changed anything besides status and bookkeeping metadata: such an update moves an
  // unschedulable pod on (to backoff or active) and marks an in-flight pod as updated. Pods in
  // active or backoff stay where they are; assumed pods are ignored until assumed_ttl passes.
  void AddOrUpdate(const std::string& key, bool changed);
  // The pod is gone or no longer ours (bound, deleted, finished, other scheduler).
  void Delete(const std::string& key);
  // A cluster event that may make unschedulable pods fit.
  void MoveAllToActiveOrBackoff();

  // Blocks until a pod is ready (it is then in flight), `cancel` fires or Close() was called.
  std::optional<QueuedPod> Pop(const hami::Cancellation* cancel);
  std::optional<QueuedPod> TryPop();
  void Done(const std::string& key, CycleOutcome outcome);
  // Wakes and ends every Pop(); later Pops return nothing.
  void Close();
  // While paused (e.g. not the leader) Pop() hands nothing out; the queue keeps tracking pods.
  void SetPaused(bool paused);

  QueueSizes Sizes() const;
  // Cycles started for this pod so far (0 if unknown). Kept for assumed pods.
  int Attempts(const std::string& key) const;
  // The backoff after `attempts` failed cycles.
  std::chrono::milliseconds BackoffFor(int attempts) const;

 private:
  // kNone: just created, linked nowhere yet.
  enum class State { kNone, kActive, kBackoff, kUnschedulable, kInFlight, kAssumed };
  struct Entry {
    State state = State::kNone;
    int attempts = 0;
    hami::MonoTime first_seen{};
    hami::MonoTime last_failure{};
    hami::MonoTime backoff_until{};
    hami::MonoTime unschedulable_since{};
    hami::MonoTime assumed_at{};
    uint64_t active_seq = 0;    // position in active_ while kActive
    uint64_t popped_moves = 0;  // moves_ when popped
    bool updated_in_flight = false;
    bool deleted_in_flight = false;
    bool recreated_in_flight = false;  // deleted, then a pod of the same name was added
  };
  using Map = std::map<std::string, Entry>;

  // The helpers below run with mu_ held.
  void ToActive(Map::iterator it) REQUIRES(mu_);
  void ToBackoff(Map::iterator it) REQUIRES(mu_);
  // Moves an unschedulable or failed pod on: backoff while its backoff lasts, else active.
  void Requeue(Map::iterator it, hami::MonoTime now) REQUIRES(mu_);
  void Unlink(Map::iterator it) REQUIRES(mu_);
  // Moves expired backoffs and timed-out unschedulable pods to active.
  void Flush(hami::MonoTime now) REQUIRES(mu_);
  std::optional<QueuedPod> PopLocked(hami::MonoTime now) REQUIRES(mu_);
  // The earliest time Flush() could move something (MonoTime::max() when nothing waits).
  hami::MonoTime NextDeadline() const REQUIRES(mu_);

  hami::Clock& clock_;
  const SchedulingQueueOptions options_;

  mutable Mutex mu_;
  std::condition_variable cv_;
  Map pods_ GUARDED_BY(mu_);
  std::map<uint64_t, std::string> active_ GUARDED_BY(mu_);  // seq -> key
  std::set<std::pair<hami::MonoTime, std::string>> backoff_ GUARDED_BY(mu_);  // (until, key)
  std::set<std::pair<hami::MonoTime, std::string>> unschedulable_ GUARDED_BY(mu_);  // (since, key)
  uint64_t next_seq_ GUARDED_BY(mu_) = 0;
  uint64_t moves_ GUARDED_BY(mu_) = 0;
  bool closed_ GUARDED_BY(mu_) = false;
  bool paused_ GUARDED_BY(mu_) = false;
};

}  // namespace hami::sim
