#include "deviceplugin/plugin_service.h"

#include <sys/stat.h>

#include <algorithm>
#include <filesystem>
#include <sstream>

#include "common/log.h"
#include "common/thread_name.h"
#include "common/uuid.h"
#include "device/node_lock.h"
#include "device/node_registration.h"
#include "extender/node_locker.h"
#include "k8s/api_error.h"
#include "k8s/object.h"
#include "k8s/typed.h"

namespace hami::deviceplugin {

namespace {

constexpr std::string_view kRegisterAnnotation = "hami.io/node-nvidia-register";
constexpr std::string_view kVgpuNodeAnnotation = "hami.io/vgpu-node";

std::string Annotation(const k8s::Object& obj, std::string_view key) {
  const k8s::Object* anns = nullptr;
  if (auto m = obj.find("metadata"); m != obj.end() && m->is_object()) {
    if (auto a = m->find("annotations"); a != m->end() && a->is_object()) anns = &*a;
  }
  if (anns == nullptr) return "";
  auto it = anns->find(std::string(key));
  return it != anns->end() && it->is_string() ? it->get<std::string>() : "";
}

bool HasAnnotation(const k8s::Object& obj, std::string_view key) {
  const k8s::Object* anns = nullptr;
  if (auto m = obj.find("metadata"); m != obj.end() && m->is_object()) {
    if (auto a = m->find("annotations"); a != m->end() && a->is_object()) anns = &*a;
  }
  return anns != nullptr && anns->contains(std::string(key));
}

// Region file names: random version-4 UUIDs, as upstream names them.
std::string RandomCacheName() { return NewRandomUuid() + ".cache"; }

// A fresh, empty directory every process of the container may write (mode 0777).
Status RecreateDir(const std::string& dir) {
  std::error_code ec;
  std::filesystem::remove_all(dir, ec);
  if (ec) return Status(StatusCode::kInternal, "cannot clear " + dir + ": " + ec.message());
  std::filesystem::create_directories(dir, ec);
  if (ec) return Status(StatusCode::kInternal, "cannot create " + dir + ": " + ec.message());
  if (chmod(dir.c_str(), 0777) != 0) {
    return Status(StatusCode::kInternal, "cannot chmod " + dir);
  }
  return OkStatus();
}

std::string Describe(const ContainerAllocation& a) {
  std::ostringstream os;
  for (size_t i = 0; i < a.devices.size(); ++i) {
    const device::ContainerDevice& d = a.devices[i];
    os << (i ? ", " : "") << d.uuid << " (" << d.mem_mib << " MiB, " << d.cores << " % cores)";
  }
  return os.str();
}

}  // namespace

PodView PodViewOf(const k8s::Object& pod) {
  PodView v;
  v.ns = k8s::Namespace(pod);
  v.name = k8s::Name(pod);
  v.uid = k8s::Uid(pod);
  if (auto m = pod.find("metadata"); m != pod.end() && m->is_object()) {
    if (auto a = m->find("annotations"); a != m->end() && a->is_object()) {
      for (auto it = a->begin(); it != a->end(); ++it) {
        if (it->is_string()) v.annotations[it.key()] = it->get<std::string>();
      }
    }
  }
  auto spec = pod.find("spec");
  if (spec == pod.end() || !spec->is_object()) return v;
  for (const char* list : {"initContainers", "containers"}) {
    auto cs = spec->find(list);
    if (cs == spec->end() || !cs->is_array()) continue;
    for (const k8s::Object& c : *cs) {
      if (!c.is_object()) continue;
      ContainerView cv;
      cv.name = c.value("name", "");
      if (auto env = c.find("env"); env != c.end() && env->is_array()) {
        for (const k8s::Object& e : *env) {
          if (!e.is_object()) continue;
          auto name = e.find("name");
          auto value = e.find("value");
          if (name != e.end() && name->is_string() && value != e.end() && value->is_string()) {
            cv.env[name->get<std::string>()] = value->get<std::string>();
          }
        }
      }
      v.containers.push_back(std::move(cv));
    }
  }
  return v;
}

struct PluginService::PendingPod {
  PodView view;
  std::string resource_version;
  k8s::ObjectPtr object;
  k8s::Object node;  // as read to find the pod: the lock release starts from it
};

PluginService::PluginService(k8s::RestClient& client, GpuDriver& driver, PluginOptions options,
                             hami::Clock* clock)
    : client_(client),
      driver_(driver),
      options_(std::move(options)),
      clock_(clock != nullptr ? *clock : real_clock_),
      locker_(client_, clock_, {.expire_seconds = options_.node_lock_expire_seconds}) {}

PluginService::~PluginService() { Stop(); }

Status PluginService::Start() {
  if (options_.settings.operating_mode == device::OperatingMode::kMig) {
    return Status(StatusCode::kFailedPrecondition,
                  "node " + options_.node_name + ": operating mode \"mig\" is not supported by " +
                      "this plugin (use hami-core or mps)");
  }
  Result<Inventory> inv = driver_.Discover();
  if (!inv.ok()) return Status(inv.status().code(), "GPU discovery: " + inv.status().message());
  std::vector<std::string> uuids;
  {
    std::lock_guard<std::mutex> l(mu_);
    inventory_ = std::move(*inv);
    RebuildLocked();
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
                   << " (mode " << device::OperatingModeName(options_.settings.operating_mode)
                   << ", driver "
                   << (inventory_.driver_version.empty() ? "?" : inventory_.driver_version) << ")";
  }
  health_ = std::make_unique<HealthMonitor>(
      driver_, options_.xid_policy,
      [this](const std::vector<std::string>& u, const std::string& why) { MarkUnhealthy(u, why); },
      options_.health_wait_slice);
  Result<std::vector<std::string>> unsupported = health_->Start(uuids);
  if (!unsupported.ok()) {
    HAMI_LOG(Warning) << "GPU health: cannot watch XID events (" << unsupported.status().message()
                      << "); GPUs will not be marked unhealthy";
  } else {
    for (const std::string& u : *unsupported) {
      HAMI_LOG(Warning) << "GPU health: " << u << " cannot report XID events; not monitored";
    }
  }
  if (Status s = Refresh(false); !s.ok()) {
    HAMI_LOG(Warning) << "node " << options_.node_name << ": first registration failed ("
                      << s.message() << "); retrying in " << options_.retry_interval.count()
                      << " ms";
  }
  refresher_ = std::thread([this] {
    SetCurrentThreadName("register");
    RefreshLoop();
  });
  return OkStatus();
}

void PluginService::Stop() {
  {
    std::lock_guard<std::mutex> l(mu_);
    stopping_ = true;
  }
  changed_.notify_all();
  wake_.notify_all();
  if (refresher_.joinable()) refresher_.join();
  if (health_) health_->Stop();
}

void PluginService::RebuildLocked() {
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

Status PluginService::Refresh(bool rediscover) {
  if (rediscover) {
    Result<Inventory> inv = driver_.Discover();
    if (!inv.ok()) return Status(inv.status().code(), "GPU discovery: " + inv.status().message());
    std::lock_guard<std::mutex> l(mu_);
    inventory_ = std::move(*inv);
    RebuildLocked();
  }
  std::string reg, score;
  {
    std::lock_guard<std::mutex> l(mu_);
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
  std::lock_guard<std::mutex> l(mu_);
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

void PluginService::RefreshLoop() {
  MonoTime next = clock_.Now() + options_.register_interval;
  std::unique_lock<std::mutex> l(mu_);
  while (!stopping_) {
    const bool due = clock_.Now() >= next;
    if (!due && !publish_now_) {
      clock_.WaitUntil(wake_, l, next);  // may return early: the loop checks again
      continue;
    }
    publish_now_ = false;
    l.unlock();
    Status s = Refresh(due);
    if (!s.ok()) HAMI_LOG(Warning) << s.message();
    l.lock();
    ++stats_.refreshes;
    if (due || !s.ok()) {
      next = clock_.Now() + (s.ok() ? options_.register_interval : options_.retry_interval);
    }
  }
}

void PluginService::MarkUnhealthy(const std::vector<std::string>& uuids,
                                  const std::string& reason) {
  std::lock_guard<std::mutex> l(mu_);
  bool changed = false;
  for (const std::string& u : uuids) {
    if (!unhealthy_.insert(u).second) continue;
    changed = true;
    HAMI_LOG(Warning) << "GPU " << u << " on node " << options_.node_name << " is unhealthy ("
                      << reason << "): kubelet and the scheduler stop offering it";
  }
  if (!changed) return;
  RebuildLocked();
  publish_now_ = true;
  wake_.notify_all();
}

uint64_t PluginService::Devices(uint64_t known, std::chrono::milliseconds timeout,
                                std::vector<PluginDevice>* out) {
  std::unique_lock<std::mutex> l(mu_);
  changed_.wait_for(l, timeout, [&] { return stopping_ || generation_ != known; });
  *out = devices_;
  return generation_;
}

PluginService::Stats PluginService::stats() const {
  std::lock_guard<std::mutex> l(mu_);
  return stats_;
}

Result<PluginService::PendingPod> PluginService::FindPendingPod() {
  const std::string& node = options_.node_name;
  auto eligible = [&](const k8s::Object& pod) {
    return k8s::GetString(pod, "/spec/nodeName") == node &&
           Annotation(pod, kVgpuNodeAnnotation) == node &&
           Annotation(pod, scheduler::kBindPhaseAnnotation) == scheduler::kBindPhaseAllocating &&
           HasAnnotation(pod, options_.allocation.to_allocate_key);
  };
  Result<k8s::Object> n = k8s::GetNode(client_, node);
  auto pending = [&](k8s::Object pod) {
    PendingPod p;
    p.view = PodViewOf(pod);
    p.resource_version = k8s::ResourceVersion(pod);
    p.object = std::make_shared<const k8s::Object>(std::move(pod));
    p.node = *n;
    return p;
  };
  if (!n.ok()) {
    return Status(StatusCode::kUnavailable,
                  "cannot read node " + node + " to find the pod: " + n.status().message());
  }
  std::string lock = scheduler::NodeLockOf(*n);
  if (!lock.empty()) {
    Result<device::NodeLockValue> v = device::DecodeNodeLock(lock);
    if (v.ok() && !v->IsLegacy()) {
      Result<k8s::Object> pod = k8s::GetPod(client_, v->pod_namespace, v->pod_name);
      if (pod.ok() && eligible(*pod)) return pending(std::move(*pod));
      if (!pod.ok() && !k8s::IsNotFound(pod.status())) {
        return Status(StatusCode::kUnavailable, "cannot read pod " + v->pod_namespace + "/" +
                                                    v->pod_name + ": " + pod.status().message());
      }
    }
  }
  k8s::ListOptions opts;
  opts.field_selector = "spec.nodeName=" + node;
  Result<k8s::Object> list = k8s::ListPods(client_, "", opts);
  if (!list.ok()) {
    return Status(StatusCode::kUnavailable,
                  "cannot list the pods of node " + node + ": " + list.status().message());
  }
  const k8s::Object* best = nullptr;
  int64_t best_time = 0;
  if (auto items = list->find("items"); items != list->end() && items->is_array()) {
    for (const k8s::Object& pod : *items) {
      if (k8s::GetString(pod, "/status/phase") != "Pending" || !eligible(pod)) continue;
      std::string t = Annotation(pod, scheduler::kBindTimeAnnotation);
      if (t.empty()) continue;
      int64_t when = std::strtoll(t.c_str(), nullptr, 10);
      if (best == nullptr || when < best_time) {
        best = &pod;
        best_time = when;
      }
    }
  }
  if (best == nullptr) {
    return Status(StatusCode::kNotFound,
                  "no pod bound to node " + node + " is waiting for GPUs (bind phase allocating)");
  }
  return pending(*best);
}

Status PluginService::MarkFailed(const PendingPod& p, const std::string& reason) {
  const PodView& v = p.view;
  HAMI_LOG(Warning) << "pod " << v.Key() << ": allocation on node " << options_.node_name
                    << " failed: " << reason;
  Status s = k8s::PatchPodAnnotations(client_, v.ns, v.name,
                                      {{std::string(scheduler::kBindPhaseAnnotation),
                                        std::string(scheduler::kBindPhaseFailed)}})
                 .status();
  k8s::EventSpec ev;
  ev.involved = p.object;
  ev.type = "Warning";
  ev.reason = "AllocationFailed";
  ev.message = "hami-device-plugin on " + options_.node_name + ": " + reason;
  ev.component = "hami-device-plugin";
  ev.host = options_.node_name;
  if (Result<k8s::WriteAck> e = k8s::CreateEvent(client_, ev); !e.ok()) {
    HAMI_LOG(Warning) << "pod " << v.Key() << ": cannot post event: " << e.status().message();
  }
  if (Status r = locker_.Release(options_.node_name, v.ns, v.name, &p.node); !r.ok()) {
    HAMI_LOG(Warning) << "pod " << v.Key() << ": cannot release the node lock: " << r.message();
  }
  {
    std::lock_guard<std::mutex> l(mu_);
    ++stats_.allocation_failures;
  }
  return s;
}

std::vector<std::vector<std::string>> PluginService::PreferredAllocation(
    const std::vector<PreferredRequest>& requests) {
  std::lock_guard<std::mutex> serial(allocate_mu_);
  std::vector<std::vector<std::string>> out(requests.size());
  Result<PendingPod> p = FindPendingPod();
  if (!p.ok()) {
    HAMI_VLOG(2) << "preferred allocation: " << p.status().message() << "; no preference";
    return out;
  }
  ReplicaMap replicas;
  {
    std::lock_guard<std::mutex> l(mu_);
    replicas = replicas_;
  }
  for (size_t i = 0; i < requests.size(); ++i) {
    out[i] =
        PreferredDevices(p->view, options_.allocation.to_allocate_key, i, requests[i], replicas);
  }
  return out;
}

Result<std::vector<ContainerAllocation>> PluginService::Allocate(
    const std::vector<std::vector<std::string>>& requests) {
  std::lock_guard<std::mutex> serial(allocate_mu_);
  constexpr int kAttempts = 4;
  for (int attempt = 1;; ++attempt) {
    HAMI_ASSIGN_OR_RETURN(PendingPod p, FindPendingPod());
    ReplicaMap replicas;
    {
      std::lock_guard<std::mutex> l(mu_);
      replicas = replicas_;
    }
    Result<AllocationPlan> plan =
        PlanAllocation(p.view, requests, replicas, options_.allocation, RandomCacheName);
    if (!plan.ok()) {
      (void)MarkFailed(p, plan.status().message());
      return plan.status();
    }
    for (const ContainerAllocation& a : plan->containers) {
      if (a.host_dir.empty()) continue;
      if (Status s = RecreateDir(a.host_dir); !s.ok()) {
        (void)MarkFailed(p, s.message());
        return s;
      }
    }
    nlohmann::json patch;
    patch["metadata"]["resourceVersion"] = p.resource_version;
    patch["metadata"]["annotations"][options_.allocation.to_allocate_key] = plan->to_allocate;
    if (plan->complete) {
      patch["metadata"]["annotations"][std::string(scheduler::kBindPhaseAnnotation)] =
          std::string(scheduler::kBindPhaseSuccess);
    }
    Result<k8s::WriteAck> ack =
        client_.PatchAck(k8s::kPods, p.view.ns, p.view.name, k8s::PatchType::kMerge, patch.dump());
    if (!ack.ok() && k8s::IsConflict(ack.status()) && attempt < kAttempts) {
      HAMI_VLOG(2) << "pod " << p.view.Key() << " changed while allocating; reading it again";
      continue;
    }
    if (!ack.ok()) {
      std::string why = "recording the allocation on the pod failed: " + ack.status().message();
      (void)MarkFailed(p, why);
      return Status(StatusCode::kUnavailable, "pod " + p.view.Key() + ": " + why);
    }
    for (const ContainerAllocation& a : plan->containers) {
      HAMI_LOG(Info) << "pod " << p.view.Key() << " container " << a.container_name
                     << ": allocated " << Describe(a) << " on node " << options_.node_name;
    }
    if (plan->complete) {
      if (Status r = locker_.Release(options_.node_name, p.view.ns, p.view.name, &p.node);
          !r.ok()) {
        HAMI_LOG(Warning) << "pod " << p.view.Key()
                          << ": allocation done but the node lock could not be released ("
                          << r.message() << "); the scheduler will take it over";
      }
      HAMI_LOG(Info) << "pod " << p.view.Key() << ": bind phase success, node lock released";
    }
    std::lock_guard<std::mutex> l(mu_);
    stats_.allocations += plan->containers.size();
    return std::move(plan->containers);
  }
}

}  // namespace hami::deviceplugin
