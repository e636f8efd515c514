// LockReleaser: clears the HAMi node lock a finished allocation left behind. The device plugin
// normally clears the lock when its Allocate ends; when the pod holding it has finished
// (bind-phase success/failed, pod ended or gone) and the lock is still there `grace` later, the
// releaser clears it itself: no duplicate writes in the normal case, and a plugin that died
// mid-way does not keep its node locked for the whole expiry.
//
//   LockReleaser releaser(locker, clock, grace,
//                         [&](const std::string& n) { return cache.Get(n); });
//   releaser.Start();
//   releaser.ObservePod(pod, /*gone=*/false);   // from the pod informer's handler
//   releaser.Stop();
//
// Work: one key per lock to check, "<node>/<ns>/<pod>", on the releaser's own queue and thread;
// a failed write is retried with backoff, at most five times (the lock's own expiry is the last
// resort).
//
// Thread safety: ObservePod and stats from any thread; Start/Stop from the owner's thread.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <thread>

#include "common/clock.h"
#include "common/thread_annotations.h"
#include "device/node_locker.h"
#include "k8s/object_fwd.h"
#include "k8s/work_queue.h"

namespace hami::extender {

class LockReleaser {
 public:
  // The informer cache's current copy of a node; null when unknown.
  using NodeLookup = std::function<k8s::ObjectPtr(const std::string& node)>;
  struct Stats {
    uint64_t queued = 0;    // finished holders whose node lock was queued for release
    uint64_t released = 0;  // locks this releaser cleared
  };

  // `locker` and `clock` must outlive the releaser. `stats_changed` (optional) runs after each
  // change of stats(), on the thread that made it, with no lock of the releaser held.
  LockReleaser(device::NodeLocker& locker, const Clock& clock, Duration grace, NodeLookup node,
               std::function<void()> stats_changed = nullptr);
  ~LockReleaser();
  LockReleaser(const LockReleaser&) = delete;
  LockReleaser& operator=(const LockReleaser&) = delete;

  void Start();
  void Stop();
  // A pod's new state (`gone`: deleted): when it finished allocating and still holds its node's
  // lock (as the cached node shows), a check of that lock is queued for `grace` from now.
  void ObservePod(const k8s::Object& pod, bool gone);
  // Queues a check, `grace` from now, that clears `node`'s lock if ns/pod still holds it (an
  // unsettled bind's lock once the pod is placed again).
  void QueueRelease(const std::string& node, const std::string& ns, const std::string& pod);
  // Handles one queued key if one is due now (tests on a FakeClock); false when none was.
  bool ProcessOne();
  Stats stats() const;

 private:
  void Run();
  void Process(const std::string& key);
  // Clears the lock if ns/pod still holds it; false when a write failed.
  bool Release(const std::string& node, const std::string& ns, const std::string& pod);

  device::NodeLocker& locker_;
  const Clock& clock_;
  const Duration grace_;
  const NodeLookup node_;
  const std::function<void()> stats_changed_;
  k8s::WorkQueue queue_;
  mutable Mutex stats_mu_;
  Stats stats_ GUARDED_BY(stats_mu_);
  std::thread worker_;
};

}  // namespace hami::extender
