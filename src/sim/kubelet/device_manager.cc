#include "sim/kubelet/device_manager.h"

// Before gRPC's headers: Abseil (which they include) defines the same annotation macros, and a
// redefinition in a system header is silent where ours after it would not be.
#include "common/thread_annotations.h"
#include <grpcpp/grpcpp.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <condition_variable>
#include <filesystem>
#include <mutex>
#include <set>
#include <thread>

#include "common/log.h"
#include "common/thread_name.h"
#include "deviceplugin/v1beta1/api.grpc.pb.h"

namespace hami::sim {

namespace api = ::v1beta1;

int64_t ResourceState::Allocatable() const {
  return static_cast<int64_t>(std::count_if(devices.begin(), devices.end(),
                                            [](const KubeletDevice& d) { return d.healthy; }));
}

namespace {

bool ValidResourceName(const std::string& name) {
  // An extended resource: "<domain>/<name>", not in the kubernetes.io domain.
  size_t slash = name.find('/');
  return slash != std::string::npos && slash > 0 && slash + 1 < name.size() &&
         name.find('/', slash + 1) == std::string::npos &&
         name.compare(0, slash, "kubernetes.io") != 0;
}

}  // namespace

// One registered plugin: its channel and the ListAndWatch reader.
struct Endpoint {
  std::string resource;
  std::string endpoint;
  std::shared_ptr<grpc::Channel> channel;
  std::unique_ptr<api::DevicePlugin::Stub> stub;
  grpc::ClientContext stream_ctx;
  std::thread reader;
};

class DeviceManager::Impl final : public api::Registration::Service {
 public:
  explicit Impl(std::string dir) : dir_(std::move(dir)) {}
  ~Impl() override { Stop(); }

  Status Serve() {
    std::error_code ec;
    std::filesystem::create_directories(dir_, ec);
    if (ec) return Status(StatusCode::kInternal, "cannot create " + dir_ + ": " + ec.message());
    // What kubelet does at start: forget every plugin socket, then offer kubelet.sock.
    for (const auto& e : std::filesystem::directory_iterator(dir_, ec)) {
      if (e.is_socket(ec)) std::filesystem::remove(e.path(), ec);
    }
    grpc::ServerBuilder b;
    b.AddListeningPort("unix://" + dir_ + "/kubelet.sock", grpc::InsecureServerCredentials());
    b.RegisterService(this);
    server_ = b.BuildAndStart();
    if (!server_) return Status(StatusCode::kUnavailable, "cannot serve " + dir_ + "/kubelet.sock");
    return OkStatus();
  }

  void Stop() {
    std::vector<std::unique_ptr<Endpoint>> eps;
    {
      MutexLock l(mu_);
      if (stopped_) return;
      stopped_ = true;
      for (auto& [name, ep] : endpoints_) eps.push_back(std::move(ep));
      endpoints_.clear();
      for (auto& ep : retired_) eps.push_back(std::move(ep));
      retired_.clear();
    }
    if (server_) server_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(1));
    for (auto& ep : eps) {
      ep->stream_ctx.TryCancel();
      if (ep->reader.joinable()) ep->reader.join();
    }
    ::unlink((dir_ + "/kubelet.sock").c_str());
  }

