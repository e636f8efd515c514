#include "deviceplugin/plugin_service.h"

namespace hami::deviceplugin {

namespace {

RegistrarOptions RegistrarOptionsOf(const PluginOptions& o) {
  return {.node_name = o.node_name,
          .resource_name = o.resource_name,
          .settings = o.settings,
          .topology_score = o.topology_score,
          .xid_policy = o.xid_policy,
          .register_interval = o.register_interval,
          .retry_interval = o.retry_interval,
          .health_wait_slice = o.health_wait_slice};
}

AllocatorOptions AllocatorOptionsOf(const PluginOptions& o) {
  return {.node_name = o.node_name,
          .allocation = o.allocation,
          .node_lock_expire_seconds = o.node_lock_expire_seconds};
}

}  // namespace

PluginService::PluginService(k8s::RestClient& client, GpuDriver& driver, PluginOptions options,
                             hami::Clock* clock)
    : options_(std::move(options)),
      clock_(clock != nullptr ? *clock : real_clock_),
      allocator_(client, AllocatorOptionsOf(options_), [this] { return registrar_.Replicas(); },
                 clock_),
      registrar_(client, driver, RegistrarOptionsOf(options_), clock_,
                 [this] { StatsChanged(); }) {}

Result<std::vector<ContainerAllocation>> PluginService::Allocate(
    const std::vector<std::vector<std::string>>& requests) {
  Result<std::vector<ContainerAllocation>> r = allocator_.Allocate(requests);
  StatsChanged();  // the allocator counts inside Allocate only
  return r;
}

PluginService::Stats PluginService::stats() const {
  Registrar::Stats r = registrar_.stats();
  Allocator::Stats a = allocator_.stats();
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
