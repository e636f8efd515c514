#include "sim/world/kube_node.h"

#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <arpa/inet.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "common/file_util.h"
#include "common/log.h"
#include "common/subprocess.h"
#include "k8s/config.h"
#include "k8s/object.h"
#include "sim/world/waits.h"

namespace hami::sim {
namespace {

namespace fs = std::filesystem;

std::vector<std::string> ChildEnv() {
  const char* path = std::getenv("PATH");
  return {std::string("PATH=") + (path ? path : "/usr/bin:/bin") + ":/usr/sbin:/sbin",
          "HOME=/tmp"};
}

}  // namespace

Result<std::string> KubeNode::HostAddress(const std::string& own_bridge) {
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0) return InternalError("getifaddrs failed");
  std::string found;
  for (ifaddrs* i = list; i != nullptr && found.empty(); i = i->ifa_next) {
    if (i->ifa_addr == nullptr || i->ifa_addr->sa_family != AF_INET) continue;
    if ((i->ifa_flags & IFF_LOOPBACK) || !(i->ifa_flags & IFF_UP) ||
        !(i->ifa_flags & IFF_RUNNING)) {
      continue;
    }
    const std::string name = i->ifa_name;
    if (name == own_bridge || name.rfind("docker", 0) == 0 || name.rfind("veth", 0) == 0 ||
        name.rfind("br-", 0) == 0 || name.rfind("cni", 0) == 0) {
      continue;
    }
    char text[INET_ADDRSTRLEN];
    auto* in = reinterpret_cast<sockaddr_in*>(i->ifa_addr);
    if (inet_ntop(AF_INET, &in->sin_addr, text, sizeof text) != nullptr) found = text;
  }
  freeifaddrs(list);
  if (found.empty()) {
    return Status(StatusCode::kFailedPrecondition,
                  "no network interface with a non-loopback IPv4 address is up: a kubelet "
                  "refuses a loopback node IP");
  }
  return found;
}

namespace {

bool SocketAnswers(const std::string& path) {
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return false;
  sockaddr_un addr = {};
  addr.sun_family = AF_UNIX;
  snprintf(addr.sun_path, sizeof addr.sun_path, "%s", path.c_str());
  bool ok = connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0;
  close(fd);
  return ok;
}

// Mount points of this process's mount namespace under `dir` (mountinfo's field 5, octal
// escapes decoded), deepest first.
std::vector<std::string> MountsUnder(const std::string& dir) {
  std::vector<std::string> out;
  std::ifstream in("/proc/self/mountinfo");
  for (std::string line; std::getline(in, line);) {
    std::istringstream fields(line);
    std::string f, point;
    for (int i = 0; i < 5 && fields >> f; ++i) point = f;
    std::string decoded;
    for (size_t i = 0; i < point.size(); ++i) {
      if (point[i] == '\\' && i + 3 < point.size()) {
        decoded += static_cast<char>(std::stoi(point.substr(i + 1, 3), nullptr, 8));
        i += 3;
      } else {
        decoded += point[i];
      }
    }
    if (decoded.rfind(dir + "/", 0) == 0) out.push_back(decoded);
  }
  std::sort(out.begin(), out.end(),
            [](const std::string& a, const std::string& b) { return a.size() > b.size(); });
  return out;
}

std::string Quoted(const std::string& s) { return "\"" + s + "\""; }

// Removes the cgroup folder `dir` and everything below it that holds no process, children
// first (a cgroup folder goes only by rmdir, and only once it is empty of folders and tasks).
void RemoveCgroupTree(const std::string& dir) {
  std::error_code ec;
  for (const fs::directory_entry& e : fs::directory_iterator(dir, ec)) {
    if (e.is_directory(ec) && !e.is_symlink(ec)) RemoveCgroupTree(e.path().string());
  }
  rmdir(dir.c_str());
}

// The kubelet's cgroups (kubepods and the QoS and pod cgroups below it, cgroupDriver
// cgroupfs) under every hierarchy of the machine: what a stopped node leaves of its pods.
void RemoveKubepodsCgroups() {
  std::error_code ec;
  RemoveCgroupTree("/sys/fs/cgroup/kubepods");  // cgroup v2
  for (const fs::directory_entry& e : fs::directory_iterator("/sys/fs/cgroup", ec)) {
    if (!e.is_symlink(ec)) RemoveCgroupTree(e.path().string() + "/kubepods");
  }
}

}  // namespace

