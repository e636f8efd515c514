#include "device/vendors/ascend_vendor.h"

#include <limits>
#include <map>
#include <set>

#include "device/json_util.h"
#include "device/request.h"
#include "device/text_util.h"

namespace hami::device {
namespace {

constexpr int64_t kMax32 = std::numeric_limits<int32_t>::max();

std::string ContainerWhat(const ContainerResources& c) {
  return "container " + text::Quote(c.name) + ": ";
}

}  // namespace

AscendVendor::AscendVendor(AscendChipConfig chip, bool hami_core_default)
    : chip_(std::move(chip)), hami_core_default_(hami_core_default) {
  const std::string& cw = chip_.common_word;
  names_.count = chip_.resource_name;
  names_.memory = chip_.resource_memory_name;
  names_.core = chip_.resource_core_name;
  names_.memory_factor = chip_.memory_factor < 1 ? 1 : chip_.memory_factor;
  keys_.node_register = "hami.io/node-register-" + cw;
  keys_.node_handshake = "hami.io/node-handshake-" + cw;
  keys_.to_allocate = "hami.io/" + cw + "-devices-to-allocate";
  keys_.allocated = "hami.io/" + cw + "-devices-allocated";
  keys_.use_uuid = "hami.io/use-" + cw + "-uuid";
  keys_.nouse_uuid = "hami.io/no-use-" + cw + "-uuid";
  keys_.mode_select = std::string(kAscendModeAnnotation);
  keys_.node_setting = std::string(kAscendNodeHamiCoreAnnotation);
}

Result<std::vector<DeviceInfo>> AscendVendor::DecodeNodeDevices(const NodeView& node) const {
  HAMI_ASSIGN_OR_RETURN(std::vector<DeviceInfo> devices, Vendor::DecodeNodeDevices(node));
  bool hami_core = hami_core_default_;
  if (auto it = node.annotations.find(kAscendNodeHamiCoreAnnotation);
      it != node.annotations.end()) {
    hami_core = it->second == "true";
  }
  const bool networked = chip_.common_word.starts_with("Ascend910") && !chip_.super_pod;
  for (DeviceInfo& d : devices) {
    d.mode = std::string(hami_core ? kAscendHamiCoreMode : kAscendHardSplitMode);
    if (auto it = d.custom.find(std::string(kAscendNetworkIdKey));
        networked && it != d.custom.end()) {
      d.group = it->second;
    }
  }
  return devices;
}

std::optional<AscendVendor::Rounded> AscendVendor::RoundMemory(int64_t mib) const {
  for (const AscendTemplate& t : chip_.templates) {  // sorted by memory
    if (t.memory_mib >= mib) return Rounded{t.memory_mib, t.name};
  }
  int64_t capacity = chip_.memory_capacity > 0 ? chip_.memory_capacity : chip_.memory_allocatable;
  if (mib <= capacity) return Rounded{chip_.memory_allocatable, ""};
  return std::nullopt;
}

Result<std::optional<ContainerRequest>> AscendVendor::ParseRequest(
    const ContainerResources& c) const {
  HAMI_ASSIGN_OR_RETURN(std::optional<int64_t> count,
                        ReadIntegerResource(c, names_.count, 0, kMax32));
  std::optional<int64_t> mem, cores;
  if (!names_.memory.empty()) {
    HAMI_ASSIGN_OR_RETURN(mem, ReadIntegerResource(c, names_.memory, 0, kMax32));
  }
  if (!names_.core.empty()) {
    HAMI_ASSIGN_OR_RETURN(cores, ReadIntegerResource(c, names_.core, 0, 100));
  }
  if (!count || *count == 0) return std::optional<ContainerRequest>();
  ContainerRequest r;
  r.vendor = chip_.common_word;
  r.count = static_cast<int32_t>(*count);
  if (mem && *mem > 0) {
    int64_t scaled = *mem * names_.memory_factor;
    if (scaled > kMax32) {
      return InvalidArgumentError(ContainerWhat(c) + names_.memory + "=" + std::to_string(*mem) +
                                  " x memoryFactor " + std::to_string(names_.memory_factor) +
                                  " exceeds " + std::to_string(kMax32) + " MiB");
    }
    r.mem_mib = static_cast<int32_t>(scaled);
  } else {
    r.mem_percent = 100;
  }
  r.cores = cores ? static_cast<int32_t>(*cores) : 0;
  return std::optional<ContainerRequest>(std::move(r));
}

Result<ContainerMutation> AscendVendor::MutateContainer(const ContainerResources& c,
                                                        const AdmissionContext& ctx) const {
  const Annotations& pod = ctx.pod;
  ContainerMutation m;
  HAMI_ASSIGN_OR_RETURN(std::optional<ContainerRequest> r, ParseRequest(c));
  if (!r) {
    if (chip_.overwrite_env) m.default_env["ASCEND_VISIBLE_DEVICES"] = "";
    return m;
  }
  m.found = true;
  const std::string what = ContainerWhat(c);
  int64_t count = r->count;
  if (chip_.super_pod) {
    // A 910C module is two NPUs: one is raised to the module, odd counts above one are refused.
    if (count == 1) {
      count = 2;
      m.set_limits[names_.count] = "2";
      if (c.requests.count(names_.count) > 0) m.set_requests[names_.count] = "2";
    } else if (count % 2 != 0) {
      return InvalidArgumentError(what + names_.count + "=" + std::to_string(count) + ": " +
                                  chip_.common_word + " NPUs come in modules of 2; ask for 1 " +
                                  "(one module) or an even number");
    }
  }
  auto mode = pod.find(kAscendModeAnnotation);
  const bool hami_core = mode != pod.end() && mode->second == kAscendHamiCoreMode;
  if (!hami_core && r->cores > 0) {
    return InvalidArgumentError(what + names_.core + " is only supported in hami-core mode " +
                                "(pod annotation " + std::string(kAscendModeAnnotation) + ": " +
                                std::string(kAscendHamiCoreMode) + ")");
  }
  int64_t mem = r->mem_mib;
  if (mem == 0) {
    mem = chip_.memory_allocatable;  // no memory: a whole card
  } else if (!hami_core) {
    std::optional<Rounded> rounded = RoundMemory(mem);
    if (!rounded) {
      return InvalidArgumentError(what + names_.memory + "=" +
                                  std::to_string(mem / names_.memory_factor) + " is more than a " +
                                  chip_.common_word + " card holds (" +
                                  std::to_string(chip_.memory_capacity) + " MiB)");
    }
    mem = rounded->memory_mib;
    // One device may be sliced; on super-pod chips one module (two NPUs, each getting the
    // template), so that the raised count passes again when the webhook is called twice.
    if (count > (chip_.super_pod ? 2 : 1) && mem != chip_.memory_allocatable) {
      return InvalidArgumentError(what + "a vNPU slice (" + names_.memory + ") is for one " +
                                  chip_.common_word + "; several NPUs are taken whole");
    }
  }
  if (!names_.memory.empty()) {
    std::string q = std::to_string(mem / names_.memory_factor);
    m.set_limits[names_.memory] = q;
    m.set_requests[names_.memory] = q;
  }
  m.runtime_class = chip_.runtime_class_name;
  return m;
}

bool AscendVendor::has_topology_rule() const {
  return chip_.super_pod || chip_.common_word.starts_with("Ascend910");
}

TopologyChoice AscendVendor::ChooseDevices(std::span<const DeviceCandidate> candidates,
                                           int32_t need) const {
  if (!chip_.super_pod) return ChooseByGroup(candidates, need);
  TopologyChoice c;
  c.topology_mismatch = false;  // reported as too few whole modules
  std::map<uint32_t, size_t> by_index;
  for (size_t i = 0; i < candidates.size(); ++i) by_index.emplace(candidates[i].index, i);
  std::set<uint32_t> used_modules;
  for (size_t i = 0; i < candidates.size() && static_cast<int32_t>(c.picked.size()) < need; ++i) {
    uint32_t module = candidates[i].index / 2;
    if (used_modules.count(module) > 0) continue;
    auto a = by_index.find(module * 2), b = by_index.find(module * 2 + 1);
    if (a == by_index.end() || b == by_index.end()) continue;
    used_modules.insert(module);
    c.picked.push_back(a->second);
    c.picked.push_back(b->second);
  }
  if (static_cast<int32_t>(c.picked.size()) != need) c.picked.clear();
  return c;
}

void AscendVendor::EncodePodExtras(const PodSingleDevice& devices, const PodWriteContext& ctx,
                                   Annotations* pod) const {
  bool hami_core = false;
  if (ctx.pod_annotations != nullptr) {
    auto it = ctx.pod_annotations->find(kAscendModeAnnotation);
    hami_core = it != ctx.pod_annotations->end() && it->second == kAscendHamiCoreMode;
  }
  // Go's field order (UUID, temp, memory, core), empty fields left out, as Huawei's plugin reads.
  std::string list = "[";
  size_t n = 0;
  for (const ContainerDevices& ctr : devices) {
    for (const ContainerDevice& d : ctr) {
      if (n++ > 0) list += ",";
      list += "{\"UUID\":";
      json_util::AppendGoString(&list, d.uuid);
      const AscendTemplate* tmpl = nullptr;
      for (const AscendTemplate& t : chip_.templates) {
        if (t.memory_mib == d.mem_mib && tmpl == nullptr) tmpl = &t;
      }
      // v2.10: hami-core (soft split) writes the amounts alone; otherwise the template as
      // well. Zero amounts are left out (Go's omitempty).
      if (!hami_core && tmpl != nullptr) {
        list += ",\"temp\":";
        json_util::AppendGoString(&list, tmpl->name);
      }
      if (d.mem_mib != 0) list += ",\"memory\":" + std::to_string(d.mem_mib);
      if (d.cores != 0) list += ",\"core\":" + std::to_string(d.cores);
      list += "}";
    }
  }
  list += "]";
  if (n == 0) return;
  (*pod)["huawei.com/" + chip_.common_word] = std::move(list);
  (*pod)[std::string(kAscendPredicateTimeAnnotation)] = std::to_string(ctx.unix_seconds);
}

}  // namespace hami::device
