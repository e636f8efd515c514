// World (world.h): the per-node processes (kubelet, device plugin, monitor), fault injection on
// running processes, and pods through the API server.

#include <signal.h>

#include "common/subprocess.h"
#include "k8s/typed.h"
#include "sim/world/manifests.h"
#include "sim/world/waits.h"
#include "sim/world/world.h"

namespace hami::sim {

using SteadyClock = std::chrono::steady_clock;

Status World::StartKubelet(const std::string& node) {
  const WorldNode* n = Node(node);
  if (n == nullptr) return NotFoundError("no node " + node);
  if (!options_.node_bin_dir.empty()) {
    if (KubeNode* real = real_node(node)) return real->StartKubelet();
    return StartRealNode(*n);
  }
  const std::string here = options_.kubelet_relative_paths ? "" : dir_ + "/";
  std::vector<std::string> argv = {Bin("hami-sim-kubelet"),
                                   "--kubeconfig=" + kubeconfig_,
                                   "--node-name=" + node,
                                   "--root-dir=" + here + node,
                                   "--sim-config=" + here + node + "/gpu.conf",
                                   "--sim-state=" + here + node + "/gpu-state",
                                   "--sim-lib-dir=" + options_.build_dir + "/sim",
                                   "--heartbeat=" + options_.kubelet_heartbeat};
  for (const auto& [k, v] : n->labels) argv.push_back("--label=" + k + "=" + v);
  if (options_.stand_in_for_gpu_containers) argv.push_back("--stand-in-for-gpu-containers");
  if (options_.pid_namespaces) argv.push_back("--pid-namespaces");
  if (n->cdi_runtime) argv.push_back("--cdi-spec-dir=" + here + node + "/cdi");
  argv.push_back(ReadyArg(node + "-kubelet"));
  if (options_.kubelet_relative_paths) {
    // cd first: the shell execs the kubelet, so the process (and its signals) stay the same.
    std::string command = "cd '" + dir_ + "' && exec";
    for (const std::string& a : argv) command += " '" + a + "'";
    argv = {"/bin/sh", "-c", command};
  }
  ReadyFields ready;
  return Launch(node + "-kubelet", argv, BaseEnv(), &ready);
}

Status World::StopKubelet(const std::string& node) {
  if (KubeNode* real = real_node(node)) return real->StopKubelet();
  auto it = processes_.find(node + "-kubelet");
  if (it == processes_.end()) return NotFoundError("no kubelet for " + node);
  it->second->Stop();
  return OkStatus();
}

Status World::StartPlugin(const std::string& node) {
  const WorldNode* n = Node(node);
  if (n == nullptr) return NotFoundError("no node " + node);
  std::vector<std::string> env = BaseEnv();
  env.push_back("NODE_NAME=" + node);
  env.push_back("KUBECONFIG=" + KubeconfigOf("hami-device-plugin"));
  env.push_back("HAMI_SIM_CONFIG=" + dir_ + "/" + node + "/gpu.conf");
  env.push_back("HAMI_SIM_STATE=" + GpuState(node));
  env.push_back("LD_LIBRARY_PATH=" + options_.build_dir + "/sim");
  if (n->cdi_runtime) env.push_back("CDI_SPEC_DIR=" + dir_ + "/" + node + "/cdi");
  env.insert(env.end(), n->plugin_env.begin(), n->plugin_env.end());
  std::vector<std::string> argv = {Bin("hami-device-plugin"),
                                   "--device-plugin-path=" + DevicePluginDir(node),
                                   "--hook-path=" + HookPath(node),
                                   "--libvgpu=" + options_.build_dir + "/lib/libvgpu.so",
                                   "--node-config-file=" + dir_ + "/config.json",
                                   "--register-interval=" + options_.register_interval};
  if (!options_.device_config_yaml.empty()) {
    argv.push_back("--config-file=" + dir_ + "/device-config.yaml");
  }
  if (!n->volcano.empty()) argv.push_back("--volcano=" + n->volcano);
  argv.insert(argv.end(), options_.plugin_args.begin(), options_.plugin_args.end());
  argv.push_back(ReadyArg(node + "-plugin"));
  ReadyFields ready;
  return Launch(node + "-plugin", argv, env, &ready);
}

Status World::StartMonitor(const std::string& node) {
  const WorldNode* n = Node(node);
  if (n == nullptr) return NotFoundError("no node " + node);
  std::vector<std::string> env = BaseEnv();
  env.push_back("NODE_NAME=" + node);
  env.push_back("KUBECONFIG=" + KubeconfigOf("hami-monitor"));
  env.push_back("HOOK_PATH=" + HookPath(node) + "/vgpu");
  env.push_back("HAMI_SIM_CONFIG=" + dir_ + "/" + node + "/gpu.conf");
  env.push_back("HAMI_SIM_STATE=" + GpuState(node));
  env.push_back("LD_LIBRARY_PATH=" + options_.build_dir + "/sim");
  ReadyFields ready;
  HAMI_RETURN_IF_ERROR(Launch(node + "-monitor",
                              {Bin("hami-monitor"), "--metrics-bind-address=127.0.0.1:0",
                               "--update-interval=" + options_.monitor_interval,
                               ReadyArg(node + "-monitor")},
                              env, &ready));
  monitor_urls_[node] = "http://" + ready["metrics"] + "/metrics";
  return OkStatus();
}

std::string World::MonitorMetricsUrl(const std::string& node) const {
  auto it = monitor_urls_.find(node);
  return it == monitor_urls_.end() ? "" : it->second;
}

Status World::StopPlugin(const std::string& node) {
  auto it = processes_.find(node + "-plugin");
  if (it == processes_.end()) return NotFoundError("no plugin for " + node);
  it->second->Stop();
  return OkStatus();
}

LoggedProcess* World::Find(const std::string& process) const {
  auto it = processes_.find(process);
  if (it != processes_.end()) return it->second->Running() ? it->second.get() : nullptr;
  for (const auto& [name, node] : real_nodes_) {
    if (process == name + "-kubelet") return node->Process("kubelet");
    if (process == name + "-containerd") return node->Process("containerd");
  }
  if (!control_plane_) return nullptr;
  return control_plane_->Process(process == "apiserver" ? "kube-apiserver" : process);
}

int World::Pid(const std::string& process) const {
  LoggedProcess* p = Find(process);
  return p == nullptr ? -1 : p->pid();
}

Status World::Signal(const std::string& process, int sig) {
  LoggedProcess* p = Find(process);
  if (p == nullptr) return NotFoundError(process + " is not running");
  if (kill(p->pid(), sig) != 0) return Status(StatusCode::kInternal, "kill failed");
  return OkStatus();
}

Status World::InjectXid(const std::string& node, int device, int xid) {
  return SimCtl(node, {"inject-xid", "--device", std::to_string(device), "--xid",
                       std::to_string(xid)})
      .status();
}

Result<std::string> World::SimCtl(const std::string& node, const std::vector<std::string>& args) {
  std::vector<std::string> argv = {Bin("hami-simctl"), "--state", GpuState(node)};
  argv.insert(argv.end(), args.begin(), args.end());
  ProcessResult r = RunProcess(argv, {"HAMI_SIM_CONFIG=" + dir_ + "/" + node + "/gpu.conf"});
  if (r.exit_code != 0) {
    return Status(StatusCode::kInternal,
                  "hami-simctl " + (args.empty() ? "" : args[0]) + " failed: " + r.err);
  }
  return r.out;
}

Result<std::vector<std::string>> World::Apply(const std::string& yaml, const std::string& ns) {
  std::vector<std::string> names;
  for (const std::string& doc : SplitYamlDocuments(yaml)) {
    HAMI_ASSIGN_OR_RETURN(k8s::Object obj, YamlToJson(doc));
    if (!obj.is_object()) return InvalidArgumentError("a YAML document is not an object");
    HAMI_ASSIGN_OR_RETURN(k8s::Object created, client_->Create(k8s::kPods, ns, obj));
    names.push_back(k8s::Name(created));
  }
  return names;
}

Result<k8s::Object> World::WaitForPod(const std::string& ns, const std::string& name,
                                      const std::function<bool(const k8s::Object&)>& pred,
                                      std::chrono::milliseconds timeout) {
  return WaitForObject(*client_, k8s::kPods, ns, name, pred, timeout);
}

Result<k8s::Object> World::WaitForNode(const std::string& name,
                                       const std::function<bool(const k8s::Object&)>& pred,
                                       std::chrono::milliseconds timeout) {
  return WaitForObject(*client_, k8s::kNodes, "", name, pred, timeout);
}

Result<std::string> World::WaitForLog(const std::string& ns, const std::string& pod,
                                      const std::string& container, const std::string& text,
                                      std::chrono::milliseconds timeout) {
  const SteadyClock::time_point deadline = SteadyClock::now() + timeout;
  HAMI_ASSIGN_OR_RETURN(k8s::Object p, k8s::GetPod(*client_, ns, pod));
  const std::string node = k8s::GetString(p, "/spec/nodeName");
  if (node.empty()) return FailedPreconditionError("pod " + ns + "/" + pod + " is on no node");
  // Where hami-sim-kubelet keeps a container's log (its PodWorker::LogPath): under its root
  // directory, which is the node's directory here (StartKubelet). A real kubelet's is in its
  // pod log folder, one file per restart of the container.
  std::string file = dir_ + "/" + node + "/pods/" + k8s::Uid(p) + "/" + container + ".log";
  if (KubeNode* real = real_node(node)) {
    int restarts = 0;
    for (const auto& c : p["status"].value("containerStatuses", k8s::Object::array())) {
      if (c.value("name", "") == container) restarts = c.value("restartCount", 0);
    }
    file = real->ContainerLogPath(ns, pod, k8s::Uid(p), container, restarts);
  }
  Result<std::string> written = WaitForFileText(file, text, deadline);
  if (!written.ok()) {
    return written.status().WithContext("log of " + ns + "/" + pod + "/" + container);
  }
  HAMI_ASSIGN_OR_RETURN(std::string log, Logs(ns, pod, container));
  if (log.find(text) == std::string::npos) {
    return InternalError("the kubelet serves a log of " + ns + "/" + pod + "/" + container +
                         " without \"" + text + "\", which its file has: " + log);
  }
  return log;
}

Result<std::string> World::Logs(const std::string& ns, const std::string& pod,
                                const std::string& container) {
  HAMI_ASSIGN_OR_RETURN(k8s::HttpResponse r,
                        client_->Send("GET", k8s::ResourcePath(k8s::kPods, ns, pod, "log") +
                                                 "?container=" + k8s::UrlEncode(container)));
  if (r.status != 200) {
    return Status(StatusCode::kUnavailable, "logs of " + ns + "/" + pod + "/" + container +
                                                ": HTTP " + std::to_string(r.status) + " " +
                                                r.body);
  }
  return r.body;
}

}  // namespace hami::sim
