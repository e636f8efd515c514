#include "monitor/mig_reservations.h"

#include <string>

#include "device/mig_allocation.h"

namespace hami::monitor {

Result<std::vector<MigReservation>> RealisedMigReservations(const PodRef& pod) {
  Result<std::vector<device::MigAllocation>> decoded =
      device::DecodeMigAllocations(pod.mig_allocations);
  if (!decoded.ok()) return decoded.status();
  const size_t inits = pod.init_containers.size();
  std::vector<MigReservation> out;
  for (const device::MigAllocation& a : *decoded) {
    // Decoding guarantees a non-negative index.
    const size_t index = static_cast<size_t>(a.container_index);
    if (index >= inits + pod.containers.size()) {
      return InvalidArgumentError("containerIndex " + std::to_string(index) +
                                  " is past the pod's " +
                                  std::to_string(inits + pod.containers.size()) + " containers");
    }
    if (!a.runtime) continue;
    MigReservation r;
    r.ns = pod.ns;
    r.pod = pod.name;
    r.container = index < inits ? pod.init_containers[index] : pod.containers[index - inits];
    r.vdevice_index = a.device_index;
    r.gpu_uuid = a.gpu_uuid;
    r.mig_uuid = a.runtime->mig_uuid;
    r.profile = a.profile;
    r.gpu_instance_id = a.runtime->gpu_instance_id;
    r.compute_instance_id = a.runtime->compute_instance_id;
    out.push_back(std::move(r));
  }
  return out;
}

}  // namespace hami::monitor
