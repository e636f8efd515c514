#include "sim/world/kube_control_plane.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <filesystem>
#include <thread>

#include "common/base64.h"
#include "common/file_util.h"
#include "common/log.h"
#include "k8s/api_error.h"
#include "k8s/config.h"
#include "k8s/object.h"
#include "k8s/rest_client.h"
#include "net/tls.h"
#include "sim/world/manifests.h"
#include "sim/world/waits.h"

namespace hami::sim {

namespace {

using SteadyClock = std::chrono::steady_clock;

// Every request at the Metadata level: user, groups, verb, resource and the authorizer's
// decision, never a body (Secrets stay out of the log).
constexpr const char* kAuditPolicy =
    "apiVersion: audit.k8s.io/v1\n"
    "kind: Policy\n"
    "omitStages: [RequestReceived]\n"
    "rules:\n"
    "- level: Metadata\n";

// The service-account issuer: what kubeadm clusters use.
constexpr const char* kIssuer = "https://kubernetes.default.svc.cluster.local";

std::string KubeconfigYaml(const std::string& server, const std::string& ca_pem,
                           const std::string& user, const net::CertificatePem& cert) {
  return "apiVersion: v1\n"
         "kind: Config\n"
         "clusters:\n"
         "- name: kube\n"
         "  cluster:\n"
         "    server: " +
         server +
         "\n"
         "    certificate-authority-data: " +
         Base64Encode(ca_pem) +
         "\n"
         "users:\n"
         "- name: " +
         user +
         "\n"
         "  user:\n"
         "    client-certificate-data: " +
         Base64Encode(cert.cert_pem) +
         "\n"
         "    client-key-data: " +
         Base64Encode(cert.key_pem) +
         "\n"
         "contexts:\n"
         "- name: kube\n"
         "  context: {cluster: kube, user: \"" +
         user +
         "\"}\n"
         "current-context: kube\n";
}

net::CertificateSpec Spec(const std::string& cn, std::vector<std::string> groups = {}) {
  auto now = std::chrono::system_clock::now();
  net::CertificateSpec spec{cn, {}, {}, now - std::chrono::hours(1),
                            now + std::chrono::hours(24 * 365)};
  spec.organizations = std::move(groups);
  return spec;
}

std::vector<std::string> ChildEnv() {
  const char* path = std::getenv("PATH");
  return {std::string("PATH=") + (path ? path : "/usr/bin:/bin"), "HOME=/tmp"};
}

// Block style all the way down: Kubernetes' decoder takes a text starting with '{' for JSON, so
// a configuration read from flow-style YAML (or JSON) must not be written back in flow style.
void BlockStyle(YAML::Node node) {
  node.SetStyle(YAML::EmitterStyle::Block);
  if (node.IsMap()) {
    for (auto it = node.begin(); it != node.end(); ++it) BlockStyle(it->second);
  } else if (node.IsSequence()) {
    for (auto it = node.begin(); it != node.end(); ++it) BlockStyle(*it);
  }
}

const k8s::Resource kCrds{"apiextensions.k8s.io/v1", "customresourcedefinitions", false};
const k8s::Resource kVolcanoQueues{"scheduling.volcano.sh/v1beta1", "queues", false};

bool Established(const k8s::Object& crd) {
  auto status = crd.find("status");
  if (status == crd.end() || !status->is_object()) return false;
  auto conditions = status->find("conditions");
  if (conditions == status->end() || !conditions->is_array()) return false;
  return std::any_of(conditions->begin(), conditions->end(), [](const k8s::Object& c) {
    return k8s::GetString(c, "/type") == "Established" && k8s::GetString(c, "/status") == "True";
  });
}

bool AddressInUse(const Status& s) {
  return s.message().find("address already in use") != std::string::npos;
}

}  // namespace

Result<int> PickFreeLoopbackPort() {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return Status(StatusCode::kInternal, "socket failed");
  sockaddr_in addr = {};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof addr;
  if (bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
      getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    close(fd);
    return Status(StatusCode::kInternal, "cannot bind a loopback port");
  }
  close(fd);
  return static_cast<int>(ntohs(addr.sin_port));
}

Status KubeControlPlane::WithFreePorts(
    const std::string& name, int count,
    const std::function<Status(const std::vector<int>&)>& start) {
  Status last = OkStatus();
  for (int attempt = 0; attempt < 3; ++attempt) {
    std::vector<int> ports;
    for (int i = 0; i < count; ++i) {
      HAMI_ASSIGN_OR_RETURN(int port, PickFreeLoopbackPort());
      ports.push_back(port);
    }
    last = start(ports);
    if (last.ok()) {
      if (options_.on_start) options_.on_start(name);
      return OkStatus();
    }
    // Another process took a port between our look and the program's bind: try others.
    if (!AddressInUse(last)) return last;
  }
  return last;
}

Result<std::unique_ptr<KubeControlPlane>> KubeControlPlane::Start(KubeControlPlaneOptions options) {
  for (const char* b : {"etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler"}) {
    std::string path = options.bin_dir + "/" + b;
    if (access(path.c_str(), X_OK) != 0) {
      return Status(StatusCode::kFailedPrecondition,
                    path + " is missing: build the Kubernetes binaries with "
                           "`bash scripts/kube-tools.sh` and pass the folder it prints");
    }
  }
  std::unique_ptr<KubeControlPlane> cp(new KubeControlPlane(std::move(options)));
  HAMI_RETURN_IF_ERROR(cp->Boot());
  return cp;
}

KubeControlPlane::~KubeControlPlane() {
  for (auto it = order_.rbegin(); it != order_.rend(); ++it) {
    auto p = processes_.find(*it);
    if (p != processes_.end() && p->second) p->second->Stop();
  }
}

LoggedProcess* KubeControlPlane::Process(const std::string& name) {
  auto it = processes_.find(name);
  return it == processes_.end() || !it->second->Running() ? nullptr : it->second.get();
}

Status KubeControlPlane::Launch(const std::string& name, const std::vector<std::string>& argv,
                                const std::vector<std::string>& extra_env) {
  auto& slot = processes_[name];
  if (slot) slot->Stop();
  slot = std::make_unique<LoggedProcess>(name, options_.dir + "/" + name + ".log");
  if (std::find(order_.begin(), order_.end(), name) == order_.end()) order_.push_back(name);
  HAMI_VLOG(1) << "starting " << name << ": " << argv[0];
  std::vector<std::string> env = ChildEnv();
  env.insert(env.end(), extra_env.begin(), extra_env.end());
  return slot->Spawn(argv, env);
}

Status KubeControlPlane::Boot() {
  std::error_code ec;
  std::filesystem::create_directories(options_.dir + "/pki", ec);
  if (ec) return Status(StatusCode::kInternal, "cannot create " + options_.dir + "/pki");
  HAMI_RETURN_IF_ERROR(StartEtcd());
  HAMI_RETURN_IF_ERROR(WritePki());
  HAMI_RETURN_IF_ERROR(StartApiServer());
  if (options_.controller_manager) HAMI_RETURN_IF_ERROR(StartControllerManager());
  return OkStatus();
}

Status KubeControlPlane::WritePki() {
  HAMI_ASSIGN_OR_RETURN(net::CertificatePem ca,
                        net::GenerateCertificateAuthority(Spec("hami-test-kubernetes-ca")));
  ca_pem_ = ca.cert_pem;
  ca_key_pem_ = ca.key_pem;
  HAMI_RETURN_IF_ERROR(hami::WriteFileAtomically(Pki("ca.crt"), ca.cert_pem));
  HAMI_RETURN_IF_ERROR(hami::WriteFileAtomically(Pki("ca.key"), ca.key_pem));
  net::CertificateSpec serving = Spec("kube-apiserver");
  serving.dns_names = {"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc",
                       "kubernetes.default.svc.cluster.local"};
  serving.ip_addresses = {"127.0.0.1"};
  if (!options_.node_address.empty()) {
    // In-cluster clients dial the kubernetes Service's IP (the first of the service range).
    serving.ip_addresses.insert(serving.ip_addresses.end(), {options_.node_address, "10.96.0.1"});
  }
  HAMI_ASSIGN_OR_RETURN(net::CertificatePem api, net::IssueServingCertificate(serving, ca));
  HAMI_RETURN_IF_ERROR(hami::WriteFileAtomically(Pki("apiserver.crt"), api.cert_pem));
  HAMI_RETURN_IF_ERROR(hami::WriteFileAtomically(Pki("apiserver.key"), api.key_pem));
  // The API server's identity towards kubelets (logs, exec): kubeadm's group for it.
  HAMI_ASSIGN_OR_RETURN(
      net::CertificatePem kubelet_client,
      net::IssueClientCertificate(Spec("kube-apiserver-kubelet-client", {"kubeadm:cluster-admins"}),
                                  ca));
  HAMI_RETURN_IF_ERROR(
      hami::WriteFileAtomically(Pki("apiserver-kubelet-client.crt"), kubelet_client.cert_pem));
  HAMI_RETURN_IF_ERROR(
      hami::WriteFileAtomically(Pki("apiserver-kubelet-client.key"), kubelet_client.key_pem));
  // The service-account signing key, and its public key as a certificate (which the API
  // server reads as the key that verifies tokens).
  HAMI_ASSIGN_OR_RETURN(net::CertificatePem sa,
                        net::GenerateSelfSignedCertificate("service-accounts", {}, {}));
  HAMI_RETURN_IF_ERROR(hami::WriteFileAtomically(Pki("sa.key"), sa.key_pem));
  HAMI_RETURN_IF_ERROR(hami::WriteFileAtomically(Pki("sa.pub"), sa.cert_pem));
  HAMI_RETURN_IF_ERROR(hami::WriteFileAtomically(options_.dir + "/audit-policy.yaml", kAuditPolicy));
  return OkStatus();
}

Result<std::string> KubeControlPlane::WriteUserKubeconfig(const std::string& name,
                                                          const std::string& user,
                                                          const std::vector<std::string>& groups) {
  HAMI_ASSIGN_OR_RETURN(net::CertificatePem cert,
                        net::IssueClientCertificate(Spec(user, groups), {ca_pem_, ca_key_pem_}));
  std::string path = options_.dir + "/kubeconfig-" + name;
  HAMI_RETURN_IF_ERROR(
      hami::WriteFileAtomically(path, KubeconfigYaml(server_, ca_pem_, user, cert)));
  return path;
}

Status KubeControlPlane::StartEtcd() {
  return WithFreePorts("etcd", 2, [&](const std::vector<int>& ports) -> Status {
    etcd_url_ = "http://127.0.0.1:" + std::to_string(ports[0]);
    std::string peer_url = "http://127.0.0.1:" + std::to_string(ports[1]);
    std::string data = options_.dir + "/etcd";
    std::error_code ec;
    std::filesystem::remove_all(data, ec);
    HAMI_RETURN_IF_ERROR(Launch(
        "etcd", {Bin("etcd"), "--name=default", "--data-dir=" + data,
                 "--listen-client-urls=" + etcd_url_, "--advertise-client-urls=" + etcd_url_,
                 "--listen-peer-urls=" + peer_url, "--initial-advertise-peer-urls=" + peer_url,
                 "--initial-cluster=default=" + peer_url, "--listen-metrics-urls=",
                 // A test cluster's data dies with it: no fsync; a 2 GiB backend.
                 "--unsafe-no-fsync=true", "--quota-backend-bytes=2147483648",
                 "--log-level=warn"}));
    // At warn, etcd is silent once it serves: ask its health endpoint.
    k8s::RestConfig health;
    health.server = etcd_url_;
    health.timeout = std::chrono::milliseconds(1000);
    health.qps = 0;
    HAMI_ASSIGN_OR_RETURN(std::unique_ptr<k8s::RestClient> client,
                          k8s::RestClient::Create(health));
    return processes_["etcd"]->WaitUntil(
        [&] {
          auto r = client->Send("GET", "/health");
          return r.ok() && r->status == 200 && r->body.find("true") != std::string::npos;
        },
        options_.start_timeout);
  });
}

Status KubeControlPlane::WaitHealthy(LoggedProcess& p, const std::string& kubeconfig,
                                     const std::string& path) {
  HAMI_ASSIGN_OR_RETURN(k8s::RestConfig rest, k8s::LoadKubeconfigFile(kubeconfig));
  rest.qps = 0;
  rest.timeout = std::chrono::milliseconds(2000);
  HAMI_ASSIGN_OR_RETURN(std::unique_ptr<k8s::RestClient> client, k8s::RestClient::Create(rest));
  std::string last;
  Status s = p.WaitUntil(
      [&] {
        auto r = client->Send("GET", path);
        if (!r.ok()) {
          last = r.status().ToString();
          return false;
        }
        last = std::to_string(r->status) + " " + r->body.substr(0, 300);
        return r->status == 200;
      },
      options_.start_timeout);
  if (!s.ok()) return Status(s.code(), s.message() + "\nlast answer of " + path + ": " + last);
  return OkStatus();
}

Status KubeControlPlane::StartApiServer() {
  return WithFreePorts("kube-apiserver", 1, [&](const std::vector<int>& ports) -> Status {
    int port = ports[0];
    const std::string address =
        options_.node_address.empty() ? "127.0.0.1" : options_.node_address;
    server_ = "https://" + address + ":" + std::to_string(port);
    HAMI_ASSIGN_OR_RETURN(admin_kubeconfig_,
                          WriteUserKubeconfig("admin", "kubernetes-admin", {"system:masters"}));
    std::vector<std::string> argv = {
        Bin("kube-apiserver"),
        "--etcd-servers=" + etcd_url_,
        "--bind-address=" + address,
        "--advertise-address=" + address,
        "--secure-port=" + std::to_string(port),
        "--tls-cert-file=" + Pki("apiserver.crt"),
        "--tls-private-key-file=" + Pki("apiserver.key"),
        "--client-ca-file=" + Pki("ca.crt"),
        "--kubelet-client-certificate=" + Pki("apiserver-kubelet-client.crt"),
        "--kubelet-client-key=" + Pki("apiserver-kubelet-client.key"),
        "--kubelet-preferred-address-types=InternalIP,Hostname",
        "--service-account-issuer=" + std::string(kIssuer),
        "--service-account-key-file=" + Pki("sa.pub"),
        "--service-account-signing-key-file=" + Pki("sa.key"),
        "--service-cluster-ip-range=10.96.0.0/16",
        "--authorization-mode=Node,RBAC",
        "--enable-admission-plugins=NodeRestriction",
        "--allow-privileged=true",
        // Loopback cannot be an endpoint; a node address is kept as the Service's endpoint.
        std::string("--endpoint-reconciler-type=") +
            (options_.node_address.empty() ? "none" : "lease"),
        "--profiling=false",
        // The nodes are simulated kubelets, which stream `kubectl exec` over WebSocket only
        // (sim/kubelet/exec_session.h): the API server passes kubectl's WebSocket through
        // instead of translating it to SPDY towards the kubelet.
        "--feature-gates=TranslateStreamCloseWebsocketRequests=false",
    };
    if (options_.audit) {
      argv.insert(argv.end(), {"--audit-policy-file=" + options_.dir + "/audit-policy.yaml",
                               "--audit-log-path=" + audit_log(), "--audit-log-mode=blocking"});
    }
    argv.insert(argv.end(), options_.apiserver_args.begin(), options_.apiserver_args.end());
    HAMI_RETURN_IF_ERROR(Launch("kube-apiserver", argv));
    return WaitHealthy(*processes_["kube-apiserver"], admin_kubeconfig_, "/readyz");
  });
}

Status KubeControlPlane::StartControllerManager() {
  HAMI_ASSIGN_OR_RETURN(std::string kubeconfig,
                        WriteUserKubeconfig("kube-controller-manager",
                                            "system:kube-controller-manager", {}));
  HAMI_RETURN_IF_ERROR(Launch(
      "kube-controller-manager",
      {Bin("kube-controller-manager"), "--kubeconfig=" + kubeconfig, "--leader-elect=false",
       "--use-service-account-credentials=true",
       "--service-account-private-key-file=" + Pki("sa.key"), "--root-ca-file=" + Pki("ca.crt"),
       "--cluster-signing-cert-file=" + Pki("ca.crt"),
       "--cluster-signing-key-file=" + Pki("ca.key"), "--secure-port=0", "--profiling=false"}));
  // Ready when its service-account controller has made the default namespace's account (pods
  // are refused until then).
  HAMI_ASSIGN_OR_RETURN(k8s::RestConfig rest, k8s::LoadKubeconfigFile(admin_kubeconfig_));
  rest.qps = 0;
  HAMI_ASSIGN_OR_RETURN(std::unique_ptr<k8s::RestClient> client, k8s::RestClient::Create(rest));
  HAMI_RETURN_IF_ERROR(processes_["kube-controller-manager"]->WaitUntil(
      [&] {
        auto r = client->Send("GET", "/api/v1/namespaces/default/serviceaccounts/default");
        return r.ok() && r->status == 200;
      },
      options_.start_timeout));
  if (options_.on_start) options_.on_start("kube-controller-manager");
  return OkStatus();
}

Status KubeControlPlane::StartScheduler(const std::string& config_yaml,
                                        const std::string& client_kubeconfig) {
  YAML::Node config;
  try {
    config = YAML::Load(config_yaml);
  } catch (const YAML::Exception& e) {
    return Status(StatusCode::kInvalidArgument,
                  std::string("KubeSchedulerConfiguration: ") + e.what());
  }
  if (!config.IsMap()) {
    return Status(StatusCode::kInvalidArgument, "KubeSchedulerConfiguration is not a mapping");
  }
  HAMI_ASSIGN_OR_RETURN(std::string kubeconfig,
                        WriteUserKubeconfig("kube-scheduler", "system:kube-scheduler", {}));
  if (!client_kubeconfig.empty()) {
    config["clientConnection"]["kubeconfig"] = client_kubeconfig;
  } else if (!config["clientConnection"]["kubeconfig"]) {
    config["clientConnection"]["kubeconfig"] = kubeconfig;
  }
  if (!config["leaderElection"]["leaderElect"]) {
    config["leaderElection"]["leaderElect"] = false;
  }
  BlockStyle(config);
  YAML::Emitter out;
  out << config;
  std::string path = options_.dir + "/kube-scheduler-config.yaml";
  HAMI_RETURN_IF_ERROR(hami::WriteFileAtomically(path, out.c_str()));
  return WithFreePorts("kube-scheduler", 1, [&](const std::vector<int>& ports) -> Status {
    int port = ports[0];
    HAMI_RETURN_IF_ERROR(Launch(
        "kube-scheduler",
        {Bin("kube-scheduler"), "--config=" + path, "--bind-address=127.0.0.1",
         "--secure-port=" + std::to_string(port), "--authentication-kubeconfig=" + kubeconfig,
         "--authorization-kubeconfig=" + kubeconfig,
         "--authorization-always-allow-paths=/healthz,/readyz,/livez,/metrics",
         "--profiling=false"}));
    scheduler_metrics_url_ = "https://127.0.0.1:" + std::to_string(port) + "/metrics";
    return processes_["kube-scheduler"]
        ->WaitForMarker("Serving securely on", options_.start_timeout)
        .status();
  });
}

Status KubeControlPlane::StopScheduler() {
  auto it = processes_.find("kube-scheduler");
  if (it != processes_.end()) it->second->Stop();
  return OkStatus();
}

Status KubeControlPlane::ApplyCrds(const std::string& crd_dir) {
  std::vector<std::string> files;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(crd_dir, ec)) {
    if (entry.path().extension() == ".yaml") files.push_back(entry.path().string());
  }
  if (ec || files.empty()) {
    return Status(StatusCode::kFailedPrecondition,
                  "no CustomResourceDefinitions (*.yaml) in " + crd_dir);
  }
  std::sort(files.begin(), files.end());
  HAMI_ASSIGN_OR_RETURN(k8s::RestConfig rest, k8s::LoadKubeconfigFile(admin_kubeconfig_));
  rest.qps = 0;
  HAMI_ASSIGN_OR_RETURN(std::unique_ptr<k8s::RestClient> client, k8s::RestClient::Create(rest));
  std::vector<std::string> names;
  for (const std::string& file : files) {
    HAMI_ASSIGN_OR_RETURN(std::string text, hami::ReadFileToString(file));
    for (const std::string& doc : SplitYamlDocuments(text)) {
      Result<k8s::Object> crd = YamlToJson(doc);
      if (!crd.ok()) return Status(crd.status().code(), file + ": " + crd.status().message());
      if (crd->is_null()) continue;  // a document of comments only
      std::string name = k8s::GetString(*crd, "/metadata/name");
      Status s = client->Create(kCrds, "", *crd).status();
      if (!s.ok() && !k8s::IsAlreadyExists(s)) {
        return Status(s.code(), "creating the CustomResourceDefinition " + name + " (" + file +
                                    "): " + s.message());
      }
      names.push_back(name);
    }
  }
  // Served once Established (its names accepted, its storage ready): until then a list of its
  // resources is answered 404, which Volcano's informers would only log and retry.
  for (const std::string& name : names) {
    Result<k8s::Object> crd = WaitForObject(*client, kCrds, "", name, Established,
                                            options_.start_timeout);
    if (!crd.ok()) {
      return Status(crd.status().code(), "the CustomResourceDefinition " + name +
                                             " was not Established: " + crd.status().message());
    }
  }
  return OkStatus();
}

