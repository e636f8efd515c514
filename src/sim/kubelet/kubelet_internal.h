// Internals of Kubelet shared by its source files, and only by them: Kubelet::Impl (the node's
// state, the informer's callbacks and the HTTP endpoints) and PodWorker (one pod's containers).
//
// Where the parts live: kubelet.cc (Start, Stop, the public accessors, shared helpers),
// kubelet_node.cc (node registration, node status, lease, heartbeat), kubelet_pods.cc (the pod
// informer's callbacks, admission queue, deletions), kubelet_http.cc (/containerLogs and /exec),
// pod_worker.cc (admission: devices and container start; kills; exec and log lookup) and
// pod_worker_run.cc (the worker thread: restarts, termination, pod status).
//
// Thread safety: Impl's informer callbacks, admitter, heartbeat and HTTP handlers run on their
// own threads; Impl::mu_ guards the pod bookkeeping. A PodWorker's thread owns its run loop;
// PodWorker::mu_ guards its deletion state and the containers' states, which the kubelet's
// threads read (logs, exec) and change (kills).
#pragma once

#include <sys/types.h>
#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "common/log.h"
#include "common/status.h"
#include "common/thread_annotations.h"
#include "k8s/informer.h"
#include "k8s/object.h"
#include "k8s/rest_client.h"
#include "k8s/typed.h"
#include "net/http_server.h"
#include "sim/kubelet/device_manager.h"
#include "sim/kubelet/exec_session.h"
#include "sim/kubelet/kubelet.h"
#include "sim/kubelet/launch.h"

namespace hami::sim {
namespace kubelet_internal {

using Json = nlohmann::json;
using SteadyTime = std::chrono::steady_clock::time_point;

// The current time in the API's timestamp form.
std::string Now();
// The file's contents; nullopt when it cannot be read.
std::optional<std::string> ReadFile(const std::string& path);

}  // namespace kubelet_internal

struct Container {
  ContainerSpec spec;
  bool init = false;
  Launch launch;
  std::string log_path;
  std::string workdir;
  pid_t pid = -1;
  int pidfd = -1;
  int restarts = 0;
  enum class State { kWaiting, kRunning, kTerminated } state = State::kWaiting;
  std::string waiting_reason = "ContainerCreating";
  int exit_code = 0;
  std::string started_at, finished_at;
  kubelet_internal::SteadyTime restart_at{};
  bool done = false;  // will not run again
};

class PodWorker;

class Kubelet::Impl {
 public:
  Impl(k8s::RestClient& client, KubeletOptions options)
      : client_(client), options_(std::move(options)) {}
  ~Impl() { Stop(); }

  Status Start();
  void Stop();

  k8s::RestClient& client_;
  const KubeletOptions options_;
  std::unique_ptr<DeviceManager> devices_;
  std::unique_ptr<net::HttpServer> http_;
  int port_ = 0;
  std::unique_ptr<k8s::Informer> pods_;

  void Event(const k8s::ObjectPtr& pod, const std::string& type, const std::string& reason,
             const std::string& message) {
    k8s::EventSpec e;
    e.involved = pod;
    e.type = type;
    e.reason = reason;
    e.message = message;
    e.component = "kubelet";
    e.host = options_.node_name;
    if (Result<k8s::WriteAck> r = k8s::CreateEvent(client_, e); !r.ok()) {
      HAMI_VLOG(1) << "kubelet: event " << reason << " not posted: " << r.status().message();
    }
  }

 private:
  friend class PodWorker;
  Status RegisterNode();
  Status UpdateNodeStatus();
  Status RenewLease();
  void HeartbeatLoop();
  void AdmitLoop();
  void OnPod(const k8s::ObjectPtr& pod);
  void OnDelete(const k8s::ObjectPtr& pod);
  // A pod with a deletionTimestamp: its containers stop within the grace period, then the pod
  // is removed from the API (delete with grace 0).
  void OnTerminating(const k8s::ObjectPtr& pod);
  void ServeLogs(const net::HttpRequest& req, net::HttpResponse& res);
  void ServeExec(const net::HttpRequest& req, net::HttpResponse& res);
  // Where the node's driver tools (nvidia-smi) are linked.
  std::string tools_dir() const { return options_.root_dir + "/bin"; }
  // The pod worker of <ns>/<name>, or null.
  std::shared_ptr<PodWorker> WorkerOf(const std::string& ns, const std::string& name);

