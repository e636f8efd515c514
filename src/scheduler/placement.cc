#include "scheduler/placement.h"

#include <cstdio>
#include <memory>
#include <unordered_map>

#include "common/log.h"
#include "common/thread_annotations.h"
#include "scheduler/placement_internal.h"

namespace hami::scheduler {

using placement_internal::Assign;
using placement_internal::BuildContext;
using placement_internal::EvaluateNode;
using placement_internal::PodContext;
using placement_internal::Req;
using placement_internal::Scratch;
using placement_internal::ShapeKey;

namespace {

std::string FormatScore(double s) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.2f", s);
  return buf;
}

}  // namespace

std::map<std::string, std::string> Decision::FailedNodes() const {
  std::map<std::string, std::string> out;
  for (const NodeVerdict& v : verdicts) {
    if (!v.fit) out.emplace(std::string(v.node), v.failure.ToString());
  }
  return out;
}

std::string Decision::SucceedMessage() const {
  // The chosen node first, then others in request order; at most kMaxListed, so events and log
  // lines stay readable on clusters of thousands of nodes.
  constexpr size_t kMaxListed = 10;
  size_t fit_count = 0;
  std::string fits;
  if (chosen >= 0) {
    fits = std::string(verdicts[chosen].node) + ":" + FormatScore(verdicts[chosen].score);
  }
  size_t listed = fits.empty() ? 0 : 1;
  for (size_t i = 0; i < verdicts.size(); ++i) {
    const NodeVerdict& v = verdicts[i];
    if (!v.fit) continue;
    ++fit_count;
    if (static_cast<int32_t>(i) == chosen) continue;
    if (listed < kMaxListed) {
      if (!fits.empty()) fits += ",";
      fits += std::string(v.node) + ":" + FormatScore(v.score);
      ++listed;
    } else if (listed == kMaxListed) {
      fits += ",...";
      ++listed;
    }
  }
  return "find fit node(" + node + "), " + std::to_string(verdicts.size() - fit_count) +
         " nodes not fit, " + std::to_string(fit_count) + " nodes fit(" + fits + ")";
}

std::string Decision::FailedMessage() const {
  size_t unfit = 0;
  for (const NodeVerdict& v : verdicts) unfit += v.fit ? 0 : 1;
  return "no available node, " + std::to_string(unfit) + " nodes do not meet";
}

Reservation Decision::ToReservation(const PodSpec& pod) const {
  Reservation r;
  r.uid = pod.uid;
  r.name_space = pod.name_space;
  r.name = pod.name;
  r.node = node;
  r.devices = devices;
  r.init_container_count = init_container_count;
  r.mig = mig;
  r.task_class = task_class;
  return r;
}

namespace {

// The decision's account of what the pod asks for, before any node is judged.
void DescribeRequest(const PodSpec& pod, const PodContext& ctx, Decision* d) {
  d->weights = ctx.w;
  d->container_count = pod.requests.containers.size();
  d->init_container_count = pod.requests.init_count;
  d->requests_devices = !pod.requests.Empty();
  d->task_class = ctx.task_class;
}

// Writes the chosen node's assignment (`assigns`, recorded by re-evaluating the node) into
// d->devices and d->mig, in the annotation's terms: UUIDs, types, memory and cores per container.
void AddDevices(const Ledger& ledger, const PodContext& ctx, const LedgerNode& node,
                const std::vector<Assign>& assigns, Decision* d) {
  const device::VendorRegistry& vendors = ledger.vendors();
  for (const std::vector<Req>& c : ctx.containers) {
    for (const Req& r : c) {
      d->devices[std::string(vendors.vendors()[r.vendor]->Key())].resize(d->container_count);
    }
  }
  for (const Assign& a : assigns) {
    const LedgerDevice& dev = node.devices[a.dev];
    std::string key(vendors.vendors()[a.vendor]->Key());
    device::ContainerDevices& list = d->devices[key][a.container];
    if (a.mig_profile >= 0) {
      device::MigAllocation m;
      m.container_index = a.container;
      m.device_index = static_cast<int32_t>(list.size());
      m.gpu_uuid = std::string(ledger.strings().uuids.Get(dev.uuid));
      m.profile = node.mig->profiles[a.dev][a.mig_profile].name;
      m.placement = a.placement;
      d->mig.push_back(std::move(m));
    }
    device::ContainerDevice cd;
    cd.uuid = std::string(ledger.strings().uuids.Get(dev.uuid));
    std::string_view type = ledger.strings().types.Get(dev.type);
    // A type the list's separators would break is replaced by the vendor key.
    cd.type = ctx.filters[a.vendor].device_type_in_list &&
                      type.find_first_of(",:;") == std::string_view::npos && !type.empty()
                  ? std::string(type)
                  : key;
    cd.mem_mib = a.mem;
    cd.cores = a.cores;
    cd.index = static_cast<int32_t>(dev.index);
    cd.devcore = dev.devcore;
    list.push_back(std::move(cd));
  }
}

// Sets d->node to the chosen verdict's node and materialises its assignment: the node is
// evaluated again, recording the devices it takes (the evaluation is deterministic). False when
// the node no longer fits.
bool MaterialiseChoice(const Ledger& ledger, const PodContext& ctx, Decision* d) {
  const NodeVerdict& win = d->verdicts[d->chosen];
  d->node = std::string(win.node);
  Scratch rec;
  rec.record = true;
  NodeVerdict check;
  EvaluateNode(ctx, rec, static_cast<uint32_t>(win.slot), &check);
  if (!check.fit) return false;
  AddDevices(ledger, ctx, ledger.nodes()[win.slot], rec.assigns, d);
  return true;
}

struct CachedVerdict {
  uint64_t version = 0;  // LedgerNode::version the verdict was computed at; 0 = none
  bool fit = false;
  NodePolicy policy = NodePolicy::kBinpack;
  double score = 0;
  double preference = 0;
  NodeFailure failure;
};

}  // namespace

