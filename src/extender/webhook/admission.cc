#include "extender/webhook/admission.h"

#include <algorithm>
#include <nlohmann/json.hpp>
#include <optional>
#include <utility>
#include <vector>

#include "common/base64.h"
#include "common/log.h"
#include "device/request.h"
#include "device/resource_quantity.h"
#include "device/text_util.h"

namespace hami::scheduler {
namespace {

using Json = nlohmann::json;

constexpr std::string_view kAdmissionV1 = "admission.k8s.io/v1";
constexpr std::string_view kAdmissionV1beta1 = "admission.k8s.io/v1beta1";
constexpr std::string_view kDefaultScheduler = "default-scheduler";
constexpr std::string_view kTaskPriorityEnv = "CUDA_TASK_PRIORITY";
constexpr std::string_view kCorePolicyEnv = "GPU_CORE_UTILIZATION_POLICY";
constexpr std::string_view kVisibleDevicesEnv = "NVIDIA_VISIBLE_DEVICES";

// Deeper documents are refused before parsing: nlohmann copies, compares and prints recursively,
// and a Pod is nowhere near this deep.
constexpr size_t kMaxDepth = 256;

constexpr int32_t kBadRequest = 400;
constexpr int32_t kForbidden = 403;

// True when `text` nests arrays/objects deeper than `limit` (brackets inside strings ignored).
bool NestedDeeperThan(std::string_view text, size_t limit) {
  size_t depth = 0;
  bool in_string = false;
  for (size_t i = 0; i < text.size(); ++i) {
    char c = text[i];
    if (in_string) {
      if (c == '\\') {
        ++i;
      } else if (c == '"') {
        in_string = false;
      }
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > limit) return true;
    } else if ((c == ']' || c == '}') && depth > 0) {
      --depth;
    }
  }
  return false;
}

Result<Json> ParseDocument(std::string_view text, std::string_view what) {
  if (NestedDeeperThan(text, kMaxDepth)) {
    return InvalidArgumentError(std::string(what) + " nests deeper than " +
                                std::to_string(kMaxDepth) + " levels");
  }
  Json doc = Json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded()) return InvalidArgumentError(std::string(what) + " is not valid JSON");
  return doc;
}

// The string member `key` of `obj`, or "" when absent or not a string.
std::string_view StringMember(const Json& obj, std::string_view key) {
  if (!obj.is_object()) return {};
  auto it = obj.find(key);
  if (it == obj.end() || !it->is_string()) return {};
  return it->get_ref<const std::string&>();
}

// One container of the pod being mutated: its JSON (inside the mutated copy) and the resource
// view the request rules read, kept in step with every limit the webhook adds.
struct Container {
  Json* json = nullptr;
  std::string path;  // "spec.containers[0]", for messages
  device::ContainerResources resources;
  bool privileged = false;
};

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

// Reads spec.<field> (an optional array of containers) of the mutated pod.
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

AdmissionDecision Refuse(int32_t code, std::string message) {
  AdmissionDecision d;
  d.allowed = false;
  d.code = code;
  d.message = std::move(message);
  return d;
}

// "add /spec/schedulerName, add /spec/containers/0/env" for the log line.
std::string DescribePatch(const Json& patch) {
  std::string out;
  for (const Json& op : patch) {
    if (!out.empty()) out += ", ";
    out += std::string(StringMember(op, "op")) + " " + std::string(StringMember(op, "path"));
  }
  return out;
}

