// LeaderElector: lease-based leader election on a coordination.k8s.io/v1 Lease, compatible with
// client-go's LeaseLock (spec.holderIdentity, leaseDurationSeconds, acquireTime, renewTime,
// leaseTransitions).
//
// Expiry is judged on the local monotonic clock, never by comparing the other holder's timestamps
// with ours: a lease is considered expired when its (holder, renewTime) has not changed for
// lease_duration since this process first observed that pair. Writes are optimistic (PUT with the
// read resourceVersion), so two candidates can never both succeed on the same version.
//
//   LeaderElector le(client, {.ns = "kube-system", .name = "hami-scheduler", .identity = host},
//                    {.on_started_leading = ..., .on_stopped_leading = ...});
//   le.Run(stop);   // blocks: acquire, then renew until lost or stop fires (then release)
//   le.Follow();    // or only watch who holds it
//
// Thread safety: Run/TryAcquireOrRenew/Release from one thread; IsLeader/Holder from any thread.
// Callbacks run on the Run() thread.
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <mutex>
#include <string>

#include "common/clock.h"
#include "common/status.h"
#include "common/thread_annotations.h"
#include "k8s/rest_client.h"

namespace hami::k8s {

struct LeaderElectionConfig {
  std::string ns = "kube-system";
  std::string name{};
  std::string identity{};
  std::chrono::seconds lease_duration{15};
  std::chrono::seconds renew_deadline{10};
  std::chrono::seconds retry_period{2};
  bool release_on_cancel = true;
};

struct LeaderCallbacks {
  std::function<void()> on_started_leading{};
  std::function<void()> on_stopped_leading{};
  std::function<void(const std::string& identity)> on_new_leader{};  // any change of holder
};

class LeaderElector {
 public:
  LeaderElector(RestClient& client, LeaderElectionConfig config, LeaderCallbacks callbacks = {});
  LeaderElector(const LeaderElector&) = delete;
  LeaderElector& operator=(const LeaderElector&) = delete;

  // One attempt: creates the lease, renews our own, or takes over an expired one. true when we
  // hold the lease afterwards; false when another live holder has it or a concurrent writer won.
  Result<bool> TryAcquireOrRenew();
  // Gives the lease up (holderIdentity cleared) if we hold it.
  Status Release();
  // Blocks until `cancel` fires: acquires, leads while renewals succeed within renew_deadline, and
  // after losing the lease returns (callers typically exit, as kube components do).
  void Run(const Cancellation& cancel);

  // Follows the lease without ever writing it, for a process that leads while another one holds
  // the lease (HAMi's scheduler follows the lease its kube-scheduler elects on). One read: the
  // holder, and whether its (holder, renewTime) changed within the lease's leaseDurationSeconds
  // as this process observed it (the same expiry rule as the candidate's). NotFound when there is
  // no lease.
  struct Observation {
    std::string holder;
    bool fresh = false;
  };
  Result<Observation> Follow();

  bool IsLeader() const { return leader_.load(); }
  std::string Holder() const;

 private:
  void Observe(const std::string& holder, const std::string& renew_time) EXCLUDES(mu_);

  RestClient& client_;
  const LeaderElectionConfig config_;
  const LeaderCallbacks callbacks_;
  std::atomic<bool> leader_{false};

  mutable Mutex mu_;
  std::string observed_holder_ GUARDED_BY(mu_);
  std::string observed_renew_ GUARDED_BY(mu_);
  MonoTime observed_at_ GUARDED_BY(mu_) = {};
};

}  // namespace hami::k8s
