#include "device/vendors/capacity_vendor.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <initializer_list>
#include <limits>
#include <map>

#include "device/json_util.h"
#include "device/request.h"
#include "device/resource_quantity.h"
#include "device/text_util.h"
#include "device/vendors/annotated_vendor.h"
#include "device/vendors/metax_vendor.h"

namespace hami::device {
namespace {

constexpr int64_t kMax32 = std::numeric_limits<int32_t>::max();

int32_t Clamp32(int64_t v) { return static_cast<int32_t>(std::clamp<int64_t>(v, 0, kMax32)); }

// How a vendor's cards are made out of capacity.
struct Synthesis {
  std::string id_infix;  // "<node>-<infix>-<i>"
  std::string type;      // device type (the vendor key for these vendors)
  std::string units;     // capacity resource counting compute (or cards)
  int64_t units_per_card = 1;
  std::string memory;  // capacity resource counting memory units; "" = fixed memory
  int64_t memory_unit_mib = 1;
  int64_t fixed_memory_mib = 0;
  int32_t slots = 1;  // tasks per card
  int32_t devcore = 100;
  bool upper_half_numa1 = false;
};

AnnotatedVendorSpec WithoutSharedLock(AnnotatedVendorSpec s) {
  if (s.node_lock == NodeLockKind::kShared) s.node_lock = NodeLockKind::kNone;
  return s;
}

// A vendor whose devices come from capacity; requests and webhook as AnnotatedVendor.
class CapacityVendor : public AnnotatedVendor {
 public:
  // These vendors' plugins know nothing of HAMi's lock unless the spec says otherwise.
  CapacityVendor(AnnotatedVendorSpec spec, Synthesis syn)
      : AnnotatedVendor(WithoutSharedLock(std::move(spec))), syn_(std::move(syn)) {}

  std::string_view registration_capacity() const override { return syn_.units; }

  Result<std::vector<DeviceInfo>> DecodeNodeDevices(const NodeView& node) const override {
    int64_t units = node.Capacity(syn_.units);
    if (units <= 0) return NotFoundError("node has no " + syn_.units + " capacity");
    int64_t cards = (units + syn_.units_per_card - 1) / syn_.units_per_card;
    if (cards > 4096) {
      return InvalidArgumentError(syn_.units + "=" + std::to_string(units) + " makes " +
                                  std::to_string(cards) + " devices; refusing more than 4096");
    }
    int64_t mem = syn_.fixed_memory_mib;
    if (!syn_.memory.empty()) {
      // Memory of the node's cards split evenly (upstream: total x unit x per-card / units).
      long double total = static_cast<long double>(node.Capacity(syn_.memory)) *
                          syn_.memory_unit_mib * syn_.units_per_card / units;
      mem = static_cast<int64_t>(std::min<long double>(total, kMax32));
    }
    std::vector<DeviceInfo> out;
    out.reserve(static_cast<size_t>(cards));
    for (int64_t i = 0; i < cards; ++i) {
      DeviceInfo d;
      d.id = std::string(node.name) + "-" + syn_.id_infix + "-" + std::to_string(i);
      d.index = static_cast<uint32_t>(i);
      d.count = syn_.slots;
      d.devmem = Clamp32(mem);
      d.devcore = syn_.devcore;
      d.type = syn_.type;
      d.numa = syn_.upper_half_numa1 && i >= cards / 2 ? 1 : 0;
      d.health = true;
      d.vendor = std::string(Key());
      out.push_back(std::move(d));
    }
    return out;
  }

 protected:
  const Synthesis& synthesis() const { return syn_; }

