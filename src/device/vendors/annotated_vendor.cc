#include "device/vendors/annotated_vendor.h"

#include <algorithm>
#include <limits>

#include "device/request.h"
#include "device/text_util.h"
#include "device/vendors/capacity_vendor.h"

namespace hami::device {
namespace {

constexpr int64_t kMax32 = std::numeric_limits<int32_t>::max();

}  // namespace

AnnotatedVendor::AnnotatedVendor(AnnotatedVendorSpec spec) : spec_(std::move(spec)) {
  if (spec_.names.memory_factor < 1) spec_.names.memory_factor = 1;
}

Result<std::optional<ContainerRequest>> AnnotatedVendor::ParseRequest(
    const ContainerResources& c) const {
  const ResourceNames& n = spec_.names;
  HAMI_ASSIGN_OR_RETURN(std::optional<int64_t> count, ReadIntegerResource(c, n.count, 0, kMax32));
  std::optional<int64_t> mem, cores;
  if (!n.memory.empty() && !spec_.count_only) {
    HAMI_ASSIGN_OR_RETURN(mem, ReadMemoryResource(c, n.memory, kMax32, n.memory_factor));
  }
  if (!n.core.empty() && !spec_.count_only && spec_.cores_from_memory_of == 0) {
    int64_t max_cores = 100;
    if (spec_.cores_scale_with_count && count && *count > 1) max_cores = 100 * *count;
    HAMI_ASSIGN_OR_RETURN(cores, ReadIntegerResource(c, n.core, spec_.min_cores, max_cores));
  }
  if (!count || *count == 0) return std::optional<ContainerRequest>();

  ContainerRequest r;
  r.vendor = spec_.key;
  r.count = static_cast<int32_t>(*count);
  if (spec_.count_only) return std::optional<ContainerRequest>(std::move(r));
  if (mem && *mem > 0) {
    int64_t scaled = *mem * n.memory_factor;
    if (scaled > kMax32) {
      return InvalidArgumentError("container " + text::Quote(c.name) + ": " + n.memory + "=" +
                                  std::to_string(*mem) + " x memoryFactor " +
                                  std::to_string(n.memory_factor) + " exceeds " +
                                  std::to_string(kMax32) + " MiB");
    }
    if (spec_.round_memory) {
      std::optional<int64_t> rounded = spec_.round_memory(scaled);
      if (!rounded) {
        return InvalidArgumentError("container " + text::Quote(c.name) + ": " + n.memory + "=" +
                                    std::to_string(*mem) + " is larger than any partition");
      }
      scaled = *rounded;
    }
    r.mem_mib = static_cast<int32_t>(scaled);
  } else if (spec_.default_memory_mib > 0) {
    r.mem_mib = spec_.default_memory_mib;
  } else {
    r.mem_percent = 100;
  }
  if (spec_.cores_from_memory_of > 0) {
    r.cores = r.mem_mib > 0 ? static_cast<int32_t>(std::min<int64_t>(
                                  100, int64_t{r.mem_mib} * 100 / spec_.cores_from_memory_of))
                            : 100;
  } else {
    r.cores = cores ? static_cast<int32_t>(std::min<int64_t>(*cores, 100)) : spec_.default_cores;
  }
  return std::optional<ContainerRequest>(std::move(r));
}

Result<ContainerMutation> AnnotatedVendor::MutateContainer(const ContainerResources& c,
                                                           const AdmissionContext& /*ctx*/) const {
  ContainerMutation m;
  HAMI_ASSIGN_OR_RETURN(std::optional<ContainerRequest> r, ParseRequest(c));
  if (!r) return m;
  m.found = true;
  const ResourceNames& n = spec_.names;
  // Iluvatar: several devices in one container take them whole.
  if (spec_.cores_scale_with_count && r->count > 1 && !n.core.empty()) {
    m.set_limits[n.core] = std::to_string(100 * int64_t{r->count});
  }
  // Memory rounded up to a partition, written back so kubelet accounts what is handed out.
  if (spec_.round_memory && r->mem_mib > 0 && FindQuantity(c, n.memory)) {
    std::string q = std::to_string(r->mem_mib / n.memory_factor);
    m.set_limits[n.memory] = q;
    if (c.requests.count(n.memory) > 0) m.set_requests[n.memory] = q;
  }
  for (const auto& [name, value] : spec_.container_env) {
    m.default_env[name] = value == "$CONTAINER" ? c.name : value;
  }
  return m;
}

AnnotatedVendorSpec SpecFromSection(std::string key, const VendorResources& config) {
  AnnotatedVendorSpec s;
  s.key = std::move(key);
  s.names.count = config.count;
  s.names.memory = config.memory;
  s.names.core = config.core;
  s.names.memory_factor = config.memory_factor;
  s.default_memory_mib = config.default_memory_mib;
  s.default_cores = config.default_cores;
  return s;
}

std::unique_ptr<Vendor> MakeHygonDcuVendor(const VendorResources& config) {
  AnnotatedVendorSpec s = SpecFromSection(std::string(kHygonVendorKey), config);
  s.keys.node_register = std::string(kHygonRegisterAnnotation);
  s.keys.node_handshake = std::string(kHygonHandshakeAnnotation);
  s.keys.to_allocate = std::string(kHygonToAllocateAnnotation);
  s.keys.allocated = std::string(kHygonAllocatedAnnotation);
  s.keys.use_type = "hygon.com/use-dcutype";
  s.keys.nouse_type = "hygon.com/nouse-dcutype";
  s.keys.use_uuid = "hygon.com/use-gpuuuid";
  s.keys.nouse_uuid = "hygon.com/nouse-gpuuuid";
  return std::make_unique<AnnotatedVendor>(std::move(s));
}

std::unique_ptr<Vendor> MakeIluvatarVendor(const IluvatarChipConfig& chip) {
  AnnotatedVendorSpec s;
  const std::string& cw = chip.common_word;
  s.key = cw;
  s.names.count = chip.count;
  s.names.memory = chip.memory;
  s.names.core = chip.core;
  s.names.memory_factor = 256;  // vMem counts 256 MiB units
  s.keys.node_register = "hami.io/node-" + cw + "-register";
  s.keys.node_handshake = "hami.io/node-handshake-" + cw;
  s.keys.to_allocate = "hami.io/" + cw + "-devices-to-allocate";
  s.keys.allocated = "hami.io/" + cw + "-devices-allocated";
  s.keys.use_uuid = "hami.io/use-" + cw + "-uuid";
  s.keys.nouse_uuid = "hami.io/no-use-" + cw + "-uuid";
  s.cores_scale_with_count = true;
  // Iluvatar's device plugin finds the container by this variable (its spelling is the wire's).
  s.container_env["SOL_CONTINER_NAME"] = "$CONTAINER";
  return std::make_unique<AnnotatedVendor>(std::move(s));
}

namespace {

AnnotatedVendorSpec CountOnlySpec(std::string key, std::string register_suffix,
                                  const VendorResources& config, const std::string& uuid_domain) {
  AnnotatedVendorSpec s;
  s.key = key;
  s.names.count = config.count;
  s.keys.node_register = "hami.io/node-" + register_suffix + "-register";
  s.keys.node_handshake = "hami.io/node-handshake-" + register_suffix;
  // Upstream builds these from the vendor key, capital letter included.
  s.keys.to_allocate = "hami.io/" + key + "-devices-to-allocate";
  s.keys.allocated = "hami.io/" + key + "-devices-allocated";
  s.keys.use_uuid = uuid_domain + "/use-gpuuuid";
  s.keys.nouse_uuid = uuid_domain + "/nouse-gpuuuid";
  s.count_only = true;
  return s;
}

}  // namespace

std::unique_ptr<Vendor> MakeBirenVendor(const VendorResources& config) {
  return std::make_unique<AnnotatedVendor>(
      CountOnlySpec("Biren", "biren", config, "birentech.com"));
}

namespace {

// Vastai: in die mode (custominfo DeviceStrategy "die") each registered device is one die and
// custominfo AIC names its card; a pod's dies are kept on as few cards as possible.
class VastaiVendor final : public AnnotatedVendor {
 public:
  using AnnotatedVendor::AnnotatedVendor;