AdmissionDecision Review(const Json& pod, std::string_view request_ns,
                         const device::VendorRegistry& vendors, const device::DeviceConfig& config,
                         const WebhookOptions& options, const QuotaChecker* quota) {
  const Json* metadata = pod.is_object() && pod.contains("metadata") ? &pod["metadata"] : nullptr;
  std::string ns(request_ns);
  if (ns.empty() && metadata) ns = StringMember(*metadata, "namespace");
  std::string name = metadata ? std::string(StringMember(*metadata, "name")) : "";
  if (name.empty() && metadata) name = std::string(StringMember(*metadata, "generateName")) + "*";
  const std::string who = "webhook: pod " + ns + "/" + name + ": ";

  auto refuse = [&](int32_t code, std::string message) {
    // A malformed pod is worth a warning; a policy refusal is routine.
    if (code == kBadRequest) {
      HAMI_LOG(Warning) << who << "denied: " << message;
    } else {
      HAMI_LOG(Info) << who << "denied: " << message;
    }
    return Refuse(code, std::move(message));
  };

  if (!pod.is_object()) return refuse(kBadRequest, "the object is not a Pod");
  if (std::string_view kind = StringMember(pod, "kind"); !kind.empty() && kind != "Pod") {
    return refuse(kBadRequest, "the object is a " + std::string(kind) + ", not a Pod");
  }

  Json mutated = pod;
  auto spec_it = mutated.find("spec");
  if (spec_it == mutated.end() || !spec_it->is_object()) {
    return refuse(kBadRequest, "pod has no spec");
  }
  Json& spec = *spec_it;
  std::vector<Container> containers;
  if (Status s = ReadContainers(spec, "initContainers", &containers); !s.ok()) {
    return refuse(kBadRequest, s.message());
  }
  const size_t init_count = containers.size();
  if (Status s = ReadContainers(spec, "containers", &containers); !s.ok()) {
    return refuse(kBadRequest, s.message());
  }
  if (containers.size() == init_count) return refuse(kForbidden, "pod has no containers");

  std::string_view scheduler = StringMember(spec, "schedulerName");
  if (!scheduler.empty() &&
      (scheduler != kDefaultScheduler || !options.force_overwrite_default_scheduler) &&
      scheduler != options.scheduler_name) {
    HAMI_VLOG(4) << who << "allowed unchanged: schedulerName is " << scheduler;
    return AdmissionDecision{};
  }

  // Enflame's DRS-shared GCUs (HAMi v2.10's Enflame default) are not scheduled here yet: refused,
  // saying what is, rather than admitted to wait in Pending without a word.
  if (auto enflame = config.vendors.find("enflame"); enflame != config.vendors.end()) {
    // HAMi v2.10's two ways to ask: a DRS slice count, or memory/cores it turns into a profile.
    const device::VendorResources& e = enflame->second;
    const std::string drs_names[] = {e.Extra("resourceNameDRSGCU", "enflame.com/drs-gcu"),
                                     e.Extra("resourceNameGCUMemory", "enflame.com/gcu-memory"),
                                     e.Extra("resourceNameGCUCore", "enflame.com/gcu-core")};
    for (const Container& c : containers) {
      auto asked = std::find_if(std::begin(drs_names), std::end(drs_names), [&](const auto& n) {
        return c.resources.limits.count(n) > 0 || c.resources.requests.count(n) > 0;
      });
      if (asked == std::end(drs_names)) continue;
      return refuse(kForbidden,
                    c.path + " asks for " + *asked +
                        ": Enflame's DRS-shared GCUs are not scheduled by hami-cpp yet; ask for " +
                        e.Extra("resourceNameVGCU", "enflame.com/vgcu") + " (with " +
                        e.Extra("resourceNameVGCUPercentage", "enflame.com/vgcu-percentage") +
                        ") or for whole GCUs (" + e.Extra("resourceNameGCU", "enflame.com/gcu") +
                        ")");
    }
  }

  // Invalid quantities are refused with the reason before anything is changed.
  if (Result<device::PodRequests> r =
          device::ParsePodRequests(vendors, ResourcesOf(containers, init_count));
      !r.ok()) {
    return refuse(kBadRequest, r.status().message());
  }

  bool has_devices = false;
  if (config.nvidia) {
    for (Container& c : containers) has_devices |= MutateNvidiaContainer(*config.nvidia, c, spec);
  }
  const device::Annotations pod_annotations = PodAnnotations(pod);
  for (Container& c : containers) {
    Result<bool> found = MutateVendorContainer(
        vendors, device::AdmissionContext(pod_annotations, options.node_facts), c, mutated, spec);
    if (!found.ok()) return refuse(kBadRequest, found.status().message());
    has_devices |= *found;
  }
  Result<device::PodRequests> requests =
      device::ParsePodRequests(vendors, ResourcesOf(containers, init_count));
  if (!requests.ok()) return refuse(kBadRequest, requests.status().message());
  has_devices |= !requests->Empty();

  if (has_devices) {
    for (const Container& c : containers) {
      if (c.privileged)
        return refuse(kForbidden, "container " + c.resources.name + " is privileged");
    }
    if (!options.scheduler_name.empty()) {
      spec["schedulerName"] = options.scheduler_name;
      if (!StringMember(spec, "nodeName").empty()) {
        return refuse(kForbidden, "pod has node assigned");
      }
    }
    if (quota != nullptr) {
      for (const auto& vendor : vendors.vendors()) {
        const device::ResourceNames& names = vendor->resource_names();
        if (names.memory.empty() && names.core.empty()) continue;
        // Init containers run one after another, app containers together: the pod's peak is the
        // larger of the biggest init container and the sum of the app containers.
        int64_t app_mem = 0, app_cores = 0, init_mem = 0, init_cores = 0;
        bool asks = false;
        for (size_t i = 0; i < requests->containers.size(); ++i) {
          for (const device::ContainerRequest& req : requests->containers[i]) {
            if (req.vendor != vendor->Key()) continue;
            asks = true;
            int64_t mem = int64_t{req.mem_mib} * req.count;
            int64_t cores = int64_t{req.cores} * req.count;
            if (i < requests->init_count) {
              init_mem = std::max(init_mem, mem);
              init_cores = std::max(init_cores, cores);
            } else {
              app_mem += mem;
              app_cores += cores;
            }
          }
        }
        if (!asks) continue;
        Status fits = quota->Check(ns, vendor->Key(), std::max(app_mem, init_mem),
                                   std::max(app_cores, init_cores));
        if (!fits.ok()) {
          return refuse(kForbidden, "exceeding resource quota: " + fits.message());
        }
      }
    }
  }

  AdmissionDecision decision;
  Json patch = Json::diff(pod, mutated);
  if (patch.empty()) {
    HAMI_VLOG(4) << who << "allowed unchanged: no HAMi devices requested";
    return decision;
  }
  decision.patch = patch.dump();
  HAMI_LOG(Info) << who << "allowed"
                 << (has_devices && !options.scheduler_name.empty()
                         ? ", schedulerName set to " + options.scheduler_name
                         : std::string())
                 << "; patch: " << DescribePatch(patch);
  return decision;
}

