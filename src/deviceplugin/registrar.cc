#include "deviceplugin/registrar.h"

#include <algorithm>

#include "common/log.h"
#include "common/thread_name.h"
#include "device/node_registration.h"
#include "device/volcano_vgpu.h"
#include "device/wire_time.h"
#include "k8s/object.h"
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
      stats_changed_(std::move(stats_changed)), queue_(clock), held_(!options_.publish_at_start) {}

Registrar::~Registrar() { Stop(); }

Status Registrar::Start(Drive drive) {
  if (DynamicMig() && (options_.mig_driver == nullptr || options_.mig_instances == nullptr)) {
    return Status(StatusCode::kFailedPrecondition,
                  "node " + options_.node_name +
                      ": operating mode \"mig\" needs a driver that can make MIG devices");
  }
  Result<Inventory> inv = driver_.Discover();
  if (!inv.ok()) return Status(inv.status().code(), "GPU discovery: " + inv.status().message());
  std::vector<std::string> watched;
  {
    MutexLock l(mu_);
    inventory_ = std::move(*inv);
    Result<MigPlan> plan = PlanMig();
    if (!plan.ok()) {
      return Status(plan.status().code(), "node " + options_.node_name + ": " +
                                              plan.status().message());
    }
    if (options_.mig_strategy == MigStrategy::kMixed) {
      for (const MigResource& r : plan->resources) mig_resources_.push_back(r.resource);
    }
    if (DynamicMig()) RefreshMigFacts(true);
    Rebuild();
    for (const std::string& w : registration_.warnings) HAMI_LOG(Warning) << w;
    HAMI_RETURN_IF_ERROR(DescribeServed());
    if (options_.volcano) {
      if (Status v = CheckVolcanoSettings(registration_.devices, *options_.volcano); !v.ok()) {
        return Status(v.code(), "node " + options_.node_name + ": " + v.message());
      }
    }
    watched = WatchedGpus();
  }
  StartHealth(watched);
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

Status Registrar::DescribeServed() {
  const std::string node = "node " + options_.node_name + ": ";
  size_t mig = 0;
  for (const auto& [resource, list] : mig_devices_) {
    mig += list.size();
    HAMI_LOG(Info) << node << "offering " << list.size() << " MIG device(s) as " << resource
                   << " (mig strategy mixed)";
  }
  if (registration_.devices.empty() && mig == 0) {
    return Status(StatusCode::kFailedPrecondition,
                  node + "none of the " + std::to_string(inventory_.gpus.size()) +
                      " GPU(s) the driver reports can be served (see the warnings above)");
  }
  if (registration_.devices.empty()) {
    HAMI_LOG(Info) << node << "no GPU left to share as " << options_.resource_name
                   << ": every served GPU has MIG enabled";
    return OkStatus();
  }
  HAMI_LOG(Info) << node << "serving " << registration_.devices.size()
                 << (DynamicMig() ? " GPU(s) cut into MIG devices on demand"
                     : options_.mig_strategy == MigStrategy::kSingle
                         ? " MIG device(s) (mig strategy single) x 1 slot"
                         : " GPU(s) x " + std::to_string(options_.settings.device_split_count) +
                               " slots")
                 << " as " << options_.resource_name << " (mode "
                 << device::OperatingModeName(options_.settings.operating_mode) << ", driver "
                 << (inventory_.driver_version.empty() ? "?" : inventory_.driver_version) << ")";
  return OkStatus();
}

std::vector<std::string> Registrar::WatchedGpus() const {
  std::set<std::string> registered;
  for (const device::DeviceInfo& d : registration_.devices) registered.insert(d.id);
  std::vector<std::string> out;
  for (const GpuInfo& g : inventory_.gpus) {
    if (FilteredOut(g, options_.settings.filter_devices)) continue;
    bool served = g.mig_enabled && !DynamicMig() ? options_.mig_strategy != MigStrategy::kNone
                                                 : registered.count(g.uuid) > 0;
    if (served) out.push_back(g.uuid);
  }
  return out;
}

Result<MigPlan> Registrar::PlanMig() const {
  Inventory served;
  for (const GpuInfo& g : inventory_.gpus) {
    if (!FilteredOut(g, options_.settings.filter_devices)) served.gpus.push_back(g);
  }
  return PlanMigResources(served, options_.mig_strategy);
}

bool Registrar::RebuildMig(const MigPlan& plan) {
  for (const std::string& w : plan.warnings) {
    if (mig_warned_.insert(w).second) HAMI_LOG(Warning) << w;
  }
  std::map<std::string, const GpuInfo*> gpu_of;
  for (const GpuInfo& g : inventory_.gpus) {
    for (const MigDeviceInfo& m : g.mig_devices) gpu_of[m.uuid] = &g;
  }
  const bool numa = options_.settings.enable_numa_topology;
  std::map<std::string, std::vector<PluginDevice>> lists;
  for (const MigResource& r : plan.resources) {
    if (!std::binary_search(mig_resources_.begin(), mig_resources_.end(), r.resource)) {
      std::string w = "MIG devices of " + r.resource +
                      " appeared after the plugin started: restart the plugin to offer them";
      if (mig_warned_.insert(w).second) HAMI_LOG(Warning) << w;
      continue;
    }
    std::vector<PluginDevice>& list = lists[r.resource];
    for (const std::string& id : r.device_ids) {
      const GpuInfo& g = *gpu_of.at(id);
      list.push_back({id, g.uuid, unhealthy_.count(id) == 0 && unhealthy_.count(g.uuid) == 0,
                      numa ? std::max(0, g.numa_node) : -1});
    }
  }
  if (lists == mig_devices_) return false;
  mig_devices_ = std::move(lists);
  return true;
}

void Registrar::RefreshMigFacts(bool first) {
  MigDriver& driver = *options_.mig_driver;
  std::map<std::string, std::vector<device::MigPlacement>> blocked;
  for (const ForeignMig& f : options_.mig_instances->Foreign(inventory_)) {
    blocked[f.gpu_uuid].push_back(f.device.gi_placement);
    std::string w = "MIG device " + f.device.uuid + " on GPU " + f.gpu_uuid +
                    " was not made for a pod by this plugin: its place on the GPU is left out " +
                    "of the registration (destroy it to free it)";
    if (mig_warned_.insert(w).second) HAMI_LOG(Warning) << w;
  }
  // Upstream's B5: a GPU instance without a compute instance is no MIG device, but its place is
  // taken; a pod reserved there would fail its own Allocate. After the first pass one must be
  // seen empty twice in a row: the plugin's own Allocate makes a GPU instance, then its compute
  // instance, and a pass in between must not take the place a pod holds out of the registration.
  std::set<std::string> empty_now;
  for (const GpuInfo& g : inventory_.gpus) {
    for (const device::MigPlacement& p : g.empty_gpu_instances) {
      std::string key = g.uuid + "/" + std::to_string(p.start) + "+" + std::to_string(p.size);
      empty_now.insert(key);
      if (!first && empty_seen_.count(key) == 0) continue;
      blocked[g.uuid].push_back(p);
      std::string w = "GPU " + g.uuid + ": a GPU instance at memory slices " +
                       std::to_string(p.start) + "-" + std::to_string(p.start + p.size - 1) +
                       " holds no compute instance (not made by this plugin): its place is left "
                       "out of the registration (destroy it to free it)";
      if (mig_warned_.insert(w).second) HAMI_LOG(Warning) << w;
    }
  }
  empty_seen_ = std::move(empty_now);
  for (const GpuInfo& g : inventory_.gpus) {
    if (FilteredOut(g, options_.settings.filter_devices)) continue;
    MigGpuFacts& f = mig_facts_[g.uuid];
    f.blocked = blocked[g.uuid];
    Result<MigModeState> mode = driver.GetMigMode(g.uuid);
    std::string refused;  // why turning MIG on did not take
    if (mode.ok() && first && !mode->current && !mode->pending) {
      HAMI_LOG(Info) << "GPU " << g.uuid << ": turning MIG on (operating mode mig)";
      if (Status s = driver.EnableMig(g.uuid); !s.ok()) refused = s.message();
      mode = driver.GetMigMode(g.uuid);
    }
    if (!mode.ok()) {
      f.error = mode.status().message();
      continue;
    }
    f.not_ready = mode->current       ? ""
                  : !refused.empty()  ? "turning MIG on failed: " + refused
                  : mode->pending     ? "MIG is turned on but takes effect after a GPU reset"
                                      : "MIG is off";
    if (!f.profiles.empty()) continue;
    Result<std::vector<MigProfileSpec>> profiles = driver.MigProfiles(g.uuid);
    f.error = profiles.ok() ? "" : profiles.status().message();
    if (profiles.ok()) f.profiles = std::move(*profiles);
  }
}

void Registrar::Rebuild() {
  registration_ =
      DynamicMig()
          ? BuildMigRegistration(inventory_, options_.settings, options_.mig_allowlist,
                                 mig_facts_, unhealthy_)
          : BuildRegistration(inventory_, options_.settings, unhealthy_, options_.mig_strategy);
  std::vector<PluginDevice> devices =
      BuildPluginDevices(registration_.devices, options_.settings.enable_numa_topology);
  if (options_.topology_score) {
    std::vector<std::string> warnings;
    scores_ = BuildPairScores(inventory_, registration_.devices, &warnings);
    for (const std::string& w : warnings) HAMI_VLOG(2) << w;
  }
  bool changed = devices != devices_;
  if (changed) {
    devices_ = std::move(devices);
    replicas_.clear();
    for (const PluginDevice& d : devices_) replicas_[d.id] = d.gpu;
  }
  if (options_.mig_strategy == MigStrategy::kMixed) {
    // A layout that no longer plans (single's checks) keeps the last lists; mixed always plans.
    if (Result<MigPlan> plan = PlanMig(); plan.ok() && RebuildMig(*plan)) changed = true;
  }
  if (options_.volcano) {
    const bool numa = options_.settings.enable_numa_topology;
    const VolcanoSettings& v = *options_.volcano;
    std::map<std::string, std::vector<PluginDevice>> lists;
    if (v.whole) {
      lists[options_.resource_name] = WholeGpuDevices(registration_.devices, numa);
    } else if (v.share) {
      lists[std::string(device::VolcanoShareResource(*v.share))] =
          VolcanoShareDevices(registration_.devices, v, numa);
    } else {
      lists[v.memory_resource] = VolcanoMemoryDevices(registration_.devices, v, numa);
      lists[v.cores_resource] = VolcanoCoreDevices(registration_.devices, v, numa);
    }
    if (lists != volcano_devices_) {
      volcano_devices_ = std::move(lists);
      changed = true;
    }
  }
  if (changed) {
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
    if (DynamicMig()) RefreshMigFacts(false);
    Rebuild();
  }
  if (options_.volcano) {
    if (options_.volcano->whole) return OkStatus();  // kubelet's capacity says it all
    return options_.volcano->share ? PublishVolcanoShare(rediscover) : PublishVolcano(rediscover);
  }
  std::string reg, score;
  {
    MutexLock l(mu_);
    if (held_) return OkStatus();  // Publish() queues the first publication
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

Status Registrar::PublishVolcano(bool full_pass) {
  const VolcanoSettings& v = *options_.volcano;
  std::string reg;
  size_t listed = 0, served = 0;
  bool handshake = false;
  {
    MutexLock l(mu_);
    if (held_) return OkStatus();
    std::vector<device::DeviceInfo> records = VolcanoRegisterDevices(registration_.devices, v);
    listed = records.size();
    served = registration_.devices.size();
    // With no healthy GPU the value still needs a ':' for the scheduler: it reads no device.
    Result<std::string> text = records.empty() ? Result<std::string>(std::string(":"))
                                               : device::EncodeVolcanoNodeDevices(records);
    if (!text.ok()) {
      return Status(text.status().code(), "node " + options_.node_name + ": " +
                                               text.status().message());
    }
    reg = std::move(*text);
    handshake = v.handshake && !handshake_written_;
  }
  if (v.handshake && !handshake && full_pass) {
    // Only schedulers up to v1.15.0 stamp the handshake; it is read once per full pass so a
    // newer scheduler costs one GET and no write.
    Result<k8s::Object> node = k8s::GetNode(client_, options_.node_name);
    if (!node.ok()) {
      return Status(node.status().code(), "reading node " + options_.node_name +
                                              " for its Volcano handshake: " +
                                              node.status().message());
    }
    std::string value = k8s::GetAnnotation(*node, device::kVolcanoNodeHandshakeAnnotation);
    handshake = value.empty() || device::VolcanoHandshakeAwaitsReport(value);
  }
  {
    MutexLock l(mu_);
    if (reg == published_register_ && !handshake) return OkStatus();
  }
  k8s::AnnotationChanges changes{{std::string(device::kVolcanoNodeRegisterAnnotation), reg}};
  if (handshake) {
    changes[std::string(device::kVolcanoNodeHandshakeAnnotation)] =
        device::EncodeVolcanoHandshakeReported(device::UnixToCivil(clock_.NowUnixSeconds(), 0));
  }
  Result<k8s::WriteAck> ack = k8s::PatchNodeAnnotations(client_, options_.node_name, changes);
  if (!ack.ok()) {
    return Status(ack.status().code(), "publishing the Volcano registration on node " +
                                           options_.node_name + ": " + ack.status().message());
  }
  MutexLock l(mu_);
  const bool first = published_register_.empty();
  const bool changed = reg != published_register_;
  published_register_ = reg;
  if (handshake) handshake_written_ = true;
  ++stats_.registrations_published;
  if (changed) {
    HAMI_LOG(Info) << "node " << options_.node_name << ": " << (first ? "registered " : "updated ")
                   << listed << " GPU(s) in " << device::kVolcanoNodeRegisterAnnotation
                   << (listed < served ? " (" + std::to_string(served - listed) +
                                             " unhealthy left out)"
                                       : "");
  }
  if (handshake && !first) {
    HAMI_VLOG(1) << "node " << options_.node_name << ": reported to Volcano's handshake again";
  }
  return OkStatus();
}

Status Registrar::PublishVolcanoShare(bool full_pass) {
  const std::string& name = options_.node_name;
  std::string unhealthy;
  std::pair<std::string, std::string> capacity;
  bool published = false;  // the unhealthy IDs were written once by this process
  {
    MutexLock l(mu_);
    if (held_) return OkStatus();
    unhealthy = VolcanoUnhealthyIndices(registration_.devices);
    capacity = VolcanoShareCapacity(registration_.devices, *options_.volcano);
    published = published_unhealthy_.has_value();
    if (published && !full_pass && *published_unhealthy_ == unhealthy) return OkStatus();
  }
  const std::string key(device::kVolcanoGpuUnhealthyIdsAnnotation);
  bool write_annotation = true, write_status = false;
  if (full_pass || !published) {
    Result<k8s::Object> node = k8s::GetNode(client_, name);
    if (!node.ok()) {
      return Status(node.status().code(), "reading node " + name + " for Volcano: " +
                                              node.status().message());
    }
    write_annotation = k8s::GetAnnotation(*node, key) != unhealthy ||
                       (unhealthy.empty() && k8s::HasAnnotation(*node, key));
    std::string res = capacity.first;  // as a JSON Pointer token: its '/' escaped
    res.replace(res.find('/'), 1, "~1");
    write_status = k8s::GetString(*node, "/status/capacity/" + res) != capacity.second ||
                   k8s::GetString(*node, "/status/allocatable/" + res) != capacity.second;
  }
  if (write_annotation) {
    k8s::AnnotationChanges changes{
        {key, unhealthy.empty() ? std::nullopt : std::optional<std::string>(unhealthy)}};
    Result<k8s::WriteAck> ack = k8s::PatchNodeAnnotations(client_, name, changes);
    if (!ack.ok()) {
      return Status(ack.status().code(), "writing " + key + " on node " + name + ": " +
                                             ack.status().message());
    }
    HAMI_LOG(Info) << "node " << name << ": " << key << " "
                   << (unhealthy.empty() ? "removed (every GPU healthy)" : "= " + unhealthy);
  }
  if (write_status) {
    nlohmann::json patch;
    patch["status"]["capacity"][capacity.first] = capacity.second;
    patch["status"]["allocatable"][capacity.first] = capacity.second;
    Result<k8s::WriteAck> ack = client_.PatchAck(k8s::kNodes, "", name, k8s::PatchType::kMerge,
                                                 patch.dump(), "status");
    if (!ack.ok()) {
      return Status(ack.status().code(), "writing " + capacity.first +
                                             " into the status of node " + name + ": " +
                                             ack.status().message());
    }
    HAMI_LOG(Info) << "node " << name << ": status capacity " << capacity.first << " = "
                   << capacity.second << " (Volcano's scheduler reads it)";
  }
  MutexLock l(mu_);
  published_unhealthy_ = unhealthy;
  if (write_annotation || write_status) ++stats_.registrations_published;
  return OkStatus();
}

void Registrar::Publish() {
  {
    MutexLock l(mu_);
    if (!held_) return;
    held_ = false;
  }
  HAMI_LOG(Info) << "node " << options_.node_name
                 << ": the kubelet serves the plugin's devices; publishing the registration";
  queue_.Add(kPublishKey);
}

void Registrar::MarkUnhealthy(const std::vector<std::string>& uuids, const std::string& reason) {
  {
    MutexLock l(mu_);
    bool changed = false;
    for (const std::string& u : uuids) {
      if (!unhealthy_.insert(u).second) continue;
      changed = true;
      HAMI_LOG(Warning) << (u.rfind("MIG-", 0) == 0 ? "MIG device " : "GPU ") << u
                        << " on node " << options_.node_name << " is unhealthy ("
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

std::vector<std::string> Registrar::MigResourceNames() const {
  MutexLock l(mu_);
  return mig_resources_;
}

uint64_t Registrar::ResourceDevices(const std::string& resource, uint64_t known,
                                    std::chrono::milliseconds timeout,
                                    std::vector<PluginDevice>* out) {
  UniqueLock l(mu_);
  changed_.wait_for(l.native(), timeout,
                    [&]() REQUIRES(mu_) { return stopping_ || generation_ != known; });
  out->clear();
  for (const auto* lists : {&mig_devices_, &volcano_devices_}) {
    if (auto it = lists->find(resource); it != lists->end()) *out = it->second;
  }
  return generation_;
}

std::vector<device::DeviceInfo> Registrar::RegisteredDevices() const {
  MutexLock l(mu_);
  return registration_.devices;
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
