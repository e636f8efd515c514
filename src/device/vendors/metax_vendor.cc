#include "device/vendors/metax_vendor.h"

#include <algorithm>
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
constexpr std::string_view kTopologyAwareAnnotation = "metax-tech.com/sgpu-topology-aware";

// Task classes: the app class in bits 0-1 (0 none, 1 online, 2 offline), the QoS policy in bits
// 2-3 (0 none, 1 best-effort, 2 fixed-share, 3 burst-share).
constexpr uint8_t kOnline = 1, kOffline = 2;
constexpr std::string_view kQosNames[] = {"", "best-effort", "fixed-share", "burst-share"};

uint8_t AppOf(uint8_t cls) { return cls & 3; }
uint8_t QosOf(uint8_t cls) { return (cls >> 2) & 3; }

class MetaxSgpuVendor final : public AnnotatedVendor {
 public:
  MetaxSgpuVendor(AnnotatedVendorSpec spec, bool topology_aware)
      : AnnotatedVendor(std::move(spec)), topology_aware_(topology_aware) {}

  // The device config's sgpuTopologyAware, unless the pod's annotation says true or false.
  bool scores_links(const Annotations& pod) const override {
    bool on = topology_aware_;
    if (auto it = pod.find(kTopologyAwareAnnotation); it != pod.end()) {
      bool v = false;
      if (text::ParseBool(text::TrimSpace(it->second), &v)) on = v;
    }
    return on;
  }

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
      HAMI_RETURN_IF_ERROR(json_util::ReadOptional(e, "qosPolicy", p, &d.mode));
      int32_t zone = 0;  // MetaLink zone; 0 = no link
      HAMI_RETURN_IF_ERROR(json_util::ReadOptional(e, "linkZone", p, &zone));
      if (zone > 0) d.group = std::to_string(zone);
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

  bool uses_task_classes() const override { return true; }
  // A pod's sGPUs within one MetaLink zone where they can be (ChooseByGroup).
  bool has_topology_rule() const override { return true; }
  TopologyChoice ChooseDevices(std::span<const DeviceCandidate> candidates,
                               int32_t need) const override {
    return ChooseByGroup(candidates, need);
  }

  uint8_t TaskClass(const Annotations& pod) const override {
    uint8_t app = 0;
    if (auto it = pod.find(kAppClassAnnotation); it != pod.end()) {
      app = it->second == "online" ? kOnline : it->second == "offline" ? kOffline : 0;
    }
    uint8_t qos = 0;
    if (auto it = pod.find(kQosAnnotation); it != pod.end() && app != kOnline) {
      for (uint8_t q = 1; q < 4; ++q) {
        if (it->second == kQosNames[q]) qos = q;
      }
    }
    return static_cast<uint8_t>(app | qos << 2);
  }

  // A task holding all of a device's compute leaves it no QoS to keep (it is alone).
  uint8_t ChargeClass(uint8_t task_class, bool exclusive) const override {
    return exclusive ? AppOf(task_class) : task_class;
  }

  // App classes: tasks without one never share with online or offline tasks; online tasks join
  // devices without plain tasks; offline tasks join devices with offline tasks only (or empty
  // ones). QoS (not for online tasks): a used device takes only tasks of its QoS policy (the
  // policy of the tasks on it, else the one its plugin registered), unless the new task takes
  // the whole device.
  ShareVerdict CanShare(uint8_t task_class, const TaskClassCounts& on_device,
                        std::string_view device_mode, bool exclusive) const override {
    int64_t by_app[3] = {0, 0, 0};
    bool qos_seen[4] = {false, false, false, false};
    for (size_t c = 0; c < on_device.size(); ++c) {
      if (on_device[c] == 0) continue;
      by_app[std::min<uint8_t>(AppOf(static_cast<uint8_t>(c)), 2)] += on_device[c];
      qos_seen[QosOf(static_cast<uint8_t>(c))] = true;
    }
    const uint8_t app = AppOf(task_class);
    if ((app == 0 && by_app[kOnline] + by_app[kOffline] > 0) || (app == kOnline && by_app[0] > 0) ||
        (app == kOffline && by_app[0] + by_app[kOnline] > 0)) {
      return ShareVerdict::kAppClassMismatch;
    }
    const bool used = by_app[0] + by_app[kOnline] + by_app[kOffline] > 0;
    const uint8_t qos = QosOf(task_class);
    if (app == kOnline || !used || exclusive || qos == 0) return ShareVerdict::kOk;
    bool tasks_have_qos = false;
    for (uint8_t q = 1; q < 4; ++q) {
      if (!qos_seen[q]) continue;
      tasks_have_qos = true;
      if (q != qos) return ShareVerdict::kQosPolicyMismatch;
    }
    if (!tasks_have_qos && !device_mode.empty() && device_mode != kQosNames[qos]) {
      return ShareVerdict::kQosPolicyMismatch;
    }
    return ShareVerdict::kOk;
  }

  // Online tasks would rather have sGPUs with fewer online tasks, and least of all one that runs
  // offline tasks only (they would be preempted in turn); upstream's figures.
  double DevicePreference(uint8_t task_class, const TaskClassCounts& on_device) const override {
    if (AppOf(task_class) != kOnline) return 0;
    int64_t online = 0, offline = 0, plain = 0;
    for (size_t c = 0; c < on_device.size(); ++c) {
      const uint8_t app = AppOf(static_cast<uint8_t>(c));
      (app == kOnline ? online : app == 0 ? plain : offline) += on_device[c];
    }
    if (offline > 0 && online == 0 && plain == 0) return -100.0 * static_cast<double>(offline);
    return -20.0 * static_cast<double>(online) - 2.0 * static_cast<double>(offline);
  }

  // Online tasks are given no compute (MetaX's plugin schedules them first).
  bool TaskTakesNoCores(uint8_t task_class) const override { return AppOf(task_class) == kOnline; }

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

 private:
  bool topology_aware_;
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
  return std::make_unique<MetaxSgpuVendor>(std::move(s),
                                           config.Extra("sgpuTopologyAware", "false") == "true");
}

}  // namespace hami::device