  grpc::Status Register(grpc::ServerContext*, const api::RegisterRequest* req,
                        api::Empty*) override {
    if (req->version() != "v1beta1") {
      return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                          "unsupported device plugin API version " + req->version());
    }
    if (!ValidResourceName(req->resource_name())) {
      return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                          "invalid extended resource name " + req->resource_name());
    }
    if (req->endpoint().empty() || req->endpoint().find('/') != std::string::npos) {
      return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                          "endpoint must be a socket name in " + dir_);
    }
    auto ep = std::make_unique<Endpoint>();
    ep->resource = req->resource_name();
    ep->endpoint = req->endpoint();
    // A connection of its own, as kubelet dials each registration afresh: gRPC would otherwise
    // share the connection state (and reconnect backoff) of an earlier channel to the same
    // socket path, such as the one to a plugin that has since been restarted.
    grpc::ChannelArguments args;
    args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
    ep->channel = grpc::CreateCustomChannel("unix://" + dir_ + "/" + req->endpoint(),
                                            grpc::InsecureChannelCredentials(), args);
    // Shorter than the plugins' usual registration deadline (5 s), so the answer reaches them.
    if (!ep->channel->WaitForConnected(std::chrono::system_clock::now() +
                                       std::chrono::seconds(3))) {
      HAMI_LOG(Warning) << "kubelet: plugin for " << req->resource_name()
                        << " registered, but its socket " << req->endpoint()
                        << " does not answer; refused";
      return grpc::Status(grpc::StatusCode::UNAVAILABLE,
                          "cannot dial the plugin at " + dir_ + "/" + req->endpoint());
    }
    ep->stub = api::DevicePlugin::NewStub(ep->channel);
    Endpoint* raw = ep.get();
    {
      MutexLock l(mu_);
      if (stopped_) return grpc::Status(grpc::StatusCode::UNAVAILABLE, "kubelet is stopping");
      ResourceState& st = resources_[ep->resource];
      st.endpoint = ep->endpoint;
      st.preferred_allocation = req->options().get_preferred_allocation_available();
      st.connected = true;
      ++st.registrations;
      if (auto old = endpoints_.find(ep->resource); old != endpoints_.end()) {
        old->second->stream_ctx.TryCancel();
        retired_.push_back(std::move(old->second));
      }
      endpoints_[ep->resource] = std::move(ep);
      raw->reader = std::thread([this, raw] {
        SetCurrentThreadName("kubelet-law");
        ReadStream(raw);
      });
    }
    HAMI_LOG(Info) << "kubelet: plugin for " << req->resource_name() << " registered at "
                   << req->endpoint();
    Changed();
    return grpc::Status::OK;
  }

  void ReadStream(Endpoint* ep) {
    api::Empty empty;
    std::unique_ptr<grpc::ClientReader<api::ListAndWatchResponse>> reader =
        ep->stub->ListAndWatch(&ep->stream_ctx, empty);
    api::ListAndWatchResponse resp;
    while (reader->Read(&resp)) {
      std::vector<KubeletDevice> devices;
      for (const api::Device& d : resp.devices()) {
        KubeletDevice k{d.id(), d.health() == "Healthy", -1};
        if (d.has_topology() && d.topology().nodes_size() > 0) {
          k.numa_node = static_cast<int>(d.topology().nodes(0).id());
        }
        devices.push_back(std::move(k));
      }
      {
        MutexLock l(mu_);
        auto it = endpoints_.find(ep->resource);
        if (it == endpoints_.end() || it->second.get() != ep) break;  // replaced
        ResourceState& st = resources_[ep->resource];
        st.devices = std::move(devices);
        ++st.updates;
      }
      Changed();
    }
    grpc::Status s = reader->Finish();
    {
      MutexLock l(mu_);
      auto it = endpoints_.find(ep->resource);
      if (it != endpoints_.end() && it->second.get() == ep)
        resources_[ep->resource].connected = false;
    }
    HAMI_VLOG(1) << "kubelet: ListAndWatch of " << ep->resource << " ended (" << s.error_message()
                 << ")";
    Changed();
  }

  void Changed() {
    std::function<void()> cb;
    {
      // Notified under the lock: Stop() takes it too, so no notification can touch the
      // condition variable once the manager is being destroyed.
      MutexLock l(mu_);
      ++version_;
      cb = on_change_;
      cv_.notify_all();
    }
    if (cb) cb();
  }

  Result<std::vector<ContainerDevices>> AllocatePod(const std::string& pod_uid,
                                                    const std::string& resource,
                                                    const std::vector<ContainerNeed>& containers) {
    MutexLock serial(allocate_mu_);
    std::vector<ContainerDevices> out;
    std::vector<std::string> reusable;  // devices of the pod's init containers
    std::vector<std::string> taken;     // held by this call's app containers
    // What this call took is given back. Called with mu_ held (the first check) or not (a
    // failed Allocate), hence two forms: std::mutex is not recursive, and locking it again on
    // the same thread blocks that thread forever, and with it every Register and heartbeat.
    auto fail_locked = [&](Status s) REQUIRES(mu_) {
      held_[pod_uid].erase(resource);
      return s;
    };
    auto fail = [&](Status s) EXCLUDES(mu_) {
      MutexLock l(mu_);
      return fail_locked(std::move(s));
    };
    for (const ContainerNeed& c : containers) {
      if (c.count <= 0) continue;
      Candidates cand;
      {
        MutexLock l(mu_);
        Result<Candidates> found = CandidatesFor(pod_uid, resource, taken, reusable);
        if (!found.ok()) return fail_locked(found.status());
        cand = std::move(*found);
      }
      Result<std::vector<std::string>> ids =
          ChooseIds(cand, reusable, static_cast<size_t>(c.count), resource);
      if (!ids.ok()) return fail(ids.status());
      Result<ContainerDevices> d = CallAllocate(cand.stub, c.name, *ids);
      if (!d.ok()) return fail(d.status());
      out.push_back(std::move(*d));
      {
        MutexLock l(mu_);
        std::vector<std::string>& held = held_[pod_uid][resource];
        for (const std::string& id : *ids) {
          if (std::find(held.begin(), held.end(), id) == held.end()) held.push_back(id);
        }
      }
      NoteUse(c.init, *ids, reusable, taken);
    }
    return out;
  }

  // What one container may get of a resource: the plugin to ask, whether it offers a preferred
  // allocation, and the healthy devices neither another pod nor this call (`taken`, `reusable`)
  // holds.
  struct Candidates {
    api::DevicePlugin::Stub* stub = nullptr;
    bool preferred = false;
    std::vector<std::string> available;
  };

  // Unavailable when no connected plugin serves `resource`.
  Result<Candidates> CandidatesFor(const std::string& pod_uid, const std::string& resource,
                                   const std::vector<std::string>& taken,
                                   const std::vector<std::string>& reusable) REQUIRES(mu_) {
    Candidates out;
    auto ep = endpoints_.find(resource);
    const ResourceState* st = resources_.count(resource) ? &resources_.at(resource) : nullptr;
    if (ep == endpoints_.end() || st == nullptr || !st->connected) {
      return Status(StatusCode::kUnavailable,
                    "no device plugin serves " + resource + " on this node");
    }
    out.stub = ep->second->stub.get();
    out.preferred = st->preferred_allocation;
    std::set<std::string> busy(taken.begin(), taken.end());
    busy.insert(reusable.begin(), reusable.end());
    for (const auto& [uid, by_resource] : held_) {
      if (uid == pod_uid) continue;
      auto r = by_resource.find(resource);
      if (r != by_resource.end()) busy.insert(r->second.begin(), r->second.end());
    }
    for (const KubeletDevice& d : st->devices) {
      if (d.healthy && !busy.count(d.id)) out.available.push_back(d.id);
    }
    return out;
  }

  // `want` device IDs: the reusable ones (up to `want`), topped up with the plugin's preference
  // when it offers a usable one (it must include them), else with the first available ones.
  // ResourceExhausted when too few are available.
  Result<std::vector<std::string>> ChooseIds(const Candidates& cand,
                                             const std::vector<std::string>& reusable, size_t want,
                                             const std::string& resource) {
    const std::vector<std::string>& available = cand.available;
    std::vector<std::string> must(
        reusable.begin(),
        reusable.begin() + static_cast<std::ptrdiff_t>(std::min(want, reusable.size())));
    std::vector<std::string> ids = must;
    if (ids.size() < want) {
      if (available.size() < want - ids.size()) {
        return Status(StatusCode::kResourceExhausted,
                      "requested number of devices unavailable for " + resource +
                          ". Requested: " + std::to_string(want) +
                          ", Available: " + std::to_string(available.size() + ids.size()));
      }
      std::vector<std::string> pick;
      if (cand.preferred) pick = Preferred(cand.stub, available, must, static_cast<int32_t>(want));
      if (!pick.empty()) {
        ids = std::move(pick);
      } else {
        for (size_t i = 0; ids.size() < want; ++i) ids.push_back(available[i]);
      }
    }
    return ids;
  }

  // The plugin's Allocate for one container's `ids`, as that container's devices. Unavailable
  // when the call fails or answers for other than one container.
  static Result<ContainerDevices> CallAllocate(api::DevicePlugin::Stub* stub,
                                               const std::string& container,
                                               const std::vector<std::string>& ids) {
    api::AllocateRequest req;
    api::ContainerAllocateRequest* cr = req.add_container_requests();
    for (const std::string& id : ids) cr->add_devices_ids(id);
    api::AllocateResponse resp;
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
    grpc::Status s = stub->Allocate(&ctx, req, &resp);
    if (!s.ok() || resp.container_responses_size() != 1) {
      return Status(StatusCode::kUnavailable,
                    "Allocate for container " + container + " failed: " +
                        (s.ok() ? "the plugin answered no container" : s.error_message()));
    }
    const api::ContainerAllocateResponse& r = resp.container_responses(0);
    ContainerDevices d;
    d.name = container;
    d.device_ids = ids;
    for (const auto& [k, v] : r.envs()) d.envs[k] = v;
    for (const auto& [k, v] : r.annotations()) d.annotations[k] = v;
    for (const api::CDIDevice& cdi : r.cdi_devices()) d.cdi_devices.push_back(cdi.name());
    for (const api::Mount& m : r.mounts()) {
      d.mounts.push_back({m.container_path(), m.host_path(), m.read_only()});
    }
    return d;
  }

  // Books `ids` for the rest of the pod: an init container's devices become reusable; an app
  // container's are taken and reusable no more (app containers do not share).
  static void NoteUse(bool init, const std::vector<std::string>& ids,
                      std::vector<std::string>& reusable, std::vector<std::string>& taken) {
    if (init) {
      for (const std::string& id : ids) {
        if (std::find(reusable.begin(), reusable.end(), id) == reusable.end()) {
          reusable.push_back(id);
        }
      }
    } else {
      taken.insert(taken.end(), ids.begin(), ids.end());
      for (const std::string& id : ids) {
        reusable.erase(std::remove(reusable.begin(), reusable.end(), id), reusable.end());
      }
    }
  }

  // The plugin's preference, validated; empty when unusable.
  std::vector<std::string> Preferred(api::DevicePlugin::Stub* stub,
                                     const std::vector<std::string>& available,
                                     const std::vector<std::string>& must, int32_t size) {
    api::PreferredAllocationRequest req;
    api::ContainerPreferredAllocationRequest* c = req.add_container_requests();
    for (const std::string& id : available) c->add_available_deviceids(id);
    for (const std::string& id : must) c->add_must_include_deviceids(id);
    c->set_allocation_size(size);
    api::PreferredAllocationResponse resp;
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    if (!stub->GetPreferredAllocation(&ctx, req, &resp).ok() ||
        resp.container_responses_size() != 1) {
      return {};
    }
    std::vector<std::string> ids(resp.container_responses(0).deviceids().begin(),
                                 resp.container_responses(0).deviceids().end());
    std::set<std::string> allowed(available.begin(), available.end());
    allowed.insert(must.begin(), must.end());
    std::set<std::string> unique(ids.begin(), ids.end());
    bool ok = static_cast<int32_t>(ids.size()) == size && unique.size() == ids.size() &&
              std::all_of(ids.begin(), ids.end(),
                          [&](const std::string& id) { return allowed.count(id) > 0; }) &&
              std::all_of(must.begin(), must.end(),
                          [&](const std::string& id) { return unique.count(id) > 0; });
    if (!ok) {
      HAMI_LOG(Warning) << "kubelet: the plugin's preferred allocation is unusable; choosing";
      return {};
    }
    return ids;
  }

  const std::string dir_;
  std::unique_ptr<grpc::Server> server_;
  // Allocations run one at a time (they call the plugin); taken before mu_, never inside it.
  Mutex allocate_mu_;
  mutable Mutex mu_;
  mutable std::condition_variable cv_;
  bool stopped_ GUARDED_BY(mu_) = false;
  uint64_t version_ GUARDED_BY(mu_) = 0;
  std::map<std::string, ResourceState> resources_ GUARDED_BY(mu_);
  std::map<std::string, std::unique_ptr<Endpoint>> endpoints_ GUARDED_BY(mu_);
  std::vector<std::unique_ptr<Endpoint>> retired_ GUARDED_BY(mu_);
  // Devices handed out, by pod UID and resource.
  std::map<std::string, std::map<std::string, std::vector<std::string>>> held_ GUARDED_BY(mu_);
  std::function<void()> on_change_ GUARDED_BY(mu_);
};

