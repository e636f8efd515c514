// KubeControlPlane: a real Kubernetes control plane for tests and the main job, made of the
// binaries scripts/kube-tools.sh builds from their Go modules (etcd, kube-apiserver,
// kube-controller-manager, kube-scheduler), each as its own process on loopback ports the kernel
// picked, stopped in order when the object goes away.
//
//   KubeControlPlaneOptions o;
//   o.bin_dir = "$(bash scripts/kube-tools.sh)";
//   o.dir = "/tmp/x";                     // pki/, etcd/, logs, kubeconfigs
//   auto cp = KubeControlPlane::Start(o).value();
//   cp->admin_kubeconfig();               // system:masters, for kubectl and the tests
//   cp->StartScheduler(config_yaml);      // a KubeSchedulerConfiguration (extenders, ...)
//   cp->StartVolcano("$(bash scripts/volcano-tools.sh)", conf);  // Volcano's scheduler beside it
//
// What it sets up, as a kubeadm cluster does: one cluster CA that signs the API server's serving
// certificate and every client certificate (the administrator, the controller manager and the
// scheduler as their system users, the API server's client for kubelets); a service-account
// signing key (tokens for ServiceAccounts, also TokenRequest); the RBAC and Node authorizers and
// the default admission plugins plus NodeRestriction; an audit log of every request at the
// Metadata level (who did what, and whether it was allowed). On loopback, the kubernetes Service
// gets no endpoints (Endpoints refuse loopback addresses), and nothing routes Service IPs:
// clients and webhooks are reached by URL; with KubeControlPlaneOptions::node_address, pods on a
// real node reach it through the Service as in a cluster.
//
// Thread safety: one owning thread.
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "common/status.h"
#include "sim/world/logged_process.h"

namespace hami::sim {

struct KubeControlPlaneOptions {
  std::string bin_dir;  // etcd, kube-apiserver, kube-controller-manager, kube-scheduler
  std::string dir;      // working directory (must exist)
  bool controller_manager = true;
  // kube-apiserver writes every request to audit.log before answering (the RBAC test's proof);
  // false: no audit log (benchmarks, to see its cost).
  bool audit = true;
  std::vector<std::string> apiserver_args;  // extra --flags for kube-apiserver
  // "" = the API server is on loopback only, for clients on this machine. An address of the
  // machine (a real node's, KubeNode::HostAddress()) = pods reach it as in-cluster clients do:
  // it listens on that address (server() names it), advertises it, so that the kubernetes
  // Service's endpoints are it (the API server keeps them, as it does in a cluster), and its
  // certificate also names it and the Service's IP, 10.96.0.1. A service proxy on the node
  // (KubeNodeOptions::service_proxy) routes the Service IP there.
  std::string node_address;
  std::chrono::seconds start_timeout{120};
  // Called with each process's name once it is up (progress displays).
  std::function<void(const std::string&)> on_start;
};

class KubeControlPlane {
 public:
  static Result<std::unique_ptr<KubeControlPlane>> Start(KubeControlPlaneOptions options);
  ~KubeControlPlane();
  KubeControlPlane(const KubeControlPlane&) = delete;
  KubeControlPlane& operator=(const KubeControlPlane&) = delete;

  // https://127.0.0.1:<port> (https://<node_address>:<port> with a node address)
  const std::string& server() const { return server_; }
  // A kubeconfig of a cluster administrator (group system:masters).
  const std::string& admin_kubeconfig() const { return admin_kubeconfig_; }
  // The cluster CA certificate (PEM): what a client trusts the API server with.
  const std::string& ca_pem() const { return ca_pem_; }
  // The API server's audit log: one audit.k8s.io/v1 Event (JSON) per line.
  std::string audit_log() const { return options_.dir + "/audit.log"; }
  const std::string& dir() const { return options_.dir; }

  // Writes <dir>/kubeconfig-<name>: a client certificate of the cluster CA for `user` in
  // `groups` (e.g. "system:node:gpu-1" in {"system:nodes"}). Returns its path.
  Result<std::string> WriteUserKubeconfig(const std::string& name, const std::string& user,
                                          const std::vector<std::string>& groups);

