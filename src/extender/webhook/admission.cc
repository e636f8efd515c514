#include "extender/webhook/admission.h"

#include <algorithm>
#include <nlohmann/json.hpp>
#include <optional>
#include <utility>
#include <vector>

#include "common/base64.h"
#include "common/log.h"
#include "device/nvidia/nvidia_vendor.h"
#include "device/text_util.h"
#include "extender/webhook/admission_internal.h"

namespace hami::extender {

std::string_view admission_internal::StringMember(const Json& obj, std::string_view key) {
  if (!obj.is_object()) return {};
  auto it = obj.find(key);
  if (it == obj.end() || !it->is_string()) return {};
  return it->get_ref<const std::string&>();
}

namespace {

using admission_internal::Container;
using admission_internal::Json;
using admission_internal::MutateContainers;
using admission_internal::ReadContainers;
using admission_internal::StringMember;

constexpr std::string_view kAdmissionV1 = "admission.k8s.io/v1";
constexpr std::string_view kAdmissionV1beta1 = "admission.k8s.io/v1beta1";
constexpr std::string_view kDefaultScheduler = "default-scheduler";

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

AdmissionDecision Refuse(int32_t code, std::string message) {
  AdmissionDecision d;
  d.allowed = false;
  d.code = code;
  d.message = std::move(message);
  return d;
}

// Why Review refuses a pod: kBadRequest when it is malformed, kForbidden when a policy says no.
struct Denial {
  int32_t code;
  std::string message;
};

// Refuse() with its log line: a malformed pod is worth a warning; a policy refusal is routine.
AdmissionDecision RefuseLogged(const std::string& who, Denial denial) {
  if (denial.code == kBadRequest) {
    HAMI_LOG(Warning) << who << "denied: " << denial.message;
  } else {
    HAMI_LOG(Info) << who << "denied: " << denial.message;
  }
  return Refuse(denial.code, std::move(denial.message));
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

// The "webhook: pod <ns>/<name>: " prefix of Review's log lines. `*ns` becomes the namespace the
// pod is admitted to: the request's, else the pod's own.
std::string ReviewSubject(const Json& pod, std::string_view request_ns, std::string* ns) {
  const Json* metadata = pod.is_object() && pod.contains("metadata") ? &pod["metadata"] : nullptr;
  *ns = std::string(request_ns);
  if (ns->empty() && metadata) *ns = StringMember(*metadata, "namespace");
  std::string name = metadata ? std::string(StringMember(*metadata, "name")) : "";
  if (name.empty() && metadata) name = std::string(StringMember(*metadata, "generateName")) + "*";
  return "webhook: pod " + *ns + "/" + name + ": ";
}

// Reads the init containers, then the app containers, of the mutated pod's `spec`;
// `*init_count` tells them apart.
std::optional<Denial> ReadPodContainers(Json& spec, std::vector<Container>* containers,
                                        size_t* init_count) {
  if (Status s = ReadContainers(spec, "initContainers", containers); !s.ok()) {
    return Denial{kBadRequest, s.message()};
  }
  *init_count = containers->size();
  if (Status s = ReadContainers(spec, "containers", containers); !s.ok()) {
    return Denial{kBadRequest, s.message()};
  }
  if (containers->size() == *init_count) return Denial{kForbidden, "pod has no containers"};
  return std::nullopt;
}

// The scheduler the pod names when that is not ours to take over; "" when it is ours.
std::string_view OtherScheduler(const Json& spec, const WebhookOptions& options) {
  std::string_view scheduler = StringMember(spec, "schedulerName");
  if (!scheduler.empty() &&
      (scheduler != kDefaultScheduler || !options.force_overwrite_default_scheduler) &&
      scheduler != options.scheduler_name) {
    return scheduler;
  }
  return {};
}

// Enflame's DRS-shared GCUs (HAMi v2.10's Enflame default) are not scheduled here yet: a pod
// asking for them is refused, saying what is, rather than admitted to wait in Pending unexplained.
std::optional<Denial> EnflameDrsDenial(const device::DeviceConfig& config,
                                       const std::vector<Container>& containers) {
  auto enflame = config.vendors.find("enflame");
  if (enflame == config.vendors.end()) return std::nullopt;
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
    return Denial{kForbidden,
                  c.path + " asks for " + *asked +
                      ": Enflame's DRS-shared GCUs are not scheduled by hami-cpp yet; ask for " +
                      e.Extra("resourceNameVGCU", "enflame.com/vgcu") + " (with " +
                      e.Extra("resourceNameVGCUPercentage", "enflame.com/vgcu-percentage") +
                      ") or for whole GCUs (" + e.Extra("resourceNameGCU", "enflame.com/gcu") +
                      ")"};
  }
  return std::nullopt;
}

// What a pod asks of one vendor at its peak: init containers run one after another, app
// containers together, so the peak is the larger of the biggest init container and the sum of
// the app containers.
struct PeakUse {
  int64_t mem = 0, cores = 0;
  bool asks = false;  // whether any container asks for this vendor's devices
};

PeakUse PeakUseOf(const device::PodRequests& requests, std::string_view vendor_key) {
  int64_t app_mem = 0, app_cores = 0, init_mem = 0, init_cores = 0;
  PeakUse peak;
  for (size_t i = 0; i < requests.containers.size(); ++i) {
    for (const device::ContainerRequest& req : requests.containers[i]) {
      if (req.vendor != vendor_key) continue;
      peak.asks = true;
      int64_t mem = int64_t{req.mem_mib} * req.count;
      int64_t cores = int64_t{req.cores} * req.count;
      if (i < requests.init_count) {
        init_mem = std::max(init_mem, mem);
        init_cores = std::max(init_cores, cores);
      } else {
        app_mem += mem;
        app_cores += cores;
      }
    }
  }
  peak.mem = std::max(app_mem, init_mem);
  peak.cores = std::max(app_cores, init_cores);
  return peak;
}

// The first vendor quota in namespace `ns` the pod's peak use would exceed, checked in vendor
// order; OK when every one fits.
Status CheckQuota(const QuotaChecker& quota, const std::string& ns,
                  const device::VendorRegistry& vendors, const device::PodRequests& requests) {
  for (const auto& vendor : vendors.vendors()) {
    const device::ResourceNames& names = vendor->resource_names();
    if (names.memory.empty() && names.core.empty()) continue;
    PeakUse peak = PeakUseOf(requests, vendor->Key());
    if (!peak.asks) continue;
    Status fits = quota.Check(ns, vendor->Key(), peak.mem, peak.cores);
    if (!fits.ok()) return fits;
  }
  return OkStatus();
}

// The rules for a pod that asks for devices: no privileged container, our scheduler set in
// `spec` (and no node assigned already), and the namespace quota, checked in that order.
std::optional<Denial> AdmitDevicePod(const std::vector<Container>& containers, Json& spec,
                                     const device::PodRequests& requests, const std::string& ns,
                                     const device::VendorRegistry& vendors,
                                     const WebhookOptions& options, const QuotaChecker* quota) {
  for (const Container& c : containers) {
    if (c.privileged) return Denial{kForbidden, "container " + c.resources.name + " is privileged"};
  }
  if (!options.scheduler_name.empty()) {
    spec["schedulerName"] = options.scheduler_name;
    if (!StringMember(spec, "nodeName").empty()) {
      return Denial{kForbidden, "pod has node assigned"};
    }
  }
  if (quota != nullptr) {
    if (Status fits = CheckQuota(*quota, ns, vendors, requests); !fits.ok()) {
      return Denial{kForbidden, "exceeding resource quota: " + fits.message()};
    }
  }
  return std::nullopt;
}

// Upstream's B11: with nvidia.com/vgpu-mode mig, a container asking for several devices gets
// several MIG devices, but a CUDA process enumerates only one MIG device, so one process uses
// only the first. The pod is admitted (several processes, each given one device, do work) with
// a warning per such container.
std::vector<std::string> MigWarnings(const Json& pod, const std::vector<Container>& containers,
                                     const device::PodRequests& requests) {
  std::vector<std::string> out;
  const Json* annotations = nullptr;
  if (auto m = pod.find("metadata"); m != pod.end() && m->is_object()) {
    if (auto a = m->find("annotations"); a != m->end() && a->is_object()) annotations = &*a;
  }
  if (annotations == nullptr) return out;
  // The same test as the scheduler's mode selection: the device mode is a substring of it.
  std::string_view mode = StringMember(*annotations, device::kNvidiaVgpuMode);
  if (mode.find(device::kModeMig) == std::string_view::npos) return out;
  for (size_t i = 0; i < containers.size() && i < requests.containers.size(); ++i) {
    for (const device::ContainerRequest& r : requests.containers[i]) {
      if (r.vendor != device::kNvidiaVendorKey || r.count <= 1) continue;
      out.push_back(containers[i].path + " asks for " + std::to_string(r.count) +
                    " MIG devices, but a CUDA process sees only one MIG device: run one process "
                    "per device (CUDA_VISIBLE_DEVICES set to one MIG UUID each) or ask for one "
                    "larger instance");
    }
  }
  return out;
}

// Admits the pod with the patch from `pod` to `mutated` (none when they are equal), logged.
AdmissionDecision Admit(const Json& pod, const Json& mutated, const std::string& who,
                        bool has_devices, const WebhookOptions& options) {
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

AdmissionDecision Review(const Json& pod, std::string_view request_ns,
                         const device::VendorRegistry& vendors, const device::DeviceConfig& config,
                         const WebhookOptions& options, const QuotaChecker* quota) {
  std::string ns;
  const std::string who = ReviewSubject(pod, request_ns, &ns);
  if (!pod.is_object()) return RefuseLogged(who, {kBadRequest, "the object is not a Pod"});
  if (std::string_view kind = StringMember(pod, "kind"); !kind.empty() && kind != "Pod") {
    return RefuseLogged(who,
                        {kBadRequest, "the object is a " + std::string(kind) + ", not a Pod"});
  }

  Json mutated = pod;
  auto spec_it = mutated.find("spec");
  if (spec_it == mutated.end() || !spec_it->is_object()) {
    return RefuseLogged(who, {kBadRequest, "pod has no spec"});
  }
  Json& spec = *spec_it;
  std::vector<Container> containers;
  size_t init_count = 0;
  if (std::optional<Denial> d = ReadPodContainers(spec, &containers, &init_count)) {
    return RefuseLogged(who, std::move(*d));
  }
  if (std::string_view scheduler = OtherScheduler(spec, options); !scheduler.empty()) {
    HAMI_VLOG(4) << who << "allowed unchanged: schedulerName is " << scheduler;
    return AdmissionDecision{};
  }
  if (std::optional<Denial> d = EnflameDrsDenial(config, containers)) {
    return RefuseLogged(who, std::move(*d));
  }

  bool has_devices = false;
  Result<device::PodRequests> requests = MutateContainers(
      pod, mutated, spec, containers, init_count, vendors, config, options, &has_devices);
  if (!requests.ok()) return RefuseLogged(who, {kBadRequest, requests.status().message()});
  has_devices |= !requests->Empty();
  if (has_devices) {
    if (std::optional<Denial> d =
            AdmitDevicePod(containers, spec, *requests, ns, vendors, options, quota)) {
      return RefuseLogged(who, std::move(*d));
    }
  }
  AdmissionDecision decision = Admit(pod, mutated, who, has_devices, options);
  decision.warnings = MigWarnings(pod, containers, *requests);
  for (const std::string& w : decision.warnings) HAMI_LOG(Info) << who << "warned: " << w;
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
  if (!decision.warnings.empty()) response["warnings"] = decision.warnings;
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

}  // namespace hami::extender
