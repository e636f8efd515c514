// The MIG instances a pod's containers hold, read from its hami.io/vgpu-mig-allocations
// annotation (codec: device/mig_allocation.h) for hami_mig_device_info.
//
// Thread safety: pure.
#pragma once

#include <vector>

#include "common/status.h"
#include "monitor/monitor.h"

namespace hami::monitor {

// The realised entries (those with a runtime identity) of `pod.mig_allocations`, in annotation
// order, each container named through the pod's spec: containerIndex counts the init
// containers first, then the regular ones. Entries the device plugin has not realised yet are
// left out. kInvalidArgument when the annotation does not decode, or names a container index
// the pod does not have (the annotation then describes another pod spec: none of it is used).
Result<std::vector<MigReservation>> RealisedMigReservations(const PodRef& pod);

}  // namespace hami::monitor
