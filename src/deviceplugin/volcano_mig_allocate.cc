#include "deviceplugin/volcano_mig_allocate.h"

#include <algorithm>
#include <set>

#include "device/volcano_mig.h"

namespace hami::deviceplugin {

namespace {

// The slot `id` stands for on its GPU, with the driver's figure for its profile's memory.
struct ResolvedSlot {
  device::MigSlot slot;
  int64_t driver_mib = 0;
};

Result<ResolvedSlot> ResolveSlot(const device::VolcanoMigId& id, const VolcanoMigSource& source) {
  std::optional<std::string> name = source.gpu_name(id.gpu_uuid);
  if (!name) return FailedPreconditionError("GPU " + id.gpu_uuid + " is not one of this node's");
  const device::KnownMigGeometry* geometry = device::FindMigGeometry(source.geometries, *name);
  if (geometry == nullptr) {
    return FailedPreconditionError(
        "GPU " + id.gpu_uuid + " (" + *name +
        ") matches no model of this node's knownMigGeometries: Volcano's scheduler and this "
        "node read different device configs");
  }
  auto group = std::find_if(geometry->groups.begin(), geometry->groups.end(),
                            [&](const device::MigGeometryGroup& g) { return g.group == id.group; });
  if (group == geometry->groups.end()) {
    return FailedPreconditionError("MIG geometry group \"" + id.group + "\" is not one of " +
                                   *name + "'s in this node's knownMigGeometries");
  }
  HAMI_ASSIGN_OR_RETURN(std::vector<device::MigProfile> profiles,
                        source.profiles(id.gpu_uuid));
  Result<std::vector<device::MigSlot>> slots = device::LayoutMigGroup(*group, profiles);
  if (!slots.ok()) {
    return FailedPreconditionError("GPU " + id.gpu_uuid + " (" + *name +
                                   "): " + slots.status().message());
  }
  if (id.position >= slots->size()) {
    return FailedPreconditionError("position " + std::to_string(id.position) + " is past group " +
                                   id.group + "'s " + std::to_string(slots->size()) + " slots");
  }
  ResolvedSlot r{.slot = (*slots)[id.position]};
  for (const device::MigProfile& p : profiles) {
    if (p.name == r.slot.profile) r.driver_mib = p.memory_mib;
  }
  return r;
}

}  // namespace

Result<std::vector<device::MigAllocation>> RealiseVolcanoMigSlots(
    const PodView& pod, int32_t container_index, const device::ContainerDevices& devices,
    int32_t memory_factor, const VolcanoMigSource& source, std::vector<MigOwner>* made) {
  const std::string container =
      container_index >= 0 && static_cast<size_t>(container_index) < pod.containers.size()
          ? pod.containers[static_cast<size_t>(container_index)].name
          : "#" + std::to_string(container_index);
  const std::string who = "pod " + pod.Key() + " container " + container + ": ";
  if (source.instances == nullptr) {
    return FailedPreconditionError(who + "no MIG driver to make MIG devices");
  }
  std::vector<device::MigAllocation> out;
  for (size_t k = 0; k < devices.size(); ++k) {
    const device::ContainerDevice& d = devices[k];
    Result<device::VolcanoMigId> id = device::ParseVolcanoMigId(d.uuid);
    if (!id.ok()) return FailedPreconditionError(who + id.status().message());
    Result<ResolvedSlot> slot = ResolveSlot(*id, source);
    if (!slot.ok()) return FailedPreconditionError(who + d.uuid + ": " + slot.status().message());
    const int64_t asked = int64_t{d.mem_mib} * memory_factor;
    if (slot->driver_mib < asked) {
      return FailedPreconditionError(
          who + d.uuid + ": its " + slot->slot.profile + " has " +
          std::to_string(slot->driver_mib) + " MiB, less than the " + std::to_string(asked) +
          " MiB asked for (knownMigGeometries counts it as " +
          std::to_string(slot->slot.memory_mib) + " MiB: correct it for this GPU)");
    }
    const MigOwner owner{pod.uid, container_index, static_cast<int32_t>(k)};
    bool created = false;
    Result<MigInstance> inst =
        source.instances->Ensure(owner, pod.Key(), id->gpu_uuid, slot->slot.profile,
                                 slot->slot.placement, &created, source.finished);
    if (!inst.ok()) {
      return Status(inst.status().code(), who + d.uuid + ": " + inst.status().message());
    }
    if (created) made->push_back(owner);
    out.push_back({.container_index = container_index,
                   .device_index = static_cast<int32_t>(k),
                   .gpu_uuid = id->gpu_uuid,
                   .profile = slot->slot.profile,
                   .placement = slot->slot.placement,
                   .runtime = device::MigRuntimeIdentity{inst->device.uuid, inst->device.gi_id,
                                                         inst->device.ci_id}});
  }
  return out;
}

std::string MergeMigAllocations(const std::string& existing,
                                const std::vector<device::MigAllocation>& served) {
  std::vector<device::MigAllocation> all;
  if (Result<std::vector<device::MigAllocation>> old = device::DecodeMigAllocations(existing);
      old.ok()) {
    all = std::move(*old);
  }
  std::set<int32_t> containers;
  for (const device::MigAllocation& m : served) containers.insert(m.container_index);
  std::erase_if(all, [&](const device::MigAllocation& m) {
    return containers.count(m.container_index) != 0;
  });
  all.insert(all.end(), served.begin(), served.end());
  std::sort(all.begin(), all.end(), [](const auto& a, const auto& b) {
    return std::pair(a.container_index, a.device_index) <
           std::pair(b.container_index, b.device_index);
  });
  return device::EncodeMigAllocations(all);
}

}  // namespace hami::deviceplugin