// Per request shape, the last verdict of every node slot. Bounded: past kMaxShapes shapes the
// least recently used one is dropped (at most 64 x nodes entries of about 64 bytes: 20 MiB at
// 5,000 nodes; a cluster's pods usually come in a handful of shapes).
class VerdictCache {
 public:
  struct Shape {
    Mutex mu;  // held while a placement reads and fills the entries
    std::vector<CachedVerdict> by_slot GUARDED_BY(mu);
  };

  std::shared_ptr<Shape> Get(const std::string& key) {
    MutexLock lock(mu_);
    Entry& e = shapes_[key];
    if (!e.shape) {
      e.shape = std::make_shared<Shape>();
      if (shapes_.size() > kMaxShapes) {
        auto oldest = shapes_.end();
        for (auto it = shapes_.begin(); it != shapes_.end(); ++it) {
          if (it->second.shape != e.shape &&
              (oldest == shapes_.end() || it->second.last_use < oldest->second.last_use)) {
            oldest = it;
          }
        }
        shapes_.erase(oldest);
      }
    }
    e.last_use = ++tick_;
    return e.shape;
  }
  void Drop(const std::string& key) {
    MutexLock lock(mu_);
    shapes_.erase(key);
  }

 private:
  static constexpr size_t kMaxShapes = 64;
  struct Entry {
    std::shared_ptr<Shape> shape;
    uint64_t last_use = 0;  // tick_ at the shape's last Get
  };
  Mutex mu_;
  std::unordered_map<std::string, Entry> shapes_ GUARDED_BY(mu_);
  uint64_t tick_ GUARDED_BY(mu_) = 0;
};

PlacementEngine::PlacementEngine(EngineOptions options)
    : options_(std::move(options)), cache_(std::make_shared<VerdictCache>()) {
  if (!ParseGpuPolicy(options_.gpu_policy, &global_gpu_)) global_gpu_ = GpuPolicy::Default();
}

Result<Decision> PlacementEngine::Place(const Ledger& ledger, const PodSpec& pod,
                                        std::span<const std::string_view> node_names,
                                        TraceLevel trace) const {
  std::vector<int32_t> slots(node_names.size());
  for (size_t i = 0; i < node_names.size(); ++i) slots[i] = ledger.FindNode(node_names[i]);
  return PlaceSlots(ledger, pod, node_names, slots, trace, true);
}

Result<Decision> PlacementEngine::PlaceOnAllNodes(const Ledger& ledger, const PodSpec& pod,
                                                  TraceLevel trace) const {
  std::vector<std::string_view> names;
  std::vector<int32_t> slots;
  for (size_t i = 0; i < ledger.nodes().size(); ++i) {
    const LedgerNode& n = ledger.nodes()[i];
    if (!n.registered) continue;
    names.push_back(ledger.strings().nodes.Get(n.name));
    slots.push_back(static_cast<int32_t>(i));
  }
  return PlaceSlots(ledger, pod, names, slots, trace, true);
}