std::string KubeNode::HostProblems() {
  std::vector<std::string> problems;
  if (geteuid() != 0) problems.push_back("not root (a kubelet and containerd need root)");
  bool v2 = fs::exists("/sys/fs/cgroup/cgroup.controllers");
  if (!v2) {
    for (const char* c : {"cpu", "cpuacct", "cpuset", "memory", "pids"}) {
      if (!fs::exists(std::string("/sys/fs/cgroup/") + c + "/tasks")) {
        problems.push_back(std::string("the cgroup v1 controller '") + c + "' is not mounted");
      }
    }
  }
  std::ifstream fss("/proc/filesystems");
  std::string all((std::istreambuf_iterator<char>(fss)), std::istreambuf_iterator<char>());
  if (all.find("\toverlay\n") == std::string::npos) {
    problems.push_back("the kernel has no overlay filesystem (containerd's snapshotter)");
  }
  if (!fs::exists("/proc/sys/net/ipv4/ip_forward")) problems.push_back("no IPv4 networking");
  std::string text;
  for (const std::string& p : problems) text += (text.empty() ? "" : "; ") + p;
  return text;
}

Result<std::unique_ptr<KubeNode>> KubeNode::Start(KubeControlPlane& control_plane,
                                                  KubeNodeOptions options) {
  if (std::string why = HostProblems(); !why.empty()) {
    return Status(StatusCode::kFailedPrecondition, "this machine cannot run a node: " + why);
  }
  Result<std::string> env = ReadFileToString(options.bin_dir + "/node.env");
  if (!env.ok()) {
    return Status(StatusCode::kFailedPrecondition,
                  options.bin_dir + "/node.env is missing: set up the node's tools with "
                                    "`bash scripts/node-tools.sh` and pass the folder it prints");
  }
  std::unique_ptr<KubeNode> node(new KubeNode(control_plane, std::move(options)));
  node->tools_ = KeyValueLines(*env);
  std::vector<std::string> tools = {"KUBELET", "CONTAINERD", "CTR", "CNI_BIN_DIR"};
  if (node->options_.service_proxy) tools.push_back("KUBE_PROXY");
  for (const std::string& tool : tools) {
    if (node->tools_[tool].empty() || !fs::exists(node->tools_[tool])) {
      return Status(StatusCode::kFailedPrecondition,
                    tool + " of node.env is missing: run scripts/node-tools.sh");
    }
  }
  HAMI_RETURN_IF_ERROR(node->Boot());
  return node;
}

KubeNode::KubeNode(KubeControlPlane& control_plane, KubeNodeOptions options)
    : control_plane_(control_plane), options_(std::move(options)) {}

KubeNode::~KubeNode() {
  Drain();
  StopKubeProxy();
  if (auto it = processes_.find("kubelet"); it != processes_.end()) it->second->Stop();
  KillContainers();
  if (auto it = processes_.find("containerd"); it != processes_.end()) it->second->Stop();
  UnmountUnder(options_.dir);
  RemoveKubepodsCgroups();
  for (const char* ip : {"/usr/sbin/ip", "/sbin/ip", "/usr/bin/ip", "/bin/ip"}) {
    if (access(ip, X_OK) == 0) {
      RunProcess({ip, "link", "delete", options_.bridge}, ChildEnv());
      break;
    }
  }
}

LoggedProcess* KubeNode::Process(const std::string& name) {
  auto it = processes_.find(name);
  return it == processes_.end() || !it->second->Running() ? nullptr : it->second.get();
}

