#include "sim/cluster/sim_cluster.h"

#include <algorithm>
#include <cstdint>
#include <deque>
#include <filesystem>
#include <stdexcept>

#include "common/base64.h"
#include "common/change_signal.h"
#include "common/file_util.h"
#include "device/config.h"
#include "device/node_locker.h"
#include "device/node_registration.h"
#include "device/vendor.h"
#include "k8s/informer.h"
#include "k8s/typed.h"
#include "net/tls.h"
#include "sim/apiserver/admission.h"
#include "sim/cluster/fake_device_plugin.h"
#include "sim/kubescheduler/config.h"
#include "sim/kubescheduler/kube_scheduler.h"
#include "sim/world/kube_control_plane.h"

namespace hami::sim {

using Json = nlohmann::json;

namespace {

// The extender's managedResources beyond the NVIDIA ones KubeSchedulerConfigYaml lists: every
// scheduled vendor's resources reach the extender (the chart lists the enabled ones).
std::vector<std::string> OtherVendorResources(const SimClusterOptions& o,
                                              const sim::KubeSchedulerConfig& nvidia) {
  std::vector<std::string> out;
  if (!o.device_config) return out;
  device::VendorRegistry vendors =
      device::VendorRegistry::FromConfig(*o.device_config, o.scheduler.vendors).value();
  for (const auto& v : vendors.vendors()) {
    const device::ResourceNames& n = v->resource_names();
    for (const std::string& name : {n.count, n.memory, n.memory_percentage, n.core}) {
      bool listed = name.empty();
      for (const sim::ManagedResource& m : nvidia.extenders.at(0).managed_resources) {
        listed = listed || m.name == name;
      }
      for (const std::string& m : out) listed = listed || m == name;
      if (!listed) out.push_back(name);
    }
  }
  return out;
}

// What SimCluster::WaitFor waits on: the changes to API state, told by every SimCluster of the
// process (WaitFor is static and cannot tell clusters apart; a change of another one costs a
// waiter one needless look, nothing more). Never destroyed: the API server's and the watches'
// threads may still report while the process exits.
ChangeSignal& ApiChanges() {
  static ChangeSignal& changes = *new ChangeSignal;
  return changes;
}

// Keeps an informer's cache small: it exists only for its events.
k8s::Object MetadataOnly(const k8s::Object& o) {
  k8s::Object out;
  for (const char* key : {"name", "namespace", "resourceVersion"}) {
    if (o.contains("metadata") && o["metadata"].contains(key)) {
      out["metadata"][key] = o["metadata"][key];
    }
  }
  return out;
}

}  // namespace

// kube-scheduler, configured as the chart configures it: the stand-in in this process, or the
// real one beside a real API server.
class SimCluster::Driver {
 public:
  Driver(k8s::RestClient& client, const std::string& url, const SimClusterOptions& o,
         KubeControlPlane* real)
      : real_(real) {
    // With driver_identity set, the kube-scheduler holds the chart's Lease (default/hami-scheduler)
    // and hami-scheduler follows it, as in the chart's deployment.
    std::string election = o.driver_identity.empty() || real ? "  leaderElect: false\n"
                                                             : "  leaderElect: true\n"
                                                               "  resourceName: hami-scheduler\n"
                                                               "  resourceNamespace: default\n"
                                                               "  retryPeriod: 200ms\n";
    std::string yaml = KubeSchedulerConfigYaml(url, election);
    sim::KubeSchedulerConfig cfg = sim::ParseKubeSchedulerConfig(yaml).value();
    std::vector<std::string> others = OtherVendorResources(o, cfg);
    if (real_ != nullptr) {
      // The text ends inside managedResources: more entries first, then top-level fields.
      for (const std::string& name : others) {
        yaml += "  - name: " + name + "\n    ignoredByScheduler: true\n";
      }
      yaml += "podInitialBackoffSeconds: 1\npodMaxBackoffSeconds: " +
              std::to_string(std::max<int64_t>(1, o.real_max_backoff.count())) + "\n";
      Status s = real_->StartScheduler(yaml);
      if (!s.ok()) throw std::runtime_error(s.ToString());
      return;
    }
    for (const std::string& name : others) {
      cfg.extenders.at(0).managed_resources.push_back(sim::ManagedResource{name, true});
    }
    sim::KubeSchedulerOptions opts;
    opts.workers = o.driver_workers;
    opts.initial_backoff = o.driver_initial_backoff;
    opts.max_backoff = o.driver_max_backoff;
    opts.identity = o.driver_identity;
    scheduler_ = std::make_unique<sim::KubeScheduler>(client, std::move(cfg), opts);
    Status s = scheduler_->Start();
    if (!s.ok()) throw std::runtime_error(s.ToString());
  }
  ~Driver() {
    if (scheduler_) scheduler_->Stop();
    if (real_ != nullptr) (void)real_->StopScheduler();
  }

