#include "deviceplugin/whole_device_backend.h"

#include <algorithm>

#include "common/log.h"
#include "deviceplugin/mig_resources.h"

namespace hami::deviceplugin {

WholeDeviceBackend::WholeDeviceBackend(std::string resource, AllocationSettings settings,
                                       DeviceSource devices)
    : resource_(std::move(resource)),
      settings_(std::move(settings)),
      devices_(std::move(devices)) {}

std::vector<std::vector<std::string>> WholeDeviceBackend::PreferredAllocation(
    const std::vector<PreferredRequest>& requests) {
  std::vector<std::vector<std::string>> out;
  for (const PreferredRequest& r : requests) {
    std::vector<std::string> ids = r.must_include;
    for (const std::string& id : r.available) {
      if (static_cast<int32_t>(ids.size()) >= r.size) break;
      if (std::find(ids.begin(), ids.end(), id) == ids.end()) ids.push_back(id);
    }
    out.push_back(std::move(ids));
  }
  return out;
}

Result<std::vector<ContainerAllocation>> WholeDeviceBackend::Allocate(
    const std::vector<std::vector<std::string>>& requests) {
  std::vector<PluginDevice> devices;
  devices_(0, std::chrono::milliseconds(0), &devices);
  MigResource offered{resource_, "", {}};
  for (const PluginDevice& d : devices) offered.device_ids.push_back(d.id);
  std::vector<ContainerAllocation> out;
  for (const std::vector<std::string>& ids : requests) {
    Result<ContainerAllocation> a = MigAllocation(offered, ids, settings_);
    if (!a.ok()) {
      HAMI_LOG(Warning) << "Allocate " << resource_ << " refused: " << a.status().message();
      return a.status();
    }
    std::string list;
    for (const std::string& id : ids) list += (list.empty() ? "" : ",") + id;
    HAMI_LOG(Info) << "allocated " << resource_ << " " << list << " to a container";
    out.push_back(std::move(*a));
  }
  allocations_ += out.size();
  return out;
}

}  // namespace hami::deviceplugin
