// LeaseFollower: decides whether this hami-scheduler instance leads, by following (never writing)
// the Lease its kube-scheduler holds. Like upstream, an instance leads while the Lease's holder
// identity starts with its own identity (kube-scheduler's identity is "<host>_<uuid>") and the
// holder keeps renewing it. With leader election off the instance leads from the start.
//
//   LeaseFollower lease(client, clock, options, [&](bool leader) { ... });
//   lease.Start();          // one read now, then one every `poll`, on its own queue and thread
//   lease.IsLeader();
//   lease.Stop();
//
// On every change `on_change(leader)` runs on the follower's thread, after IsLeader() already
// answers the new state and before the pod's role label (hami.io/scheduler-role) is written.
//
// Thread safety: IsLeader from any thread; Start/Stop from the owner's thread.
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "common/clock.h"
#include "k8s/leader_election.h"
#include "k8s/rest_client.h"
#include "k8s/work_queue.h"

namespace hami::extender {

struct LeaseFollowerOptions {
  bool enabled = false;  // --leader-elect; off: always the leader
  std::string lease_namespace = "kube-system";
  std::string lease_name = "hami-scheduler";
  std::string identity;  // leads when the holder identity starts with this
  std::chrono::milliseconds poll{2000};
  // Own pod (POD_NAMESPACE/POD_NAME) to label with its role; empty: no label.
  std::string pod_namespace, pod_name;
};

class LeaseFollower {
 public:
  // `client` and `clock` must outlive the follower.
  LeaseFollower(k8s::RestClient& client, const Clock& clock, LeaseFollowerOptions options,
                std::function<void(bool leader)> on_change);
  ~LeaseFollower();
  LeaseFollower(const LeaseFollower&) = delete;
  LeaseFollower& operator=(const LeaseFollower&) = delete;

  void Start();
  void Stop();
  bool IsLeader() const { return leader_.load(); }
  // One read of the Lease and what follows from it (what each poll runs).
  void FollowOnce();

 private:
  void Run();
  void SetLeader(bool leader);

  k8s::RestClient& client_;
  const LeaseFollowerOptions options_;
  const std::function<void(bool)> on_change_;
  std::atomic<bool> leader_;
  k8s::WorkQueue queue_;                       // one key, "lease": the next read
  std::unique_ptr<k8s::LeaderElector> lease_;  // read only
  std::thread worker_;
};

}  // namespace hami::extender
