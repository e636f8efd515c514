// NodeRegistrar: decides which nodes' devices hami-scheduler schedules. It judges each vendor of
// each node by HAMi's registration rules (the device plugin's register annotation or the
// vendor's capacity, the handshake annotation it answers, allocatable counts) and keeps the
// AssumeCache's node set in step: a node whose plugin went away leaves scheduling, and its plugin
// is asked to register again.
//
//   NodeRegistrar registrar(client, clock, vendors, cache, options, is_leader, on_pass);
//   registrar.Start(node_informer);   // waits for the node list, then passes while leading
//   registrar.NodeChanged("node-a");  // from the node informer's handler
//   registrar.Stop();
//
// Work, on the registrar's own queue and thread: "node/<name>" (one node's registration, once
// the first full pass is done and while leading) and "resync" (every node's, then again every
// register_interval while leading). `on_pass` runs after each full pass (readiness may change),
// after a single node is reconciled and after a node is deleted: whenever the ledger may have
// changed.
//
// Thread safety: every member may be called from any thread; Start/Stop from the owner's.
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <map>
#include <string>
#include <thread>

#include "common/clock.h"
#include "common/thread_annotations.h"
#include "device/vendor.h"
#include "k8s/informer.h"
#include "k8s/rest_client.h"
#include "k8s/typed.h"
#include "k8s/work_queue.h"
#include "scheduler/assume_cache.h"

namespace hami::extender {

struct NodeRegistrarOptions {
  std::chrono::seconds register_interval{15};
  // A handshake left unanswered this long, with no allocatable devices, takes the vendor out.
  std::chrono::seconds handshake_grace{60};
};

class NodeRegistrar {
 public:
  // Every reference must outlive the registrar.
  NodeRegistrar(k8s::RestClient& client, const Clock& clock,
                const device::VendorRegistry& vendors, scheduler::AssumeCache& cache,
                NodeRegistrarOptions options, std::function<bool()> is_leader,
                std::function<void()> on_pass);
  ~NodeRegistrar();
  NodeRegistrar(const NodeRegistrar&) = delete;
  NodeRegistrar& operator=(const NodeRegistrar&) = delete;

  // `nodes` must outlive the registrar; Start at most once.
  void Start(k8s::Informer& nodes);
  void Stop();

  // Node informer events.
  void NodeChanged(const std::string& name);
  void NodeDeleted(const std::string& name);
  // Leading: a full pass is queued. Following: the next full pass starts over.
  void LeaderChanged(bool leader);
  // A full pass has run since the start or the last leadership change.
  bool RegisteredOnce() const { return registered_once_.load(); }
  // One registration pass over every cached node (what "resync" runs), expiring old
  // reservations.
  void ReconcileNodes();

 private:
  // What the registrar knows of one vendor on one node.
  struct VendorNodeState {
    int64_t allocatable = -1;  // -1: never seen
    // Allocatable dropped to 0 after being positive: out until the count comes back (upstream
    // re-admits such a node on the next pass and drops it again a minute later).
    bool plugin_lost = false;
    bool in_ledger = false;  // its devices are scheduled
  };
  struct NodeState {
    std::map<std::string, VendorNodeState> vendors;  // by vendor key
    bool in_ledger = false;
  };
  // One node as a pass reads it.
  struct NodeReading {
    const k8s::Object& node;
    const device::Annotations& annos;
    int64_t now;  // Unix seconds
  };
  // What judging a node's vendors produces.
  struct NodeVerdict {
    scheduler::NodeObject obj;      // the node as the ledger gets it (broken vendors left out)
    k8s::AnnotationChanges writes;  // handshakes to request or clear
    std::string why;                // why the last broken vendor is out
  };

  void Run();
  void Process(const std::string& key);
  void Resync();
  void ReconcileNode(const k8s::Object& node);
  // Judges one vendor of a node (registration, handshake, allocatable): true when healthy. An
  // unhealthy vendor's devices leave `verdict.obj`.
  bool JudgeVendor(const device::Vendor& vendor, const NodeReading& at, VendorNodeState& vs,
                   NodeVerdict& verdict);
  // Applies a pass's verdict on one node to the ledger (`healthy_any`: some vendor is healthy).
  void Apply(const std::string& name, bool healthy_any, NodeState& state, NodeVerdict& verdict);

  k8s::RestClient& client_;
  const Clock& clock_;
  const device::VendorRegistry& vendors_;
  scheduler::AssumeCache& cache_;
  const NodeRegistrarOptions options_;
  const std::function<bool()> is_leader_;
  const std::function<void()> on_pass_;
  k8s::Informer* nodes_ = nullptr;  // set by Start, before the worker runs
  k8s::WorkQueue queue_;
  Cancellation stop_;  // ends the worker's wait for the first node list
  std::atomic<bool> registered_once_{false};
  // Only the worker writes a node's state (NodeDeleted erases it).
  Mutex state_mu_;
  std::map<std::string, NodeState> state_ GUARDED_BY(state_mu_);
  std::thread worker_;
};

}  // namespace hami::extender
