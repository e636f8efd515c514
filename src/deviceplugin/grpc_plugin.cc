#include "deviceplugin/grpc_plugin.h"

#include <grpcpp/grpcpp.h>
#include <unistd.h>

#include "common/log.h"
#include "deviceplugin/v1beta1/api.grpc.pb.h"

namespace hami::deviceplugin {
namespace {

namespace api = ::v1beta1;

grpc::StatusCode GrpcCode(StatusCode c) {
  switch (c) {
    case StatusCode::kInvalidArgument:
      return grpc::StatusCode::INVALID_ARGUMENT;
    case StatusCode::kNotFound:
      return grpc::StatusCode::NOT_FOUND;
    case StatusCode::kFailedPrecondition:
      return grpc::StatusCode::FAILED_PRECONDITION;
    case StatusCode::kUnavailable:
      return grpc::StatusCode::UNAVAILABLE;
    case StatusCode::kAborted:
      return grpc::StatusCode::ABORTED;
    case StatusCode::kDeadlineExceeded:
      return grpc::StatusCode::DEADLINE_EXCEEDED;
    case StatusCode::kCancelled:
      return grpc::StatusCode::CANCELLED;
    default:
      return grpc::StatusCode::INTERNAL;
  }
}

class DevicePluginImpl final : public api::DevicePlugin::Service {
 public:
  DevicePluginImpl(DevicePluginBackend& service, bool preferred)
      : service_(service), preferred_(preferred) {}

  void Shutdown() { stopping_ = true; }

  grpc::Status GetDevicePluginOptions(grpc::ServerContext*, const api::Empty*,
                                      api::DevicePluginOptions* out) override {
    out->set_pre_start_required(false);
    out->set_get_preferred_allocation_available(preferred_);
    return grpc::Status::OK;
  }

  grpc::Status ListAndWatch(grpc::ServerContext* ctx, const api::Empty*,
                            grpc::ServerWriter<api::ListAndWatchResponse>* writer) override {
    uint64_t known = 0;
    std::vector<PluginDevice> devices;
    HAMI_VLOG(2) << "kubelet opened ListAndWatch";
    while (!stopping_ && !ctx->IsCancelled()) {
      uint64_t gen = service_.Devices(known, std::chrono::milliseconds(500), &devices);
      if (gen == known) continue;
      api::ListAndWatchResponse resp;
      for (const PluginDevice& d : devices) {
        api::Device* dev = resp.add_devices();
        dev->set_id(d.id);
        dev->set_health(d.healthy ? "Healthy" : "Unhealthy");
        if (d.numa_node >= 0) dev->mutable_topology()->add_nodes()->set_id(d.numa_node);
      }
      if (!writer->Write(resp)) break;
      known = gen;
    }
    HAMI_VLOG(2) << "ListAndWatch stream ended";
    return grpc::Status::OK;
  }

  grpc::Status GetPreferredAllocation(grpc::ServerContext*,
                                      const api::PreferredAllocationRequest* req,
                                      api::PreferredAllocationResponse* out) override {
    std::vector<PreferredRequest> reqs;
    for (const api::ContainerPreferredAllocationRequest& c : req->container_requests()) {
      PreferredRequest r;
      r.available.assign(c.available_deviceids().begin(), c.available_deviceids().end());
      r.must_include.assign(c.must_include_deviceids().begin(), c.must_include_deviceids().end());
      r.size = c.allocation_size();
      reqs.push_back(std::move(r));
    }
    for (const std::vector<std::string>& ids : service_.PreferredAllocation(reqs)) {
      api::ContainerPreferredAllocationResponse* c = out->add_container_responses();
      for (const std::string& id : ids) c->add_deviceids(id);
    }
    return grpc::Status::OK;
  }

  grpc::Status Allocate(grpc::ServerContext*, const api::AllocateRequest* req,
                        api::AllocateResponse* out) override {
    std::vector<std::vector<std::string>> requests;
    for (const api::ContainerAllocateRequest& c : req->container_requests()) {
      requests.emplace_back(c.devices_ids().begin(), c.devices_ids().end());
    }
    Result<std::vector<ContainerAllocation>> r = service_.Allocate(requests);
    if (!r.ok()) return grpc::Status(GrpcCode(r.status().code()), r.status().message());
    for (const ContainerAllocation& a : *r) {
      api::ContainerAllocateResponse* c = out->add_container_responses();
      for (const auto& [k, v] : a.envs) (*c->mutable_envs())[k] = v;
      for (const Mount& m : a.mounts) {
        api::Mount* pm = c->add_mounts();
        pm->set_container_path(m.container_path);
        pm->set_host_path(m.host_path);
        pm->set_read_only(m.read_only);
      }
      for (const auto& [k, v] : a.annotations) (*c->mutable_annotations())[k] = v;
      for (const std::string& name : a.cdi_devices) c->add_cdi_devices()->set_name(name);
    }
    return grpc::Status::OK;
  }