  Result<std::vector<DeviceInfo>> DecodeNodeDevices(const NodeView& node) const override {
    HAMI_ASSIGN_OR_RETURN(std::vector<DeviceInfo> devices,
                          AnnotatedVendor::DecodeNodeDevices(node));
    for (DeviceInfo& d : devices) {
      auto strategy = d.custom.find("DeviceStrategy");
      auto card = d.custom.find("AIC");
      if (strategy != d.custom.end() && strategy->second == "die" && card != d.custom.end()) {
        d.group = card->second;
      }
    }
    return devices;
  }
  bool has_topology_rule() const override { return true; }
  TopologyChoice ChooseDevices(std::span<const DeviceCandidate> candidates,
                               int32_t need) const override {
    return ChooseByGroup(candidates, need);
  }
  // A mutex pod takes a card's dies only when the whole card is idle.
  bool mutex_takes_group() const override { return true; }
};

}  // namespace

std::unique_ptr<Vendor> MakeVastaiVendor(const VendorResources& config) {
  return std::make_unique<VastaiVendor>(CountOnlySpec("Vastai", "va", config, "vastaitech.com"));
}

std::unique_ptr<Vendor> MakeAmdVendor(const VendorResources& config) {
  AnnotatedVendorSpec s = SpecFromSection("AMD", config);
  s.keys.node_register = "hami.io/node-amd-register";
  s.keys.to_allocate = "hami.io/amd-devices-to-allocate";
  s.keys.allocated = "hami.io/amd-devices-allocated";
  s.keys.use_type = "amd.com/use-gputype";
  s.keys.nouse_type = "amd.com/nouse-gputype";
  s.keys.use_uuid = "amd.com/use-gpu-uuid";
  s.keys.nouse_uuid = "amd.com/nouse-gpu-uuid";
  s.default_cores = config.default_cores > 0 ? config.default_cores : 100;
  s.min_cores = 1;
  s.cores_in_device_units = true;
  s.lists_device_type = true;
  return std::make_unique<AnnotatedVendor>(std::move(s));
}

namespace {

// vXPU: the board's topology for several devices; a card is shared by partitions of one size.
class KunlunVxpuVendor final : public AnnotatedVendor {
 public:
  using AnnotatedVendor::AnnotatedVendor;
  bool has_topology_rule() const override { return true; }
  TopologyChoice ChooseDevices(std::span<const DeviceCandidate> candidates,
                               int32_t need) const override {
    return ChooseKunlunBoard(candidates, need, /*idle_only=*/false);
  }
  bool equal_partitions() const override { return true; }
};

}  // namespace

std::unique_ptr<Vendor> MakeKunlunVxpuVendor(const VendorResources& config) {
  AnnotatedVendorSpec s;
  s.key = "XPU";
  s.names.count = config.Extra("resourceVCountName", "kunlunxin.com/vxpu");
  s.names.memory = config.Extra("resourceVMemoryName", "kunlunxin.com/vxpu-memory");
  s.keys.node_register = "hami.io/node-register-xpu";
  s.keys.node_handshake = "hami.io/node-handshake-xpu";
  s.keys.to_allocate = "hami.io/xpu-devices-to-allocate";
  s.keys.allocated = "hami.io/xpu-devices-allocated";
  s.keys.use_uuid = "hami.io/use-xpu-uuid";
  s.keys.nouse_uuid = "hami.io/no-use-xpu-uuid";
  s.round_memory = [](int64_t mib) -> std::optional<int64_t> {
    for (int64_t part :
         {kKunlunCardMemoryMiB / 4, kKunlunCardMemoryMiB / 2, kKunlunCardMemoryMiB}) {
      if (mib <= part) return part;
    }
    return std::nullopt;
  };
  s.cores_from_memory_of = kKunlunCardMemoryMiB;
  return std::make_unique<KunlunVxpuVendor>(std::move(s));
}

}  // namespace hami::device
