// KubeNode: a real Kubernetes node on this machine for tests and the main job: containerd (its
// own instance: root, state, socket and runc root under the node's folder, beside any other
// containerd of the machine) and a kubelet built from the control plane's pin, registered with a
// KubeControlPlane. What scripts/node-tools.sh sets up (kubelet, node.env naming containerd,
// ctr, runc, the CNI plugins).
//
//   KubeNodeOptions o;
//   o.bin_dir = "$(bash scripts/node-tools.sh)";
//   o.dir = "/tmp/x/node-1";                 // containerd/, kubelet/, cni/, logs
//   o.node_name = "node-1";
//   o.image_archives = {"/tmp/x/image.tar"}; // sim/node/oci_image.h; imported before the kubelet
//   o.sandbox_image = "localhost/hami-cpp:node-test";
//   auto node = KubeNode::Start(*control_plane, o).value();
//   node->device_plugin_dir();               // where a device plugin puts its socket
//
// The node: the kubelet (cgroupfs driver, cgroup v1 allowed, swap allowed) serves on the
// machine's first non-loopback IPv4 address (the kubelet refuses a loopback node IP) with a
// self-signed certificate, trusts client certificates of the cluster CA (the API server's client
// for kubelets) and authorizes every request they make. Pods get addresses from the CNI bridge
// plugin (a bridge of the node's own, host-local addresses in `pod_cidr`, no masquerading).
//
// Stopping (the destructor): the node's pods are deleted through the API server and the kubelet
// is given `drain_timeout` to take them down as it does (network namespaces, volumes); then the
// kubelet stops, every container left is killed through containerd, containerd stops, and
// whatever is still mounted under the node's folder is unmounted, so the folder can be removed.
//
// Start refuses with FailedPrecondition and the reason when the machine cannot run a node (not
// root, a cgroup controller or overlayfs missing, no non-loopback address): a test then fails
// saying why, never passes without a node.
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
#include "k8s/rest_client.h"
#include "sim/world/kube_control_plane.h"
#include "sim/world/logged_process.h"

namespace hami::sim {

struct KubeNodeOptions {
  std::string bin_dir;  // what scripts/node-tools.sh prints: kubelet, node.env
  std::string dir;      // the node's folder (created)
  std::string node_name = "node-1";
  std::map<std::string, std::string> labels;
  // OCI archives imported into containerd's k8s.io namespace before the kubelet starts.
  std::vector<std::string> image_archives;
  std::string sandbox_image;  // containerd's pause image: must be in one of the archives
  // containerd's runc (its runc runtime's BinaryName), e.g. hami-sim-container-runtime; "" = runc.
  std::string runtime_binary;
  // KEY=VALUE entries for containerd's environment, which its shims and runc inherit.
  std::vector<std::string> containerd_env;
  // kube-proxy (node.env's KUBE_PROXY) in iptables mode, as the node's system:kube-proxy: Service
  // IPs reach their endpoints from the node's pods and from the machine, the kubernetes
  // Service's 10.96.0.1 among them (the control plane needs a node_address for that one). Its
  // rules are removed when the node stops (`kube-proxy --cleanup`).
  bool service_proxy = false;
  std::string pod_cidr = "10.244.0.0/24";
  std::string bridge = "hami-cni0";
  int max_pods = 110;
  std::chrono::seconds start_timeout{120};
  std::chrono::seconds drain_timeout{60};
  std::function<void(const std::string&)> on_start;
};

class KubeNode {
 public:
  static Result<std::unique_ptr<KubeNode>> Start(KubeControlPlane& control_plane,
                                                 KubeNodeOptions options);
  ~KubeNode();
  KubeNode(const KubeNode&) = delete;
  KubeNode& operator=(const KubeNode&) = delete;

  const std::string& name() const { return options_.node_name; }
  const std::string& node_ip() const { return node_ip_; }
  // The kubelet's device-plugin folder (kubelet.sock is there). The kubelet has it fixed at
  // /var/lib/kubelet/device-plugins whatever its --root-dir (k8s.io/kubelet's DevicePluginPath):
  // the one path of the node outside its folder, which is why nodes run one at a time. Start
  // removes the device checkpoint an earlier node left there.
  static std::string device_plugin_dir() { return "/var/lib/kubelet/device-plugins"; }
  std::string kubelet_dir() const { return options_.dir + "/kubelet"; }
  const std::string& containerd_socket() const { return containerd_socket_; }
  // The file the kubelet writes a container's output to (CRI's log format: a timestamp, the
  // stream and a tag before each line), for its `restarts`-th restart.
  std::string ContainerLogPath(const std::string& ns, const std::string& pod,
                               const std::string& uid, const std::string& container,
                               int restarts) const {
    return options_.dir + "/pod-logs/" + ns + "_" + pod + "_" + uid + "/" + container + "/" +
           std::to_string(restarts) + ".log";
  }
  // "containerd", "kubelet" or "kube-proxy", when running; else null.
  LoggedProcess* Process(const std::string& name);

  // The kubelet alone (SIGTERM; containers keep running) and back: it registers again, finds
  // its pods' containers and asks the device plugins to register again (the plugin folder's
  // kubelet.sock is made anew).
  Status StopKubelet();
  Status StartKubelet();
  // containerd alone, and back (its containers keep running under their shims).
  Status RestartContainerd();
  // `ctr` against this node's containerd, namespace k8s.io: its standard output, or Internal
  // with its error output.
  Result<std::string> Ctr(const std::vector<std::string>& args);

  // Why this machine cannot run a node ("" when it can): the checks Start makes first.
  static std::string HostProblems();
  // The address a node on this machine registers with: the first IPv4 address of an interface
  // that is up and is neither the loopback nor a bridge or veth of containers (a kubelet refuses
  // a loopback node IP). FailedPrecondition when there is none.
  static Result<std::string> HostAddress(const std::string& own_bridge = "hami-cni0");

 private:
  KubeNode(KubeControlPlane& control_plane, KubeNodeOptions options);
  Status Boot();
  Status StartContainerd();
  Status ImportImages();
  Status WriteCniConfig();
  Status WriteKubeletFiles();
  Status WaitNodeReady();
  Status StartKubeProxy();
  // Stops kube-proxy and removes the rules it made.
  void StopKubeProxy();
  // The shutdown described above, each step best effort.
  void Drain();
  void KillContainers();
  void UnmountUnder(const std::string& dir);

  KubeControlPlane& control_plane_;
  KubeNodeOptions options_;
  std::map<std::string, std::string> tools_;  // node.env
  std::string node_ip_;
  std::string containerd_socket_;
  std::string kubelet_kubeconfig_;
  int kubelet_port_ = 0, healthz_port_ = 0;
  std::unique_ptr<k8s::RestClient> admin_;
  std::map<std::string, std::unique_ptr<LoggedProcess>> processes_;
};

}  // namespace hami::sim
