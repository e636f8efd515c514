// Dynamic MIG under Volcano (operating mode mig with --volcano=vgpu): turns the slots Volcano's
// scheduler assigned a container (`GPU-<uuid>[<group>-<position>]`, device/volcano_mig.h) into
// MIG devices. Each slot's profile and placement come from the group's fixed layout on that GPU
// (LayoutMigGroup over the GPU's profiles as its driver lists them); the instance is made there
// through MigInstances, keyed by pod UID, container index and device index as in HAMi's mode, so
// a retried Allocate gets the same device, a finished pod's device is reclaimed, and nothing
// else on the GPU is touched (Volcano's agent re-creates the whole GPU instead).
//
// A slot that cannot be served is FailedPrecondition naming the container and why: an ID that is
// not a slot, a GPU not on this node, a GPU model or group the node's knownMigGeometries lack
// (the scheduler and the node then read different device configs), a position past the group,
// or a profile smaller than what the container asked for (the geometry's memory figure is then
// wrong for this GPU, and the container would get less than the scheduler promised).
//
// Thread safety: as MigInstances; the callbacks must be safe to call from the calling thread.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "common/status.h"
#include "device/config.h"
#include "device/device.h"
#include "device/mig_allocation.h"
#include "deviceplugin/allocation.h"
#include "deviceplugin/mig_instances.h"

namespace hami::deviceplugin {

struct VolcanoMigSource {
  std::vector<device::KnownMigGeometry> geometries;  // the device config's knownMigGeometries
  // The name of a GPU of this node (as registered), nullopt for one it does not have.
  std::function<std::optional<std::string>(const std::string& gpu_uuid)> gpu_name;
  // The GPU's MIG profiles as its driver lists them.
  std::function<Result<std::vector<device::MigProfile>>(const std::string& gpu_uuid)> profiles;
  MigInstances* instances = nullptr;
  MigInstances::FinishedPod finished;  // as MigInstances::Ensure takes it
};

// The MIG devices of container `container_index` (init containers first) of `pod`, one per
// entry of `devices` (Volcano's record for it; mem_mib in the scheduler's units, times
// `memory_factor` MiB), with their runtime identity. Owners whose instance this call made are
// appended to `made` (for the caller to release when it gives up).
Result<std::vector<device::MigAllocation>> RealiseVolcanoMigSlots(
    const PodView& pod, int32_t container_index, const device::ContainerDevices& devices,
    int32_t memory_factor, const VolcanoMigSource& source, std::vector<MigOwner>* made);

// `existing` (the pod's hami.io/vgpu-mig-allocations, possibly empty or unreadable) with the
// entries of the containers in `served` replaced by them: the annotation's new value.
std::string MergeMigAllocations(const std::string& existing,
                                const std::vector<device::MigAllocation>& served);

}  // namespace hami::deviceplugin
