// World: the whole simulated system as separate processes, each the real binary: the simulated
// API server, hami-scheduler (extender, and the pods' admission webhook over TLS), the
// kube-scheduler stand-in, and per node a hami-sim-kubelet and a hami-device-plugin on the node's
// own simulated GPUs (and, with WorldOptions::monitors, a hami-monitor). They talk over their real
// interfaces only: HTTP(S) to the API server and the extender, gRPC on unix sockets between kubelet
// and plugin.
//
//   WorldOptions o;
//   o.build_dir = "build";
//   o.nodes = {{"node-a", kTwoA100s}, {"node-b", kFourT4s}};
//   auto w = World::Start(o).value();
//   w->Apply(yaml_text, "default");
//   w->WaitForPod("default", "p", [](const k8s::Object& p) { return PodPhase(p) == "Running"; });
//   std::string ready = w->WaitForLog("default", "p", "main", "listening").value();
//   std::string log = w->Logs("default", "p", "main").value();
//
// Every process logs to <dir>/<name>.log. The end-to-end tests and (later) the main job use it;
// fault tests stop and start single processes.
//
// Thread safety: one owning thread.
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <ostream>
#include <memory>
#include <string>
#include <vector>

#include "common/ready_file.h"
#include "common/status.h"
#include "k8s/object.h"
#include "k8s/rest_client.h"
#include "sim/world/kube_control_plane.h"
#include "sim/world/kube_node.h"
#include "sim/world/logged_process.h"