 private:
  Synthesis syn_;
};

// The first card of the first container that has one.
const ContainerDevice* FirstDevice(const PodSingleDevice& devices) {
  for (const ContainerDevices& c : devices) {
    if (!c.empty()) return &c.front();
  }
  return nullptr;
}

// The device indices of one container's devices, comma-separated.
std::string JoinIndices(const ContainerDevices& c) {
  std::string out;
  for (const ContainerDevice& d : c) {
    if (!out.empty()) out += ',';
    out += std::to_string(d.index);
  }
  return out;
}

std::string IndexList(const PodSingleDevice& devices) {
  // The last container with devices, as upstream writes it (one container per pod is the norm).
  std::string out;
  for (const ContainerDevices& c : devices) {
    if (!c.empty()) out = JoinIndices(c);
  }
  return out;
}

class CambriconVendor final : public CapacityVendor {
 public:
  using CapacityVendor::CapacityVendor;
  void EncodePodExtras(const PodSingleDevice& devices, const PodWriteContext& /*ctx*/,
                       Annotations* pod) const override {
    const ContainerDevice* d = FirstDevice(devices);
    if (d == nullptr) return;
    (*pod)["CAMBRICON_DSMLU_ASSIGNED"] = "false";
    (*pod)["CAMBRICON_DSMLU_PROFILE"] = std::to_string(d->index) + "_" + std::to_string(d->cores) +
                                        "_" +
                                        std::to_string(d->mem_mib / resource_names().memory_factor);
  }
};

class KunlunVendor final : public CapacityVendor {
 public:
  using CapacityVendor::CapacityVendor;

  bool has_topology_rule() const override { return true; }
  TopologyChoice ChooseDevices(std::span<const DeviceCandidate> candidates,
                               int32_t need) const override {
    return ChooseKunlunBoard(candidates, need, /*idle_only=*/true);
  }

  void EncodePodExtras(const PodSingleDevice& devices, const PodWriteContext& /*ctx*/,
                       Annotations* pod) const override {
    std::string idx = IndexList(devices);
    if (!idx.empty()) (*pod)["BAIDU_COM_DEVICE_IDX"] = idx;
  }
};

// Moore Threads: a container's memory and cores are its GPUs' total.
class MthreadsVendor final : public CapacityVendor {
 public:
  using CapacityVendor::CapacityVendor;

  Result<std::optional<ContainerRequest>> ParseRequest(const ContainerResources& c) const override {
    HAMI_ASSIGN_OR_RETURN(std::optional<ContainerRequest> r, CapacityVendor::ParseRequest(c));
    if (!r || r->count <= 1) return r;
    if (r->mem_mib > 0) r->mem_mib /= r->count;
    r->cores /= r->count;
    return r;
  }

  Result<ContainerMutation> MutateContainer(const ContainerResources& c,
                                            const AdmissionContext& ctx) const override {
    HAMI_ASSIGN_OR_RETURN(ContainerMutation m, CapacityVendor::MutateContainer(c, ctx));
    if (!m.found) return m;
    const ResourceNames& n = resource_names();
    Result<std::optional<int64_t>> count = ReadIntegerResource(c, n.count, 0, kMax32);
    int64_t k = count.ok() && *count ? **count : 1;
    std::optional<std::string_view> mem = FindQuantity(c, n.memory);
    if (k > 1) {  // several GPUs are taken whole
      m.set_limits[n.core] = std::to_string(16 * k);
      m.set_limits[n.memory] = std::to_string(96 * k);
      m.set_pod_annotations["mthreads.com/request-gpu-num"] = std::to_string(k);
    } else if (!mem) {
      m.set_limits[n.core] = "16";
      m.set_limits[n.memory] = "96";
    } else {
      static const int64_t kAllowed[] = {2, 4, 8, 16, 32, 64, 96};
      Result<int64_t> v = ParseIntegerQuantity(*mem);
      if (!v.ok() ||
          std::find(std::begin(kAllowed), std::end(kAllowed), *v) == std::end(kAllowed)) {
        return InvalidArgumentError("container " + text::Quote(c.name) + ": " + n.memory + "=" +
                                    std::string(*mem) +
                                    ": sGPU memory (512 MiB units) must be one of 2, 4, 8, 16, "
                                    "32, 64, 96");
      }
    }
    return m;
  }