Result<Decision> PlacementEngine::PlaceSlots(const Ledger& ledger, const PodSpec& pod,
                                             std::span<const std::string_view> names,
                                             std::span<const int32_t> slots, TraceLevel trace,
                                             bool use_cache) const {
  Decision d;
  HAMI_ASSIGN_OR_RETURN(PodContext ctx,
                        BuildContext(ledger, pod, options_, global_gpu_, &d.policies));
  ctx.trace = trace;
  DescribeRequest(pod, ctx, &d);
  if (!d.requests_devices) return d;

  Scratch s;
  if (trace == TraceLevel::kDevices) s.decision = &d;
  d.verdicts.resize(names.size());
  double best = 0;
  use_cache = use_cache && trace == TraceLevel::kNodes;
  // The shape's remembered verdicts by node slot, held under its lock for the whole loop. Without
  // the cache a local, never-filled shape stands in, so the loop below is one straight piece of
  // code (a lambda called from two branches was not inlined: 5% slower cold filters) and the
  // lock analysis sees the same lock on both paths.
  std::string shape_key;
  std::shared_ptr<VerdictCache::Shape> cached_shape;
  if (use_cache) {
    shape_key = ShapeKey(ctx);
    cached_shape = cache_->Get(shape_key);
  }
  VerdictCache::Shape uncached;
  VerdictCache::Shape& shape = cached_shape ? *cached_shape : uncached;
  MutexLock shape_lock(shape.mu);
  std::vector<CachedVerdict>* entries = nullptr;
  if (use_cache) {
    if (shape.by_slot.size() < ledger.nodes().size()) shape.by_slot.resize(ledger.nodes().size());
    entries = &shape.by_slot;
  }
  bool from_cache = false;  // whether any verdict was reused
  for (size_t i = 0; i < names.size(); ++i) {
    NodeVerdict& v = d.verdicts[i];
    v.node = names[i];
    v.slot = slots[i];
    if (slots[i] < 0) {
      v.failure.kind = NodeFailure::Kind::kNodeUnregistered;
      continue;
    }
    const LedgerNode& node = ledger.nodes()[slots[i]];
    v.node = ledger.strings().nodes.Get(node.name);
    CachedVerdict* cached = entries != nullptr ? &(*entries)[slots[i]] : nullptr;
    if (cached != nullptr && cached->version == node.version) {
      v.fit = cached->fit;
      v.policy = cached->policy;
      v.score = cached->score;
      v.preference = cached->preference;
      v.failure = cached->failure;
      from_cache = true;
    } else {
      s.verdict = static_cast<uint32_t>(i);
      EvaluateNode(ctx, s, static_cast<uint32_t>(slots[i]), &v);
      if (cached != nullptr)
        *cached = CachedVerdict{node.version, v.fit, v.policy, v.score, v.preference, v.failure};
    }
    if (!v.fit) continue;
    double pref = (v.policy == NodePolicy::kSpread ? -v.score : v.score) + v.preference;
    if (d.chosen < 0 || pref > best) {
      best = pref;
      d.chosen = static_cast<int32_t>(i);
    }
  }
  if (d.chosen < 0) return d;

  if (MaterialiseChoice(ledger, ctx, &d)) return d;
  if (!from_cache) return InternalError("placement on " + d.node + " did not reproduce");
  // A remembered verdict outlived a change of the node it was about: forget the shape and decide
  // again from scratch. Never expected; the warning makes a missed version bump visible.
  HAMI_LOG(Warning) << "placement verdict cache was stale for " << d.node << "; placing without it";
  cache_->Drop(shape_key);
  return PlaceSlots(ledger, pod, names, slots, trace, false);
}

Result<Decision> PlaceAndReserve(Ledger& ledger, const PlacementEngine& engine, const PodSpec& pod,
                                 std::span<const std::string_view> node_names, TraceLevel trace) {
  if (const LedgerPod* old = ledger.FindPod(pod.uid);
      old != nullptr && old->state == PodState::kReserved) {
    ledger.RemovePod(pod.uid);
  }
  HAMI_ASSIGN_OR_RETURN(Decision d, engine.Place(ledger, pod, node_names, trace));
  if (d.fit()) HAMI_RETURN_IF_ERROR(ledger.Reserve(d.ToReservation(pod)));
  return d;
}

}  // namespace hami::scheduler