namespace hami::sim {

// The image the containers of a real node run (WorldOptions::node_bin_dir): hami-cpp's binaries
// at the production image's paths, vgpu_probe, busybox; also the node's pause image.
inline constexpr const char* kNodeTestImage = "localhost/hami-cpp:node-test";

struct WorldNode {
  std::string name;
  std::string gpu_config;  // simulated driver config (HAMI_SIM_CONFIG text)
  std::map<std::string, std::string> labels = {{"gpu", "on"}};
  std::vector<std::string> plugin_env;  // extra KEY=VALUE for its device plugin
  // "" (HAMi's protocol) or the Volcano mode its device plugin serves (--volcano: vgpu, share,
  // number or whole); the node is ready once it offers that mode's resource.
  std::string volcano;
  // The node's container runtime resolves CDI names (containerd with CDI on): its kubelet fails a
  // container given a CDI device no spec in <node>/cdi defines, the NVIDIA toolkit's spec of the
  // node's GPUs is written there at start (as `nvidia-ctk cdi generate` at boot: whole GPUs by
  // index and UUID), and the device plugin writes its own specs there ($CDI_SPEC_DIR).
  bool cdi_runtime = false;
};

// Who plays the control plane.
enum class ControlPlaneKind {
  // hami-sim-apiserver and hami-sim-kube-scheduler: seconds to start, nothing else to build.
  kSimulated,
  // etcd, kube-apiserver, kube-controller-manager and kube-scheduler built from their Go modules
  // (scripts/kube-tools.sh; WorldOptions::kube_bin_dir), see kube_control_plane.h.
  kReal,
};

// "simulated" / "real" (InvalidArgument otherwise) and back.
Result<ControlPlaneKind> ParseControlPlaneKind(const std::string& text);
const char* ControlPlaneKindName(ControlPlaneKind kind);
std::ostream& operator<<(std::ostream& os, ControlPlaneKind kind);

struct WorldOptions {
  std::string build_dir;  // holds bin/, lib/ and sim/
  ControlPlaneKind control_plane = ControlPlaneKind::kSimulated;
  std::string kube_bin_dir;  // with kReal: what scripts/kube-tools.sh prints
  // With kReal and non-empty: the node (one at most) is a real one, containerd and a kubelet
  // (kube_node.h) set up by scripts/node-tools.sh (what it prints), instead of hami-sim-kubelet.
  // Its containers run kNodeTestImage (sim/node/node_image.h, made from build_dir at start) and
  // get the simulated driver through hami-sim-container-runtime, containerd's runc there.
  std::string node_bin_dir;
  // With kReal and non-empty: kube-scheduler runs with the KubeSchedulerConfiguration this Helm
  // chart renders (`helm template`, the hami-scheduler ConfigMap's config.yaml), pointed at the
  // world's extender; otherwise with KubeSchedulerConfigYaml (the same shape).
  std::string chart_dir;
  // With kReal, one real node and chart_dir: hami-cpp is deployed as an operator deploys it,
  // `helm install hami <chart_dir> --namespace kube-system`, instead of the world starting
  // hami-scheduler, kube-scheduler, the device plugin and the monitor as its own processes (the
  // control plane runs the cluster's default kube-scheduler, which places them). They run as the
  // chart's pods, from the node image (kube-scheduler from an image made of
  // kube_bin_dir's binary), with the chart's RBAC and ServiceAccounts, and reach the API server
  // through the kubernetes Service (the API server is on the node's address, and the node runs
  // kube-proxy). The world gives the values this machine needs (images, host paths under the
  // node's folder, node_config_json, device_config_yaml); everything else is the chart's, or
  // helm_values_yaml's. scheduler_args, plugin_args, rbac_manifests, leader_elect,
  // webhook_cert_secret and service_accounts are refused there: chart values say those.
  bool helm_install = false;
  std::string helm_values_yaml;  // a values file's text, applied after the world's own values
  std::string dir;        // working directory; "" = a fresh temporary one (removed at the end)
  std::vector<WorldNode> nodes;
  std::string device_config_yaml;  // "" = the chart's defaults
  std::string node_config_json;    // the device plugins' config.json; "" = none
  std::vector<std::string> scheduler_args;
  std::vector<std::string> plugin_args;  // extra flags for every hami-device-plugin
  bool monitors = false;                 // also a hami-monitor per node
  std::string monitor_interval = "1s";   // its --update-interval
  std::string kubelet_heartbeat = "2s";
  bool stand_in_for_gpu_containers = false;  // kubelets run the GPU workload in every GPU container
  bool pid_namespaces = false;  // kubelets run containers in PID namespaces of their own (root)
  // Kubelets start in the world's directory with their node's paths relative to it, as the
  // README's by-hand command line has them (the kubelet must hand containers absolute ones).
  bool kubelet_relative_paths = false;
  std::string register_interval = "30s";
  // Least privilege: non-empty = the API server runs with RBAC and an administrator token; these
  // manifests (ServiceAccounts, Roles, ClusterRoles and their bindings, multi-document YAML) are
  // created first, and hami-scheduler, the device plugins and the monitors then reach the API
  // server with a token of their ServiceAccount (`service_accounts`: "hami-scheduler",
  // "hami-device-plugin", "hami-monitor" -> "<namespace>/<name>"; a component without an entry
  // keeps the administrator's). The kubelets and the kube-scheduler stand-in keep the
  // administrator's credentials: they play the cluster's own components.
  std::string rbac_manifests;
  // kube-scheduler stand-in elects on the Lease kube-system/hami-scheduler and hami-scheduler
  // follows it (--leader-elect), as the chart deploys them.
  bool leader_elect = false;
  // hami-scheduler manages its webhook certificate (--webhook-cert-secret=hami-scheduler-tls in
  // kube-system) and fills in the caBundle of hami-webhook itself, as the chart deploys it;
  // otherwise the world makes a certificate and hands it over as files.
  bool webhook_cert_secret = false;
  std::map<std::string, std::string> service_accounts;
  std::chrono::seconds start_timeout{60};
  // Called with each process's name once it is up (progress displays).
  std::function<void(const std::string&)> on_start;
};

class World {
 public:
  static Result<std::unique_ptr<World>> Start(WorldOptions options);
  ~World();
  World(const World&) = delete;
  World& operator=(const World&) = delete;

  k8s::RestClient& client() { return *client_; }
  const std::string& kubeconfig() const { return kubeconfig_; }
  const std::string& dir() const { return dir_; }
  const WorldOptions& options() const { return options_; }