Status KubeControlPlane::WaitHttpOk(LoggedProcess& p, const std::string& url,
                                    const std::function<bool()>& ready) {
  k8s::RestConfig plain;
  plain.server = url.substr(0, url.find('/', url.find("//") + 2));
  plain.timeout = std::chrono::milliseconds(1000);
  plain.qps = 0;
  HAMI_ASSIGN_OR_RETURN(std::unique_ptr<k8s::RestClient> client, k8s::RestClient::Create(plain));
  std::string path = url.substr(plain.server.size());
  std::string last;
  Status s = p.WaitUntil(
      [&] {
        auto r = client->Send("GET", path);
        if (!r.ok()) {
          last = r.status().ToString();
          return false;
        }
        last = std::to_string(r->status) + " " + r->body.substr(0, 300);
        return r->status == 200 && ready();
      },
      options_.start_timeout);
  if (!s.ok()) return Status(s.code(), s.message() + "\nlast answer of " + url + ": " + last);
  return OkStatus();
}

Status KubeControlPlane::StartVolcano(const std::string& volcano_bin_dir,
                                      const std::string& scheduler_conf_yaml) {
  const std::string scheduler = volcano_bin_dir + "/vc-scheduler";
  const std::string controllers = volcano_bin_dir + "/vc-controller-manager";
  for (const std::string& path : {scheduler, controllers}) {
    if (access(path.c_str(), X_OK) != 0) {
      return Status(StatusCode::kFailedPrecondition,
                    path + " is missing: build Volcano with `bash scripts/volcano-tools.sh` "
                           "and pass the folder it prints");
    }
  }
  try {
    if (!YAML::Load(scheduler_conf_yaml).IsMap()) {
      return Status(StatusCode::kInvalidArgument, "the Volcano scheduler conf is not a mapping");
    }
  } catch (const YAML::Exception& e) {
    return Status(StatusCode::kInvalidArgument,
                  std::string("the Volcano scheduler conf: ") + e.what());
  }
  // vc-scheduler reloads its conf on every write or creation in the conf's folder (fsnotify):
  // a folder of its own, away from the logs. Rewriting the file reloads it.
  std::error_code ec;
  const std::string dir = std::filesystem::absolute(options_.dir, ec).string();
  std::filesystem::create_directories(dir + "/volcano", ec);
  if (ec) return Status(StatusCode::kInternal, "cannot create " + dir + "/volcano");
  const std::string conf = dir + "/volcano/volcano-scheduler.conf";
  HAMI_RETURN_IF_ERROR(hami::WriteFileAtomically(conf, scheduler_conf_yaml, 0644));
  HAMI_RETURN_IF_ERROR(StopVolcano());
  HAMI_RETURN_IF_ERROR(ApplyCrds(volcano_bin_dir + "/crd"));

  // Both take a kubeconfig only (no separate authentication for their plain-HTTP /healthz).
  // vc-scheduler's vGPU device code (the handshake and pod annotation patches) and its node lock
  // ignore --kubeconfig: they build their own client at start from $KUBECONFIG (else
  // $HOME/.kube/config or the in-cluster account), and without one the first vGPU node
  // dereferences a null client.
  const std::vector<std::string> env = {"KUBECONFIG=" + admin_kubeconfig_};
  Status controllers_up =
      WithFreePorts("vc-controller-manager", 1, [&](const std::vector<int>& ports) -> Status {
        std::string healthz = "127.0.0.1:" + std::to_string(ports[0]);
        HAMI_RETURN_IF_ERROR(Launch(
            "vc-controller-manager",
            {controllers, "--kubeconfig=" + admin_kubeconfig_, "--leader-elect=false",
             "--scheduler-name=volcano", "--enable-healthz=true", "--healthz-address=" + healthz},
            env));
        return WaitHttpOk(*processes_["vc-controller-manager"], "http://" + healthz + "/healthz",
                          [] { return true; });
      });
  HAMI_RETURN_IF_ERROR(controllers_up);

  HAMI_ASSIGN_OR_RETURN(k8s::RestConfig rest, k8s::LoadKubeconfigFile(admin_kubeconfig_));
  rest.qps = 0;
  rest.timeout = std::chrono::milliseconds(2000);
  HAMI_ASSIGN_OR_RETURN(std::unique_ptr<k8s::RestClient> client, k8s::RestClient::Create(rest));
  return WithFreePorts("vc-scheduler", 2, [&](const std::vector<int>& ports) -> Status {
    std::string healthz = "127.0.0.1:" + std::to_string(ports[0]);
    std::string metrics = "127.0.0.1:" + std::to_string(ports[1]);
    HAMI_RETURN_IF_ERROR(Launch(
        "vc-scheduler",
        {scheduler, "--kubeconfig=" + admin_kubeconfig_, "--scheduler-conf=" + conf,
         "--scheduler-name=volcano", "--leader-elect=false", "--enable-healthz=true",
         "--healthz-address=" + healthz, "--enable-metrics=true", "--listen-address=" + metrics,
         // What it dumps of its cache on SIGUSR2 stays with the cluster's files.
         "--cache-dump-dir=" + dir},
        env));
    volcano_metrics_url_ = "http://" + metrics + "/metrics";
    // It serves /healthz only after creating the default Queue, which it retries for a minute
    // and panics without; the Queue is asked for as well so that readiness is what a test needs.
    return WaitHttpOk(*processes_["vc-scheduler"], "http://" + healthz + "/healthz", [&] {
      return client->Get(kVolcanoQueues, "", "default").ok();
    });
  });
}

Status KubeControlPlane::StopVolcano() {
  for (const char* name : {"vc-scheduler", "vc-controller-manager"}) {
    auto it = processes_.find(name);
    if (it != processes_.end() && it->second) it->second->Stop();
  }
  return OkStatus();
}

}  // namespace hami::sim