Result<std::unique_ptr<DeviceManager>> DeviceManager::Start(const std::string& plugin_dir) {
  auto impl = std::make_unique<Impl>(plugin_dir);
  HAMI_RETURN_IF_ERROR(impl->Serve());
  return std::unique_ptr<DeviceManager>(new DeviceManager(std::move(impl)));
}

DeviceManager::DeviceManager(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
DeviceManager::~DeviceManager() { Stop(); }
void DeviceManager::Stop() { impl_->Stop(); }

std::map<std::string, ResourceState> DeviceManager::Resources() const {
  MutexLock l(impl_->mu_);
  return impl_->resources_;
}

bool DeviceManager::WaitFor(
    const std::function<bool(const std::map<std::string, ResourceState>&)>& cond,
    std::chrono::milliseconds timeout) const {
  UniqueLock l(impl_->mu_);
  return impl_->cv_.wait_for(l.native(), timeout,
                             [&]() REQUIRES(impl_->mu_) { return cond(impl_->resources_); });
}

void DeviceManager::SetOnChange(std::function<void()> on_change) {
  MutexLock l(impl_->mu_);
  impl_->on_change_ = std::move(on_change);
}

Result<std::vector<ContainerDevices>> DeviceManager::AllocatePod(
    const std::string& pod_uid, const std::string& resource,
    const std::vector<ContainerNeed>& containers) {
  return impl_->AllocatePod(pod_uid, resource, containers);
}

void DeviceManager::FreePod(const std::string& pod_uid) {
  MutexLock l(impl_->mu_);
  impl_->held_.erase(pod_uid);
}

std::vector<std::string> DeviceManager::Held(const std::string& pod_uid,
                                             const std::string& resource) const {
  MutexLock l(impl_->mu_);
  auto p = impl_->held_.find(pod_uid);
  if (p == impl_->held_.end()) return {};
  auto r = p->second.find(resource);
  return r == p->second.end() ? std::vector<std::string>{} : r->second;
}

}  // namespace hami::sim
