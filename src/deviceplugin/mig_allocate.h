// Dynamic MIG at Allocate: turns the scheduler's reservations (`hami.io/vgpu-mig-allocations`:
// GPU, profile and placement per container and device) for the containers kubelet is
// allocating into MIG devices (MigInstances::Ensure, keyed by pod UID, container and device),
// tells each container its MIG devices (NVIDIA_VISIBLE_DEVICES=MIG-<uuid>, or the configured
// device list strategies) and gives back the annotation with the runtime identity of each
// (migUUID, gpuInstanceID, computeInstanceID) for the allocator's single guarded write.
//
// A reservation that does not fit what kubelet asks (count, GPU) is FailedPrecondition naming
// the container; a failure part-way destroys the instances this call made (retries of an
// earlier call keep theirs: Ensure is idempotent per owner, so a conflict-retried write never
// makes a second instance).
//
// Thread safety: as MigInstances.
#pragma once

#include <string>
#include <vector>

#include "common/status.h"
#include "deviceplugin/allocation.h"
#include "deviceplugin/mig_instances.h"

namespace hami::deviceplugin {

// `containers`: the plan's allocations (devices = the reserved GPUs, in order); their device
// list is filled in. Returns the annotation's new value.
// `finished` as MigInstances::Ensure takes it.
Result<std::string> RealiseMigReservations(const PodView& pod,
                                           std::vector<ContainerAllocation>* containers,
                                           const AllocationSettings& settings,
                                           MigInstances& instances,
                                           const MigInstances::FinishedPod& finished = {});

}  // namespace hami::deviceplugin
