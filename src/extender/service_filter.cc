// SchedulerService::Filter: the extender's filter verb (see service.h).
#include <map>
#include <nlohmann/json.hpp>

#include "common/log.h"
#include "device/mig_allocation.h"
#include "extender/extender_args.h"
#include "extender/k8s_objects.h"
#include "extender/service.h"
#include "extender/service_internal.h"
#include "k8s/api_error.h"
#include "k8s/object.h"
#include "k8s/typed.h"

namespace hami::extender {

using scheduler::AssumeCache;
using scheduler::CardReason;
using scheduler::Decision;
using scheduler::HeldLockRef;
using scheduler::Ledger;
using scheduler::LedgerOptions;
using scheduler::NodeFailure;
using scheduler::NodeVerdict;
using scheduler::PodSpec;
using scheduler::QuotaRoom;
using scheduler::kAssignedNodeAnnotation;
using scheduler::kAssignedTimeAnnotation;

namespace {

using Json = nlohmann::json;
using service_internal::ErrorReply;
using service_internal::PodKey;

// When every card of every node offered failed on its type, the pod's type selectors name no
// card there: "; no GPU on these nodes has a type matching nvidia.com/use-gputype=\"X\" ...".
// Empty otherwise.
std::string NoTypeMatches(const Decision& d, const device::VendorRegistry& vendors,
                          const device::Annotations& annotations) {
  if (d.verdicts.empty()) return "";
  for (const NodeVerdict& v : d.verdicts) {
    const NodeFailure& f = v.failure;
    if (v.fit || f.kind != NodeFailure::Kind::kCards || f.total == 0 ||
        f.Count(CardReason::kCardTypeMismatch) != f.total) {
      return "";
    }
  }
  std::string selectors;
  for (const auto& vendor : vendors.vendors()) {
    const device::VendorAnnotationKeys& k = vendor->annotation_keys();
    for (const std::string* key : {&k.use_type, &k.nouse_type}) {
      if (key->empty()) continue;
      auto it = annotations.find(*key);
      if (it == annotations.end()) continue;
      selectors += (selectors.empty() ? "" : " and ") + *key + "=\"" + it->second + "\"";
    }
  }
  if (selectors.empty()) return "";  // a mode selector (vgpu-mode), not a type list
  return "; no GPU on these nodes has a type matching " + selectors +
         " (types match as substrings, ignoring case, '-', '_' and spaces)";
}

// The summary of a failed filter, grouped by reason: "no available node, 3 nodes do not meet:
// 2 CardInsufficientMemory (node-a, node-b); 1 NodeInsufficientDevice (node-c)".
std::string FailureSummary(const Decision& d, const device::VendorRegistry& vendors,
                           const device::Annotations& annotations) {
  std::map<std::string, std::vector<std::string>> by_reason;
  for (const auto& [node, reason] : d.FailedNodes()) by_reason[reason].push_back(node);
  std::string out = d.FailedMessage();
  if (by_reason.empty()) return out;
  out += ":";
  bool first = true;
  for (const auto& [reason, nodes] : by_reason) {
    out += first ? " " : "; ";
    first = false;
    out += std::to_string(nodes.size()) + " nodes " + reason + " (";
    for (size_t i = 0; i < nodes.size() && i < 5; ++i) out += (i ? ", " : "") + nodes[i];
    if (nodes.size() > 5) out += ", ...";
    out += ")";
  }
  return out + NoTypeMatches(d, vendors, annotations);
}

// An answer that keeps `nodes` (empty when none) and fails the rest with their reasons.
std::string FilterAnswer(const std::vector<std::string>& nodes,
                         const std::map<std::string, std::string>& failed) {
  Json out;
  out["nodenames"] = Json::array();
  for (const std::string& n : nodes) out["nodenames"].push_back(n);
  out["failedNodes"] = Json::object();
  for (const auto& [n, reason] : failed) out["failedNodes"][n] = reason;
  return out.dump();
}

// A pod that asks for no device is not ours to constrain: every offered node stays.
std::string PassThrough(const ExtenderArgs& args) {
  Json out = Json::object();
  if (args.has_names) {
    out["nodenames"] = Json::array();
    for (std::string_view v : args.names) out["nodenames"].push_back(std::string(v));
  } else if (!args.nodes.is_null()) {
    out["nodes"] = args.nodes;
  }
  return out.dump();
}

PodSpec PodSpecOf(const k8s::Object& pod) {
  PodSpec spec;
  spec.uid = k8s::Uid(pod);
  spec.name_space = k8s::Namespace(pod);
  spec.name = k8s::Name(pod);
  spec.annotations = AnnotationsOf(pod);
  return spec;
}

}  // namespace

std::string SchedulerService::FilterError(std::string message) {
  Count(&ServiceStats::filter_errors);
  return ErrorReply(message);
}

void SchedulerService::RecordFilterEvent(const k8s::ObjectPtr& pod, bool ok,
                                         const std::string& message) {
  events_.Record(k8s::EventSpec{pod, "Pod", ok ? "Normal" : "Warning",
                                ok ? "FilteringSucceed" : "FilteringFailed", message,
                                options_.scheduler_name, options_.identity});
}

std::vector<QuotaRoom> SchedulerService::QuotaRoomOf(const Ledger& ledger,
                                                     const PodSpec& spec) const {
  MutexLock q(quota_mu_);
  if (!quota_.HasQuota(spec.name_space)) return {};
  return quota_.Room(ledger, spec.name_space, spec.uid);
}

std::string SchedulerService::FilterSimulation(const std::string& pod_json, const Json& nodes) {
  Result<k8s::Object> pod = k8s::ParseObject(pod_json);
  if (!pod.ok()) return ErrorReply("pod: " + pod.status().message());
  Ledger scratch(vendors_, clock_, LedgerOptions{options_.reservation_ttl_seconds});
  std::map<std::string, Json> by_name;
  if (nodes.contains("items") && nodes["items"].is_array()) {
    for (const Json& n : nodes["items"]) {
      Status s = scratch.UpsertNode(NodeObjectOf(n));
      if (!s.ok()) HAMI_VLOG(4) << "simulation: node " << k8s::Name(n) << ": " << s.message();
      by_name[k8s::Name(n)] = n;
    }
  }
  PodSpec spec = PodSpecOf(*pod);
  Result<device::PodRequests> req = device::ParsePodRequests(vendors_, PodResourcesOf(*pod));
  if (!req.ok()) return ErrorReply(req.status().message());
  spec.requests = std::move(*req);
  std::vector<std::string> names;
  for (const auto& [n, _] : by_name) names.push_back(n);
  std::vector<std::string_view> views(names.begin(), names.end());
  Result<Decision> d = engine_.Place(scratch, spec, views);
  if (!d.ok()) return ErrorReply(d.status().message());
  Json out;
  out["failedNodes"] = Json::object();
  for (const auto& [n, reason] : d->FailedNodes()) out["failedNodes"][n] = reason;
  out["nodes"]["items"] = Json::array();
  if (d->fit()) out["nodes"]["items"].push_back(by_name[d->node]);
  return out.dump();
}

std::string SchedulerService::Filter(std::string_view body) {
  Count(&ServiceStats::filters);
  Result<ExtenderArgs> args = ParseExtenderArgs(body);
  if (!args.ok()) {
    return FilterError("extender args are not a JSON object: " + args.status().message());
  }
  if (!args->pod.is_object()) return FilterError("extender args missing pod");
  auto pod = std::make_shared<const k8s::Object>(std::move(args->pod));
  const std::string key = PodKey(k8s::Namespace(*pod), k8s::Name(*pod));
  PodSpec spec = PodSpecOf(*pod);
  Result<device::PodRequests> req = device::ParsePodRequests(vendors_, PodResourcesOf(*pod));
  if (!req.ok()) {
    std::string msg = "pod " + key + ": invalid device request: " + req.status().message();
    HAMI_LOG(Warning) << msg;
    RecordFilterEvent(pod, false, msg);
    return FilterError(msg);
  }
  spec.requests = std::move(*req);
  if (args->names_not_list) return FilterError("extender args: nodenames is not a list");
  if (spec.requests.Empty()) return PassThrough(*args);
  if (!args->has_names) {
    if (!args->nodes.is_object()) return FilterError("extender args carry no nodes");
    return FilterSimulation(pod->dump(), args->nodes);
  }
  if (spec.uid.empty()) return FilterError("pod " + key + " has no uid");
  if (Status ready = AwaitReady(); !ready.ok()) return FilterError(ready.message());
  // Views into `args`, which outlives them: no copy of thousands of node names per filter.
  return PlaceAndAnswer(pod, spec, key, args->names);
}

Status SchedulerService::WithdrawPlacement(const PodSpec& spec) {
  Json patch;
  patch["metadata"]["uid"] = spec.uid;  // a precondition: never another pod of that name
  Json& annotations = patch["metadata"]["annotations"];
  annotations[std::string(kAssignedNodeAnnotation)] = nullptr;
  annotations[std::string(kAssignedTimeAnnotation)] = nullptr;
  annotations[std::string(device::kMigAllocationsAnnotation)] = nullptr;
  for (const auto& vendor : vendors_.vendors()) {
    const device::VendorAnnotationKeys& k = vendor->annotation_keys();
    for (const std::string* key : {&k.to_allocate, &k.allocated}) {
      if (!key->empty()) annotations[*key] = nullptr;
    }
  }
  patch["metadata"]["labels"][std::string(kAssignedNodeAnnotation)] = nullptr;
  Result<k8s::Object> r =
      client_.Patch(k8s::kPods, spec.name_space, spec.name, k8s::PatchType::kMerge, patch.dump());
  if (r.ok() || k8s::IsNotFound(r.status())) return OkStatus();  // gone: nothing to withdraw
  return r.status();
}

std::string SchedulerService::PlaceAndAnswer(const k8s::ObjectPtr& pod, PodSpec& spec,
                                             const std::string& key,
                                             const std::vector<std::string_view>& nodes) {
  std::optional<HeldLockRef> release;
  std::string written_on;
  const std::string busy = cache_.PrepareToPlace(spec.uid, &release, &written_on);
  if (release) releaser_.QueueRelease(release->node, release->ns, release->name);
  if (busy.empty() && !written_on.empty()) {
    // The pod carries an earlier placement (its Binding failed, or a restart found it): that
    // must leave the pod before its devices go to anyone else, or a rebuilt ledger (a restart,
    // another instance) would count them for this pod and for their new holder.
    Status withdrawn = WithdrawPlacement(spec);
    if (!withdrawn.ok()) {
      std::string msg = "pod " + key + ": its earlier placement on " + written_on +
                        " could not be withdrawn (" + withdrawn.ToString() +
                        "); its devices stay reserved, retried at its next scheduling";
      HAMI_LOG(Warning) << msg;
      RecordFilterEvent(pod, false, msg);
      return FilterError(msg);
    }
    HAMI_LOG(Info) << "pod " << key << ": earlier placement on " << written_on
                   << " withdrawn; placing again";
    cache_.Forget(spec.uid);
  }
  if (!busy.empty()) {
    // kube-scheduler gave up on a bind that is still running (or whose outcome is unknown):
    // placing the pod again now could bind it twice. Every node fails until that settles.
    HAMI_LOG(Info) << "pod " << key << ": not placed again: " << busy;
    RecordFilterEvent(pod, false, busy);
    Count(&ServiceStats::bind_busy);
    std::map<std::string, std::string> failed;
    for (std::string_view v : nodes) failed.emplace(std::string(v), busy);
    return FilterAnswer({}, failed);
  }
  Result<AssumeCache::Placed> placed = cache_.PlaceAndAssume(
      engine_, spec, nodes, [&](const Ledger& ledger) { return QuotaRoomOf(ledger, spec); });
  if (!placed.ok()) return FilterError("pod " + key + ": " + placed.status().message());
  if (placed->replaced_after_race) Count(&ServiceStats::replaced_after_race);
  const Decision& d = placed->decision;
  if (!d.fit()) {
    std::string msg = FailureSummary(d, vendors_, spec.annotations);
    HAMI_LOG(Info) << "pod " << key << ": no node fits: " << msg;
    RecordFilterEvent(pod, false, msg);
    Count(&ServiceStats::filter_no_fit);
    return FilterAnswer({}, d.FailedNodes());
  }
  return RecordPlacement(pod, spec, key, d);
}

// The placement goes onto the pod (the source of truth from then on) in the bind, in one round
// trip with the node lock; until then the reservation holds the devices and the cache the patch.
std::string SchedulerService::RecordPlacement(const k8s::ObjectPtr& pod, const PodSpec& spec,
                                              const std::string& key, const Decision& d) {
  device::Annotations annos;
  const int64_t decided_at = clock_.NowUnixSeconds();
  Status enc = device::EncodePodDevices(
      vendors_, d.devices, d.container_count, &annos,
      device::PodWriteContext{d.node, decided_at, &spec.annotations, &spec.requests});
  if (!enc.ok()) {
    cache_.Forget(spec.uid);
    std::string msg =
        "pod " + key + ": placement on " + d.node + " not encodable: " + enc.ToString();
    HAMI_LOG(Warning) << msg;
    RecordFilterEvent(pod, false, msg);
    return FilterError(msg);
  }
  annos[std::string(kAssignedNodeAnnotation)] = d.node;
  annos[std::string(kAssignedTimeAnnotation)] = std::to_string(decided_at);
  if (!d.mig.empty()) {
    annos[std::string(device::kMigAllocationsAnnotation)] = device::EncodeMigAllocations(d.mig);
  }
  Json patch;
  for (const auto& [k, v] : annos) patch["metadata"]["annotations"][k] = v;
  patch["metadata"]["labels"][std::string(kAssignedNodeAnnotation)] = d.node;
  cache_.RecordPlacement(spec.uid, d.node, patch.dump());
  std::string msg = d.SucceedMessage();
  std::string lists;  // every vendor's device list written
  for (const auto& vendor : vendors_.vendors()) {
    auto it = annos.find(vendor->annotation_keys().allocated);
    if (it == annos.end()) continue;
    lists += (lists.empty() ? "" : " ") + std::string(vendor->Key()) + "=" + it->second;
  }
  HAMI_LOG(Info) << "pod " << key << ": " << msg << "; devices " << (lists.empty() ? "-" : lists);
  RecordFilterEvent(pod, true, msg);
  Count(&ServiceStats::filter_fit);
  return FilterAnswer({d.node}, d.FailedNodes());
}

}  // namespace hami::extender