 private:
  KubeControlPlane* real_;
  std::unique_ptr<sim::KubeScheduler> scheduler_;
};

void SimCluster::StartDriver() {
  driver_ = std::make_unique<Driver>(*client_, extender_url_, options_, control_plane_.get());
}

sim::ApiServer& SimCluster::apiserver() {
  if (!apiserver_) throw std::logic_error("SimCluster::apiserver(): not a simulated API server");
  return *apiserver_;
}

bool SimCluster::WaitFor(const std::function<bool()>& cond, std::chrono::milliseconds timeout) {
  return ApiChanges().WaitUntil(cond, timeout);
}

bool SimCluster::WaitForScheduler(const std::function<bool()>& cond,
                                  std::chrono::milliseconds timeout) {
  return service_->WaitFor(cond, timeout);
}

SimCluster::SimCluster(SimClusterOptions options) : options_(std::move(options)) {
  if (options_.kube_bin_dir.empty()) {
    sim::ApiServerOptions api;
    api.bookmark_interval = std::chrono::milliseconds(500);
    api.on_write = [] { ApiChanges().Notify(); };
    apiserver_ = sim::ApiServer::Start(api).value();
    rest_.server = apiserver_->url();
  } else {
    StartRealControlPlane();
  }
  rest_.qps = 0;  // unlimited: the test is the only client
  client_ = k8s::RestClient::Create(rest_).value();
  if (control_plane_) {
    WatchForChanges();
    // No controller manager: the ServiceAccount pods are admitted with is made here.
    Result<k8s::Object> sa = client_->Create(k8s::Resource{"v1", "serviceaccounts", true},
                                             "default", Json{{"metadata", {{"name", "default"}}}});
    if (!sa.ok()) throw std::runtime_error(sa.status().ToString());
  }

  net::CertificatePem pem =
      net::GenerateSelfSignedCertificate("hami-scheduler", {"localhost"}, {"127.0.0.1"}).value();
  ca_pem_ = pem.cert_pem;
  cert_ = net::CertificateSource::FromPem(pem).value();
  StartScheduler();

  // The webhook registration the chart installs, pointing at this process.
  Json hook = HamiWebhookConfiguration(extender_url_, ca_pem_);
  k8s::Resource hooks{"admissionregistration.k8s.io/v1", "mutatingwebhookconfigurations", false};
  Result<k8s::Object> created = client_->Create(hooks, "", hook);
  if (!created.ok()) throw std::runtime_error(created.status().ToString());

  if (options_.device_plugin) plugin_ = std::make_unique<FakeDevicePlugin>(*client_);
  StartDriver();
}

void SimCluster::StartRealControlPlane() {
  char tmpl[] = "/tmp/hami-cluster-XXXXXX";
  if (mkdtemp(tmpl) == nullptr) throw std::runtime_error("mkdtemp failed");
  dir_ = tmpl;
  KubeControlPlaneOptions o;
  o.bin_dir = options_.kube_bin_dir;
  o.dir = dir_;
  o.controller_manager = false;  // nothing renews node leases; its lifecycle controller would
                                 // taint every node
  o.audit = false;
  Result<std::unique_ptr<KubeControlPlane>> cp = KubeControlPlane::Start(o);
  if (!cp.ok()) throw std::runtime_error("real control plane: " + cp.status().ToString());
  control_plane_ = std::move(*cp);
  Result<k8s::RestConfig> rest = k8s::LoadKubeconfigFile(control_plane_->admin_kubeconfig());
  if (!rest.ok()) throw std::runtime_error(rest.status().ToString());
  rest_ = std::move(*rest);
}

void SimCluster::WatchForChanges() {
  // What WaitFor's conditions read. A watch resumes where it broke off and a relist reports
  // what it missed, so every change is told, and told after kube-apiserver committed it.
  for (const k8s::Resource& r : {k8s::kPods, k8s::kNodes, k8s::kEvents}) {
    k8s::InformerOptions o;
    o.transform = MetadataOnly;
    auto w = std::make_unique<k8s::Informer>(*client_, r, o);
    auto notify = [] { ApiChanges().Notify(); };
    w->AddEventHandler({
        .on_add = [notify](const k8s::ObjectPtr&) { notify(); },
        .on_update = [notify](const k8s::ObjectPtr&, const k8s::ObjectPtr&) { notify(); },
        .on_delete = [notify](const k8s::ObjectPtr&) { notify(); },
    });
    w->Start();
    change_watches_.push_back(std::move(w));
  }
}

SimCluster::~SimCluster() {
  driver_.reset();
  plugin_.reset();
  StopScheduler();
  change_watches_.clear();  // they use client_
  client_.reset();  // closes kept-alive connections, so the server stops at once
  if (apiserver_) apiserver_->Stop();
  control_plane_.reset();
  if (!dir_.empty()) {
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }
}

void SimCluster::StartScheduler() {
  k8s::RestClient* api = client_.get();
  if (options_.scheduler_api) {
    k8s::RestConfig cfg = rest_;  // the same credentials, another way in
    cfg.server = options_.scheduler_api(rest_.server);
    cfg.qps = 0;
    cfg.timeout = options_.scheduler_api_timeout;
    scheduler_client_ = k8s::RestClient::Create(cfg).value();
    api = scheduler_client_.get();
  }
  service_ =
      extender::SchedulerService::Create(
          *api, options_.device_config.value_or(device::DefaultDeviceConfig()), options_.scheduler)
          .value();
  net::HttpServerOptions http;
  http.port = port_;
  http.certificate = cert_;
  https_ = net::HttpServer::Create(http).value();
  service_->RegisterRoutes(*https_);
  Status s = service_->Start();
  if (!s.ok()) throw std::runtime_error(s.ToString());
  port_ = https_->Start().value();
  extender_url_ = "https://127.0.0.1:" + std::to_string(port_);
}

void SimCluster::StopScheduler() {
  if (https_) https_->Stop();
  if (service_) service_->Stop();
  https_.reset();
  service_.reset();
  scheduler_client_.reset();
}

void SimCluster::RestartScheduler() {
  StopScheduler();
  StartScheduler();
}

void SimCluster::AddNode(const std::string& name, const std::vector<device::DeviceInfo>& gpus) {
  Json node;
  node["apiVersion"] = "v1";
  node["kind"] = "Node";
  node["metadata"]["name"] = name;
  node["metadata"]["labels"]["gpu"] = "on";
  node["metadata"]["labels"]["kubernetes.io/hostname"] = name;
  node["metadata"]["annotations"]["hami.io/node-nvidia-register"] =
      device::EncodeNodeDevicesJson(gpus);
  int64_t slots = 0;
  for (const device::DeviceInfo& g : gpus) slots += g.count;
  node["status"]["capacity"]["nvidia.com/gpu"] = std::to_string(slots);
  node["status"]["allocatable"]["nvidia.com/gpu"] = std::to_string(slots);
  node["status"]["allocatable"]["pods"] = "110";
  CreateNode(std::move(node));
  // Registered once the scheduler's ledger lists the node's first device.
  std::string probe = gpus.empty() ? name : gpus.front().id;
  WaitForScheduler([&] { return service_->LedgerDump().find(probe) != std::string::npos; });
}

void SimCluster::AddVendorNode(const std::string& name,
                               const std::map<std::string, std::string>& annotations,
                               const std::map<std::string, std::string>& allocatable,
                               const std::string& probe,
                               const std::map<std::string, std::string>& labels) {
  Json node;
  node["apiVersion"] = "v1";
  node["kind"] = "Node";
  node["metadata"]["name"] = name;
  node["metadata"]["labels"]["kubernetes.io/hostname"] = name;
  for (const auto& [k, v] : labels) node["metadata"]["labels"][k] = v;
  for (const auto& [k, v] : annotations) node["metadata"]["annotations"][k] = v;
  for (const auto& [k, v] : allocatable) {
    node["status"]["capacity"][k] = v;
    node["status"]["allocatable"][k] = v;
  }
  node["status"]["allocatable"]["pods"] = "110";
  CreateNode(std::move(node));
  WaitForScheduler([&] { return service_->LedgerDump().find(probe) != std::string::npos; });
}

void SimCluster::CreateNode(k8s::Object node) {
  if (control_plane_) {
    node["status"]["conditions"] = Json::array({{{"type", "Ready"},
                                                 {"status", "True"},
                                                 {"reason", "KubeletReady"},
                                                 {"lastHeartbeatTime", "2026-01-01T00:00:00Z"},
                                                 {"lastTransitionTime", "2026-01-01T00:00:00Z"}}});
  }
  Result<k8s::Object> r = client_->Create(k8s::kNodes, "", node);
  if (!r.ok()) throw std::runtime_error(r.status().ToString());
  if (control_plane_) {
    // The API server's TaintNodesByCondition admission taints a new node not-ready; the node
    // lifecycle controller, not running here, would lift it once the node reports Ready.
    Result<k8s::Object> lifted = client_->Patch(k8s::kNodes, "", k8s::Name(*r),
                                                k8s::PatchType::kMerge,
                                                R"({"spec":{"taints":null}})");
    if (!lifted.ok()) throw std::runtime_error(lifted.status().ToString());
  }
}

Result<k8s::Object> SimCluster::CreatePod(const std::string& ns, const k8s::Object& pod) {
  return client_->Create(k8s::kPods, ns, pod);
}

std::vector<std::string> SimCluster::ApplyYamlFile(const std::string& path, const std::string& ns) {
  std::vector<std::string> names;
  for (const std::string& doc : SplitYamlDocuments(ReadFileToString(path).value_or(""))) {
    Result<k8s::Object> obj = YamlToJson(doc);
    if (!obj.ok()) throw std::runtime_error(path + ": " + obj.status().ToString());
    Result<k8s::Object> created = CreatePod(ns, *obj);
    if (!created.ok()) throw std::runtime_error(path + ": " + created.status().ToString());
    names.push_back(k8s::Name(*created));
  }
  return names;
}

std::string SimCluster::BoundNode(const std::string& ns, const std::string& name) {
  Result<k8s::Object> p = k8s::GetPod(*client_, ns, name);
  return p.ok() ? k8s::GetString(*p, "/spec/nodeName") : "";
}

std::string SimCluster::Annotation(const std::string& ns, const std::string& name,
                                   const std::string& key) {
  Result<k8s::Object> p = k8s::GetPod(*client_, ns, name);
  if (!p.ok()) return "";
  std::string escaped;
  for (char c : key) escaped += c == '/' ? std::string("~1") : std::string(1, c);
  return k8s::GetString(*p, "/metadata/annotations/" + escaped);
}

std::vector<k8s::Object> SimCluster::Events(const std::string& ns, const std::string& name) {
  std::vector<k8s::Object> out;
  k8s::ListOptions lo;
  lo.field_selector = "involvedObject.name=" + name;
  Result<k8s::Object> list = client_->List(k8s::kEvents, ns, lo);
  if (!list.ok() || !list->contains("items")) return out;
  for (const k8s::Object& e : (*list)["items"]) {
    if (k8s::GetString(e, "/involvedObject/name") == name) out.push_back(e);
  }
  return out;
}

}  // namespace hami::sim
