// World (world.h): start-up, in dependency order, and teardown. RBAC and credentials are in
// world_rbac.cc; the node processes, fault injection and pod access in world_processes.cc.

#include "sim/world/world.h"

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>

#include "common/file_util.h"
#include "common/log.h"
#include "common/subprocess.h"
#include "k8s/config.h"
#include "k8s/typed.h"
#include "net/tls.h"
#include "sim/world/manifests.h"
#include "sim/world/waits.h"
#include "sim/world/world_internal.h"

namespace hami::sim {

using Json = nlohmann::json;
using SteadyClock = std::chrono::steady_clock;

namespace world_internal {

Status WriteAll(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
  out.close();
  if (!out) return Status(StatusCode::kInternal, "cannot write " + path);
  return OkStatus();
}

// Ready once the node has its registration (the scheduler places pods on it) and its GPUs as
// allocatable (its kubelet admits them); for a Volcano node, once it offers its mode's resource
// (and, in vGPU mode, Volcano's registration).
Status WaitForNodeGpus(k8s::RestClient& client, const WorldNode& n,
                       std::chrono::seconds timeout) {
  const std::string& name = n.name;
  const std::string resource = n.volcano == "vgpu"     ? "volcano.sh~1vgpu-number"
                               : n.volcano == "share"  ? "volcano.sh~1gpu-memory"
                               : n.volcano == "number" ? "volcano.sh~1gpu-number"
                                                       : "nvidia.com~1gpu";
  const std::string registration =
      n.volcano.empty()    ? "hami.io~1node-nvidia-register"
      : n.volcano == "vgpu" ? "volcano.sh~1node-vgpu-register"
                            : "";
  Result<k8s::Object> node = WaitForObject(
      client, k8s::kNodes, "", name,
      [&](const k8s::Object& o) {
        std::string gpus = k8s::GetString(o, "/status/allocatable/" + resource);
        return (registration.empty() ||
                !k8s::GetString(o, "/metadata/annotations/" + registration).empty()) &&
               !gpus.empty() && gpus != "0";
      },
      timeout);
  if (!node.ok()) return node.status().WithContext("node " + name + " never registered GPUs");
  return OkStatus();
}

}  // namespace world_internal

using world_internal::WaitForNodeGpus;
using world_internal::WriteAll;

namespace {

// Mutating webhook configurations (cluster-scoped), where hami-scheduler's is registered.
k8s::Resource Webhooks() {
  return {"admissionregistration.k8s.io/v1", "mutatingwebhookconfigurations", false};
}

// `requested`, or a fresh /tmp directory (then `*owned` is set) when it is empty; created with its
// parents. `*dir` is set before the creation is tried, so a failed world still knows its path.
Status MakeWorldDir(const std::string& requested, std::string* dir, bool* owned) {
  *dir = requested;
  if (dir->empty()) {
    char tmpl[] = "/tmp/hami-world-XXXXXX";
    if (mkdtemp(tmpl) == nullptr) return Status(StatusCode::kInternal, "mkdtemp failed");
    *dir = tmpl;
    *owned = true;
  }
  std::error_code ec;
  std::filesystem::create_directories(*dir, ec);
  if (ec) return Status(StatusCode::kInternal, "cannot create " + *dir + ": " + ec.message());
  return OkStatus();
}

// hami-scheduler's command line, in flag order: connection and bind flags, then TLS (a cert
// Secret the scheduler manages, or the files under `dir`), the device config, leader election,
// the caller's extra flags, and last `ready_arg`.
std::vector<std::string> SchedulerArgv(const WorldOptions& o, const std::string& dir,
                                       const std::string& binary, const std::string& kubeconfig,
                                       const std::string& device_config,
                                       const std::string& ready_arg) {
  std::vector<std::string> sched = {binary, "--kubeconfig=" + kubeconfig,
                                    "--http_bind=127.0.0.1:0",
                                    "--metrics-bind-address=127.0.0.1:0"};
  if (o.webhook_cert_secret) {
    sched.insert(sched.end(),
                 {"--webhook-cert-secret=hami-scheduler-tls",
                  "--webhook-cert-namespace=kube-system", "--webhook-config-name=hami-webhook"});
  } else {
    sched.insert(sched.end(),
                 {"--cert_file=" + dir + "/tls.crt", "--key_file=" + dir + "/tls.key"});
  }
  if (!o.device_config_yaml.empty()) sched.push_back("--device-config-file=" + device_config);
  if (o.leader_elect) {
    sched.insert(sched.end(), {"--leader-elect=true", "--leader-elect-resource-name=hami-scheduler",
                               "--leader-elect-resource-namespace=kube-system"});
  }
  sched.insert(sched.end(), o.scheduler_args.begin(), o.scheduler_args.end());
  sched.push_back(ready_arg);
  return sched;
}

// The configuration exists before the scheduler starts (as when the manifests are applied
// together); its URL follows once the extender's port is known, its caBundle comes from the
// scheduler.
Status CreatePlaceholderWebhook(k8s::RestClient& client) {
  k8s::Object hook = HamiWebhookConfiguration("https://127.0.0.1:1", "");
  hook["webhooks"][0]["clientConfig"].erase("caBundle");
  Result<k8s::Object> created = client.Create(Webhooks(), "", hook);
  if (!created.ok()) return created.status();
  return OkStatus();
}

// Points the placeholder webhook at the extender, then waits until the scheduler has filled in
// its CA: before that the API server cannot call the webhook.
Status AimPlaceholderWebhook(k8s::RestClient& client, const std::string& extender_url,
                             std::chrono::seconds timeout) {
  k8s::Object patch = k8s::Object::array({{{"op", "replace"},
                                           {"path", "/webhooks/0/clientConfig/url"},
                                           {"value", extender_url + "/webhook"}}});
  Result<k8s::Object> hook =
      client.Patch(Webhooks(), "", "hami-webhook", k8s::PatchType::kJsonPatch, patch.dump());
  if (!hook.ok()) return hook.status();
  Result<k8s::Object> filled = WaitForObject(
      client, Webhooks(), "", "hami-webhook",
      [](const k8s::Object& h) {
        return !h.value(k8s::Object::json_pointer("/webhooks/0/clientConfig/caBundle"),
                        std::string())
                    .empty();
      },
      timeout);
  if (!filled.ok()) {
    return filled.status().WithContext("hami-scheduler never filled in the webhook's caBundle");
  }
  return OkStatus();
}

// The kube-scheduler configuration from sim/world/manifests.h, leader election on the Lease
// kube-system/hami-scheduler when asked for.
std::string DefaultKubeSchedulerConfig(const std::string& extender_url, bool leader_elect) {
  if (!leader_elect) return KubeSchedulerConfigYaml(extender_url);
  return KubeSchedulerConfigYaml(extender_url,
                                 "  leaderElect: true\n  resourceName: hami-scheduler\n"
                                 "  resourceNamespace: kube-system\n");
}

// What `nvidia-ctk cdi generate` writes for the GPUs of a simulated driver config (its `uuid =`
// lines, in device order): each whole GPU by index and by UUID, and the spec-wide edits.
std::string ToolkitCdiSpec(const std::string& gpu_config) {
  std::string devices;
  std::istringstream in(gpu_config);
  int index = 0;
  for (std::string line; std::getline(in, line);) {
    std::istringstream words(line);
    std::string key, eq, uuid;
    if (!(words >> key >> eq >> uuid) || key != "uuid" || eq != "=") continue;
    const std::string edits = "  containerEdits:\n    deviceNodes:\n    - path: /dev/nvidia" +
                              std::to_string(index) + "\n";
    devices += "- name: \"" + std::to_string(index) + "\"\n" + edits;
    devices += "- name: " + uuid + "\n" + edits;
    ++index;
  }
  return "cdiVersion: 0.5.0\nkind: nvidia.com/gpu\ndevices:\n" + devices +
         "containerEdits:\n  env:\n  - NVIDIA_VISIBLE_DEVICES=void\n  deviceNodes:\n"
         "  - path: /dev/nvidiactl\n";
}

}  // namespace

std::string PodPhase(const k8s::Object& pod) { return k8s::GetString(pod, "/status/phase"); }

bool PodReady(const k8s::Object& pod) {
  for (const auto& c : pod["status"].value("conditions", k8s::Object::array())) {
    if (c.value("type", "") == "Ready") return c.value("status", "") == "True";
  }
  return false;
}

Result<std::string> ChartKubeSchedulerConfig(const std::string& kube_bin, const std::string& chart,
                                             const std::string& extender_url, bool leader_elect) {
  ProcessResult r = RunProcess({kube_bin + "/helm", "template", "hami", chart, "--namespace",
                                "kube-system", "--show-only", "templates/scheduler-config.yaml"},
                               {"HOME=/tmp", "HELM_CACHE_HOME=/tmp/.hami-helm-cache",
                                "HELM_CONFIG_HOME=/tmp/.hami-helm-config",
                                "HELM_DATA_HOME=/tmp/.hami-helm-data"});
  if (r.exit_code != 0) {
    return InternalError("helm template " + chart + " failed (" + std::to_string(r.exit_code) +
                         "): " + r.err);
  }
  std::string text;
  for (const std::string& doc : SplitYamlDocuments(r.out)) {
    Result<k8s::Object> cm = YamlToJson(doc);
    if (cm.ok() && k8s::GetString(*cm, "/metadata/name") == "hami-scheduler") {
      text = k8s::GetString(*cm, "/data/config.yaml");
    }
  }
  if (text.empty()) {
    return NotFoundError("the chart " + chart + " renders no ConfigMap hami-scheduler with a "
                         "config.yaml");
  }
  HAMI_ASSIGN_OR_RETURN(k8s::Object config, YamlToJson(text));
  if (!config.contains("extenders") || !config["extenders"].is_array() ||
      config["extenders"].empty()) {
    return InvalidArgumentError("the chart's KubeSchedulerConfiguration has no extender");
  }
  config["extenders"][0]["urlPrefix"] = extender_url;
  if (extender_url.rfind("https://", 0) != 0) {
    config["extenders"][0].erase("enableHTTPS");
    config["extenders"][0].erase("tlsConfig");
  }
  config["leaderElection"] = leader_elect ? Json{{"leaderElect", true},
                                                 {"resourceName", "hami-scheduler"},
                                                 {"resourceNamespace", "kube-system"}}
                                          : Json{{"leaderElect", false}};
  return config.dump();  // JSON is YAML
}

World::World(WorldOptions options) : options_(std::move(options)) {}

World::~World() {
  // The chart's release first (its DaemonSets would bring back the pods a node takes down).
  if (helm_installed_) {
    (void)Helm({"uninstall", kHelmRelease, "--namespace", "kube-system", "--wait", "--timeout",
                "60s"});
  }
  // A real node first, while everything it asks (the API server) still runs: its pods are
  // taken down as a kubelet does, and nothing stays mounted in the world's folder.
  real_nodes_.clear();
  // In three waves, each stopping together: the nodes' processes (their containers end with
  // their kubelets), then the schedulers, then the API server, which the others talk to until
  // they are gone.
  auto wave = [&](const std::function<bool(const std::string&)>& member) {
    std::vector<LoggedProcess*> stopping;
    for (auto it = order_.rbegin(); it != order_.rend(); ++it) {
      if (!member(*it)) continue;
      processes_[*it]->Terminate();
      stopping.push_back(processes_[*it].get());
    }
    auto deadline = SteadyClock::now() + std::chrono::seconds(10);
    for (LoggedProcess* p : stopping) p->Reap(deadline);
  };
  auto control_plane = [](const std::string& n) {
    return n == "apiserver" || n == "hami-scheduler" || n == "kube-scheduler";
  };
  wave([&](const std::string& n) { return !control_plane(n); });
  wave([&](const std::string& n) { return control_plane(n) && n != "apiserver"; });
  wave([&](const std::string& n) { return n == "apiserver"; });
  processes_.clear();
  control_plane_.reset();  // kube-scheduler, kube-controller-manager, kube-apiserver, etcd
  if (own_dir_) {
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }
}

Result<std::unique_ptr<World>> World::Start(WorldOptions options) {
  std::unique_ptr<World> w(new World(std::move(options)));
  HAMI_RETURN_IF_ERROR(w->Boot());
  return w;
}

std::string World::Bin(const std::string& name) const {
  return options_.build_dir + "/bin/" + name;
}

const WorldNode* World::Node(const std::string& name) const {
  for (const WorldNode& n : options_.nodes) {
    if (n.name == name) return &n;
  }
  return nullptr;
}

std::string World::HookPath(const std::string& node) const { return dir_ + "/" + node + "/hook"; }
std::string World::GpuState(const std::string& node) const {
  return dir_ + "/" + node + "/gpu-state";
}

std::vector<std::string> World::BaseEnv() const {
  const char* path = std::getenv("PATH");
  return {std::string("PATH=") + (path ? path : "/usr/bin:/bin"), "HOME=/tmp"};
}

Status World::Launch(const std::string& name, std::vector<std::string> argv,
                     std::vector<std::string> env, ReadyFields* ready) {
  auto& slot = processes_[name];
  if (slot && slot->Running()) return Status(StatusCode::kAlreadyExists, name + " is running");
  slot = std::make_unique<LoggedProcess>(name, LogFile(name));
  if (std::find(order_.begin(), order_.end(), name) == order_.end()) order_.push_back(name);
  // An earlier run's file would say "ready" at once.
  const std::string ready_file = ReadyPath(name);
  ::unlink(ready_file.c_str());
  HAMI_RETURN_IF_ERROR(slot->Spawn(argv, env));
  if (ready != nullptr) {
    HAMI_RETURN_IF_ERROR(slot->WaitUntil(
        [&] {
          Result<ReadyFields> r = ReadReadyFile(ready_file);
          if (r.ok()) *ready = std::move(*r);
          return r.ok();
        },
        // The ready file is written beside the log and renamed in: an event, never a timer.
        options_.start_timeout, LoggedProcess::kEventsOnly));
  }
  if (options_.on_start) options_.on_start(name);
  return OkStatus();
}

Status World::Boot() {
  HAMI_RETURN_IF_ERROR(MakeWorldDir(options_.dir, &dir_, &own_dir_));
  if (options_.helm_install) return BootWithHelm();
  HAMI_RETURN_IF_ERROR(StartControlPlane());
  if (!options_.rbac_manifests.empty()) HAMI_RETURN_IF_ERROR(SetUpRbac());

  HAMI_ASSIGN_OR_RETURN(
      net::CertificatePem pem,
      net::GenerateSelfSignedCertificate("hami-scheduler", {"localhost"}, {"127.0.0.1"}));
  HAMI_RETURN_IF_ERROR(WriteAll(dir_ + "/tls.crt", pem.cert_pem));
  HAMI_RETURN_IF_ERROR(WriteAll(dir_ + "/tls.key", pem.key_pem));
  if (options_.webhook_cert_secret) HAMI_RETURN_IF_ERROR(CreatePlaceholderWebhook(*client_));
  std::string device_config = dir_ + "/device-config.yaml";
  if (!options_.device_config_yaml.empty()) {
    HAMI_RETURN_IF_ERROR(WriteAll(device_config, options_.device_config_yaml));
  }
  ReadyFields ready;
  HAMI_RETURN_IF_ERROR(Launch("hami-scheduler",
                              SchedulerArgv(options_, dir_, Bin("hami-scheduler"),
                                            KubeconfigOf("hami-scheduler"), device_config,
                                            ReadyArg("hami-scheduler")),
                              BaseEnv(), &ready));
  extender_url_ = ready["extender"];
  if (extender_url_.rfind("https://", 0) != 0) {
    return Status(StatusCode::kInternal, "hami-scheduler's ready file names no HTTPS extender");
  }
  scheduler_metrics_url_ = "http://" + ready["metrics"] + "/metrics";

  if (options_.webhook_cert_secret) {
    HAMI_RETURN_IF_ERROR(AimPlaceholderWebhook(*client_, extender_url_, options_.start_timeout));
  } else {
    Result<k8s::Object> hook =
        client_->Create(Webhooks(), "", HamiWebhookConfiguration(extender_url_, pem.cert_pem));
    if (!hook.ok()) return hook.status();
  }
  std::string scheduler_config = DefaultKubeSchedulerConfig(extender_url_, options_.leader_elect);
  if (control_plane_ && !options_.chart_dir.empty()) {
    HAMI_ASSIGN_OR_RETURN(scheduler_config,
                          ChartKubeSchedulerConfig(options_.kube_bin_dir, options_.chart_dir,
                                                   extender_url_, options_.leader_elect));
  }
  HAMI_RETURN_IF_ERROR(StartKubeScheduler(scheduler_config));
  if (!options_.node_config_json.empty()) {
    HAMI_RETURN_IF_ERROR(WriteAll(dir_ + "/config.json", options_.node_config_json));
  }
  for (const WorldNode& n : options_.nodes) HAMI_RETURN_IF_ERROR(StartNode(n));
  for (const WorldNode& n : options_.nodes) {
    HAMI_RETURN_IF_ERROR(WaitForNodeGpus(*client_, n, options_.start_timeout));
  }
  return OkStatus();
}

Status World::WriteNodeFiles(const WorldNode& n) {
  std::error_code ec;  // a missing node directory shows in the gpu.conf write below
  std::filesystem::create_directories(dir_ + "/" + n.name, ec);
  HAMI_RETURN_IF_ERROR(WriteAll(dir_ + "/" + n.name + "/gpu.conf", n.gpu_config));
  if (n.cdi_runtime) {
    std::filesystem::create_directories(dir_ + "/" + n.name + "/cdi", ec);
    HAMI_RETURN_IF_ERROR(
        WriteAll(dir_ + "/" + n.name + "/cdi/nvidia.yaml", ToolkitCdiSpec(n.gpu_config)));
  }
  return OkStatus();
}

Status World::StartNode(const WorldNode& n) {
  HAMI_RETURN_IF_ERROR(WriteNodeFiles(n));
  HAMI_RETURN_IF_ERROR(StartKubelet(n.name));
  HAMI_RETURN_IF_ERROR(StartPlugin(n.name));
  if (options_.monitors) HAMI_RETURN_IF_ERROR(StartMonitor(n.name));
  return OkStatus();
}

Status World::AddNode(WorldNode node) {
  if (node.name.empty()) return InvalidArgumentError("a node needs a name");
  if (Node(node.name) != nullptr) {
    return Status(StatusCode::kAlreadyExists, "the world already has a node " + node.name);
  }
  const std::string name = node.name;
  options_.nodes.push_back(std::move(node));
  HAMI_RETURN_IF_ERROR(StartNode(options_.nodes.back()));
  return WaitForNodeGpus(*client_, *Node(name), options_.start_timeout);
}

Result<ControlPlaneKind> ParseControlPlaneKind(const std::string& text) {
  if (text == "simulated") return ControlPlaneKind::kSimulated;
  if (text == "real") return ControlPlaneKind::kReal;
  return InvalidArgumentError("control plane \"" + text + "\": want simulated or real");
}

const char* ControlPlaneKindName(ControlPlaneKind kind) {
  return kind == ControlPlaneKind::kReal ? "real" : "simulated";
}

std::ostream& operator<<(std::ostream& os, ControlPlaneKind kind) {
  return os << ControlPlaneKindName(kind);
}

Status World::StartControlPlane() {
  if (options_.control_plane == ControlPlaneKind::kReal) {
    // RBAC is always on there; the administrator is a client certificate in system:masters.
    KubeControlPlaneOptions cp;
    cp.bin_dir = options_.kube_bin_dir;
    cp.dir = dir_ + "/kube";
    cp.start_timeout = std::max(options_.start_timeout, std::chrono::seconds(120));
    cp.on_start = options_.on_start;
    if (options_.helm_install) {
      // The chart's pods are in-cluster clients of the API server.
      HAMI_ASSIGN_OR_RETURN(cp.node_address, KubeNode::HostAddress());
    }
    std::error_code ec;
    std::filesystem::create_directories(cp.dir, ec);
    HAMI_ASSIGN_OR_RETURN(control_plane_, KubeControlPlane::Start(std::move(cp)));
    kubeconfig_ = control_plane_->admin_kubeconfig();
  } else {
    kubeconfig_ = dir_ + "/kubeconfig";
    std::vector<std::string> apiserver = {Bin("hami-sim-apiserver"), "--write-kubeconfig",
                                          kubeconfig_};
    if (!options_.rbac_manifests.empty()) {
      // HTTPS: kubectl sends bearer tokens over TLS only.
      apiserver.insert(apiserver.end(), {"--self-signed", "--rbac", "--token", "hami-sim-admin"});
    }
    apiserver.push_back(ReadyArg("apiserver"));
    ReadyFields ready;
    HAMI_RETURN_IF_ERROR(Launch("apiserver", apiserver, BaseEnv(), &ready));
  }
  HAMI_ASSIGN_OR_RETURN(k8s::RestConfig rest, k8s::LoadKubeconfigFile(kubeconfig_));
  rest.qps = 0;
  HAMI_ASSIGN_OR_RETURN(client_, k8s::RestClient::Create(rest));
  return OkStatus();
}

Status World::StartKubeScheduler(const std::string& config_yaml) {
  if (control_plane_) {
    // As the chart deploys it: kube-scheduler runs in hami-scheduler's pod, with its account.
    auto account = component_kubeconfigs_.find("hami-scheduler");
    return control_plane_->StartScheduler(
        config_yaml, account != component_kubeconfigs_.end() ? account->second : "");
  }
  HAMI_RETURN_IF_ERROR(WriteAll(dir_ + "/kube-scheduler.yaml", config_yaml));
  return Launch("kube-scheduler",
                {Bin("hami-sim-kube-scheduler"), "--config=" + dir_ + "/kube-scheduler.yaml",
                 "--kubeconfig=" + kubeconfig_},
                BaseEnv());
}

}  // namespace hami::sim
