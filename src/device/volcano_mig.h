// Volcano's dynamic MIG (vGPU mode on a node whose register records say `mig`), the node's half:
// which MIG device a scheduler-assigned slot stands for. Wire facts from
// ../shared/reference/volcano-deviceshare.md, sections 4.4, 4.10 and 4.11.
//
// Volcano's scheduler cuts a GPU by the geometries of `knownMigGeometries` (config.h): a GPU is
// committed to one group of its model's entry, and each device it assigns is a slot of that
// group, written in place of the GPU's UUID in `volcano.sh/devices-to-allocate`:
//
//   GPU-<uuid>[<group>-<position>]        e.g. "GPU-0fc3...[group2-3]"
//
// where position numbers the group's slots in the order its instances are listed: an instance
// type's slots follow those of the types before it (A100-80GB group2 = 2g.20gb x 3, 1g.10gb x 1:
// positions 0-2 are the 2g.20gb slots, position 3 the 1g.10gb one).
//
// Volcano's own agent re-creates the whole geometry with nvidia-mig-parted whenever a GPU's
// group changes (destroying every MIG device on it, in use or not) and takes the NVML MIG device
// of index `position`, whatever its profile. This node instead gives every slot of a group a
// fixed placement (LayoutMigGroup) and makes only the slot's own instance there, so pods of the
// same group never disturb each other and a slot is always of the profile the scheduler counted.
//
// Thread safety: pure functions.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "device/config.h"
#include "device/device.h"

namespace hami::device {

struct VolcanoMigId {
  std::string gpu_uuid;  // the GPU the slot is on
  std::string group;
  uint32_t position = 0;
  friend bool operator==(const VolcanoMigId&, const VolcanoMigId&) = default;
};

// Whether a device ID of Volcano's device list names a MIG slot (it has '[').
bool IsVolcanoMigId(std::string_view id);
// Reads "<uuid>[<group>-<position>]"; InvalidArgument, quoting the ID, unless the UUID is
// non-empty, the ID ends at the ']', the group is non-empty and without '-', and the position
// after its '-' a non-negative decimal integer (as Volcano's scheduler splits the ID).
Result<VolcanoMigId> ParseVolcanoMigId(std::string_view id);
std::string FormatVolcanoMigId(const VolcanoMigId& id);

// The first entry one of whose models `gpu_name` contains (Volcano's substring rule); null when
// none does.
const KnownMigGeometry* FindMigGeometry(const std::vector<KnownMigGeometry>& known,
                                        std::string_view gpu_name);

// One slot of a group: the profile the scheduler counts it as (its memory too) and where on the
// GPU its instance goes.
struct MigSlot {
  std::string profile;
  int64_t memory_mib = 0;  // the geometry's figure
  MigPlacement placement;
  friend bool operator==(const MigSlot&, const MigSlot&) = default;
};

// Every slot of `group` in position order, each with a placement of its profile among
// `profiles` (the GPU's, as its driver lists them) such that no two slots overlap. The layout
// depends on nothing else, so the same slot always lands in the same place: larger instances are
// placed first, each at the lowest start left free, with a search over the alternatives when
// that greedy choice leaves a later slot no room. FailedPrecondition naming the group when a
// profile is not the GPU's or the group does not fit on the GPU at all.
Result<std::vector<MigSlot>> LayoutMigGroup(const MigGeometryGroup& group,
                                            const std::vector<MigProfile>& profiles);

}  // namespace hami::device