  // Starts kube-scheduler with a KubeSchedulerConfiguration (YAML). Its clientConnection is
  // `kubeconfig` when given, else the text's, else a system:kube-scheduler certificate's; leader
  // election is off unless the text sets it. Replaces a running scheduler.
  Status StartScheduler(const std::string& config_yaml, const std::string& kubeconfig = "");
  Status StopScheduler();
  // https://127.0.0.1:<port>/metrics of the running kube-scheduler (readable without
  // credentials; its certificate is self-signed), "" before StartScheduler.
  const std::string& scheduler_metrics_url() const { return scheduler_metrics_url_; }

  // Starts Volcano beside the control plane, as a test tool: `volcano_bin_dir` is what
  // scripts/volcano-tools.sh prints (vc-scheduler, vc-controller-manager, crd/*.yaml). Creates
  // the CustomResourceDefinitions of crd/ (one that exists already is kept) and waits until the
  // API server serves them; starts vc-controller-manager (all its controllers: the podgroup
  // controller gives every pod of schedulerName `volcano` a PodGroup) and vc-scheduler with
  // `scheduler_conf_yaml` (a volcano-scheduler.conf: actions, tiers, plugin arguments) as its
  // --scheduler-conf (written to <dir>/volcano/volcano-scheduler.conf, which vc-scheduler reloads
  // whenever the file is written again), both as the administrator (admin_kubeconfig()), with
  // leader election off and the scheduler name `volcano`. Returns once both answer /healthz and
  // the `default` Queue (which vc-scheduler creates at start) exists. Replaces running ones.
  Status StartVolcano(const std::string& volcano_bin_dir, const std::string& scheduler_conf_yaml);
  // Stops vc-scheduler, then vc-controller-manager; their objects (CRDs, Queues, PodGroups) stay.
  Status StopVolcano();
  // http://127.0.0.1:<port>/metrics of the running vc-scheduler, "" before StartVolcano.
  const std::string& volcano_metrics_url() const { return volcano_metrics_url_; }

  // A running process by name ("etcd", "kube-apiserver", "kube-controller-manager",
  // "kube-scheduler", "vc-controller-manager", "vc-scheduler"), or null.
  LoggedProcess* Process(const std::string& name);

 private:
  explicit KubeControlPlane(KubeControlPlaneOptions options) : options_(std::move(options)) {}
  Status Boot();
  Status WritePki();
  Status StartEtcd();
  Status StartApiServer();
  Status StartControllerManager();
  Status WaitHealthy(LoggedProcess& p, const std::string& kubeconfig, const std::string& path);
  // Creates the CustomResourceDefinitions in the YAML files of `crd_dir` and waits until each is
  // Established.
  Status ApplyCrds(const std::string& crd_dir);
  // Waits until `p` answers 200 to GET `url` (plain HTTP, no credentials) and `ready()` holds.
  Status WaitHttpOk(LoggedProcess& p, const std::string& url, const std::function<bool()>& ready);
  // Starts `name` with ChildEnv()'s environment plus `extra_env` ("NAME=value" entries).
  Status Launch(const std::string& name, const std::vector<std::string>& argv,
                const std::vector<std::string>& extra_env = {});
  // Runs `start` with `count` ports that were free a moment ago; up to three times, with new
  // ports, when the process found one taken. Reports `name` as up on success.
  Status WithFreePorts(const std::string& name, int count,
                       const std::function<Status(const std::vector<int>&)>& start);
  std::string Bin(const std::string& name) const { return options_.bin_dir + "/" + name; }
  std::string Pki(const std::string& name) const { return options_.dir + "/pki/" + name; }

  KubeControlPlaneOptions options_;
  std::string server_;
  std::string etcd_url_;
  std::string scheduler_metrics_url_;
  std::string volcano_metrics_url_;
  std::string admin_kubeconfig_;
  std::string ca_pem_, ca_key_pem_;
  std::map<std::string, std::unique_ptr<LoggedProcess>> processes_;
  std::vector<std::string> order_;  // start order; stopped in reverse
};

// A TCP port on 127.0.0.1 that was free a moment ago (bound to 0, read, closed): for programs
// that cannot report the port they picked. Another process may take it first; starting again
// with a new port is the caller's remedy.
Result<int> PickFreeLoopbackPort();

}  // namespace hami::sim
