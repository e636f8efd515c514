#include "deviceplugin/registrar.h"

#include "common/log.h"
#include "common/thread_name.h"
#include "device/node_registration.h"
#include "k8s/typed.h"

namespace hami::deviceplugin {

namespace {

constexpr std::string_view kRegisterAnnotation = "hami.io/node-nvidia-register";
constexpr const char* kRefreshKey = "refresh";  // rediscover, then publish
constexpr const char* kPublishKey = "publish";  // publish what is known now

}  // namespace

Registrar::Registrar(k8s::RestClient& client, GpuDriver& driver, RegistrarOptions options,
                     hami::Clock& clock, std::function<void()> stats_changed)
    : client_(client), driver_(driver), options_(std::move(options)), clock_(clock),
      stats_changed_(std::move(stats_changed)), queue_(clock) {}

Registrar::~Registrar() { Stop(); }

Status Registrar::Start(Drive drive) {
  if (options_.settings.operating_mode == device::OperatingMode::kMig) {
    return Status(StatusCode::kFailedPrecondition,
                  "node " + options_.node_name + ": operating mode \"mig\" is not supported by " +
                      "this plugin (use hami-core or mps)");
  }
  Result<Inventory> inv = driver_.Discover();
  if (!inv.ok()) return Status(inv.status().code(), "GPU discovery: " + inv.status().message());
  std::vector<std::string> uuids;
  {
    MutexLock l(mu_);
    inventory_ = std::move(*inv);
    Rebuild();
    for (const std::string& w : registration_.warnings) HAMI_LOG(Warning) << w;
    if (registration_.devices.empty()) {
      return Status(StatusCode::kFailedPrecondition,
                    "node " + options_.node_name + ": none of the " +
                        std::to_string(inventory_.gpus.size()) +
                        " GPU(s) the driver reports can be served (see the warnings above)");
    }
    for (const device::DeviceInfo& d : registration_.devices) uuids.push_back(d.id);
    HAMI_LOG(Info) << "node " << options_.node_name << ": serving " << uuids.size() << " GPU(s) x "
                   << options_.settings.device_split_count << " slots as " << options_.resource_name
                   << " (mode "
                   << device::OperatingModeName(options_.settings.operating_mode) << ", driver "
                   << (inventory_.driver_version.empty() ? "?" : inventory_.driver_version) << ")";
  }
  StartHealth(uuids);
  Status first = Refresh(false);
  if (!first.ok()) {
    HAMI_LOG(Warning) << "node " << options_.node_name << ": first registration failed ("
                      << first.message() << "); retrying in " << options_.retry_interval.count()
                      << " ms";
  }
  queue_.AddAfter(kRefreshKey, first.ok() ? options_.register_interval : options_.retry_interval);
  if (stats_changed_) stats_changed_();
  if (drive == Drive::kWorker) {
    worker_ = std::thread([this] {
      SetCurrentThreadName("register");
      std::string key;
      while (queue_.Get(&key)) Run(key);
    });
  }
  return OkStatus();
}

void Registrar::StartHealth(const std::vector<std::string>& uuids) {
  health_ = std::make_unique<HealthMonitor>(
      driver_, options_.xid_policy,
      [this](const std::vector<std::string>& u, const std::string& why) { MarkUnhealthy(u, why); },
      options_.health_wait_slice);
  Result<std::vector<std::string>> unsupported = health_->Start(uuids);
  if (!unsupported.ok()) {
    HAMI_LOG(Warning) << "GPU health: cannot watch XID events (" << unsupported.status().message()
                      << "); GPUs will not be marked unhealthy";
    return;
  }
  for (const std::string& u : *unsupported) {
    HAMI_LOG(Warning) << "GPU health: " << u << " cannot report XID events; not monitored";
  }
}

void Registrar::Stop() {
  {
    MutexLock l(mu_);
    stopping_ = true;
  }
  changed_.notify_all();
  queue_.ShutDown();
  if (worker_.joinable()) worker_.join();
  if (health_) health_->Stop();
}

bool Registrar::Step() {
  std::string key;
  if (!queue_.TryGet(&key)) return false;
  Run(key);
  return true;
}

void Registrar::Run(const std::string& key) {
  const bool rediscover = key == kRefreshKey;
  Status s = Refresh(rediscover);
  if (!s.ok()) HAMI_LOG(Warning) << s.message();
  queue_.Done(key);
  // A failed publication brings the next full pass forward to retry_interval; a pass that
  // succeeded schedules the next one a register_interval away.
  if (rediscover || !s.ok()) {
    queue_.AddAfter(kRefreshKey, s.ok() ? options_.register_interval : options_.retry_interval);
  }
  // Counted only now that the next pass is scheduled (see Stats::refreshes).
  {
    MutexLock l(mu_);
    ++stats_.refreshes;
  }
  if (stats_changed_) stats_changed_();
}

void Registrar::Rebuild() {
  registration_ = BuildRegistration(inventory_, options_.settings, unhealthy_);
  std::vector<PluginDevice> devices =
      BuildPluginDevices(registration_.devices, options_.settings.enable_numa_topology);
  if (options_.topology_score) {
    std::vector<std::string> warnings;
    scores_ = BuildPairScores(inventory_, registration_.devices, &warnings);
    for (const std::string& w : warnings) HAMI_VLOG(2) << w;
  }
  if (devices != devices_) {
    devices_ = std::move(devices);
    replicas_.clear();
    for (const PluginDevice& d : devices_) replicas_[d.id] = d.gpu;
    ++generation_;
    changed_.notify_all();
  }
}

Status Registrar::Refresh(bool rediscover) {
  if (rediscover) {
    Result<Inventory> inv = driver_.Discover();
    if (!inv.ok()) return Status(inv.status().code(), "GPU discovery: " + inv.status().message());
    MutexLock l(mu_);
    inventory_ = std::move(*inv);
    Rebuild();
  }
  std::string reg, score;
  {
    MutexLock l(mu_);
    reg = device::EncodeNodeDevicesJson(registration_.devices);
    if (options_.topology_score) score = device::EncodePairScores(scores_);
    if (reg == published_register_ && score == published_score_) return OkStatus();
  }
  k8s::AnnotationChanges changes{{std::string(kRegisterAnnotation), reg}};
  if (options_.topology_score) {
    changes[std::string(device::kNvidiaPairScoreAnnotation)] = score;
  }
  Result<k8s::WriteAck> ack = k8s::PatchNodeAnnotations(client_, options_.node_name, changes);
  if (!ack.ok()) {
    return Status(ack.status().code(), "publishing the registration on node " + options_.node_name +
                                           ": " + ack.status().message());
  }
  MutexLock l(mu_);
  bool first = published_register_.empty();
  published_register_ = reg;
  published_score_ = score;
  ++stats_.registrations_published;
  size_t healthy = 0;
  for (const device::DeviceInfo& d : registration_.devices) healthy += d.health ? 1 : 0;
  HAMI_LOG(Info) << "node " << options_.node_name << ": " << (first ? "registered " : "updated ")
                 << registration_.devices.size() << " GPU(s) (" << healthy << " healthy) in "
                 << kRegisterAnnotation;
  return OkStatus();
}

void Registrar::MarkUnhealthy(const std::vector<std::string>& uuids, const std::string& reason) {
  {
    MutexLock l(mu_);
    bool changed = false;
    for (const std::string& u : uuids) {
      if (!unhealthy_.insert(u).second) continue;
      changed = true;
      HAMI_LOG(Warning) << "GPU " << u << " on node " << options_.node_name << " is unhealthy ("
                        << reason << "): kubelet and the scheduler stop offering it";
    }
    if (!changed) return;
    Rebuild();
  }
  queue_.Add(kPublishKey);
}

uint64_t Registrar::Devices(uint64_t known, std::chrono::milliseconds timeout,
                            std::vector<PluginDevice>* out) {
  UniqueLock l(mu_);
  changed_.wait_for(l.native(), timeout,
                    [&]() REQUIRES(mu_) { return stopping_ || generation_ != known; });
  *out = devices_;
  return generation_;
}

ReplicaMap Registrar::Replicas() const {
  MutexLock l(mu_);
  return replicas_;
}

Registrar::Stats Registrar::stats() const {
  MutexLock l(mu_);
  return stats_;
}

}  // namespace hami::deviceplugin
