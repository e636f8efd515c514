#include "device/vendors/metax_vendor.h"

#include <limits>

#include "device/json_util.h"
#include "device/request.h"
#include "device/resource_quantity.h"
#include "device/text_util.h"
#include "device/vendors/annotated_vendor.h"

namespace hami::device {
namespace {

using json_util::Json;

constexpr int64_t kMax32 = std::numeric_limits<int32_t>::max();
constexpr std::string_view kQosAnnotation = "metax-tech.com/sgpu-qos-policy";
constexpr std::string_view kAppClassAnnotation = "metax-tech.com/sgpu-app-class";

class MetaxSgpuVendor final : public AnnotatedVendor {
 public:
  using AnnotatedVendor::AnnotatedVendor;

  Result<std::vector<DeviceInfo>> DecodeNodeDevices(const NodeView& node) const override {
    const std::string& key = annotation_keys().node_register;
    auto it = node.annotations.find(key);
    if (it == node.annotations.end()) return NotFoundError("node has no " + key + " annotation");
    HAMI_ASSIGN_OR_RETURN(Json list, json_util::Parse(it->second, key));
    if (!list.is_array()) return InvalidArgumentError(key + ": expected a JSON list of GPUs");
    std::vector<DeviceInfo> out;
    for (size_t i = 0; i < list.size(); ++i) {
      const Json& e = list[i];
      const std::string p = json_util::Indexed(key, i);
      if (!e.is_object()) return InvalidArgumentError(p + ": expected an object");
      DeviceInfo d;
      HAMI_RETURN_IF_ERROR(json_util::ReadOptional(e, "uuid", p, &d.id));
      HAMI_RETURN_IF_ERROR(json_util::ReadOptional(e, "model", p, &d.type));
      HAMI_RETURN_IF_ERROR(json_util::ReadOptional(e, "totalDevCount", p, &d.count));
      HAMI_RETURN_IF_ERROR(json_util::ReadOptional(e, "totalCompute", p, &d.devcore));
      HAMI_RETURN_IF_ERROR(json_util::ReadOptional(e, "totalVRam", p, &d.devmem));
      HAMI_RETURN_IF_ERROR(json_util::ReadOptional(e, "numa", p, &d.numa));
      HAMI_RETURN_IF_ERROR(json_util::ReadOptional(e, "healthy", p, &d.health));
      if (d.id.empty()) return InvalidArgumentError(p + ".uuid: empty");
      if (d.count < 0 || d.devcore < 0 || d.devmem < 0) {
        return InvalidArgumentError(p + ": negative totals");
      }
      d.index = static_cast<uint32_t>(i);
      d.vendor = std::string(Key());
      out.push_back(std::move(d));
    }
    if (out.empty()) return NotFoundError(key + ": no GPUs");
    return out;
  }

  // vmemory: a bare number is GiB, a quantity with a unit is bytes (rounded up to MiB).
  Result<std::optional<ContainerRequest>> ParseRequest(const ContainerResources& c) const override {
    const ResourceNames& n = resource_names();
    ContainerResources rest = c;
    rest.limits.erase(n.memory);
    rest.requests.erase(n.memory);
    HAMI_ASSIGN_OR_RETURN(std::optional<ContainerRequest> r, AnnotatedVendor::ParseRequest(rest));
    std::optional<std::string_view> q = FindQuantity(c, n.memory);
    if (!r || !q) return r;
    Result<int64_t> v = ParseIntegerQuantity(*q);
    const std::string what =
        "container " + text::Quote(c.name) + ": " + n.memory + "=" + text::Quote(*q) + ": ";
    if (!v.ok() || *v < 0) {
      return InvalidArgumentError(what +
                                  "not a non-negative whole quantity (a bare number is "
                                  "GiB, e.g. 4; with a unit it is bytes, e.g. 2048Mi)");
    }
    bool bare = q->find_first_not_of("0123456789") == std::string_view::npos;
    int64_t mib = bare ? (*v > kMax32 / 1024 ? kMax32 + int64_t{1} : *v * 1024)
                       : (*v + (1 << 20) - 1) / (1 << 20);
    if (mib > kMax32)
      return InvalidArgumentError(what + "more than " + std::to_string(kMax32) + " MiB");
    if (mib > 0) {
      r->mem_mib = static_cast<int32_t>(mib);
      r->mem_percent = kMemPercentUnset;
    }
    return r;
  }