Status KubeNode::Boot() {
  std::error_code ec;
  for (const char* sub : {"/containerd", "/kubelet", "/cni/net.d", "/cni/ipam", "/pki"}) {
    fs::create_directories(options_.dir + sub, ec);
    if (ec) return InternalError("cannot create " + options_.dir + sub + ": " + ec.message());
  }
  // A fresh node hands out nothing yet: an earlier node's checkpoint of devices in use (the
  // folder is the machine's, not the node's) must not survive into this one.
  fs::create_directories(device_plugin_dir(), ec);
  fs::remove(device_plugin_dir() + "/kubelet_internal_checkpoint", ec);
  HAMI_ASSIGN_OR_RETURN(node_ip_, HostAddress(options_.bridge));
  HAMI_ASSIGN_OR_RETURN(k8s::RestConfig admin, k8s::LoadKubeconfigFile(
                                                   control_plane_.admin_kubeconfig()));
  admin.qps = 0;
  HAMI_ASSIGN_OR_RETURN(admin_, k8s::RestClient::Create(admin));
  HAMI_RETURN_IF_ERROR(WriteCniConfig());
  HAMI_RETURN_IF_ERROR(StartContainerd());
  HAMI_RETURN_IF_ERROR(ImportImages());
  HAMI_RETURN_IF_ERROR(WriteKubeletFiles());
  HAMI_RETURN_IF_ERROR(StartKubelet());
  HAMI_RETURN_IF_ERROR(WaitNodeReady());
  return options_.service_proxy ? StartKubeProxy() : OkStatus();
}

Status KubeNode::WriteCniConfig() {
  const std::string conf = R"({
  "cniVersion": "1.0.0",
  "name": "hami-node",
  "plugins": [{
    "type": "bridge",
    "bridge": )" + Quoted(options_.bridge) + R"(,
    "isGateway": true,
    "ipMasq": false,
    "hairpinMode": true,
    "ipam": {
      "type": "host-local",
      "ranges": [[{"subnet": )" + Quoted(options_.pod_cidr) + R"(}]],
      "routes": [{"dst": "0.0.0.0/0"}],
      "dataDir": )" + Quoted(options_.dir + "/cni/ipam") + R"(
    }
  }]
}
)";
  return WriteFileAtomically(options_.dir + "/cni/net.d/10-hami-node.conflist", conf, 0644);
}

Status KubeNode::StartContainerd() {
  const std::string d = options_.dir + "/containerd";
  containerd_socket_ = d + "/containerd.sock";
  const std::string cri = "[plugins.\"io.containerd.grpc.v1.cri\"";
  std::string runtime = options_.runtime_binary.empty() ? tools_["RUNC"] : options_.runtime_binary;
  std::string config =
      "version = 2\nroot = " + Quoted(d + "/root") + "\nstate = " + Quoted(d + "/state") +
      "\n# Only what a CRI node needs; nothing under /opt.\n"
      "disabled_plugins = [\"io.containerd.internal.v1.opt\", "
      "\"io.containerd.snapshotter.v1.aufs\", \"io.containerd.snapshotter.v1.btrfs\", "
      "\"io.containerd.snapshotter.v1.zfs\", \"io.containerd.snapshotter.v1.devmapper\"]\n"
      "[grpc]\n  address = " + Quoted(containerd_socket_) + "\n" +
      "[ttrpc]\n  address = " + Quoted(containerd_socket_ + ".ttrpc") + "\n" +
      cri + "]\n  sandbox_image = " + Quoted(options_.sandbox_image) + "\n" +
      cri + ".containerd]\n  snapshotter = \"overlayfs\"\n  default_runtime_name = \"runc\"\n" +
      cri + ".containerd.runtimes.runc]\n  runtime_type = \"io.containerd.runc.v2\"\n" +
      cri + ".containerd.runtimes.runc.options]\n  BinaryName = " + Quoted(runtime) +
      "\n  Root = " + Quoted(d + "/runc") + "\n  SystemdCgroup = false\n" +
      cri + ".cni]\n  bin_dir = " + Quoted(tools_["CNI_BIN_DIR"]) +
      "\n  conf_dir = " + Quoted(options_.dir + "/cni/net.d") + "\n";
  HAMI_RETURN_IF_ERROR(WriteFileAtomically(d + "/config.toml", config, 0644));
  auto& slot = processes_["containerd"];
  slot = std::make_unique<LoggedProcess>("containerd", options_.dir + "/containerd.log");
  std::vector<std::string> env = ChildEnv();
  env.insert(env.end(), options_.containerd_env.begin(), options_.containerd_env.end());
  HAMI_RETURN_IF_ERROR(
      slot->Spawn({tools_["CONTAINERD"], "--config", d + "/config.toml"}, env));
  // The socket's creation in its folder wakes the wait; a connect proves it serves.
  HAMI_RETURN_IF_ERROR(slot->WaitUntil([&] { return SocketAnswers(containerd_socket_); },
                                       options_.start_timeout));
  if (options_.on_start) options_.on_start("containerd");
  return OkStatus();
}

