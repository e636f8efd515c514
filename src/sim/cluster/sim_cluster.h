// A whole simulated control plane in one process: the in-memory API server, hami-scheduler
// (SchedulerService behind an HTTPS server, registered as the pods' mutating webhook), the
// kube-scheduler stand-in configured with the extender, and a fake device plugin per node that
// writes registrations and acknowledges allocations the way a device plugin does.
//
//   SimCluster c;                                   // everything started, nothing registered
//   c.AddNode("node-a", {Gpu("GPU-a", 0, 32768)});
//   c.ApplyYamlFile(path, "default");               // pods go through the webhook
//   c.WaitFor([&] { return c.BoundNode("default", "p") != ""; });       // API objects
//   c.WaitForScheduler([&] { return c.scheduler().stats().binds == 1; });  // hami-scheduler
//
// With `kube_bin_dir` set, the same cluster runs on a real control plane instead: etcd and
// kube-apiserver (KubeControlPlane, no controller manager) and the real kube-scheduler with the
// chart's extender configuration; hami-scheduler and the fake device plugins stay in this
// process. Nodes are registered Ready and untainted, as a kubelet and the node lifecycle
// controller would leave them.
//
// For tests and benchmarks, not for production. Thread safety: one
// owning thread (the parts run their own threads).
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "device/config.h"
#include "device/device.h"
#include "extender/service.h"
#include "k8s/config.h"
#include "k8s/object.h"
#include "k8s/rest_client.h"
#include "net/http_server.h"
#include "sim/apiserver/api_server.h"
#include "sim/world/manifests.h"

namespace hami::k8s {
class Informer;
}  // namespace hami::k8s

namespace hami::sim {

class FakeDevicePlugin;
class KubeControlPlane;

struct SimClusterOptions {
  extender::SchedulerOptions scheduler;
  int driver_workers = 1;
  // Non-empty: the kube-scheduler stand-in runs leader election with this identity on the Lease
  // default/hami-scheduler (set scheduler.leader_elect to make hami-scheduler follow it).
  std::string driver_identity;
  std::chrono::milliseconds driver_initial_backoff{50};
  std::chrono::milliseconds driver_max_backoff{400};
  bool device_plugin = true;  // acknowledge allocations (bind-phase success, lock release)
  // Set: hami-scheduler reaches the API server at the URL this returns for the server's own
  // (a fault-injecting proxy in front of it, say), with a client of its own whose requests time
  // out after `scheduler_api_timeout`; everything else keeps the direct connection.
  std::function<std::string(const std::string& apiserver_url)> scheduler_api;
  std::chrono::milliseconds scheduler_api_timeout{5000};
  // hami-scheduler's device-config.yaml; unset: the chart's (NVIDIA only).
  std::optional<device::DeviceConfig> device_config;
  // Non-empty: the binaries scripts/kube-tools.sh builds; the cluster runs on a real
  // kube-apiserver and kube-scheduler (driver_workers and driver_identity do not apply; the
  // kube-scheduler retries a pod after 1 s, doubling up to `real_max_backoff`).
  std::string kube_bin_dir;
  std::chrono::seconds real_max_backoff{2};
};

class SimCluster {
 public:
  explicit SimCluster(SimClusterOptions options = {});
  ~SimCluster();
  SimCluster(const SimCluster&) = delete;
  SimCluster& operator=(const SimCluster&) = delete;

  k8s::RestClient& client() { return *client_; }
  extender::SchedulerService& scheduler() { return *service_; }
  // The simulated API server; throws std::logic_error on a real control plane.
  sim::ApiServer& apiserver();
  bool real() const { return control_plane_ != nullptr; }
  const std::string& extender_url() const { return extender_url_; }

  // Registers a node as a device plugin would (annotation + allocatable) and waits until the
  // scheduler has it.
  void AddNode(const std::string& name, const std::vector<device::DeviceInfo>& gpus);
  // A node as another vendor's device plugin leaves it: `annotations` (its registration and
  // handshake) and `allocatable` resources; waits until the scheduler's ledger lists `probe`
  // (one of its device ids). `labels` are added to the node's (e.g. its instance type).
  void AddVendorNode(const std::string& name, const std::map<std::string, std::string>& annotations,
                     const std::map<std::string, std::string>& allocatable,
                     const std::string& probe,
                     const std::map<std::string, std::string>& labels = {});
  // Creates every document of a multi-document YAML file (pods) in `ns`.
  std::vector<std::string> ApplyYamlFile(const std::string& path, const std::string& ns);
  Result<k8s::Object> CreatePod(const std::string& ns, const k8s::Object& pod);

  // Stops hami-scheduler and starts a fresh instance on the same port (ledger rebuilt from the
  // API server).
  void RestartScheduler();

  std::string BoundNode(const std::string& ns, const std::string& name);
  std::string Annotation(const std::string& ns, const std::string& name, const std::string& key);
  std::vector<k8s::Object> Events(const std::string& ns, const std::string& name);
  // Waits until `cond` holds; false once `timeout` passed without it (a failure bound, never a
  // pacing). `cond` is looked at first and again after every write any SimCluster's API server
  // in this process stores (on a real control plane: every change its pods, nodes and events
  // watches report), so it must read API objects only (BoundNode, Annotation, Events, the
  // client). State kept inside hami-scheduler is waited for with WaitForScheduler. `cond` runs
  // on the calling thread with no lock held.
  static bool WaitFor(const std::function<bool()>& cond,
                      std::chrono::milliseconds timeout = std::chrono::seconds(30));
  // As WaitFor, for conditions on hami-scheduler's own state (stats, leadership, LedgerDump):
  // looked at again on each change the running instance announces (SchedulerService::WaitFor
  // says which). Waits on the instance running when called (not across RestartScheduler).
  bool WaitForScheduler(const std::function<bool()>& cond,
                        std::chrono::milliseconds timeout = std::chrono::seconds(30));

  class Driver;

 private:
  void StartScheduler();
  void StopScheduler();
  void StartDriver();
  void StartRealControlPlane();
  // On a real control plane: watches whose events wake WaitFor.
  void WatchForChanges();
  // Creates a node; on a real API server, marks it Ready and lifts the not-ready taint the
  // API server's admission put on it.
  void CreateNode(k8s::Object node);

  SimClusterOptions options_;
  std::string dir_;  // the real control plane's working directory
  std::unique_ptr<KubeControlPlane> control_plane_;
  std::unique_ptr<sim::ApiServer> apiserver_;
  k8s::RestConfig rest_;  // how the test's client reaches the API server
  std::unique_ptr<k8s::RestClient> client_;
  std::unique_ptr<k8s::RestClient> scheduler_client_;  // with options.scheduler_api
  std::unique_ptr<extender::SchedulerService> service_;
  std::unique_ptr<net::HttpServer> https_;
  int port_ = 0;
  std::string extender_url_;
  std::string ca_pem_;
  std::shared_ptr<net::CertificateSource> cert_;
  std::unique_ptr<FakeDevicePlugin> plugin_;
  std::unique_ptr<Driver> driver_;
  // On a real control plane, the watches that wake WaitFor (the simulated API server reports
  // its writes itself).
  std::vector<std::unique_ptr<k8s::Informer>> change_watches_;
};

}  // namespace hami::sim
