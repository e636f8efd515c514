// KubeScheduler: the simulated kube-scheduler ("scheduling driver"). It behaves like
// kube-scheduler configured with HTTP scheduler extenders, so that our extender can be tested end
// to end against a real or simulated API server without the Kubernetes binaries:
//
//   HAMI_ASSIGN_OR_RETURN(KubeSchedulerConfig cfg, LoadKubeSchedulerConfigFile(path));
//   KubeScheduler sched(*client, cfg, {.workers = 1});
//   HAMI_RETURN_IF_ERROR(sched.Start());
//   ...
//   sched.Stop();
//
// What it does:
//   - Watches pods (all namespaces) and nodes. A pod is pending for it when spec.schedulerName is
//     the first profile's schedulerName, spec.nodeName is empty, it has no deletionTimestamp and
//     its phase is neither Succeeded nor Failed. Pending pods go through SchedulingQueue (backoff,
//     unschedulable pool, cluster events; see scheduling_queue.h).
//   - One scheduling cycle per pod at a time (options.workers of them in parallel; kube-scheduler
//     runs one). Built-in filtering is deliberately minimal: a node is a candidate unless it is
//     spec.unschedulable (and the pod does not tolerate that) or lacks a label of the pod's
//     spec.nodeSelector. Taints, affinity, resource fit and every other plugin are not simulated.
//     Like kube-scheduler, each cycle walks the nodes (sorted by name) from where the previous
//     cycle stopped and stops once NumFeasibleNodesToFind() candidates are found, so large
//     clusters offer extenders a rotating subset. Then each extender with a filterVerb
//     that is interested in the pod (managedResources) filters the candidates, in configuration
//     order; a filter error fails the cycle unless the extender is ignorable.
//   - Zero candidates: a Warning FailedScheduling event "0/<N> nodes are available: ..." and the
//     pod waits in the unschedulable pool. Errors (extender, API, no nodes at all): a Warning
//     FailedScheduling event with the error, and backoff.
//   - Otherwise the first remaining candidate is chosen (prioritize verbs and scoring are not
//     simulated; HAMi's filter returns exactly one node). Binding runs asynchronously, as
//     kube-scheduler's binding cycle does, so the next cycle may start before it completes:
//     through the interested extender with a bindVerb when there is one (an "error" answer gives
//     FailedScheduling "Binding rejected: <error>" and backoff), else through the pods/binding
//     subresource. Success emits a Normal "Scheduled" event
//     "Successfully assigned <ns>/<name> to <node>".
//   - Events carry the scheduler name as their component. One log line per decision.
//   - With leaderElection.leaderElect, a LeaderElector on the configured Lease (identity
//     "<hostname>_<random>", like kube-scheduler) gates scheduling: informers run always, cycles
//     only while leading. Unlike kube-scheduler, which exits when it loses the lease, the
//     simulation stands for election again.
//
// Thread safety: Start/Stop from one owning thread; every other method from any thread.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "common/clock.h"
#include "common/status.h"
#include "k8s/rest_client.h"
#include "sim/kubescheduler/config.h"
#include "sim/kubescheduler/extender.h"
#include "sim/kubescheduler/stats.h"

namespace hami::sim {

struct KubeSchedulerOptions {
  // Parallel scheduling cycles. 1 is kube-scheduler's behaviour; more is for load tests.
  int workers = 1;
  // Concurrent bindings (kube-scheduler binds each pod on its own goroutine).
  int bind_workers = 16;
  // Override the configuration's podInitialBackoffSeconds / podMaxBackoffSeconds (tests use
  // milliseconds).
  std::optional<std::chrono::milliseconds> initial_backoff{};
  std::optional<std::chrono::milliseconds> max_backoff{};
  // kube-scheduler's podMaxInUnschedulablePodsDuration.
  std::chrono::milliseconds unschedulable_timeout{std::chrono::minutes(5)};
  // How long a pod we bound is not rescheduled while the informer has not yet seen the binding.
  std::chrono::milliseconds assumed_ttl{std::chrono::seconds(30)};
  // Leader-election identity; "" = "<hostname>_<random hex>".
  std::string identity{};
  // Time source for backoff and statistics; nullptr = the client's clock.
  hami::Clock* clock = nullptr;
  // Builds the client of each configured extender; empty = Extender::Create (libcurl).
  std::function<Result<std::unique_ptr<Extender>>(const ExtenderConfig&)> extender_factory{};
};

class KubeScheduler {
 public:
  // `client` must outlive the scheduler.
  KubeScheduler(k8s::RestClient& client, KubeSchedulerConfig config,
                KubeSchedulerOptions options = {});
  ~KubeScheduler();  // Stop()s
  KubeScheduler(const KubeScheduler&) = delete;
  KubeScheduler& operator=(const KubeScheduler&) = delete;

  // Builds the extender clients (TLS material is read here) and starts informers, leader
  // election and workers. Returns without waiting for the informers to sync. Fails on unusable
  // extender settings or when called twice.
  Status Start();
  // Stops scheduling, abandons queued bindings and events, gives the lease up. Idempotent.
  void Stop();

  const KubeSchedulerConfig& config() const;
  const std::string& identity() const;
  // True while allowed to schedule: always without leader election, else while holding the lease.
  bool IsLeader() const;
  // Both informers have completed their first list.
  bool HasSynced() const;
  KubeSchedulerStats Stats() const;
  // Scheduling cycles run for "ns/name" so far; kept after binding until the pod is deleted.
  int Attempts(const std::string& pod_key) const;

  class Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

// How many feasible nodes a cycle looks for before it stops filtering, as kube-scheduler decides
// it: every node in clusters under 100 nodes; otherwise `percentage` of them (0 = adaptive:
// 50% minus one point per 125 nodes, at least 5%), but never fewer than 100.
size_t NumFeasibleNodesToFind(int64_t percentage, size_t num_nodes);

// "<hostname>_<32 random hex digits>", kube-scheduler's identity format.
std::string DefaultLeaderIdentity();

}  // namespace hami::sim
