// NamespaceChanges (the main job's waits): a change counter for the pods and events of one
// namespace, fed by the API server's watches.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <string>
#include <thread>

#include "common/thread_annotations.h"
#include "k8s/informer.h"
#include "k8s/rest_client.h"

namespace hami::sim {

// Wakes whoever waits when a pod or an event in one namespace is added, changed or deleted, as the
// API server's watches report them (one k8s::Informer each, kept running). Waiters judge their
// condition through the API again on each wake. Events are followed besides pods because
// hami-scheduler records its FilteringFailed events on a thread of its own, after the pod changes
// they explain: following the pods alone could miss the last one.
//
// Thread safety: the informers' threads Bump; Generation and WaitForChange from any thread.
class NamespaceChanges {
 public:
  NamespaceChanges(k8s::RestClient& client, const std::string& ns)
      : pods_(client, k8s::kPods, {.ns = ns}), events_(client, k8s::kEvents, {.ns = ns}) {
    for (k8s::Informer* informer : {&pods_, &events_}) {
      informer->AddEventHandler(
          {.on_add = [this](const k8s::ObjectPtr&) { Bump(); },
           .on_update = [this](const k8s::ObjectPtr&, const k8s::ObjectPtr&) { Bump(); },
           .on_delete = [this](const k8s::ObjectPtr&) { Bump(); }});
      informer->Start();
    }
  }
  // Stops both informers at once: each waits for its watch's read to see the cancellation.
  ~NamespaceChanges() {
    std::thread events([this] { events_.Stop(); });
    pods_.Stop();
    events.join();
  }
  NamespaceChanges(const NamespaceChanges&) = delete;
  NamespaceChanges& operator=(const NamespaceChanges&) = delete;

  // Counts the changes seen so far. Read it before judging a condition, then WaitForChange: a
  // change the judgement's reads missed has not been counted yet, so it ends the wait.
  uint64_t Generation() {
    MutexLock l(mu_);
    return generation_;
  }
  // Until more than `seen` changes were counted, or `deadline`.
  void WaitForChange(uint64_t seen, std::chrono::steady_clock::time_point deadline) {
    UniqueLock l(mu_);
    changed_.wait_until(l.native(), deadline, [&]() REQUIRES(mu_) {
      return generation_ != seen;
    });
  }

 private:
  void Bump() {
    {
      MutexLock l(mu_);
      ++generation_;
    }
    changed_.notify_all();
  }

  Mutex mu_;
  std::condition_variable changed_;
  uint64_t generation_ GUARDED_BY(mu_) = 0;
  // Constructed last, so that their handlers find the members above in place.
  k8s::Informer pods_;
  k8s::Informer events_;
};

}  // namespace hami::sim
