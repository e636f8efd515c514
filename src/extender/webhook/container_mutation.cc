// The container half of the admission webhook: reading a pod's containers out of its JSON and
// applying HAMi's NVIDIA rules and every vendor's own rules to them (rule 3 of admission.h).
#include "extender/webhook/admission_internal.h"

#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "device/request.h"
#include "device/resource_quantity.h"
#include "device/text_util.h"

namespace hami::extender::admission_internal {
namespace {

constexpr std::string_view kTaskPriorityEnv = "CUDA_TASK_PRIORITY";
constexpr std::string_view kCorePolicyEnv = "GPU_CORE_UTILIZATION_POLICY";
constexpr std::string_view kVisibleDevicesEnv = "NVIDIA_VISIBLE_DEVICES";

// Reads `resources.<field>` of a container into `out`. Quantities arrive as strings from the API
// server; plain JSON numbers (hand-written requests) are taken as their decimal text.
Status ReadQuantities(const Json& resources, std::string_view field, const std::string& path,
                      std::map<std::string, std::string, std::less<>>* out) {
  auto it = resources.find(field);
  if (it == resources.end() || it->is_null()) return OkStatus();
  std::string where = path + ".resources." + std::string(field);
  if (!it->is_object()) return InvalidArgumentError(where + " is not an object");
  for (const auto& [name, value] : it->items()) {
    if (value.is_string()) {
      (*out)[name] = value.get<std::string>();
    } else if (value.is_number()) {
      (*out)[name] = value.dump();
    } else {
      return InvalidArgumentError(where + "[" + device::text::Quote(name) + "] is not a quantity");
    }
  }
  return OkStatus();
}

Result<Container> ReadContainer(Json& json, std::string path) {
  if (!json.is_object()) return InvalidArgumentError(path + " is not an object");
  Container c;
  c.json = &json;
  c.resources.name = std::string(StringMember(json, "name"));
  if (auto env = json.find("env"); env != json.end() && !env->is_null() && !env->is_array()) {
    return InvalidArgumentError(path + ".env is not an array");
  }
  if (auto res = json.find("resources"); res != json.end() && !res->is_null()) {
    if (!res->is_object()) return InvalidArgumentError(path + ".resources is not an object");
    HAMI_RETURN_IF_ERROR(ReadQuantities(*res, "limits", path, &c.resources.limits));
    HAMI_RETURN_IF_ERROR(ReadQuantities(*res, "requests", path, &c.resources.requests));
  }
  if (auto sc = json.find("securityContext"); sc != json.end() && sc->is_object()) {
    auto p = sc->find("privileged");
    c.privileged = p != sc->end() && p->is_boolean() && p->get<bool>();
  }
  c.path = std::move(path);
  return c;
}

}  // namespace

Status ReadContainers(Json& spec, std::string_view field, std::vector<Container>* out) {
  auto it = spec.find(field);
  if (it == spec.end() || it->is_null()) return OkStatus();
  std::string base = "spec." + std::string(field);
  if (!it->is_array()) return InvalidArgumentError(base + " is not an array");
  for (size_t i = 0; i < it->size(); ++i) {
    HAMI_ASSIGN_OR_RETURN(Container c,
                          ReadContainer((*it)[i], base + "[" + std::to_string(i) + "]"));
    out->push_back(std::move(c));
  }
  return OkStatus();
}

namespace {

device::PodResources ResourcesOf(const std::vector<Container>& containers, size_t init_count) {
  device::PodResources pod;
  for (size_t i = 0; i < containers.size(); ++i) {
    (i < init_count ? pod.init_containers : pod.containers).push_back(containers[i].resources);
  }
  return pod;
}

// Sets environment variable `name` of a container, replacing the value of an existing entry.
void SetEnv(Json& container, std::string_view name, std::string_view value) {
  Json& env = container["env"];
  if (!env.is_array()) env = Json::array();
  for (Json& e : env) {
    if (e.is_object() && StringMember(e, "name") == name) {
      e["value"] = value;
      e.erase("valueFrom");  // value and valueFrom are mutually exclusive
      return;
    }
  }
  env.push_back(Json{{"name", name}, {"value", value}});
}

// Sets resources.<field>[resource] ("limits" or "requests") in the JSON and the parsed copy.
void SetQuantity(Container& c, const char* field, const std::string& resource, std::string value) {
  Json& resources = (*c.json)["resources"];
  if (!resources.is_object()) resources = Json::object();
  Json& list = resources[field];
  if (!list.is_object()) list = Json::object();
  list[resource] = value;
  auto& parsed = std::string_view(field) == "limits" ? c.resources.limits : c.resources.requests;
  parsed[resource] = std::move(value);
}

void SetLimit(Container& c, const std::string& resource, std::string value) {
  SetQuantity(c, "limits", resource, std::move(value));
}

// Adds `name=value` unless the container already sets `name`.
void DefaultEnv(Json& container, const std::string& name, const std::string& value) {
  Json& env = container["env"];
  if (!env.is_array()) env = Json::array();
  for (const Json& e : env) {
    if (e.is_object() && StringMember(e, "name") == name) return;
  }
  env.push_back(Json{{"name", name}, {"value", value}});
}

// The pod's metadata.annotations (string values only).
device::Annotations PodAnnotations(const Json& pod) {
  device::Annotations out;
  auto md = pod.find("metadata");
  if (md == pod.end() || !md->is_object()) return out;
  auto an = md->find("annotations");
  if (an == md->end() || !an->is_object()) return out;
  for (auto it = an->begin(); it != an->end(); ++it) {
    if (it->is_string()) out.emplace(it.key(), it->get<std::string>());
  }
  return out;
}

// Every vendor's own admission rules (device/vendor.h MutateContainer) applied to `c`. Returns
// whether the container asks for any vendor's devices afterwards.
Result<bool> MutateVendorContainer(const device::VendorRegistry& vendors,
                                   const device::AdmissionContext& ctx, Container& c, Json& pod,
                                   Json& spec) {
  bool found = false;
  for (const auto& vendor : vendors.vendors()) {
    Result<device::ContainerMutation> m = vendor->MutateContainer(c.resources, ctx);
    if (!m.ok()) return m.status().WithContext("container " + c.resources.name);
    for (const auto& [res, q] : m->set_limits) SetLimit(c, res, q);
    for (const auto& [res, q] : m->set_requests) SetQuantity(c, "requests", res, q);
    for (const auto& [name, value] : m->default_env) DefaultEnv(*c.json, name, value);
    if (!m->runtime_class.empty() && StringMember(spec, "runtimeClassName").empty()) {
      spec["runtimeClassName"] = m->runtime_class;
    }
    for (const auto& [key, value] : m->set_pod_annotations) {
      Json& md = pod["metadata"];
      if (!md.is_object()) md = Json::object();
      Json& annos = md["annotations"];
      if (!annos.is_object()) annos = Json::object();
      annos[key] = value;
    }
    found |= m->found;
  }
  return found;
}

bool Present(const device::ContainerResources& r, const std::string& resource) {
  return !resource.empty() && device::FindQuantity(r, resource).has_value();
}

// The integer value of a resource already validated by ParsePodRequests.
std::optional<int64_t> IntegerOf(const device::ContainerResources& r, const std::string& resource) {
  if (resource.empty()) return std::nullopt;
  std::optional<std::string_view> q = device::FindQuantity(r, resource);
  if (!q) return std::nullopt;
  Result<int64_t> v = device::ParseIntegerQuantity(*q);
  if (!v.ok()) return std::nullopt;
  return *v;
}

// HAMi's NVIDIA admission rules for one container (see the header, rule 3). Returns whether the
// container asks for NVIDIA devices once mutated.
bool MutateNvidiaContainer(const device::NvidiaConfig& cfg, Container& c, Json& spec) {
  const device::ContainerResources& r = c.resources;
  if (std::optional<int64_t> priority = IntegerOf(r, cfg.resource_priority_name)) {
    SetEnv(*c.json, kTaskPriorityEnv, std::to_string(*priority));
  }
  if (cfg.gpu_core_policy != device::GpuCorePolicy::kDefault) {
    SetEnv(*c.json, kCorePolicyEnv, device::GpuCorePolicyName(cfg.gpu_core_policy));
  }

  bool has = Present(r, cfg.resource_count_name);
  if (!has && cfg.default_gpu_num > 0 && !cfg.resource_count_name.empty() &&
      (Present(r, cfg.resource_core_name) || Present(r, cfg.resource_memory_name) ||
       Present(r, cfg.resource_memory_percentage_name))) {
    SetLimit(c, cfg.resource_count_name, std::to_string(cfg.default_gpu_num));
    has = true;
  }

  // A request that takes a card's whole memory takes the card: give it all the cores too, so
  // nobody shares the device with it.
  if (has && !cfg.resource_core_name.empty() && !Present(r, cfg.resource_core_name)) {
    bool whole_card;
    if (Present(r, cfg.resource_memory_percentage_name)) {
      whole_card = IntegerOf(r, cfg.resource_memory_percentage_name) == 100;
    } else {
      whole_card = cfg.resource_memory_name.empty() || !Present(r, cfg.resource_memory_name);
    }
    if (whole_card) SetLimit(c, cfg.resource_core_name, std::to_string(device::kExclusiveCores));
  }

  if (has && !cfg.runtime_class_name.empty() && StringMember(spec, "runtimeClassName").empty()) {
    spec["runtimeClassName"] = cfg.runtime_class_name;
  }
  if (!has && cfg.overwrite_env) SetEnv(*c.json, kVisibleDevicesEnv, "none");
  return has;
}

}  // namespace

Result<device::PodRequests> MutateContainers(const Json& pod, Json& mutated, Json& spec,
                                             std::vector<Container>& containers,
                                             size_t init_count,
                                             const device::VendorRegistry& vendors,
                                             const device::DeviceConfig& config,
                                             const WebhookOptions& options, bool* has_devices) {
  // Invalid quantities are refused with the reason before anything is changed.
  if (Result<device::PodRequests> r =
          device::ParsePodRequests(vendors, ResourcesOf(containers, init_count));
      !r.ok()) {
    return r.status();
  }
  *has_devices = false;
  if (config.nvidia) {
    for (Container& c : containers) *has_devices |= MutateNvidiaContainer(*config.nvidia, c, spec);
  }
  const device::Annotations pod_annotations = PodAnnotations(pod);
  for (Container& c : containers) {
    Result<bool> found = MutateVendorContainer(
        vendors, device::AdmissionContext(pod_annotations, options.node_facts), c, mutated, spec);
    if (!found.ok()) return found.status();
    *has_devices |= *found;
  }
  return device::ParsePodRequests(vendors, ResourcesOf(containers, init_count));
}

}  // namespace hami::extender::admission_internal