  void EncodePodExtras(const PodSingleDevice& devices, const PodWriteContext& ctx,
                       Annotations* pod) const override {
    std::string idx = IndexList(devices);
    if (idx.empty()) return;
    (*pod)["mthreads.com/gpu-index"] = idx;
    (*pod)["mthreads.com/predicate-node"] = std::string(ctx.node);
    (*pod)["mthreads.com/predicate-time"] = std::to_string(ctx.unix_seconds * 1000000000LL);
  }
};

// Enflame vGCU: a card is 100 percent of memory and compute, cut by Enflame's plugin into the
// node's shared-gcu slices; a task asks for a percentage, rounded up to whole slices.
class EnflameVgcuVendor final : public CapacityVendor {
 public:
  using CapacityVendor::CapacityVendor;

  // Each card's mode is the node's slices per card (none while the node reports no slices).
  Result<std::vector<DeviceInfo>> DecodeNodeDevices(const NodeView& node) const override {
    HAMI_ASSIGN_OR_RETURN(std::vector<DeviceInfo> out, CapacityVendor::DecodeNodeDevices(node));
    const int64_t cards = node.Capacity(synthesis().units);
    const int64_t slices = node.Capacity(kEnflameSharedGcu);
    if (cards > 0 && slices > 0) {
      for (DeviceInfo& d : out) d.mode = std::to_string(slices / cards);
    }
    return out;
  }

  Result<std::optional<ContainerRequest>> ParseRequest(const ContainerResources& c) const override {
    const ResourceNames& n = resource_names();
    HAMI_ASSIGN_OR_RETURN(std::optional<int64_t> count, ReadIntegerResource(c, n.count, 0, kMax32));
    HAMI_ASSIGN_OR_RETURN(std::optional<int64_t> pct,
                          ReadIntegerResource(c, n.memory_percentage, 1, 100));
    if (!count || *count == 0) return std::optional<ContainerRequest>();
    ContainerRequest r;
    r.vendor = std::string(Key());
    r.count = static_cast<int32_t>(*count);
    // Several cards are taken whole; a card is 100 units of memory.
    r.mem_mib = *count > 1 || !pct ? 100 : static_cast<int32_t>(*pct);
    return std::optional<ContainerRequest>(std::move(r));
  }

  Result<ContainerMutation> MutateContainer(const ContainerResources& c,
                                            const AdmissionContext& ctx) const override {
    ContainerMutation m;
    HAMI_ASSIGN_OR_RETURN(std::optional<ContainerRequest> r, ParseRequest(c));
    if (!r) return m;
    m.found = true;
    const ResourceNames& n = resource_names();
    std::map<int64_t, int32_t> factors;
    if (ctx.nodes != nullptr) {
      factors = ctx.nodes->CapacityRatios(kEnflameSharedGcu, synthesis().units);
      // A card is 100 percent: finer slices than 1 % are not a factor a plugin reports.
      std::erase_if(factors, [](const auto& f) { return f.first < 1 || f.first > 100; });
    }
    if (factors.empty()) {
      return UnavailableError("container " + text::Quote(c.name) + ": " + n.count +
                              ": no node reports " + std::string(kEnflameSharedGcu) + " and " +
                              synthesis().units +
                              " capacity yet, so the size of a vGCU slice is unknown; create the "
                              "pod again once an Enflame node has registered");
    }
    // The pod's choice, else the slices per card most nodes have (the smaller on a tie: larger
    // slices).
    int64_t factor =
        std::max_element(factors.begin(), factors.end(), [](const auto& a, const auto& b) {
          return a.second < b.second;
        })->first;
    const std::string slices_key(kEnflameSlicesAnnotation);
    if (auto it = ctx.pod.find(slices_key); it != ctx.pod.end()) {
      int64_t named = 0;
      if (text::ParseInt(text::TrimSpace(it->second), 1, 100, &named) != nullptr ||
          !factors.contains(named)) {
        std::string known;
        for (const auto& [f, nodes] : factors) {
          known += (known.empty() ? "" : ", ") + std::to_string(f);
        }
        return InvalidArgumentError(slices_key + ": " + text::Quote(it->second) +
                                    " is not the slices per card of any Enflame node (they have " +
                                    known + ")");
      }
      factor = named;
    }
    m.set_pod_annotations[slices_key] = std::to_string(factor);
    int64_t slices = factor * r->count;
    int64_t pct = 100;
    if (r->count == 1) {
      slices = (int64_t{r->mem_mib} * factor + 99) / 100;
      pct = 100 * slices / factor;
    }
    for (auto* side : {&m.set_limits, &m.set_requests}) {
      (*side)[n.memory_percentage] = std::to_string(pct);
      (*side)[std::string(kEnflameSharedGcu)] = std::to_string(slices);
    }
    return m;
  }