Status KubeNode::RestartContainerd() {
  if (auto it = processes_.find("containerd"); it != processes_.end()) it->second->Stop();
  return StartContainerd();
}

Result<std::string> KubeNode::Ctr(const std::vector<std::string>& args) {
  std::vector<std::string> argv = {tools_["CTR"], "--address", containerd_socket_,
                                   "--namespace", "k8s.io"};
  argv.insert(argv.end(), args.begin(), args.end());
  ProcessResult r = RunProcess(argv, ChildEnv());
  if (r.exit_code != 0) {
    return InternalError("ctr " + (args.empty() ? "" : args[0]) + " failed: " + r.err + r.out);
  }
  return r.out;
}

Status KubeNode::ImportImages() {
  for (const std::string& archive : options_.image_archives) {
    Result<std::string> imported = Ctr({"images", "import", archive});
    if (!imported.ok()) return imported.status();
  }
  return OkStatus();
}

Status KubeNode::WriteKubeletFiles() {
  HAMI_ASSIGN_OR_RETURN(kubelet_kubeconfig_, control_plane_.WriteUserKubeconfig(
                                                 "kubelet-" + options_.node_name,
                                                 "system:node:" + options_.node_name,
                                                 {"system:nodes"}));
  HAMI_RETURN_IF_ERROR(
      WriteFileAtomically(options_.dir + "/pki/ca.crt", control_plane_.ca_pem(), 0644));
  HAMI_ASSIGN_OR_RETURN(kubelet_port_, PickFreeLoopbackPort());
  HAMI_ASSIGN_OR_RETURN(healthz_port_, PickFreeLoopbackPort());
  // Eviction and image garbage collection are set so that a busy test machine's disk never
  // makes the node evict the pods under test.
  const std::string config =
      "apiVersion: kubelet.config.k8s.io/v1beta1\n"
      "kind: KubeletConfiguration\n"
      "address: " + node_ip_ + "\n" +
      "port: " + std::to_string(kubelet_port_) + "\n" +
      "readOnlyPort: 0\n"
      "healthzBindAddress: 127.0.0.1\n"
      "healthzPort: " + std::to_string(healthz_port_) + "\n" +
      "authentication:\n"
      "  anonymous: {enabled: false}\n"
      "  webhook: {enabled: false}\n"
      "  x509: {clientCAFile: " + options_.dir + "/pki/ca.crt}\n" +
      "authorization: {mode: AlwaysAllow}\n"
      "cgroupDriver: cgroupfs\n"
      "failCgroupV1: false\n"
      "failSwapOn: false\n"
      "containerRuntimeEndpoint: unix://" + containerd_socket_ + "\n" +
      "podLogsDir: " + options_.dir + "/pod-logs\n" +
      "maxPods: " + std::to_string(options_.max_pods) + "\n" +
      "serializeImagePulls: false\n"
      "rotateCertificates: false\n"
      "makeIPTablesUtilChains: false\n"
      "imageGCHighThresholdPercent: 100\n"
      "imageGCLowThresholdPercent: 99\n"
      "evictionHard: {memory.available: 1Mi, nodefs.available: 1%, imagefs.available: 1%, "
      "nodefs.inodesFree: 1%}\n"
      "nodeStatusUpdateFrequency: 2s\n"
      "syncFrequency: 10s\n";
  return WriteFileAtomically(options_.dir + "/kubelet-config.yaml", config, 0644);
}