  Mutex mu_;
  std::condition_variable cv_;
  bool stopping_ GUARDED_BY(mu_) = false;
  bool status_dirty_ GUARDED_BY(mu_) = true;
  std::deque<k8s::ObjectPtr> admit_queue_ GUARDED_BY(mu_);
  std::map<std::string, std::shared_ptr<PodWorker>> workers_ GUARDED_BY(mu_);  // by pod UID
  std::map<std::string, std::string> uid_of_ GUARDED_BY(mu_);  // "ns/name" -> UID
  std::set<std::string> terminating_ GUARDED_BY(mu_);  // UIDs being stopped after a deletion
  std::vector<std::thread> reapers_ GUARDED_BY(mu_);   // deleted pods' workers
  std::string start_time_ = kubelet_internal::Now();
  // Extended resources an earlier run of this kubelet reported (written by RegisterNode, then
  // read by the heartbeat thread).
  std::set<std::string> plugin_resources_;
  std::thread heartbeat_, admitter_;
};

// One pod's containers, on its own thread.
class PodWorker {
 public:
  PodWorker(Kubelet::Impl& k, k8s::ObjectPtr pod);
  ~PodWorker();

  std::string Key() const { return ns_ + "/" + name_; }
  const std::string& uid() const { return uid_; }

  // Admission on the admitter thread; then the containers run on the worker's own thread.
  void Admit();

  // Deletion: SIGTERM now, SIGKILL after the grace period (on the worker's thread).
  // SIGTERM to every container; SIGKILL after `grace` seconds (< 0: the pod's
  // terminationGracePeriodSeconds).
  void Kill(int64_t grace = -1);
  // Kubelet shutdown: no grace.
  void KillNow();
  void Join() {
    if (thread_.joinable()) thread_.join();
  }

  std::string LogPath(const std::string& container);
  // What `kubectl exec` into `container` runs: `command` in the container's environment and
  // working directory, inside its PID and mount namespaces when it has its own.
  Result<ExecProcess> ExecInto(const std::string& container, std::vector<std::string> command);
  std::vector<std::string> ContainerNames();

 private:
  using SteadyTime = kubelet_internal::SteadyTime;

  // --- admission and container start (pod_worker.cc) ---

  void Wake() {
    uint64_t one = 1;
    (void)!write(wake_, &one, sizeof(one));
  }
  Status AllocateDevices();
  LaunchContext Context() const;
  // Starts `c`; false (with the container terminated) when it cannot.
  bool StartContainer(Container& c);

  // --- the worker thread (pod_worker_run.cc) ---

  // Blocks until some running container exits or the worker is woken; reaps what exited.
  void WaitForExits(int timeout_ms);
  bool ShouldRestart(const Container& c);
  std::chrono::milliseconds Backoff(int restarts) const;
  void Run();
  void Started(Container& c, bool ok);
  bool IsDeleting();
  bool IsRunning(const Container& c);
  // Sleeps `d` unless woken for deletion; false when deleting.
  bool Sleep(std::chrono::milliseconds d);
  // Deleted: wait for the containers within the grace period, then kill what is left.
  void Terminate();
  void Finish();
  void ReportStatus();
  // False when the API server did not take it (a gone pod counts as written).
  bool PatchStatus(const kubelet_internal::Json& body);
  // Retries a status the API server refused, once a second, until it is written or the pod is
  // deleted (as kubelet's status manager does).
  void WriteStatusUntilDone(const kubelet_internal::Json& body);
  k8s::RestClient& client() { return k_.client_; }

  Kubelet::Impl& k_;
  k8s::ObjectPtr pod_;
  std::string ns_, name_, uid_, dir_, restart_policy_;
  std::string start_time_ = kubelet_internal::Now();
  int64_t grace_ = 30;
  int wake_ = -1;
  bool status_dirty_ = false;  // worker thread only: the last status was not written
  std::map<std::string, std::vector<ContainerDevices>> answers_;  // by container name
  std::thread thread_;

  Mutex mu_;
  std::vector<Container> containers_;  // states guarded by mu_ (the vector is fixed at Admit)
  bool deleting_ GUARDED_BY(mu_) = false;
  bool finished_ GUARDED_BY(mu_) = false;
  SteadyTime kill_deadline_ GUARDED_BY(mu_) = SteadyTime::max();
};

}  // namespace hami::sim