  void EncodePodExtras(const PodSingleDevice& devices, const PodWriteContext& ctx,
                       Annotations* pod) const override {
    // The first container with cards (upstream reads the pod's first container only, which
    // leaves the key out when that one asks for none).
    for (const ContainerDevices& c : devices) {
      if (c.empty()) continue;
      (*pod)["enflame.com/gcu-assigned"] = "false";
      (*pod)["enflame.com/gcu-assigned-time"] = std::to_string(ctx.unix_seconds * 1000000000LL);
      (*pod)["enflame.com/gcu-assigned-id"] = JoinIndices(c);
      return;
    }
  }
};

// MetaX whole cards: MetaX's plugin publishes, per number of cards, how much a placement loses
// of the cards' links (binpack prefers the smallest loss) and how well it spreads (spread
// prefers the highest score).
class MetaxGpuVendor final : public CapacityVendor {
 public:
  using CapacityVendor::CapacityVendor;

  std::vector<std::string> node_preference_annotations() const override {
    return {std::string(kMetaxTopologyLosses), std::string(kMetaxTopologyScores)};
  }

  NodePreferenceTable DecodeNodePreferences(const NodeView& node) const override {
    NodePreferenceTable t;
    ReadTable(node, kMetaxTopologyLosses, -1, &t.binpack);
    ReadTable(node, kMetaxTopologyScores, +1, &t.spread);
    return t;
  }