Result<std::string> HandleReview(std::string_view body, const device::VendorRegistry& vendors,
                                 const device::DeviceConfig& config, const WebhookOptions& options,
                                 const QuotaChecker* quota) {
  HAMI_ASSIGN_OR_RETURN(Json review, ParseDocument(body, "AdmissionReview body"));
  if (!review.is_object()) return InvalidArgumentError("AdmissionReview body is not an object");
  std::string_view version = StringMember(review, "apiVersion");
  if (version != kAdmissionV1 && version != kAdmissionV1beta1) {
    return InvalidArgumentError("AdmissionReview apiVersion " + device::text::Quote(version) +
                                " is neither " + std::string(kAdmissionV1) + " nor " +
                                std::string(kAdmissionV1beta1));
  }
  if (std::string_view kind = StringMember(review, "kind"); kind != "AdmissionReview") {
    return InvalidArgumentError("body kind " + device::text::Quote(kind) +
                                " is not AdmissionReview");
  }
  auto request = review.find("request");
  if (request == review.end() || !request->is_object()) {
    return InvalidArgumentError("AdmissionReview has no request");
  }
  std::string_view uid = StringMember(*request, "uid");
  if (uid.empty()) return InvalidArgumentError("AdmissionReview request has no uid");

  AdmissionDecision decision;
  std::string_view requested_kind;
  if (auto k = request->find("kind"); k != request->end())
    requested_kind = StringMember(*k, "kind");
  auto object = request->find("object");
  if (object == request->end() || !object->is_object()) {
    decision = Refuse(kBadRequest, "AdmissionReview request has no object");
  } else if (!requested_kind.empty() && requested_kind != "Pod") {
    decision = Refuse(kBadRequest, "AdmissionReview request is for a " +
                                       std::string(requested_kind) + ", not a Pod");
  } else {
    decision =
        Review(*object, StringMember(*request, "namespace"), vendors, config, options, quota);
  }
  if (!decision.allowed && (object == request->end() || !object->is_object())) {
    HAMI_LOG(Warning) << "webhook: request " << uid << ": denied: " << decision.message;
  }

  Json response = {{"uid", uid}, {"allowed", decision.allowed}};
  if (!decision.allowed) {
    response["status"] = {{"code", decision.code},
                          {"reason", decision.code == kForbidden ? "Forbidden" : "BadRequest"},
                          {"message", decision.message}};
  }
  if (!decision.patch.empty()) {
    response["patchType"] = "JSONPatch";
    response["patch"] = Base64Encode(decision.patch);
  }
  Json answer = {{"apiVersion", version}, {"kind", "AdmissionReview"}, {"response", response}};
  return answer.dump();
}

}  // namespace

AdmissionDecision ReviewPod(std::string_view pod_json, std::string_view ns,
                            const device::VendorRegistry& vendors,
                            const device::DeviceConfig& config, const WebhookOptions& options,
                            const QuotaChecker* quota) {
  try {
    Result<Json> pod = ParseDocument(pod_json, "pod");
    if (!pod.ok()) return Refuse(kBadRequest, pod.status().message());
    return Review(*pod, ns, vendors, config, options, quota);
  } catch (const Json::exception& e) {
    // Every input was validated before use; reaching here is a bug, reported rather than thrown.
    HAMI_LOG(Error) << "webhook: unexpected JSON error: " << e.what();
    return Refuse(kBadRequest, std::string("internal error reading the pod: ") + e.what());
  }
}

Result<std::string> HandleAdmissionReview(std::string_view body,
                                          const device::VendorRegistry& vendors,
                                          const device::DeviceConfig& config,
                                          const WebhookOptions& options,
                                          const QuotaChecker* quota) {
  try {
    Result<std::string> answer = HandleReview(body, vendors, config, options, quota);
    if (!answer.ok()) HAMI_LOG(Warning) << "webhook: bad request: " << answer.status().message();
    return answer;
  } catch (const Json::exception& e) {
    HAMI_LOG(Error) << "webhook: unexpected JSON error: " << e.what();
    return InternalError(std::string("webhook: ") + e.what());
  }
}

}  // namespace hami::scheduler
