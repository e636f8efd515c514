// Kubelet's life cycle and accessors, and the helpers its parts share. The kubelet's work is in
// Kubelet::Impl and PodWorker, spread over the kubelet_*.cc and pod_worker*.cc files (see
// kubelet_internal.h).
#include "sim/kubelet/kubelet.h"

#include <filesystem>

#include "common/file_util.h"
#include "common/thread_name.h"
#include "net/tls.h"
#include "sim/kubelet/kubelet_internal.h"

namespace hami::sim {
namespace kubelet_internal {

std::string Now() { return k8s::FormatTime(std::chrono::system_clock::now()); }

std::optional<std::string> ReadFile(const std::string& path) {
  Result<std::string> text = ReadFileToString(path);
  if (!text.ok()) return std::nullopt;
  return std::move(*text);
}

}  // namespace kubelet_internal

Status Kubelet::Impl::Start() {
  std::error_code ec;
  std::filesystem::create_directories(options_.root_dir + "/pods", ec);
  if (ec) return Status(StatusCode::kInternal, "cannot create " + options_.root_dir);
  HAMI_ASSIGN_OR_RETURN(devices_, DeviceManager::Start(options_.root_dir + "/device-plugins"));
  if (!options_.nvidia_smi.empty()) {
    // A link named nvidia-smi: the program chooses what to do by the name it is called by.
    std::string link = tools_dir() + "/nvidia-smi";
    std::filesystem::create_directories(tools_dir(), ec);
    std::filesystem::remove(link, ec);
    std::filesystem::create_symlink(std::filesystem::absolute(options_.nvidia_smi), link, ec);
    if (ec) {
      return Status(StatusCode::kInternal, "cannot link " + link + " to " + options_.nvidia_smi +
                                               ": " + ec.message());
    }
  }
  devices_->SetOnChange([this] {
    MutexLock l(mu_);
    status_dirty_ = true;
    cv_.notify_all();
  });
  net::HttpServerOptions ho;
  ho.host = options_.address;
  ho.worker_threads = 64;  // an exec session holds one for as long as it lasts
  // HTTPS with a self-signed certificate, as a kubelet serves when it is given none: API servers
  // reach it without verifying it (kube-apiserver without --kubelet-certificate-authority).
  HAMI_ASSIGN_OR_RETURN(net::CertificatePem pem,
                        net::GenerateSelfSignedCertificate(options_.node_name, {options_.node_name},
                                                           {options_.address}));
  HAMI_ASSIGN_OR_RETURN(ho.certificate, net::CertificateSource::FromPem(pem));
  HAMI_ASSIGN_OR_RETURN(http_, net::HttpServer::Create(ho));
  http_->HandlePrefix(
      "GET", "/containerLogs/",
      [this](const net::HttpRequest& req, net::HttpResponse& res) { ServeLogs(req, res); });
  for (const char* method : {"GET", "POST"}) {
    http_->HandlePrefix(
        method, "/exec/",
        [this](const net::HttpRequest& req, net::HttpResponse& res) { ServeExec(req, res); });
  }
  HAMI_ASSIGN_OR_RETURN(port_, http_->Start());
  HAMI_RETURN_IF_ERROR(RegisterNode());
  if (Status s = RenewLease(); !s.ok()) {
    HAMI_LOG(Warning) << "kubelet " << options_.node_name << ": lease: " << s.message();
  }
  pods_ = std::make_unique<k8s::Informer>(
      client_, k8s::kPods,
      k8s::InformerOptions{.field_selector = "spec.nodeName=" + options_.node_name});
  pods_->AddEventHandler(
      {.on_add = [this](const k8s::ObjectPtr& p) { OnPod(p); },
       .on_update = [this](const k8s::ObjectPtr&, const k8s::ObjectPtr& p) { OnPod(p); },
       .on_delete = [this](const k8s::ObjectPtr& p) { OnDelete(p); }});
  pods_->Start();
  heartbeat_ = std::thread([this] {
    SetCurrentThreadName("kubelet-hb");
    HeartbeatLoop();
  });
  admitter_ = std::thread([this] {
    SetCurrentThreadName("kubelet-admit");
    AdmitLoop();
  });
  HAMI_LOG(Info) << "kubelet " << options_.node_name << ": node registered, logs on port " << port_
                 << ", device plugins in " << options_.root_dir << "/device-plugins";
  return OkStatus();
}

void Kubelet::Impl::Stop() {
  {
    MutexLock l(mu_);
    if (stopping_) return;
    stopping_ = true;
  }
  cv_.notify_all();
  if (pods_) pods_->Stop();
  if (admitter_.joinable()) admitter_.join();
  if (heartbeat_.joinable()) heartbeat_.join();
  std::map<std::string, std::shared_ptr<PodWorker>> workers;
  {
    MutexLock l(mu_);
    workers.swap(workers_);
  }
  for (auto& [uid, w] : workers) w->KillNow();
  for (auto& [uid, w] : workers) w->Join();
  std::vector<std::thread> reapers;
  {
    MutexLock l(mu_);
    reapers.swap(reapers_);
  }
  for (std::thread& t : reapers) t.join();
  if (http_) http_->Stop();
  if (devices_) devices_->Stop();
}

Result<std::unique_ptr<Kubelet>> Kubelet::Start(k8s::RestClient& client, KubeletOptions options) {
  auto impl = std::make_unique<Impl>(client, std::move(options));
  HAMI_RETURN_IF_ERROR(impl->Start());
  return std::unique_ptr<Kubelet>(new Kubelet(std::move(impl)));
}

Kubelet::Kubelet(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Kubelet::~Kubelet() { Stop(); }
void Kubelet::Stop() { impl_->Stop(); }
int Kubelet::port() const { return impl_->port_; }
DeviceManager& Kubelet::devices() { return *impl_->devices_; }

}  // namespace hami::sim