 private:
  // A JSON object {"<cards>": <number>, ...}; anything else gives nothing.
  static void ReadTable(const NodeView& node, std::string_view key, double sign,
                        std::map<int32_t, double>* out) {
    auto it = node.annotations.find(key);
    if (it == node.annotations.end()) return;
    Result<json_util::Json> j = json_util::Parse(it->second, key);
    if (!j.ok() || !j->is_object()) return;
    for (auto e = j->begin(); e != j->end(); ++e) {
      int64_t n = 0;
      if (!e->is_number() || text::ParseInt(e.key(), 1, 4096, &n) != nullptr) continue;
      const double v = e->get<double>();
      if (std::isfinite(v)) (*out)[static_cast<int32_t>(n)] = sign * v + 0.0;  // no -0
    }
  }
};

}  // namespace

TopologyChoice ChooseKunlunBoard(std::span<const DeviceCandidate> candidates, int32_t need,
                                 bool idle_only) {
  TopologyChoice c;
  std::array<int, 8> pos;
  pos.fill(-1);
  for (size_t i = 0; i < candidates.size(); ++i) {
    if ((candidates[i].idle || !idle_only) && candidates[i].index < 8) {
      pos[candidates[i].index] = static_cast<int>(i);
    }
  }
  auto take = [&](std::initializer_list<uint32_t> idx) {
    for (uint32_t i : idx) {
      if (pos[i] < 0) return false;
    }
    for (uint32_t i : idx) c.picked.push_back(static_cast<size_t>(pos[i]));
    return true;
  };
  if (need == 8) {
    take({0, 1, 2, 3, 4, 5, 6, 7});
    return c;
  }
  if (need != 1 && need != 2 && need != 4) return c;
  int free_in[2] = {0, 0};
  for (uint32_t i = 0; i < 8; ++i) free_in[i / 4] += pos[i] >= 0 ? 1 : 0;
  int group = -1;
  for (int g = 0; g < 2; ++g) {
    if (free_in[g] >= need && (group < 0 || free_in[g] < free_in[group])) group = g;
  }
  if (group >= 0) {
    const uint32_t first = static_cast<uint32_t>(group) * 4;
    for (uint32_t i = first; i < first + 4 && static_cast<int32_t>(c.picked.size()) < need; ++i) {
      if (pos[i] >= 0) c.picked.push_back(static_cast<size_t>(pos[i]));
    }
    return c;
  }
  if (need == 2) {
    for (uint32_t i = 0; i < 4; ++i) {
      if (take({i, i + 4})) return c;
    }
  } else if (need == 4) {
    for (auto set : {std::array<uint32_t, 4>{0, 1, 4, 5},
                     {2, 3, 6, 7},
                     {0, 2, 4, 6},
                     {1, 3, 5, 7},
                     {0, 3, 4, 7},
                     {1, 2, 5, 6}}) {
      if (take({set[0], set[1], set[2], set[3]})) return c;
    }
  }
  return c;
}

std::unique_ptr<Vendor> MakeCambriconMluVendor(const VendorResources& config) {
  AnnotatedVendorSpec s = SpecFromSection("MLU", config);
  s.keys.to_allocate = "hami.io/cambricon-mlu-devices-to-allocate";
  s.keys.allocated = "hami.io/cambricon-mlu-devices-allocated";
  s.keys.use_uuid = "cambricon.com/use-gpuuuid";
  s.keys.nouse_uuid = "cambricon.com/nouse-gpuuuid";
  s.node_lock = NodeLockKind::kOwn;
  s.own_node_lock = "cambricon.com/dsmlu.lock";
  Synthesis syn;
  syn.id_infix = "cambricon-mlu";
  syn.type = "MLU";
  syn.units = config.core;
  syn.units_per_card = 100;
  syn.memory = config.memory;
  syn.memory_unit_mib = config.memory_factor < 1 ? 1 : config.memory_factor;
  syn.slots = 100;
  return std::make_unique<CambriconVendor>(std::move(s), std::move(syn));
}

std::unique_ptr<Vendor> MakeEnflameGcuVendor(const VendorResources& config) {
  VendorResources whole = config;
  whole.count = config.Extra("resourceNameGCU", config.count);
  AnnotatedVendorSpec s = SpecFromSection("GCU", whole);
  s.names.memory.clear();  // whole cards: a count only
  s.names.core.clear();
  s.default_cores = 100;
  s.default_memory_mib = 0;
  s.keys.to_allocate = "hami.io/enflame-gcu-devices-to-allocate";
  s.keys.allocated = "hami.io/enflame-gcu-devices-allocated";
  Synthesis syn;
  syn.id_infix = "GCU";
  syn.type = "GCU";
  syn.units = whole.count;
  syn.fixed_memory_mib = 100;  // upstream's placeholder: GCUs are handed out whole
  return std::make_unique<CapacityVendor>(std::move(s), std::move(syn));
}

std::unique_ptr<Vendor> MakeEnflameVgcuVendor(const VendorResources& config) {
  AnnotatedVendorSpec s = SpecFromSection("Enflame", config);
  // The user's documents name the vGCU resources with the common keys; upstream's chart with
  // resourceNameVGCU / resourceNameVGCUPercentage.
  const std::string gcu = config.Extra("resourceNameGCU", "enflame.com/gcu");
  s.names.count = config.count != gcu ? config.count : config.Extra("resourceNameVGCU", "");
  s.names.memory_percentage = !config.memory_percentage.empty()
                                  ? config.memory_percentage
                                  : config.Extra("resourceNameVGCUPercentage", "");
  s.names.memory.clear();
  s.names.core.clear();
  if (s.names.count.empty() || s.names.count == gcu) return nullptr;
  s.keys.allocated = "hami.io/enflame-vgpu-devices-allocated";
  s.keys.use_uuid = "enflame.com/use-gpuuuid";
  s.keys.nouse_uuid = "enflame.com/nouse-gpuuuid";
  s.keys.mode_select = std::string(kEnflameSlicesAnnotation);
  s.keys.mode_select_exact = true;
  Synthesis syn;
  syn.id_infix = "enflame";
  syn.type = "Enflame";
  syn.units = std::string(kEnflameGcuCount);
  syn.fixed_memory_mib = 100;  // percent of a card
  syn.slots = 100;
  return std::make_unique<EnflameVgcuVendor>(std::move(s), std::move(syn));
}

std::unique_ptr<Vendor> MakeKunlunVendor(const VendorResources& config) {
  AnnotatedVendorSpec s = SpecFromSection("kunlun", config);
  s.names.memory.clear();
  s.names.core.clear();
  s.default_memory_mib = 0;
  s.default_cores = 0;
  s.keys.allocated = "hami.io/kunlun-allocated";
  s.keys.use_uuid = "hami.io/use-xpu-uuid";
  s.keys.nouse_uuid = "hami.io/no-use-xpu-uuid";
  Synthesis syn;
  syn.id_infix = "kunlun";
  syn.type = "kunlun";
  syn.units = config.count;
  syn.fixed_memory_mib = kKunlunCardMemoryMiB;
  syn.slots = 100;
  syn.upper_half_numa1 = true;
  return std::make_unique<KunlunVendor>(std::move(s), std::move(syn));
}

std::unique_ptr<Vendor> MakeMetaxGpuVendor(const VendorResources& config) {
  auto it = config.extra.find("resourceVCountName");
  if (it != config.extra.end() && it->second == config.count) return nullptr;  // sGPU only
  AnnotatedVendorSpec s = SpecFromSection("Metax-GPU", config);
  s.names.memory.clear();  // whole cards: a count only
  s.names.core.clear();
  s.default_memory_mib = 0;
  s.default_cores = 100;
  s.one_device_per_pod = true;
  s.keys.to_allocate = "hami.io/metax-gpu-devices-to-allocate";
  s.keys.allocated = "hami.io/metax-gpu-devices-allocated";
  Synthesis syn;
  syn.id_infix = "metax";
  syn.type = "Metax-GPU";
  syn.units = config.count;
  syn.fixed_memory_mib = 65536;  // upstream's figure: capacity does not carry the card's memory
  return std::make_unique<MetaxGpuVendor>(std::move(s), std::move(syn));
}

std::unique_ptr<Vendor> MakeMthreadsVendor(const VendorResources& config) {
  AnnotatedVendorSpec s = SpecFromSection("Mthreads", config);
  s.cores_scale_with_count = true;  // the webhook writes 16 x count for several GPUs
  s.one_device_per_pod = true;
  s.keys.allocated = "hami.io/mthreads-vgpu-devices-allocated";
  s.keys.use_uuid = "mthreads.ai/use-gpuuuid";
  s.keys.nouse_uuid = "mthreads.ai/nouse-gpuuuid";
  Synthesis syn;
  syn.id_infix = "mthreads";
  syn.type = "Mthreads";
  syn.units = config.core;
  syn.units_per_card = 16;
  syn.memory = config.memory;
  syn.memory_unit_mib = config.memory_factor < 1 ? 1 : config.memory_factor;
  syn.slots = 100;
  syn.devcore = 16;
  return std::make_unique<MthreadsVendor>(std::move(s), std::move(syn));
}

}  // namespace hami::device
