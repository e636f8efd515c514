#include "deviceplugin/mig_allocate.h"

#include <algorithm>

#include "device/mig_allocation.h"

namespace hami::deviceplugin {

namespace {

// The reservations of container `index`, by device index; FailedPrecondition unless they match
// the GPUs the scheduler reserved for it one for one.
Result<std::vector<device::MigAllocation*>> ContainerReservations(
    const PodView& pod, const ContainerAllocation& a, std::vector<device::MigAllocation>* all) {
  std::vector<device::MigAllocation*> mine;
  for (device::MigAllocation& m : *all) {
    if (m.container_index == static_cast<int32_t>(a.container_index)) mine.push_back(&m);
  }
  std::sort(mine.begin(), mine.end(),
            [](auto* x, auto* y) { return x->device_index < y->device_index; });
  const std::string who = "pod " + pod.Key() + " container " + a.container_name + ": ";
  if (mine.size() != a.devices.size()) {
    return FailedPreconditionError(who + "the scheduler reserved " +
                                   std::to_string(mine.size()) + " MIG device(s) for " +
                                   std::to_string(a.devices.size()) + " GPU(s)");
  }
  for (size_t k = 0; k < mine.size(); ++k) {
    if (mine[k]->gpu_uuid != a.devices[k].uuid) {
      return FailedPreconditionError(who + "MIG reservation " + std::to_string(k) + " is on " +
                                     mine[k]->gpu_uuid + ", the GPU reservation on " +
                                     a.devices[k].uuid);
    }
  }
  return mine;
}

}  // namespace

Result<std::string> RealiseMigReservations(const PodView& pod,
                                           std::vector<ContainerAllocation>* containers,
                                           const AllocationSettings& settings,
                                           MigInstances& instances,
                                           const MigInstances::FinishedPod& finished) {
  auto it = pod.annotations.find(std::string(device::kMigAllocationsAnnotation));
  if (it == pod.annotations.end()) {
    return FailedPreconditionError("pod " + pod.Key() + " has no " +
                                   std::string(device::kMigAllocationsAnnotation) +
                                   ": the scheduler reserved no MIG profile for it");
  }
  Result<std::vector<device::MigAllocation>> all = device::DecodeMigAllocations(it->second);
  if (!all.ok()) {
    return FailedPreconditionError("pod " + pod.Key() + ": " +
                                   std::string(device::kMigAllocationsAnnotation) + ": " +
                                   all.status().message());
  }
  std::vector<MigOwner> made;  // by this call, destroyed again if a later step fails
  auto fail = [&](Status s) {
    for (const MigOwner& o : made) (void)instances.Release(o);
    return s;
  };
  for (ContainerAllocation& a : *containers) {
    Result<std::vector<device::MigAllocation*>> mine = ContainerReservations(pod, a, &*all);
    if (!mine.ok()) return fail(mine.status());
    std::vector<std::string> uuids;
    for (device::MigAllocation* m : *mine) {
      MigOwner owner{pod.uid, m->container_index, m->device_index};
      bool created = false;
      Result<MigInstance> inst =
          instances.Ensure(owner, pod.Key(), m->gpu_uuid, m->profile, m->placement, &created,
                           finished);
      if (!inst.ok()) {
        return fail(Status(inst.status().code(), "pod " + pod.Key() + " container " +
                                                     a.container_name + ": " +
                                                     inst.status().message()));
      }
      if (created) made.push_back(owner);
      m->runtime = device::MigRuntimeIdentity{inst->device.uuid, inst->device.gi_id,
                                              inst->device.ci_id};
      uuids.push_back(inst->device.uuid);
    }
    RuntimeDeviceList(uuids, pod.uid, settings, &a);
  }
  return device::EncodeMigAllocations(*all);
}

}  // namespace hami::deviceplugin
