#include "device/volcano_mig.h"

#include <algorithm>
#include <charconv>

#include "device/text_util.h"

namespace hami::device {

namespace {

// Depth-first search for non-overlapping placements of `order`'s slots, in that order; true
// once every slot has one (the lowest starts win at each step).
bool Place(const std::vector<size_t>& order, size_t at,
           const std::vector<const MigProfile*>& profile_of, std::vector<MigSlot>* slots,
           std::vector<bool>* placed) {
  if (at == order.size()) return true;
  const size_t slot = order[at];
  std::vector<MigPlacement> starts = profile_of[slot]->placements;
  std::sort(starts.begin(), starts.end(),
            [](const MigPlacement& a, const MigPlacement& b) { return a.start < b.start; });
  // Slots of one profile are interchangeable: each takes a start after the previous one's, so
  // the search never tries the same layout twice in another order.
  const bool after_twin = at > 0 && profile_of[order[at - 1]] == profile_of[slot];
  for (const MigPlacement& p : starts) {
    if (after_twin && p.start <= (*slots)[order[at - 1]].placement.start) continue;
    bool free = true;
    for (size_t other = 0; other < slots->size() && free; ++other) {
      if ((*placed)[other] && (*slots)[other].placement.Overlaps(p)) free = false;
    }
    if (!free) continue;
    (*slots)[slot].placement = p;
    (*placed)[slot] = true;
    if (Place(order, at + 1, profile_of, slots, placed)) return true;
    (*placed)[slot] = false;
  }
  return false;
}

uint32_t LargestPlacement(const MigProfile& p) {
  uint32_t size = p.slice_count;
  for (const MigPlacement& pl : p.placements) size = std::max(size, pl.size);
  return size;
}

}  // namespace

bool IsVolcanoMigId(std::string_view id) { return id.find('[') != std::string_view::npos; }

Result<VolcanoMigId> ParseVolcanoMigId(std::string_view id) {
  auto bad = [&](const std::string& why) {
    return InvalidArgumentError("MIG device ID " + text::Quote(id) + ": " + why +
                                " (want <GPU UUID>[<group>-<position>])");
  };
  const size_t open = id.find('[');
  if (open == std::string_view::npos || open == 0) return bad("no GPU UUID before '['");
  if (id.back() != ']' || id.find(']') != id.size() - 1) return bad("it must end at its ']'");
  std::string_view inner = id.substr(open + 1, id.size() - open - 2);
  const size_t dash = inner.find('-');  // group names have none (Volcano splits on it)
  if (dash == std::string_view::npos || dash == 0) return bad("no group before '-'");
  std::string_view pos = inner.substr(dash + 1);
  VolcanoMigId out;
  auto [end, ec] = std::from_chars(pos.data(), pos.data() + pos.size(), out.position);
  if (pos.empty() || ec != std::errc() || end != pos.data() + pos.size()) {
    return bad("position " + text::Quote(pos) + " is not a non-negative integer");
  }
  out.gpu_uuid = std::string(id.substr(0, open));
  out.group = std::string(inner.substr(0, dash));
  return out;
}

std::string FormatVolcanoMigId(const VolcanoMigId& id) {
  return id.gpu_uuid + "[" + id.group + "-" + std::to_string(id.position) + "]";
}

const KnownMigGeometry* FindMigGeometry(const std::vector<KnownMigGeometry>& known,
                                        std::string_view gpu_name) {
  for (const KnownMigGeometry& k : known) {
    for (const std::string& model : k.models) {
      if (!model.empty() && gpu_name.find(model) != std::string_view::npos) return &k;
    }
  }
  return nullptr;
}

Result<std::vector<MigSlot>> LayoutMigGroup(const MigGeometryGroup& group,
                                            const std::vector<MigProfile>& profiles) {
  std::vector<MigSlot> slots;
  std::vector<const MigProfile*> profile_of;
  for (const MigGeometryInstance& inst : group.instances) {
    auto found = std::find_if(profiles.begin(), profiles.end(),
                              [&](const MigProfile& p) { return p.name == inst.name; });
    if (found == profiles.end() || found->placements.empty()) {
      std::string names;
      for (const MigProfile& p : profiles) names += (names.empty() ? "" : ", ") + p.name;
      return FailedPreconditionError("MIG geometry group " + text::Quote(group.group) + ": " +
                                     text::Quote(inst.name) + " is not a profile of this GPU (" +
                                     (names.empty() ? "it lists none" : "it has " + names) + ")");
    }
    for (int32_t i = 0; i < inst.count; ++i) {
      slots.push_back({.profile = inst.name, .memory_mib = inst.memory_mib, .placement = {}});
      profile_of.push_back(&*found);
    }
  }
  std::vector<size_t> order(slots.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return LargestPlacement(*profile_of[a]) > LargestPlacement(*profile_of[b]);
  });
  uint32_t needed = 0, room = 0;
  for (size_t i = 0; i < slots.size(); ++i) {
    needed += LargestPlacement(*profile_of[i]);
    for (const MigPlacement& pl : profile_of[i]->placements) {
      room = std::max(room, pl.start + pl.size);
    }
  }
  std::vector<bool> placed(slots.size(), false);
  if (needed > room || !Place(order, 0, profile_of, &slots, &placed)) {
    return FailedPreconditionError("MIG geometry group " + text::Quote(group.group) + " (" +
                                   std::to_string(slots.size()) +
                                   " instances) does not fit on this GPU");
  }
  return slots;
}

}  // namespace hami::device