Status KubeNode::StartKubelet() {
  std::string labels;
  for (const auto& [k, v] : options_.labels) labels += (labels.empty() ? "" : ",") + k + "=" + v;
  std::vector<std::string> argv = {tools_["KUBELET"],
                                   "--config=" + options_.dir + "/kubelet-config.yaml",
                                   "--kubeconfig=" + kubelet_kubeconfig_,
                                   "--root-dir=" + kubelet_dir(),
                                   "--cert-dir=" + options_.dir + "/pki",
                                   "--hostname-override=" + options_.node_name,
                                   "--node-ip=" + node_ip_,
                                   "--v=2"};
  if (!labels.empty()) argv.push_back("--node-labels=" + labels);
  auto& slot = processes_["kubelet"];
  if (slot) slot->Stop();
  slot = std::make_unique<LoggedProcess>("kubelet", options_.dir + "/kubelet.log");
  HAMI_RETURN_IF_ERROR(slot->Spawn(argv, ChildEnv()));
  k8s::RestConfig plain;
  plain.server = "http://127.0.0.1:" + std::to_string(healthz_port_);
  plain.timeout = std::chrono::milliseconds(1000);
  plain.qps = 0;
  HAMI_ASSIGN_OR_RETURN(std::unique_ptr<k8s::RestClient> client, k8s::RestClient::Create(plain));
  std::string last;
  Status s = slot->WaitUntil(
      [&] {
        auto r = client->Send("GET", "/healthz");
        last = r.ok() ? std::to_string(r->status) + " " + r->body : r.status().ToString();
        return r.ok() && r->status == 200;
      },
      options_.start_timeout, std::chrono::milliseconds(100));
  if (!s.ok()) return Status(s.code(), s.message() + "\nlast answer of /healthz: " + last);
  if (options_.on_start) options_.on_start("kubelet");
  return OkStatus();
}

Status KubeNode::StartKubeProxy() {
  HAMI_ASSIGN_OR_RETURN(std::string kubeconfig,
                        control_plane_.WriteUserKubeconfig("kube-proxy-" + options_.node_name,
                                                           "system:kube-proxy", {}));
  HAMI_ASSIGN_OR_RETURN(int healthz, PickFreeLoopbackPort());
  HAMI_ASSIGN_OR_RETURN(int metrics, PickFreeLoopbackPort());
  // conntrack: the machine's limits and timeouts are left as they are (0 = do not set). Node
  // ports on the node's address only, never on loopback (no route_localnet).
  const std::string config =
      "apiVersion: kubeproxy.config.k8s.io/v1alpha1\n"
      "kind: KubeProxyConfiguration\n"
      "clientConnection: {kubeconfig: " + kubeconfig + "}\n" +
      "hostnameOverride: " + options_.node_name + "\n" +
      "mode: iptables\n"
      "clusterCIDR: " + options_.pod_cidr + "\n" +
      "healthzBindAddress: 127.0.0.1:" + std::to_string(healthz) + "\n" +
      "metricsBindAddress: 127.0.0.1:" + std::to_string(metrics) + "\n" +
      "nodePortAddresses: [" + node_ip_ + "/32]\n" +
      "iptables: {localhostNodePorts: false}\n"
      "conntrack: {maxPerCore: 0, min: 0, tcpEstablishedTimeout: 0s, tcpCloseWaitTimeout: 0s}\n";
  const std::string path = options_.dir + "/kube-proxy.yaml";
  HAMI_RETURN_IF_ERROR(WriteFileAtomically(path, config, 0644));
  auto& slot = processes_["kube-proxy"];
  slot = std::make_unique<LoggedProcess>("kube-proxy", options_.dir + "/kube-proxy.log");
  HAMI_RETURN_IF_ERROR(
      slot->Spawn({tools_["KUBE_PROXY"], "--config=" + path, "--v=2"}, ChildEnv()));
  // Up once it has written its rules for the Services and endpoints it found at start: its
  // metric of the last sync is then set.
  k8s::RestConfig plain;
  plain.server = "http://127.0.0.1:" + std::to_string(metrics);
  plain.timeout = std::chrono::milliseconds(1000);
  plain.qps = 0;
  HAMI_ASSIGN_OR_RETURN(std::unique_ptr<k8s::RestClient> client, k8s::RestClient::Create(plain));
  static const std::string kSynced = "kubeproxy_sync_proxy_rules_last_timestamp_seconds";
  HAMI_RETURN_IF_ERROR(slot->WaitUntil(
      [&] {
        auto r = client->Send("GET", "/metrics");
        if (!r.ok() || r->status != 200) return false;
        // One sample per IP family ({ip_family="IPv4"}): any that is set will do.
        std::istringstream lines(r->body);
        for (std::string line; std::getline(lines, line);) {
          if (line.rfind(kSynced, 0) != 0) continue;
          const std::string value = line.substr(line.find_last_of(' ') + 1);
          if (value != "0") return true;
        }
        return false;
      },
      options_.start_timeout, std::chrono::milliseconds(100)));
  if (options_.on_start) options_.on_start("kube-proxy");
  return OkStatus();
}