  // Creates every document of a multi-document YAML text (pods) in `ns`.
  Result<std::vector<std::string>> Apply(const std::string& yaml, const std::string& ns);
  // Follows the pod through the API server's watch (sim/world/waits.h) until `pred` holds for one
  // of its states: that state. NotFound if the pod never existed, DeadlineExceeded (naming the
  // last state seen) when `pred` never held. `pred` is judged when the pod changes, so it must
  // read nothing but the pod it is given.
  Result<k8s::Object> WaitForPod(const std::string& ns, const std::string& name,
                                 const std::function<bool(const k8s::Object&)>& pred,
                                 std::chrono::milliseconds timeout = std::chrono::seconds(60));
  // The same for a node.
  Result<k8s::Object> WaitForNode(const std::string& name,
                                  const std::function<bool(const k8s::Object&)>& pred,
                                  std::chrono::milliseconds timeout = std::chrono::seconds(60));
  // Waits until container `container` of the pod, which must be on a node, has logged `text`: its
  // log then, as Logs() reads it. Woken by the kubelet's writes to the container's log file
  // (inotify); FailedPrecondition for a pod on no node, DeadlineExceeded when the text never comes.
  Result<std::string> WaitForLog(const std::string& ns, const std::string& pod,
                                 const std::string& container, const std::string& text,
                                 std::chrono::milliseconds timeout = std::chrono::seconds(60));
  // kubectl logs: GET pods/<name>/log?container=<c> through the API server.
  Result<std::string> Logs(const std::string& ns, const std::string& pod,
                           const std::string& container);

  // A node joins the running world: its directory and driver config, then its kubelet, device
  // plugin and (with WorldOptions::monitors) monitor, as Start does for the first nodes; returns
  // once the node's GPUs are registered. AlreadyExists for a name in use. A node config entry for
  // it (WorldOptions::node_config_json) must have been given at Start.
  Status AddNode(WorldNode node);

  // Fault injection: one node's processes.
  Status StopPlugin(const std::string& node);
  Status StartPlugin(const std::string& node);
  Status StopKubelet(const std::string& node);
  Status StartKubelet(const std::string& node);
  Status StartMonitor(const std::string& node);
  // "http://127.0.0.1:<port>/metrics" of a node's monitor ("" without one) and of hami-scheduler.
  std::string MonitorMetricsUrl(const std::string& node) const;
  const std::string& SchedulerMetricsUrl() const { return scheduler_metrics_url_; }
  // Sends `sig` to one process ("apiserver", "hami-scheduler", "<node>-kubelet", ...): SIGSTOP
  // and SIGCONT make the API server unreachable and back without losing its state.
  Status Signal(const std::string& process, int sig);
  // hami-simctl inject-xid on the node's simulated GPUs.
  Status InjectXid(const std::string& node, int device, int xid);
  // Any hami-simctl command on the node's simulated GPUs (an operator's nvidia-smi: MIG mode,
  // MIG devices made by hand): its standard output, or Internal with its error output.
  Result<std::string> SimCtl(const std::string& node, const std::vector<std::string>& args);
  // Paths of a node: its hook directory (HOOK_PATH) and GPU state file.
  std::string HookPath(const std::string& node) const;
  std::string GpuState(const std::string& node) const;
  std::string LogFile(const std::string& process) const { return dir_ + "/" + process + ".log"; }
  // A running process's PID (benchmarks read its /proc), or -1.
  int Pid(const std::string& process) const;
  // With RBAC: the kubeconfig a component uses ("hami-scheduler", "hami-device-plugin",
  // "hami-monitor"): its ServiceAccount's, or the administrator's.
  std::string KubeconfigOf(const std::string& component) const;
  // With RBAC: the API server's record of every authorization decision (JSON, see
  // sim::ApiServer::AuthorizationReport). Simulated control plane only.
  Result<std::string> AuthorizationReport();
  // <kube_bin_dir>/helm with `args`, as the administrator (helm's own files under the world's
  // folder): its standard output, or Internal with its exit code and output. With
  // helm_install, the release is kHelmRelease in kube-system.
  Result<std::string> Helm(const std::vector<std::string>& args);
  static constexpr const char* kHelmRelease = "hami";
  // The real control plane, or null with the simulated one.
  KubeControlPlane* real_control_plane() { return control_plane_.get(); }
  // A real node (WorldOptions::node_bin_dir) by name, or null.
  KubeNode* real_node(const std::string& name);