  Result<ContainerMutation> MutateContainer(const ContainerResources& c,
                                            const AdmissionContext& ctx) const override {
    HAMI_ASSIGN_OR_RETURN(ContainerMutation m, AnnotatedVendor::MutateContainer(c, ctx));
    const Annotations& pod = ctx.pod;
    if (!m.found) return m;
    std::string app_class;
    if (auto it = pod.find(kAppClassAnnotation); it != pod.end()) app_class = it->second;
    if (!app_class.empty() && app_class != "online" && app_class != "offline") {
      return InvalidArgumentError(std::string(kAppClassAnnotation) + ": " + text::Quote(app_class) +
                                  " is not online or offline");
    }
    if (!app_class.empty()) {
      Result<std::optional<int64_t>> count =
          ReadIntegerResource(c, resource_names().count, 0, kMax32);
      if (count.ok() && *count && **count != 1) {
        return InvalidArgumentError(std::string(kAppClassAnnotation) +
                                    ": a pod with an app class asks for one sGPU, not " +
                                    std::to_string(**count));
      }
    }
    if (app_class != "online") {
      auto it = pod.find(kQosAnnotation);
      if (it == pod.end() || it->second.empty()) {
        m.set_pod_annotations[std::string(kQosAnnotation)] = "best-effort";
      } else if (it->second != "best-effort" && it->second != "fixed-share" &&
                 it->second != "burst-share") {
        return InvalidArgumentError(std::string(kQosAnnotation) + ": " + text::Quote(it->second) +
                                    " is not one of best-effort, fixed-share, burst-share");
      }
    }
    return m;
  }

  void EncodePodExtras(const PodSingleDevice& devices, const PodWriteContext& ctx,
                       Annotations* pod) const override {
    std::string out = "[";
    bool any = false;
    for (size_t i = 0; i < devices.size(); ++i) {
      if (i > 0) out += ",";
      out += "[";
      for (size_t j = 0; j < devices[i].size(); ++j) {
        const ContainerDevice& d = devices[i][j];
        if (j > 0) out += ",";
        out += "{\"uuid\":";
        json_util::AppendGoString(&out, d.uuid);
        out += ",\"compute\":" + std::to_string(d.cores) +
               ",\"vRam\":" + std::to_string(d.mem_mib) + "}";
        any = true;
      }
      out += "]";
    }
    out += "]";
    if (!any) return;
    (*pod)["metax-tech.com/gpu-devices-allocated"] = out;
    (*pod)["metax-tech.com/predicate-time"] = std::to_string(ctx.unix_seconds * 1000000000LL);
  }
};

}  // namespace

std::unique_ptr<Vendor> MakeMetaxSgpuVendor(const VendorResources& config) {
  AnnotatedVendorSpec s;
  s.key = "Metax-SGPU";
  s.names.count = config.Extra("resourceVCountName", "metax-tech.com/sgpu");
  // The user's documents put the sGPU names in the flat keys; upstream's chart in the V keys.
  s.names.memory = !config.memory.empty()
                       ? config.memory
                       : config.Extra("resourceVMemoryName", "metax-tech.com/vmemory");
  s.names.core = !config.core.empty() ? config.core
                                      : config.Extra("resourceVCoreName", "metax-tech.com/vcore");
  s.names.memory_factor = 1024;  // for quota: a bare vmemory number is GiB
  s.default_cores = 100;
  s.keys.node_register = std::string(kMetaxDevicesAnnotation);
  s.keys.to_allocate = "hami.io/metax-sgpu-devices-to-allocate";
  s.keys.allocated = "hami.io/metax-sgpu-devices-allocated";
  s.keys.use_uuid = "metax-tech.com/use-gpuuuid";
  s.keys.nouse_uuid = "metax-tech.com/nouse-gpuuuid";
  return std::make_unique<MetaxSgpuVendor>(std::move(s));
}

}  // namespace hami::device