void KubeNode::StopKubeProxy() {
  auto it = processes_.find("kube-proxy");
  if (it == processes_.end()) return;
  it->second->Stop();
  processes_.erase(it);
  // Its chains and rules in the machine's iptables (nat, filter) go with it.
  ProcessResult r = RunProcess({tools_["KUBE_PROXY"], "--cleanup"}, ChildEnv());
  if (r.exit_code != 0) {
    HAMI_LOG(Warning) << options_.node_name << ": kube-proxy --cleanup failed: " << r.err;
  }
}

Status KubeNode::StopKubelet() {
  auto it = processes_.find("kubelet");
  if (it == processes_.end() || !it->second->Running()) {
    return Status(StatusCode::kFailedPrecondition, "the kubelet is not running");
  }
  it->second->Stop();
  return OkStatus();
}

Status KubeNode::WaitNodeReady() {
  auto ready = [](const k8s::Object& node) {
    const auto* conditions = &node["status"]["conditions"];
    if (!conditions->is_array()) return false;
    for (const auto& c : *conditions) {
      if (k8s::GetString(c, "/type") == "Ready") return k8s::GetString(c, "/status") == "True";
    }
    return false;
  };
  Result<k8s::Object> node = WaitForObject(*admin_, k8s::kNodes, "", options_.node_name,
                                           ready, options_.start_timeout);
  if (!node.ok()) {
    LoggedProcess* kubelet = Process("kubelet");
    return Status(node.status().code(),
                  node.status().message() + "\nkubelet log:\n" +
                      (kubelet ? kubelet->LogTail(30) : std::string("(not running)")));
  }
  return OkStatus();
}

void KubeNode::Drain() {
  if (!admin_ || Process("kubelet") == nullptr) return;
  k8s::ListOptions on_node;
  on_node.field_selector = "spec.nodeName=" + options_.node_name;
  Result<k8s::Object> pods = admin_->ListAll(k8s::kPods, "", on_node);
  if (!pods.ok()) return;
  k8s::DeleteOptions quick;
  quick.grace_period_seconds = 1;
  for (const auto& pod : pods->value("items", k8s::Object::array())) {
    (void)admin_->Delete(k8s::kPods, k8s::Namespace(pod), k8s::Name(pod), quick);
  }
  // The kubelet takes each pod down (containers, sandbox, network namespace); done when
  // containerd runs no task. No event announces that: asked every half second.
  (void)processes_["kubelet"]->WaitUntil(
      [&] {
        Result<std::string> tasks = Ctr({"tasks", "list", "--quiet"});
        return tasks.ok() && tasks->find_first_not_of(" \n") == std::string::npos;
      },
      options_.drain_timeout, std::chrono::milliseconds(500));
}

void KubeNode::KillContainers() {
  if (Process("containerd") == nullptr) return;
  Result<std::string> ids = Ctr({"containers", "list", "--quiet"});
  if (!ids.ok()) return;
  std::istringstream lines(*ids);
  std::vector<std::string> netns;
  for (std::string id; std::getline(lines, id);) {
    if (id.empty()) continue;
    if (Result<std::string> info = Ctr({"containers", "info", id}); info.ok()) {
      // A sandbox's network namespace is a file CNI's netns code bind-mounted under /run/netns.
      static const std::string kKey = "\"path\": \"/var/run/netns/";
      size_t at = info->find(kKey);
      if (at != std::string::npos) {
        size_t start = at + 9, end = info->find('"', start);
        netns.push_back(info->substr(start, end - start));
      }
    }
    (void)Ctr({"tasks", "delete", "--force", id});
    (void)Ctr({"containers", "delete", id});
  }
  for (const std::string& path : netns) {
    umount2(path.c_str(), MNT_DETACH);
    unlink(path.c_str());
  }
  // Normal: the kubelet removes a sandbox's namespace only when it garbage-collects the
  // sandbox, which a stopping node never waits for.
  if (!netns.empty()) HAMI_LOG(Info) << options_.node_name << ": removed " << netns.size()
                                     << " network namespace(s) of stopped sandboxes";
}

void KubeNode::UnmountUnder(const std::string& dir) {
  for (const std::string& point : MountsUnder(dir)) {
    if (umount2(point.c_str(), MNT_DETACH) != 0) {
      HAMI_LOG(Warning) << "cannot unmount " << point << ": " << strerror(errno);
    }
  }
}

}  // namespace hami::sim