  grpc::Status PreStartContainer(grpc::ServerContext*, const api::PreStartContainerRequest*,
                                 api::PreStartContainerResponse*) override {
    return grpc::Status::OK;
  }

 private:
  DevicePluginBackend& service_;
  const bool preferred_;
  std::atomic<bool> stopping_{false};
};

}  // namespace

class GrpcPlugin::Impl {
 public:
  std::unique_ptr<DevicePluginImpl> service;
  std::unique_ptr<grpc::Server> server;
};

GrpcPlugin::GrpcPlugin(DevicePluginBackend& service, GrpcPluginOptions options)
    : service_(service), options_(std::move(options)) {}

GrpcPlugin::~GrpcPlugin() { Stop(); }

Status GrpcPlugin::Serve() {
  Stop();
  const std::string path = socket_path();
  ::unlink(path.c_str());
  auto impl = std::make_unique<Impl>();
  impl->service = std::make_unique<DevicePluginImpl>(service_, options_.preferred_allocation);
  grpc::ServerBuilder builder;
  builder.AddListeningPort("unix://" + path, grpc::InsecureServerCredentials());
  builder.RegisterService(impl->service.get());
  // A node agent: a couple of polling threads are plenty for kubelet's handful of calls.
  builder.SetSyncServerOption(grpc::ServerBuilder::SyncServerOption::NUM_CQS, 1);
  builder.SetSyncServerOption(grpc::ServerBuilder::SyncServerOption::MIN_POLLERS, 1);
  builder.SetSyncServerOption(grpc::ServerBuilder::SyncServerOption::MAX_POLLERS, 2);
  impl->server = builder.BuildAndStart();
  if (!impl->server) {
    return Status(StatusCode::kUnavailable, "cannot serve the device plugin API on " + path);
  }
  // Kubelet dials the socket as soon as we register: make sure it answers first.
  auto channel = grpc::CreateChannel("unix://" + path, grpc::InsecureChannelCredentials());
  if (!channel->WaitForConnected(std::chrono::system_clock::now() + std::chrono::seconds(5))) {
    impl->server->Shutdown();
    return Status(StatusCode::kUnavailable, "the plugin socket " + path + " does not answer");
  }
  impl_ = std::move(impl);
  HAMI_LOG(Info) << "device plugin API served on " << path;
  return OkStatus();
}

Status GrpcPlugin::Register() {
  const std::string kubelet = options_.plugin_dir + "/" + options_.kubelet_socket;
  // A connection of its own: gRPC would otherwise reuse the connection state, reconnect backoff
  // included, of any other channel to the same socket path still alive in this process.
  grpc::ChannelArguments args;
  args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  // A restarted kubelet creates kubelet.sock (which wakes us) a moment before it listens on it;
  // gRPC's first reconnect would then wait its default second, during which the kubelet
  // already admits pods and refuses those asking for our devices (UnexpectedAdmissionError).
  // Retry every 100 ms instead, up to a second apart.
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
  args.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, 100);
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 1000);
  auto channel =
      grpc::CreateCustomChannel("unix://" + kubelet, grpc::InsecureChannelCredentials(), args);
  auto stub = api::Registration::NewStub(channel);
  api::RegisterRequest req;
  req.set_version("v1beta1");
  req.set_endpoint(options_.socket_name);
  req.set_resource_name(service_.ResourceName());
  req.mutable_options()->set_get_preferred_allocation_available(options_.preferred_allocation);
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + options_.register_timeout);
  ctx.set_wait_for_ready(true);
  api::Empty resp;
  grpc::Status s = stub->Register(&ctx, req, &resp);
  if (!s.ok()) {
    return Status(StatusCode::kUnavailable,
                  "registering with kubelet at " + kubelet + ": " + s.error_message());
  }
  HAMI_LOG(Info) << "registered " << service_.ResourceName() << " with kubelet ("
                 << kubelet << ")";
  return OkStatus();
}

void GrpcPlugin::Stop() {
  if (!impl_) return;
  impl_->service->Shutdown();
  impl_->server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(2));
  impl_->server->Wait();
  impl_.reset();
  ::unlink(socket_path().c_str());
}

}  // namespace hami::deviceplugin
