#include "deviceplugin/volcano_backend.h"

#include <set>

#include "common/log.h"

namespace hami::deviceplugin {

VolcanoUnitsBackend::VolcanoUnitsBackend(std::string resource, DeviceSource devices)
    : resource_(std::move(resource)), devices_(std::move(devices)) {}

Result<std::vector<ContainerAllocation>> VolcanoUnitsBackend::Allocate(
    const std::vector<std::vector<std::string>>& requests) {
  std::vector<PluginDevice> devices;
  devices_(0, std::chrono::milliseconds(0), &devices);
  std::set<std::string> offered;
  for (const PluginDevice& d : devices) offered.insert(d.id);
  for (const std::vector<std::string>& ids : requests) {
    for (const std::string& id : ids) {
      if (!offered.count(id)) {
        HAMI_LOG(Warning) << "Allocate " << resource_ << " refused: unknown device ID " << id;
        return InvalidArgumentError("device ID \"" + id + "\" is not one of this plugin's " +
                                    resource_ + " devices");
      }
    }
  }
  allocations_ += requests.size();
  return std::vector<ContainerAllocation>(requests.size());
}

}  // namespace hami::deviceplugin
