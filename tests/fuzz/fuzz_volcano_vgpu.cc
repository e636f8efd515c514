// Fuzzes the Volcano vGPU annotation codecs (volcano_vgpu.h), the Allocate pod choice
// (volcano_pod_select.h) and dynamic MIG's slot IDs and group layout (volcano_mig.h). Never
// crash; whatever decodes re-encodes to a value that decodes to the same thing; an error always
// has a message; a pick is always one the pods' annotations back; a layout never overlaps.
//
// The whole input is also read as a MIG slot ID, and its first bytes as a geometry group (up to
// four instance types of an A100-80GB's profiles, counts 0..8) to lay out.
//
// The whole input goes to every decoder. For the pod choice it is also cut at '\n' into: the
// devices-to-allocate value, vgpu-time, bind-phase, vgpu-node, two containers' count and
// memory limits, a second pod's devices-to-allocate and vgpu-time, and the request size (first
// byte of the last piece, 0..7).
#include <stddef.h>
#include <stdint.h>

#include <string>
#include <string_view>
#include <vector>

#include "device/volcano_mig.h"
#include "device/volcano_pod_select.h"
#include "device/volcano_vgpu.h"

using namespace hami::device;

namespace {

std::vector<std::string> Pieces(std::string_view text, size_t n) {
  std::vector<std::string> out(n);
  size_t i = 0;
  for (char c : text) {
    if (c == '\n' && i + 1 < n) {
      ++i;
    } else {
      out[i] += c;
    }
  }
  return out;
}

void CheckRegister(std::string_view text) {
  hami::Result<std::vector<DeviceInfo>> devices = DecodeVolcanoNodeDevices(text);
  if (!devices.ok()) {
    if (devices.status().message().empty()) __builtin_trap();
    return;
  }
  if (devices->empty()) __builtin_trap();
  for (size_t i = 0; i < devices->size(); ++i) {
    const DeviceInfo& d = (*devices)[i];
    if (d.index != i || d.count < 0 || d.devmem < 0 || d.id.empty()) __builtin_trap();
  }
  hami::Result<std::string> encoded = EncodeVolcanoNodeDevices(*devices);
  if (!encoded.ok()) __builtin_trap();
  hami::Result<std::vector<DeviceInfo>> again = DecodeVolcanoNodeDevices(*encoded);
  if (!again.ok() || *again != *devices) __builtin_trap();
  std::string_view mode = VolcanoNodeMode(*devices);
  if (mode != kModeHamiCore && mode != kModeMig) __builtin_trap();
}

void CheckPodDevices(std::string_view text) {
  hami::Result<PodSingleDevice> pod = DecodeVolcanoPodDevices(text);
  if (!pod.ok()) {
    if (pod.status().message().empty()) __builtin_trap();
    return;
  }
  size_t separators = 0;
  for (char c : text) separators += c == ';';
  if (pod->size() != separators + 1) __builtin_trap();
  std::string encoded = EncodeVolcanoPodDevices(*pod);
  hami::Result<PodSingleDevice> again = DecodeVolcanoPodDevices(encoded);
  if (!again.ok() || *again != *pod) __builtin_trap();
  if (EncodeVolcanoPodDevices(*again) != encoded) __builtin_trap();
}

void CheckScalars(std::string_view text) {
  hami::Result<Timestamp> lock = DecodeVolcanoNodeLock(text);
  if (lock.ok()) {
    hami::Result<Timestamp> again = DecodeVolcanoNodeLock(EncodeVolcanoNodeLock(*lock));
    if (!again.ok() || again->unix_seconds != lock->unix_seconds ||
        again->utc_offset_seconds != lock->utc_offset_seconds) {
      __builtin_trap();
    }
    (void)VolcanoNodeLockExpired(*lock, INT64_MAX);
    (void)VolcanoNodeLockExpired(*lock, INT64_MIN);
  }
  if (std::optional<uint64_t> t = ParseVolcanoTime(text)) {
    if (ParseVolcanoTime(FormatVolcanoTime(*t)) != t) __builtin_trap();
  }
  (void)VolcanoHandshakeAwaitsReport(text);
}

void CheckSelection(std::string_view text) {
  std::vector<std::string> p = Pieces(text, 11);
  VolcanoPod a;
  a.name = "a";
  a.ns = "ns";
  a.node_name = "node";
  a.phase = "Pending";
  a.annotations = {{std::string(kVolcanoDevicesToAllocateAnnotation), p[0]},
                   {std::string(kVolcanoVgpuTimeAnnotation), p[1]},
                   {std::string(kVolcanoBindPhaseAnnotation), p[2]},
                   {std::string(kVolcanoVgpuNodeAnnotation), p[3]}};
  for (int k = 0; k < 2; ++k) {
    ContainerResources c;
    c.name = "c" + std::to_string(k);
    if (!p[4 + 2 * k].empty()) c.limits["volcano.sh/vgpu-number"] = p[4 + 2 * k];
    if (!p[5 + 2 * k].empty()) c.limits["volcano.sh/vgpu-memory"] = p[5 + 2 * k];
    a.resources.containers.push_back(std::move(c));
  }
  VolcanoPod b = a;
  b.name = "b";
  b.annotations[std::string(kVolcanoDevicesToAllocateAnnotation)] = p[8];
  b.annotations[std::string(kVolcanoVgpuTimeAnnotation)] = p[9];
  const size_t request = p[10].empty() ? 1 : static_cast<unsigned char>(p[10][0]) % 8;
  const std::vector<VolcanoPod> pods = {a, b};

  hami::Result<VolcanoPick> pick = SelectVolcanoPod(pods, "node", request);
  if (!pick.ok()) {
    if (pick.status().message().empty()) __builtin_trap();
    return;
  }
  if (pick->pod >= pods.size() || pick->entry >= pick->to_allocate.size()) __builtin_trap();
  const VolcanoPod& chosen = pods[pick->pod];
  if (pick->container >= chosen.resources.containers.size()) __builtin_trap();
  if (pick->devices.empty() || pick->devices.size() != request) __builtin_trap();
  if (pick->devices != pick->to_allocate[pick->entry]) __builtin_trap();
  hami::Result<PodSingleDevice> read = DecodeVolcanoPodDevices(
      chosen.annotations.find(kVolcanoDevicesToAllocateAnnotation)->second);
  if (!read.ok() || *read != pick->to_allocate) __builtin_trap();
  hami::Result<PodSingleDevice> after = DecodeVolcanoPodDevices(VolcanoToAllocateAfter(*pick));
  if (!after.ok() || after->size() != pick->to_allocate.size()) __builtin_trap();
  for (size_t k = 0; k < after->size(); ++k) {
    const ContainerDevices& want = k == pick->entry ? ContainerDevices{} : pick->to_allocate[k];
    if ((*after)[k] != want) __builtin_trap();
  }
  // Once the pick is served, a last pick leaves nothing to serve, and any next container
  // comes after it.
  VolcanoPod served = chosen;
  served.annotations[std::string(kVolcanoDevicesToAllocateAnnotation)] =
      VolcanoToAllocateAfter(*pick);
  hami::Result<VolcanoPick> next = NextVolcanoContainer(served, 0);
  if (pick->last && next.status().code() != hami::StatusCode::kNotFound) __builtin_trap();
  if (next.ok() && next->entry <= pick->entry) __builtin_trap();
}

void CheckMigId(std::string_view text) {
  hami::Result<VolcanoMigId> id = ParseVolcanoMigId(text);
  if (!id.ok()) {
    if (id.status().message().empty()) __builtin_trap();
    return;
  }
  if (id->gpu_uuid.empty() || id->group.empty() || id->group.find('-') != std::string::npos ||
      !IsVolcanoMigId(text)) {
    __builtin_trap();
  }
  hami::Result<VolcanoMigId> again = ParseVolcanoMigId(FormatVolcanoMigId(*id));
  if (!again.ok() || *again != *id) __builtin_trap();
}

MigProfile Profile(const char* name, uint32_t size, std::vector<uint32_t> starts) {
  MigProfile p;
  p.name = name;
  p.slice_count = size;
  for (uint32_t s : starts) p.placements.push_back({s, size});
  return p;
}

void CheckLayout(const uint8_t* data, size_t size) {
  static const std::vector<MigProfile> kA100 = {
      Profile("1g.10gb", 1, {0, 1, 2, 3, 4, 5, 6}), Profile("1g.20gb", 2, {0, 2, 4, 6}),
      Profile("2g.20gb", 2, {0, 2, 4}), Profile("3g.40gb", 4, {0, 4}), Profile("4g.40gb", 4, {0}),
      Profile("7g.80gb", 8, {0})};
  static const char* const kNames[] = {"1g.10gb", "1g.20gb", "2g.20gb",
                                       "3g.40gb", "4g.40gb", "7g.80gb", "9g.1gb"};
  MigGeometryGroup group{"g", {}};
  size_t want = 0;
  for (size_t i = 0; i + 1 < size && i < 8; i += 2) {
    const int32_t count = data[i + 1] % 9;
    group.instances.push_back({kNames[data[i] % 7], 1, count});
    want += static_cast<size_t>(count);
  }
  hami::Result<std::vector<MigSlot>> slots = LayoutMigGroup(group, kA100);
  if (!slots.ok()) {
    if (slots.status().message().empty()) __builtin_trap();
    return;
  }
  if (slots->size() != want) __builtin_trap();
  for (size_t a = 0; a < slots->size(); ++a) {
    for (size_t b = a + 1; b < slots->size(); ++b) {
      if ((*slots)[a].placement.Overlaps((*slots)[b].placement)) __builtin_trap();
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  CheckRegister(text);
  CheckPodDevices(text);
  CheckScalars(text);
  hami::Result<VolcanoAssignment> assignment =
      DecodeVolcanoAssignment({{std::string(kVolcanoVgpuIdsAnnotation), std::string(text)},
                               {std::string(kVolcanoVgpuTimeAnnotation), std::string(text)}});
  if (assignment.ok() != DecodeVolcanoPodDevices(text).ok()) __builtin_trap();
  CheckSelection(text);
  CheckMigId(text);
  CheckLayout(data, size);
  return 0;
}