 private:
  explicit World(WorldOptions options);
  Status Boot();
  Status StartControlPlane();
  Status StartKubeScheduler(const std::string& config_yaml);
  Status SetUpRbac();
  // The node's directory, driver config and processes (its GPUs are not awaited).
  Status StartNode(const WorldNode& node);
  // A real node's containerd and kubelet (world_real_node.cc); the node image at the first.
  Status StartRealNode(const WorldNode& node);
  // WorldOptions::helm_install (world_helm.cc): the control plane, the node, then the chart.
  Status BootWithHelm();
  Status HelmInstall();
  // The kube-scheduler image the chart's scheduler pod runs: kube_bin_dir's binary, named as
  // the chart names it on this cluster (localhost/kube-scheduler:<its release>).
  Result<std::string> WriteKubeSchedulerImage();
  // Writes the node's gpu.conf (and the toolkit's CDI spec) into its folder.
  Status WriteNodeFiles(const WorldNode& node);
  // The folder a node's device plugin puts its socket in.
  std::string DevicePluginDir(const std::string& node);
  Status WriteTokenKubeconfig(const std::string& path, const std::string& token);
  // Starts `name`; with `ready` non-null, waits for the ready file the process was told to
  // write (ReadyArg(name) among its arguments) and returns its fields there.
  Status Launch(const std::string& name, std::vector<std::string> argv,
                std::vector<std::string> env, ReadyFields* ready = nullptr);
  // <dir>/<name>.ready, and the flag that names it (common/ready_file.h).
  std::string ReadyPath(const std::string& name) const { return dir_ + "/" + name + ".ready"; }
  std::string ReadyArg(const std::string& name) const { return "--ready-file=" + ReadyPath(name); }
  const WorldNode* Node(const std::string& name) const;
  std::string Bin(const std::string& name) const;
  std::vector<std::string> BaseEnv() const;
  // A started process by name, the real control plane's included ("apiserver" is
  // kube-apiserver there); null when not running.
  LoggedProcess* Find(const std::string& process) const;

  WorldOptions options_;
  std::string dir_;
  bool own_dir_ = false;
  std::string kubeconfig_;
  std::map<std::string, std::string> component_kubeconfigs_;  // by component, with RBAC
  std::string extender_url_;
  std::string scheduler_metrics_url_;
  std::map<std::string, std::string> monitor_urls_;  // by node
  std::unique_ptr<k8s::RestClient> client_;
  std::unique_ptr<KubeControlPlane> control_plane_;  // with ControlPlaneKind::kReal
  std::map<std::string, std::unique_ptr<KubeNode>> real_nodes_;  // with node_bin_dir
  std::string node_image_;  // the node image's OCI archive, once made
  bool helm_installed_ = false;
  // By name; the start order is kept below.
  std::map<std::string, std::unique_ptr<LoggedProcess>> processes_;
  std::vector<std::string> order_;
};

// The pod's status.phase ("" when absent).
std::string PodPhase(const k8s::Object& pod);
// Whether the pod's Ready condition is True.
bool PodReady(const k8s::Object& pod);

// The KubeSchedulerConfiguration a Helm chart renders (`<kube_bin>/helm template`, the ConfigMap
// `hami-scheduler`'s config.yaml) with its first extender's urlPrefix set to `extender_url` and
// leader election as given (`leader_elect` false: off; true: on the Lease
// kube-system/hami-scheduler, as the chart sets it).
Result<std::string> ChartKubeSchedulerConfig(const std::string& kube_bin, const std::string& chart,
                                             const std::string& extender_url, bool leader_elect);

// kube-apiserver's audit log (one audit.k8s.io/v1 Event per line) as the simulated API server's
// authorization report: {"<user>": {"allowed": {"<verb> <resource>[.<group>][/<sub>]": n},
// "denied": {...}}}, each request counted once.
k8s::Object AuthorizationReportFromAudit(const std::string& audit_log);

}  // namespace hami::sim
