// FakeDevicePlugin: plays every node's device plugin after a bind, for tests, benchmarks and the
// demo: acknowledges the allocation (bind-phase success, pod Running) and releases the node lock,
// as upstream's plugin does at the end of Allocate. It does not run containers; it plays their
// kubelet only in confirming a terminating pod's deletion (grace 0), since none run.
//
// Thread safety: owns an informer and its worker threads; construct and destroy on one thread.
#pragma once

#include <algorithm>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "common/clock.h"
#include "common/thread_annotations.h"
#include "common/thread_name.h"
#include "device/node_locker.h"
#include "k8s/informer.h"
#include "k8s/object.h"
#include "k8s/rest_client.h"
#include "k8s/typed.h"

namespace hami::sim {

class FakeDevicePlugin {
 public:
  // `workers` allocations are acknowledged in parallel (a cluster has one plugin per node).
  explicit FakeDevicePlugin(k8s::RestClient& client, int workers = 1)
      : client_(client),
        locker_(client, clock_),
        // Bound pods only, as a node's plugin and kubelet watch theirs (spec.nodeName=<node>):
        // one informer plays all nodes.
        pods_(client, k8s::kPods, k8s::InformerOptions{.field_selector = "spec.nodeName!="}) {
    pods_.AddEventHandler(
        {.on_add = [this](const k8s::ObjectPtr& p) { Offer(p); },
         .on_update = [this](const k8s::ObjectPtr&, const k8s::ObjectPtr& p) { Offer(p); }});
    pods_.Start();
    for (int i = 0; i < std::max(1, workers); ++i) {
      workers_.emplace_back([this] {
        SetCurrentThreadName("fake-plugin");
        Run();
      });
    }
  }
  ~FakeDevicePlugin() {
    {
      MutexLock l(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    for (std::thread& w : workers_) w.join();
    pods_.Stop();
  }

  // Allocations acknowledged so far.
  uint64_t acknowledged() const {
    MutexLock l(mu_);
    return acknowledged_;
  }

 private:
  void Offer(const k8s::ObjectPtr& p) {
    if (k8s::GetString(*p, "/spec/nodeName").empty()) return;
    if (!k8s::GetString(*p, "/metadata/deletionTimestamp").empty()) {
      // Terminating: as its node's kubelet would once the (here nonexistent) containers are gone,
      // confirm with a deletion of no grace period.
      {
        MutexLock l(mu_);
        if (!finalized_.insert(k8s::Uid(*p)).second) return;
        queue_.push_back(p);
      }
      cv_.notify_one();
      return;
    }
    if (k8s::GetString(*p, "/metadata/annotations/hami.io~1bind-phase") != "allocating") return;
    {
      MutexLock l(mu_);
      // Once per pod: later events of the same allocation (before our success lands) are echoes.
      if (!offered_.insert(k8s::Uid(*p)).second) return;
      queue_.push_back(p);
    }
    cv_.notify_one();  // one pod, one worker: waking all of them only sends the rest back to sleep
  }
  void Run() {
    for (;;) {
      k8s::ObjectPtr p;
      {
        UniqueLock l(mu_);
        cv_.wait(l.native(), [&]() REQUIRES(mu_) { return stop_ || !queue_.empty(); });
        if (stop_) return;
        p = queue_.front();
        queue_.pop_front();
      }
      std::string ns = k8s::Namespace(*p), name = k8s::Name(*p);
      std::string node = k8s::GetString(*p, "/spec/nodeName");
      if (!k8s::GetString(*p, "/metadata/deletionTimestamp").empty()) {
        k8s::DeleteOptions gone;
        gone.grace_period_seconds = 0;
        gone.precondition_uid = k8s::Uid(*p);
        (void)client_.Delete(k8s::kPods, ns, name, gone);
        continue;
      }
      (void)k8s::PatchPodAnnotations(client_, ns, name, {{"hami.io/bind-phase", "success"}});
      nlohmann::json status;
      status["status"]["phase"] = "Running";
      (void)client_.PatchAck(k8s::kPods, ns, name, k8s::PatchType::kMerge, status.dump(), "status");
      (void)locker_.Release(node, ns, name);
      MutexLock l(mu_);
      ++acknowledged_;
    }
  }

  k8s::RestClient& client_;
  hami::RealClock clock_;
  device::NodeLocker locker_;
  k8s::Informer pods_;
  mutable Mutex mu_;
  std::condition_variable cv_;
  std::deque<k8s::ObjectPtr> queue_ GUARDED_BY(mu_);
  bool stop_ GUARDED_BY(mu_) = false;
  uint64_t acknowledged_ GUARDED_BY(mu_) = 0;
  std::set<std::string> offered_ GUARDED_BY(mu_);    // pod UIDs queued once
  std::set<std::string> finalized_ GUARDED_BY(mu_);  // terminating pods' UIDs queued once
  std::vector<std::thread> workers_;
};

}  // namespace hami::sim
