// BuildContext (what the placement of a pod needs to know about the pod, resolved once per
// filter against the ledger) and ShapeKey (the verdict cache's key for that context).
#include <algorithm>
#include <string>
#include <vector>

#include "scheduler/placement_internal.h"

namespace hami::scheduler::placement_internal {
namespace {

std::string_view Lookup(const device::Annotations& a, std::string_view key) {
  if (key.empty()) return {};
  auto it = a.find(key);
  return it == a.end() ? std::string_view() : std::string_view(it->second);
}

std::vector<std::string_view> CommaList(std::string_view v) {
  std::vector<std::string_view> out;
  for (std::string_view raw : device::text::Split(v, ',')) {
    std::string_view t = device::text::TrimSpace(raw);
    if (!t.empty()) out.push_back(t);
  }
  return out;
}

// The pod's scoring weights and its own node and GPU policies (annotations), with what applies
// reported in `resolved`. An error only for malformed scoring weights; a policy annotation that
// does not parse leaves the node's or the global policy in force.
Status ResolvePodPolicies(const PodSpec& pod, const EngineOptions& options,
                          const GpuPolicy& global_gpu, PodContext* ctx,
                          ResolvedPolicies* resolved) {
  if (std::string_view w = Lookup(pod.annotations, device::kDeviceScoringWeightsAnnotation);
      !device::text::TrimSpace(w).empty()) {
    Result<device::ScoringWeights> parsed = device::DecodeScoringWeights(w);
    if (!parsed.ok()) {
      return parsed.status().WithContext(std::string(device::kDeviceScoringWeightsAnnotation));
    }
    ctx->w = *parsed;
  }

  resolved->node = options.node_policy;
  resolved->gpu = global_gpu;
  if (std::string_view v = Lookup(pod.annotations, kNodeSchedulerPolicyAnnotation);
      ParseNodePolicy(v, &ctx->pod_node)) {
    ctx->has_pod_node = true;
    resolved->node = ctx->pod_node;
    resolved->node_source = PolicySource::kPod;
  }
  if (std::string_view v = Lookup(pod.annotations, kGpuSchedulerPolicyAnnotation); !v.empty()) {
    GpuPolicy p;
    if (ParseGpuPolicy(v, &p)) {
      ctx->has_pod_gpu = true;
      resolved->gpu = p;
      resolved->gpu_source = PolicySource::kPod;
      ctx->pod_gpu = std::move(p);
    }
    resolved->ignored =
        resolved->gpu_source == PolicySource::kPod ? ctx->pod_gpu.ignored : p.ignored;
  }
  return OkStatus();
}

// The folded type names of a comma list (empty entries dropped).
void AddFoldedTypes(std::string_view list, std::vector<std::string>* out) {
  // Case, '-', '_' and spaces do not count: users write "NVIDIA-GeForce-RTX-4090" for a card
  // that registers as "NVIDIA GeForce RTX 4090".
  for (std::string_view t : CommaList(list)) {
    if (std::string folded = device::text::FoldTypeName(t); !folded.empty()) {
      out->push_back(std::move(folded));
    }
  }
}

// The pod's selectors for `vendor` (its annotation keys) resolved against the ledger's string
// tables, and the vendor's traits the evaluator consults per device.
VendorFilter ResolveVendorFilter(const device::Vendor& vendor, const PodSpec& pod,
                                 const LedgerStrings& strs) {
  const device::VendorAnnotationKeys& k = vendor.annotation_keys();
  VendorFilter f;
  AddFoldedTypes(Lookup(pod.annotations, k.use_type), &f.use_types);
  AddFoldedTypes(Lookup(pod.annotations, k.nouse_type), &f.nouse_types);
  std::vector<std::string_view> use = CommaList(Lookup(pod.annotations, k.use_uuid));
  f.has_use_uuid = !use.empty();
  for (std::string_view u : use) f.use_uuids.push_back(strs.uuids.Find(u));
  for (std::string_view u : CommaList(Lookup(pod.annotations, k.nouse_uuid))) {
    uint32_t id = strs.uuids.Find(u);
    if (id != StringInterner::kNotFound) f.nouse_uuids.push_back(id);
  }
  if (!k.mode_select.empty() && pod.annotations.find(k.mode_select) != pod.annotations.end()) {
    f.has_mode = true;
    f.mode_exact = k.mode_select_exact;
    f.mode_value = std::string(Lookup(pod.annotations, k.mode_select));
    f.mig_allowed = f.mode_value.find(device::kModeMig) != std::string::npos;
  }
  bool bind = false;
  std::string_view nb = device::text::TrimSpace(Lookup(pod.annotations, k.numa_bind));
  f.numa_bind = !nb.empty() && device::text::ParseBool(nb, &bind) && bind;
  f.type_ok.assign(strs.types.size(), 0);
  f.mode_ok.assign(strs.modes.size(), 0);
  f.cores_in_units = vendor.cores_in_device_units();
  f.core_mask = vendor.cores_as_bitmask();
  f.device_type_in_list = vendor.lists_device_type();
  if (vendor.has_topology_rule()) f.topology = &vendor;
  f.equal_partitions = vendor.equal_partitions();
  f.one_device = vendor.one_device_per_pod();
  f.mutex_group = vendor.mutex_takes_group();
  f.link_score = vendor.scores_links(pod.annotations);
  if (vendor.uses_task_classes()) {
    f.share = &vendor;
    f.task_class =
        static_cast<uint8_t>(f.share->TaskClass(pod.annotations) % device::kTaskClassCount);
    f.no_cores = f.share->TaskTakesNoCores(f.task_class);
  }
  return f;
}

// Per vendor index, the quota room of the pod's namespace (-1: no limit).
void ResolveQuota(const device::VendorRegistry& vendors, const PodSpec& pod, PodContext* ctx) {
  ctx->quota_mem.assign(vendors.vendors().size(), -1);
  ctx->quota_cores.assign(vendors.vendors().size(), -1);
  for (const QuotaRoom& q : pod.quota) {
    for (size_t vi = 0; vi < vendors.vendors().size(); ++vi) {
      if (vendors.vendors()[vi]->Key() != q.vendor) continue;
      if (q.mem_mib) ctx->quota_mem[vi] = std::max<int64_t>(0, *q.mem_mib);
      if (q.cores) ctx->quota_cores[vi] = std::max<int64_t>(0, *q.cores);
      ctx->has_quota = ctx->has_quota || q.mem_mib || q.cores;
    }
  }
}

}  // namespace

Result<PodContext> BuildContext(const Ledger& ledger, const PodSpec& pod,
                                const EngineOptions& options, const GpuPolicy& global_gpu,
                                ResolvedPolicies* resolved) {
  PodContext ctx;
  ctx.ledger = &ledger;
  ctx.global_gpu = &global_gpu;
  ctx.global_node = options.node_policy;
  const device::VendorRegistry& vendors = ledger.vendors();
  HAMI_RETURN_IF_ERROR(ResolvePodPolicies(pod, options, global_gpu, &ctx, resolved));

  // Only the vendors the pod asks for need their selectors resolved (a cluster may enable two
  // dozen vendor modules; a pod uses one or two).
  std::vector<bool> asked(vendors.vendors().size(), false);
  for (const device::ContainerRequests& c : pod.requests.containers) {
    for (const ContainerRequest& r : c) {
      for (size_t vi = 0; vi < vendors.vendors().size(); ++vi) {
        if (vendors.vendors()[vi]->Key() == r.vendor) asked[vi] = true;
      }
    }
  }
  ctx.filters.resize(vendors.vendors().size());
  for (size_t vi = 0; vi < vendors.vendors().size(); ++vi) {
    if (!asked[vi]) continue;
    VendorFilter& f = ctx.filters[vi];
    f = ResolveVendorFilter(*vendors.vendors()[vi], pod, ledger.strings());
    ctx.any_link_score = ctx.any_link_score || f.link_score;
    if (f.share != nullptr && !ctx.has_task_class) {
      ctx.has_task_class = true;
      ctx.task_class = f.task_class;
    }
  }
  ResolveQuota(vendors, pod, &ctx);

  ctx.init_count = pod.requests.init_count;
  ctx.containers.resize(pod.requests.containers.size());
  for (size_t c = 0; c < pod.requests.containers.size(); ++c) {
    for (const ContainerRequest& r : pod.requests.containers[c]) {
      int found = -1;
      for (size_t vi = 0; vi < vendors.vendors().size(); ++vi) {
        if (vendors.vendors()[vi]->Key() == r.vendor) found = static_cast<int>(vi);
      }
      if (found < 0) return InvalidArgumentError("request for unknown vendor " + r.vendor);
      if (r.count <= 0) continue;
      ctx.containers[c].push_back(Req{static_cast<uint8_t>(found), r});
    }
  }
  return ctx;
}

// Everything in the context a node's verdict depends on besides the node itself, as bytes.
// The interned ids (UUID filters) are the ledger's: ids are never reused within a ledger, and
// other ledgers' nodes carry other versions.
std::string ShapeKey(const PodContext& ctx) {
  std::string k;
  auto num = [&k](int64_t v) { k.append(reinterpret_cast<const char*>(&v), sizeof v); };
  auto str = [&](std::string_view v) {
    num(static_cast<int64_t>(v.size()));
    k.append(v);
  };
  auto policy = [&](const GpuPolicy& p) {
    num(p.key_count);
    for (size_t i = 0; i < p.key_count; ++i) num(static_cast<int64_t>(p.keys[i]));
    num(p.mutex);
    num(p.topology);
    num(p.numa_first);
  };
  num(static_cast<int64_t>(ctx.filters.size()));
  for (const VendorFilter& f : ctx.filters) {
    num(static_cast<int64_t>(f.use_types.size()));
    for (const std::string& t : f.use_types) str(t);
    num(static_cast<int64_t>(f.nouse_types.size()));
    for (const std::string& t : f.nouse_types) str(t);
    num(f.has_use_uuid);
    num(static_cast<int64_t>(f.use_uuids.size()));
    for (uint32_t u : f.use_uuids) num(u);
    num(static_cast<int64_t>(f.nouse_uuids.size()));
    for (uint32_t u : f.nouse_uuids) num(u);
    num(f.has_mode);
    str(f.mode_value);
    num(f.numa_bind);
    num(f.mig_allowed);
    num(f.task_class);
    num(f.link_score);
  }
  num(static_cast<int64_t>(ctx.containers.size()));
  for (const std::vector<Req>& c : ctx.containers) {
    num(static_cast<int64_t>(c.size()));
    for (const Req& r : c) {
      num(r.vendor);
      str(r.r.vendor);
      num(r.r.count);
      num(r.r.mem_mib);
      num(r.r.mem_percent);
      num(r.r.cores);
      num(r.r.priority);
    }
  }
  num(static_cast<int64_t>(ctx.init_count));
  num(ctx.w.slot);
  num(ctx.w.core);
  num(ctx.w.memory);
  num(ctx.has_pod_gpu);
  if (ctx.has_pod_gpu) policy(ctx.pod_gpu);
  num(ctx.has_pod_node);
  num(static_cast<int64_t>(ctx.pod_node));
  policy(*ctx.global_gpu);
  num(static_cast<int64_t>(ctx.global_node));
  num(ctx.has_quota);
  for (int64_t q : ctx.quota_mem) num(q);
  for (int64_t q : ctx.quota_cores) num(q);
  return k;
}

}  // namespace hami::scheduler::placement_internal
