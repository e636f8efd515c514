#include "deviceplugin/plugin_service.h"

namespace hami::deviceplugin {

namespace {

bool DynamicMig(const PluginOptions& o) {
  return o.settings.operating_mode == device::OperatingMode::kMig;
}

RegistrarOptions RegistrarOptionsOf(const PluginOptions& o, MigDriver* mig_driver,
                                    MigInstances* mig_instances) {
  return {.node_name = o.node_name,
          .resource_name = o.resource_name,
          .settings = o.settings,
          .topology_score = o.topology_score,
          .mig_strategy = o.mig_strategy,
          .mig_allowlist = o.mig_allowlist,
          .mig_driver = mig_driver,
          .mig_instances = mig_instances,
          .xid_policy = o.xid_policy,
          .register_interval = o.register_interval,
          .retry_interval = o.retry_interval,
          .health_wait_slice = o.health_wait_slice,
          .publish_at_start = !o.publish_after_kubelet,
          .volcano = o.volcano};
}

// A GPU's MIG profiles as its driver lists them (read once, kept by `instances`), in the
// scheduler's terms.
Result<std::vector<device::MigProfile>> DriverMigProfiles(MigInstances& instances,
                                                          const std::string& gpu) {
  HAMI_ASSIGN_OR_RETURN(std::vector<MigProfileSpec> specs, instances.Profiles(gpu));
  std::vector<device::MigProfile> out;
  for (const MigProfileSpec& p : specs) {
    out.push_back({.name = p.name,
                   .memory_mib = static_cast<int32_t>(p.memory_mib),
                   .core = 0,
                   .slice_count = p.slice_count,
                   .placements = p.placements});
  }
  return out;
}

std::unique_ptr<VolcanoAllocator> MakeVolcanoAllocator(const PluginOptions& o,
                                                       k8s::RestClient& client,
                                                       Registrar& registrar,
                                                       MigInstances* mig_instances) {
  if (!o.volcano || o.volcano->share || o.volcano->whole) return nullptr;
  VolcanoAllocatorOptions options{
      .node_name = o.node_name, .allocation = o.allocation, .volcano = *o.volcano, .mig = {}};
  if (DynamicMig(o) && mig_instances != nullptr) {
    options.mig = VolcanoMigSource{
        .geometries = o.volcano->mig_geometries,
        .gpu_name = [&registrar](const std::string& gpu) -> std::optional<std::string> {
          for (const device::DeviceInfo& d : registrar.RegisteredDevices()) {
            if (d.id == gpu) return d.type;
          }
          return std::nullopt;
        },
        .profiles = [mig_instances](const std::string& gpu) {
          return DriverMigProfiles(*mig_instances, gpu);
        },
        .instances = mig_instances,
        .finished = [&client](const MigInstance& i) { return MigPodFinished(client, i); }};
  }
  return std::make_unique<VolcanoAllocator>(client, std::move(options),
                                            [&registrar] { return registrar.Replicas(); });
}

std::unique_ptr<VolcanoShareBackend> MakeVolcanoShare(const PluginOptions& o,
                                                      k8s::RestClient& client,
                                                      Registrar& registrar) {
  if (!o.volcano || !o.volcano->share) return nullptr;
  const std::string resource(device::VolcanoShareResource(*o.volcano->share));
  return std::make_unique<VolcanoShareBackend>(
      client,
      VolcanoShareOptions{.node_name = o.node_name,
                          .allocation = o.allocation,
                          .mode = *o.volcano->share,
                          .memory_factor = o.volcano->memory_factor,
                          .enforce_memory = o.volcano->enforce_memory},
      [&registrar, resource](uint64_t known, std::chrono::milliseconds timeout,
                             std::vector<PluginDevice>* out) {
        return registrar.ResourceDevices(resource, known, timeout, out);
      },
      [&registrar] { return registrar.RegisteredDevices(); });
}

AllocatorOptions AllocatorOptionsOf(const PluginOptions& o, MigInstances* mig_instances) {
  return {.node_name = o.node_name,
          .allocation = o.allocation,
          .node_lock_expire_seconds = o.node_lock_expire_seconds,
          .mig_instances = mig_instances};
}

std::unique_ptr<MigCdiSpecs> MakeMigCdiSpecs(const PluginOptions& o, GpuDriver& driver,
                                             MigDriver* mig_driver) {
  if (!DynamicMig(o) || mig_driver == nullptr || !o.mig_cdi) return nullptr;
  return std::make_unique<MigCdiSpecs>(driver, *o.mig_cdi);
}

std::unique_ptr<MigInstances> MakeMigInstances(const PluginOptions& o, MigDriver* driver,
                                               MigCdiSpecs* cdi) {
  if (!DynamicMig(o) || driver == nullptr) return nullptr;
  auto instances = std::make_unique<MigInstances>(*driver, o.mig_state_file);
  if (cdi != nullptr) {
    instances->SetChangeListener(
        [cdi](const std::vector<MigInstance>& held) { (void)cdi->Sync(held); });
  }
  return instances;
}

}  // namespace

PluginService::PluginService(k8s::RestClient& client, GpuDriver& driver, PluginOptions options,
                             hami::Clock* clock, MigDriver* mig_driver)
    : options_(std::move(options)),
      clock_(clock != nullptr ? *clock : real_clock_),
      mig_cdi_(MakeMigCdiSpecs(options_, driver, mig_driver)),
      mig_instances_(MakeMigInstances(options_, mig_driver, mig_cdi_.get())),
      mig_controller_(mig_instances_ == nullptr
                          ? nullptr
                          : std::make_unique<MigController>(
                                client, driver, *mig_instances_,
                                MigControllerOptions{.node_name = options_.node_name,
                                                     .interval = options_.mig_reconcile_interval},
                                clock_)),
      allocator_(client, AllocatorOptionsOf(options_, mig_instances_.get()),
                 [this] { return registrar_.Replicas(); }, clock_),
      volcano_allocator_(MakeVolcanoAllocator(options_, client, registrar_,
                                              mig_instances_.get())),
      volcano_share_(MakeVolcanoShare(options_, client, registrar_)),
      registrar_(client, driver,
                 RegistrarOptionsOf(options_, mig_driver, mig_instances_.get()), clock_,
                 [this] { StatsChanged(); }) {}

PluginService::~PluginService() { Stop(); }

Status PluginService::Start() {
  if (options_.volcano && (options_.mig_strategy != MigStrategy::kNone ||
                           (DynamicMig(options_) && volcano_allocator_ == nullptr))) {
    return Status(StatusCode::kFailedPrecondition,
                  "node " + options_.node_name +
                      ": under Volcano, MIG is served only as dynamic MIG (operating mode mig) "
                      "in vGPU mode (--volcano=vgpu)");
  }
  if (mig_controller_) HAMI_RETURN_IF_ERROR(mig_controller_->Prepare());
  HAMI_RETURN_IF_ERROR(registrar_.Start());
  if (mig_controller_) mig_controller_->Start();
  return OkStatus();
}

void PluginService::Stop() {
  if (mig_controller_) mig_controller_->Stop();
  registrar_.Stop();
}

Result<std::vector<ContainerAllocation>> PluginService::Allocate(
    const std::vector<std::vector<std::string>>& requests) {
  Result<std::vector<ContainerAllocation>> r =
      volcano_share_       ? volcano_share_->Allocate(requests)
      : volcano_allocator_ ? volcano_allocator_->Allocate(requests)
                           : allocator_.Allocate(requests);
  StatsChanged();  // the allocator counts inside Allocate only
  return r;
}

PluginService::Stats PluginService::stats() const {
  Registrar::Stats r = registrar_.stats();
  Allocator::Stats a = allocator_.stats();
  if (volcano_allocator_) {
    VolcanoAllocator::Stats v = volcano_allocator_->stats();
    a.allocations += v.allocations;
    a.allocation_failures += v.allocation_failures;
  }
  if (volcano_share_) {
    VolcanoShareBackend::Stats v = volcano_share_->stats();
    a.allocations += v.allocations;
    a.allocation_failures += v.allocation_failures;
  }
  return {.refreshes = r.refreshes,
          .registrations_published = r.registrations_published,
          .allocations = a.allocations,
          .allocation_failures = a.allocation_failures};
}

bool PluginService::WaitForStats(const std::function<bool(const Stats&)>& pred,
                                 Duration timeout) const {
  return changes_.WaitUntil([&] { return pred(stats()); },
                            std::chrono::duration_cast<std::chrono::milliseconds>(timeout));
}

void PluginService::StatsChanged() { changes_.Notify(); }

}  // namespace hami::deviceplugin
