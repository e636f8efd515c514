// WorkQueue: the controller work queue of client-go's informer/workqueue split. Event handlers
// add keys; a worker takes one key at a time, does the work for it, and says Done.
//
//   - A key is queued at most once: adding a key already waiting is a no-op, and a key added
//     while a worker holds it is handed out again after its Done (never to two workers at once).
//   - AddAfter(key, d): the key is added once `d` has passed (on the injected Clock); of several
//     delays for one key the earliest wins.
//   - AddRateLimited(key): AddAfter with a per-key exponential backoff (base, base*2, ... up to
//     max) until Forget(key); NumRequeues(key) says how many there were.
//
//   WorkQueue q(clock, {});
//   q.Add("node/a");
//   std::string key;
//   while (q.Get(&key)) { Status s = Handle(key); s.ok() ? q.Forget(key) : q.AddRateLimited(key);
//                         q.Done(key); }
//
// Time: delays are judged on the Clock; a blocked Get waits in real time until the earliest
// delay's due time as the Clock reads it. Tests with a FakeClock use TryGet after Advance.
//
// Thread safety: every member may be called from any thread.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <map>
#include <set>
#include <string>

#include "common/clock.h"
#include "common/thread_annotations.h"

namespace hami::k8s {

struct WorkQueueOptions {
  Duration base_delay = std::chrono::milliseconds(100);  // first AddRateLimited delay
  Duration max_delay = std::chrono::seconds(30);         // backoff cap
};

class WorkQueue {
 public:
  // `clock` must outlive the queue.
  explicit WorkQueue(const Clock& clock, WorkQueueOptions options = {});
  WorkQueue(const WorkQueue&) = delete;
  WorkQueue& operator=(const WorkQueue&) = delete;

  void Add(const std::string& key);
  // True when the key was neither waiting nor delayed before (a new entry, not a merge).
  bool AddAfter(const std::string& key, Duration delay);
  void AddRateLimited(const std::string& key);
  void Forget(const std::string& key);
  int NumRequeues(const std::string& key) const;

  // Blocks until a key is ready (then the caller holds it until Done) or the queue is shut
  // down (false).
  bool Get(std::string* key);
  // Get without blocking: false when no key is ready now.
  bool TryGet(std::string* key);
  void Done(const std::string& key);

  // The worker loop: hands each ready key to `process(key)`, then marks it Done, until the
  // queue shuts down.
  template <typename Process>
  void Serve(Process&& process) {
    std::string key;
    while (Get(&key)) {
      process(key);
      Done(key);
    }
  }

  // Get returns false from now on; delayed keys are dropped.
  void ShutDown();
  // Keys ready to hand out, and keys waiting for their delay.
  size_t Len() const;
  size_t Delayed() const;

 private:
  void AddLocked(const std::string& key) REQUIRES(mu_);
  void PromoteDueLocked() REQUIRES(mu_);
  bool PopLocked(std::string* key) REQUIRES(mu_);

  const Clock& clock_;
  const WorkQueueOptions options_;
  mutable Mutex mu_;
  std::condition_variable cv_;
  std::deque<std::string> queue_ GUARDED_BY(mu_);        // ready, in order
  std::set<std::string> dirty_ GUARDED_BY(mu_);          // queued, or queued again after Done
  std::set<std::string> processing_ GUARDED_BY(mu_);     // held by a worker
  std::map<std::string, MonoTime> due_ GUARDED_BY(mu_);  // delayed key -> when
  std::multimap<MonoTime, std::string> by_due_ GUARDED_BY(mu_);  // the same, by time
  std::map<std::string, int> failures_ GUARDED_BY(mu_);          // AddRateLimited count per key
  bool shutting_down_ GUARDED_BY(mu_) = false;
};

}  // namespace hami::k8s
