#include "scheduler/placement.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdio>
#include <mutex>
#include <unordered_map>

#include "common/log.h"
#include "common/thread_annotations.h"
#include "device/text_util.h"

namespace hami::scheduler {
namespace {

using device::ContainerRequest;

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

// One vendor's device selectors on the pod, resolved against the ledger's string tables.
struct VendorFilter {
  std::vector<std::string> use_types;    // folded (device::text::FoldTypeName)
  std::vector<std::string> nouse_types;  // folded
  bool has_use_uuid = false;
  std::vector<uint32_t> use_uuids;
  std::vector<uint32_t> nouse_uuids;
  bool has_mode = false;
  bool mode_exact = false;  // VendorAnnotationKeys::mode_select_exact
  std::string mode_value;
  bool numa_bind = false;
  bool mig_allowed = true;                   // vgpu-mode absent or mentions mig
  bool cores_in_units = false;               // the vendor's devcore counts its own units (AMD CUs)
  bool core_mask = false;                    // the vendor's devcore is a bitmask of cores (Neuron)
  bool device_type_in_list = false;          // device lists name the device's type (AMD)
  const device::Vendor* topology = nullptr;  // the vendor chooses multi-device sets itself
  bool equal_partitions = false;             // a used device takes only its tasks' size
  bool one_device = false;                   // the pod's containers share one device
  const device::Vendor* share = nullptr;     // the vendor's task-class rule (uses_task_classes)
  uint8_t task_class = 0;                    // the pod's class for `share`
  bool no_cores = false;                     // the pod's tasks take no compute on this vendor
  bool mutex_group = false;                  // Vendor::mutex_takes_group
  bool link_score = false;                   // Vendor::scores_links for this pod
  // Lazily filled per type / mode id: 0 unknown, 1 ok, 2 mismatch.
  mutable std::vector<uint8_t> type_ok;
  mutable std::vector<uint8_t> mode_ok;

  bool TypeOk(const LedgerStrings& s, const LedgerDevice& d) const {
    if (!use_types.empty() || !nouse_types.empty()) {
      uint8_t& t = type_ok[d.type];
      if (t == 0) {
        std::string type = device::text::FoldTypeName(s.types.Get(d.type));
        bool ok = use_types.empty();
        for (const std::string& u : use_types) ok = ok || type.find(u) != std::string::npos;
        for (const std::string& u : nouse_types) ok = ok && type.find(u) == std::string::npos;
        t = ok ? 1 : 2;
      }
      if (t == 2) return false;
    }
    if (has_mode) {
      uint8_t& m = mode_ok[d.mode_name];
      if (m == 0) {
        std::string_view mode = s.modes.Get(d.mode_name);
        m = (mode_exact ? mode_value == mode : mode_value.find(mode) != std::string::npos) ? 1 : 2;
      }
      if (m == 2) return false;
    }
    return true;
  }
  bool UuidOk(const LedgerDevice& d) const {
    if (has_use_uuid && std::find(use_uuids.begin(), use_uuids.end(), d.uuid) == use_uuids.end()) {
      return false;
    }
    return std::find(nouse_uuids.begin(), nouse_uuids.end(), d.uuid) == nouse_uuids.end();
  }
};

struct Req {
  uint8_t vendor = 0;
  ContainerRequest r;
};

// Everything about the pod that does not depend on the node.
struct PodContext {
  const Ledger* ledger = nullptr;
  std::vector<VendorFilter> filters;  // per vendor index
  std::vector<std::vector<Req>> containers;
  size_t init_count = 0;
  device::ScoringWeights w;
  bool has_pod_gpu = false;
  bool has_pod_node = false;
  GpuPolicy pod_gpu;
  NodePolicy pod_node = NodePolicy::kBinpack;
  const GpuPolicy* global_gpu = nullptr;
  NodePolicy global_node = NodePolicy::kBinpack;
  TraceLevel trace = TraceLevel::kNodes;
  // The pod's task class for the ledger (its first class-using vendor's).
  bool has_task_class = false;
  uint8_t task_class = 0;
  bool any_link_score = false;  // some filter has link_score (skips LinkScore otherwise)
  // Per vendor index: quota room (-1 = unlimited).
  std::vector<int64_t> quota_mem, quota_cores;
  bool has_quota = false;
};

struct Work {
  int32_t slots;
  int64_t mem;
  int64_t cores;
};

struct MigOcc {
  uint16_t device;
  device::MigPlacement placement;
};

struct Cand {
  uint16_t dev;
  bool idle;
  int32_t numa;
  uint32_t index;
  int64_t memreq;
  int64_t cores;  // the request's cores on this device, in the device's units
  int64_t free_after;
  double score;
  double vendor_pref;  // Vendor::DevicePreference (0 for vendors without task classes)
};

// One chosen device while materialising the placement.
struct Assign {
  uint16_t container;
  uint8_t vendor;
  uint16_t dev;
  int32_t mem;
  int32_t cores;
  int32_t mig_profile;  // index into the node's profile list for the device, -1 if none
  device::MigPlacement placement;
};

// A device this evaluation gave a container.
struct Taken {
  uint16_t container;
  uint8_t vendor;
  uint16_t dev;
};

struct Scratch {
  std::vector<device::DeviceCandidate> topo;
  std::vector<Taken> taken;
  std::vector<Work> base, work, peak;
  std::vector<MigOcc> occ;
  std::vector<Cand> cands;
  std::vector<uint16_t> order, pick, group;
  std::vector<uint8_t> reason;  // per device: CardReason, kCount = passed
  bool record = false;
  std::vector<Assign> assigns;
  Decision* decision = nullptr;
  uint32_t verdict = 0;
};

double DeviceScore(const LedgerDevice& d, const Work& u, int64_t memreq, int64_t cores,
                   const device::ScoringWeights& w) {
  if (d.count == 0 || d.devcore == 0 || d.devmem == 0) return 0;
  return 10.0 * (w.slot * static_cast<double>(u.slots + 1) / d.count +
                 w.core * static_cast<double>(u.cores + cores) / d.devcore +
                 w.memory * static_cast<double>(u.mem + memreq) / d.devmem);
}

// First profile (memory, then slices ascending) at least `memreq` big with a free placement.
bool FindMigSlot(const LedgerNode& node, uint16_t dev, int64_t memreq, const Scratch& s,
                 int32_t* profile_out, device::MigPlacement* placement_out) {
  if (!node.mig) return false;
  const std::vector<device::MigProfile>& profiles = node.mig->profiles[dev];
  for (size_t pi = 0; pi < profiles.size(); ++pi) {
    const device::MigProfile& p = profiles[pi];
    if (p.memory_mib < memreq) continue;
    bool descending = p.name.starts_with("1g.") || p.name.starts_with("3g.");
    size_t n = p.placements.size();
    for (size_t k = 0; k < n; ++k) {
      const device::MigPlacement& pl = p.placements[descending ? n - 1 - k : k];
      bool busy = false;
      for (const MigOcc& o : s.occ) {
        if (o.device == dev && o.placement.Overlaps(pl)) {
          busy = true;
          break;
        }
      }
      if (!busy) {
        *profile_out = static_cast<int32_t>(pi);
        *placement_out = pl;
        return true;
      }
    }
  }
  return false;
}

// Upstream's per-device checks, in upstream's order. kCount = the device passes.
CardReason CheckDevice(const LedgerStrings& strs, const LedgerNode& node, uint16_t i,
                       const LedgerDevice& d, const Work& u, const VendorFilter& f,
                       const GpuPolicy& policy, int64_t memreq, int64_t cores, const Scratch& s) {
  if (!d.Healthy()) return CardReason::kCardNotHealth;
  if (d.cordoned) return CardReason::kCardCordoned;
  if (!f.TypeOk(strs, d)) return CardReason::kCardTypeMismatch;
  if (f.share != nullptr && node.task_classes) {
    const bool exclusive = d.devcore > 0 && cores >= d.devcore;
    switch (f.share->CanShare(f.task_class, (*node.task_classes)[i], strs.modes.Get(d.mode_name),
                              exclusive)) {
      case device::ShareVerdict::kOk:
        break;
      case device::ShareVerdict::kAppClassMismatch:
        return CardReason::kCardAppClassMismatch;
      case device::ShareVerdict::kQosPolicyMismatch:
        return CardReason::kCardQosPolicyMismatch;
    }
  }
  if (!f.UuidOk(d)) return CardReason::kCardUuidMismatch;
  if (d.count <= u.slots) return CardReason::kCardTimeSlicingExhausted;
  if (policy.mutex && u.slots > 0) return CardReason::kExclusiveDeviceAllocateConflict;
  if (policy.mutex && f.mutex_group && d.group != 0) {
    for (size_t j = 0; j < node.devices.size(); ++j) {
      if (node.devices[j].group == d.group && s.work[j].slots > 0) {
        return CardReason::kExclusiveDeviceAllocateConflict;
      }
    }
  }
  if (d.devmem - u.mem < memreq) return CardReason::kCardInsufficientMemory;
  if (f.equal_partitions && u.slots > 0 && u.mem != memreq * u.slots) {
    return CardReason::kCardPartitionSizeMismatch;
  }
  if (!f.no_cores) {
    if (d.devcore - u.cores < cores) return CardReason::kCardInsufficientCore;
    if (d.devcore == device::kExclusiveCores && cores == device::kExclusiveCores && u.slots > 0) {
      return CardReason::kExclusiveDeviceAllocateConflict;
    }
    if (d.devcore != 0 && u.cores >= d.devcore && cores == 0) {
      return CardReason::kCardComputeUnitsExhausted;
    }
  }
  if (d.mode == DeviceMode::kMig) {
    int32_t p;
    device::MigPlacement pl;
    if (!f.mig_allowed || !FindMigSlot(node, i, memreq, s, &p, &pl)) {
      return CardReason::kCardMigTopologyInfeasible;
    }
  }
  return CardReason::kCount;
}

// A request of `pct` percent on a device whose devcore counts its own units (AMD CUs): at least
// one unit; 0 % takes every unit of a device whose whole memory it takes, else none.
int64_t UnitCores(const LedgerDevice& d, int64_t pct, int64_t memreq) {
  if (d.devcore <= 0) return 0;
  if (pct <= 0) return memreq >= d.devmem ? d.devcore : 0;
  return std::clamp<int64_t>(int64_t{d.devcore} * pct / 100, 1, d.devcore);
}

// A request of `n` cores on a device whose devcore is a bitmask of its cores (AWS Neuron): the
// mask of the n lowest free cores (every core when n is at least the device's count), or -1
// when too few are free. `used` is the sum of the disjoint masks already taken, i.e. their
// union.
int64_t MaskCores(const LedgerDevice& d, int64_t n, int64_t used) {
  const uint32_t all = static_cast<uint32_t>(std::max<int32_t>(d.devcore, 0));
  const uint32_t free = all & ~static_cast<uint32_t>(used);
  if (n >= std::popcount(all)) return free == all && all != 0 ? int64_t{all} : -1;
  uint32_t mask = 0;
  for (int bit = 0; bit < 32 && n > 0; ++bit) {
    if ((free >> bit & 1) != 0) {
      mask |= uint32_t{1} << bit;
      --n;
    }
  }
  return n > 0 ? -1 : int64_t{mask};
}

bool Before(const GpuPolicy& p, const Cand& a, const Cand& b) {
  for (uint8_t k = 0; k < p.key_count; ++k) {
    switch (p.keys[k]) {
      case DeviceSortKey::kBinpack:
        if (a.score != b.score) return a.score > b.score;
        break;
      case DeviceSortKey::kSpread:
        if (a.score != b.score) return a.score < b.score;
        break;
      case DeviceSortKey::kNuma:
        if (a.numa != b.numa) return a.numa < b.numa;
        break;
      case DeviceSortKey::kBestFit:
        if (a.free_after != b.free_after) return a.free_after < b.free_after;
        break;
      case DeviceSortKey::kIdleFirst:
        if (a.idle != b.idle) return a.idle;
        break;
    }
  }
  if (a.numa != b.numa) return a.numa < b.numa;
  return a.index < b.index;
}

// Chooses the combination of `k` devices from `pool` (in preference order) with the highest sum
// of pair scores; the first maximum in lexicographic order wins.
void BestCombination(const LedgerNode& node, const std::vector<uint16_t>& pool,
                     const std::vector<Cand>& cands, size_t k, std::vector<uint16_t>* out) {
  size_t n = std::min<size_t>(pool.size(), 20);  // bound the search: C(20,10) = 184756
  std::vector<size_t> idx(k);
  for (size_t i = 0; i < k; ++i) idx[i] = i;
  int64_t best = -1;
  std::vector<size_t> best_idx;
  while (true) {
    int64_t sum = 0;
    for (size_t a = 0; a < k; ++a) {
      for (size_t b = a + 1; b < k; ++b) {
        sum += node.PairScore(cands[pool[idx[a]]].dev, cands[pool[idx[b]]].dev);
      }
    }
    if (sum > best) {
      best = sum;
      best_idx = idx;
    }
    // Next combination.
    size_t i = k;
    while (i > 0 && idx[i - 1] == n - k + i - 1) --i;
    if (i == 0) break;
    ++idx[i - 1];
    for (size_t j = i; j < k; ++j) idx[j] = idx[j - 1] + 1;
  }
  out->clear();
  for (size_t i : best_idx) out->push_back(pool[i]);
}

class NodeEvaluator {
 public:
  NodeEvaluator(const PodContext& ctx, Scratch& s) : ctx_(ctx), s_(s) {}

  // Fits the whole pod on node `slot`; fills `v` (fit, score, failure).
  void Evaluate(uint32_t slot, NodeVerdict* v) {
    const Ledger& l = *ctx_.ledger;
    const LedgerNode& node = l.nodes()[slot];
    node_ = &node;
    if (!node.registered) {
      v->failure.kind = NodeFailure::Kind::kNodeUnregistered;
      return;
    }
    policy_ = ctx_.has_pod_gpu      ? &ctx_.pod_gpu
              : node.has_gpu_policy ? &node.gpu_policy
                                    : ctx_.global_gpu;
    v->policy = ctx_.has_pod_node      ? ctx_.pod_node
                : node.has_node_policy ? node.node_policy
                                       : ctx_.global_node;
    size_t n = node.devices.size();
    s_.base.resize(n);
    s_.reason.resize(n);
    for (size_t i = 0; i < n; ++i) {
      const LedgerDevice& d = node.devices[i];
      s_.base[i] = Work{d.used_slots, d.used_mem, d.used_cores};
    }
    s_.occ.clear();
    s_.taken.clear();
    if (node.mig) {
      for (size_t i = 0; i < n; ++i) {
        for (const MigInUse& m : node.mig->in_use[i]) {
          s_.occ.push_back(MigOcc{static_cast<uint16_t>(i), m.placement});
        }
      }
    }
    s_.peak = s_.base;
    for (size_t c = 0; c < ctx_.containers.size(); ++c) {
      bool init = c < ctx_.init_count;
      if (init || c == ctx_.init_count) s_.work = s_.base;
      for (const Req& req : ctx_.containers[c]) {
        if (!FitRequest(static_cast<uint16_t>(c), req, &v->failure)) {
          v->failure.container = static_cast<int16_t>(c);
          return;
        }
      }
      if (init) {
        for (size_t i = 0; i < n; ++i) {
          s_.peak[i].slots = std::max(s_.peak[i].slots, s_.work[i].slots);
          s_.peak[i].mem = std::max(s_.peak[i].mem, s_.work[i].mem);
          s_.peak[i].cores = std::max(s_.peak[i].cores, s_.work[i].cores);
        }
      }
    }
    if (ctx_.containers.size() == ctx_.init_count) s_.work = s_.base;
    if (ctx_.has_quota && !QuotaFits()) {
      v->failure.kind = NodeFailure::Kind::kResourceQuota;
      return;
    }
    // Node score with the pod placed: usage = max(init peak, app) per field.
    int64_t slots = 0, count = 0, mem = 0, devmem = 0, cores = 0, devcore = 0;
    for (size_t i = 0; i < n; ++i) {
      const LedgerDevice& d = node.devices[i];
      slots += std::max(s_.peak[i].slots, s_.work[i].slots);
      mem += std::max(s_.peak[i].mem, s_.work[i].mem);
      cores += std::max(s_.peak[i].cores, s_.work[i].cores);
      count += d.count;
      devmem += d.devmem;
      devcore += d.devcore;
    }
    v->fit = true;
    v->failure.kind = NodeFailure::Kind::kNone;
    v->preference = Cohesion() + LinkScore() + VendorPreference() + NodeTablePreference(v->policy);
    if (count == 0 || devmem == 0 || devcore == 0) {
      v->score = 0;
    } else {
      v->score = 10.0 * (static_cast<double>(slots) / count + static_cast<double>(cores) / devcore +
                         static_cast<double>(mem) / devmem);
    }
  }

 private:
  // Fits one request of `container` on the node, taking devices into s_.work; on failure fills
  // `failure`. Steps: count the vendor's devices, check each (CollectCandidates), order them by
  // policy, narrow to one NUMA node where asked, then take devices by the vendor's topology
  // plug-in, by link score (topology-aware policy), or in preference order.
  bool FitRequest(uint16_t container, const Req& req, NodeFailure* failure) {
    const VendorFilter& f = ctx_.filters[req.vendor];
    const GpuPolicy& policy = *policy_;
    int32_t need = req.r.count;

    bool has_mig = false;
    uint16_t total = CountVendorDevices(req.vendor, &has_mig);
    bool mig_request = has_mig && f.mig_allowed;
    if (total == 0 || (!mig_request && need > total)) {
      failure->kind = NodeFailure::Kind::kNodeInsufficientDevice;
      return false;
    }
    NodeFailure fails;
    fails.kind = NodeFailure::Kind::kCards;
    fails.total = total;
    CollectCandidates(container, req, &fails);
    OrderCandidates(f, policy);

    // Restrict to one NUMA node when bound (hard) or preferred (numa-first, soft).
    const std::vector<uint16_t>* pool = &s_.order;
    if (f.numa_bind || (policy.numa_first && need > 1)) {
      if (FindNumaGroup(need, mig_request)) {
        pool = &s_.group;
      } else if (f.numa_bind) {
        if (!s_.order.empty())
          fails.Add(CardReason::kNumaNotFit, static_cast<uint16_t>(s_.order.size()));
        *failure = fails;
        return false;
      }
    }
    if (f.topology != nullptr && !mig_request) {
      return TakeByTopologyPlugin(container, req, *pool, fails, failure);
    }
    s_.pick.clear();
    if (policy.topology && !mig_request) {
      return TakeByLinkScore(container, req, *pool, fails, failure);
    }
    return TakeInOrder(container, req, *pool, fails, failure);
  }

  // The node's devices of `vendor`; *has_mig is set when one of them is in MIG mode.
  uint16_t CountVendorDevices(uint8_t vendor, bool* has_mig) const {
    const LedgerNode& node = *node_;
    uint16_t total = 0;
    uint16_t n = static_cast<uint16_t>(node.devices.size());
    for (uint16_t i = 0; i < n; ++i) {
      const LedgerDevice& d = node.devices[i];
      if (d.vendor != vendor) continue;
      ++total;
      *has_mig = *has_mig || d.mode == DeviceMode::kMig;
    }
    return total;
  }

  // Checks every device of the request's vendor (recording a verdict per device when a decision
  // is traced); the ones that pass become s_.cands, the others' reasons go to `fails`.
  void CollectCandidates(uint16_t container, const Req& req, NodeFailure* fails) {
    const LedgerStrings& strs = ctx_.ledger->strings();
    const LedgerNode& node = *node_;
    const VendorFilter& f = ctx_.filters[req.vendor];
    const ContainerRequest& r = req.r;
    int64_t cores = std::min<int64_t>(r.cores, device::kExclusiveCores);
    s_.cands.clear();
    uint16_t n = static_cast<uint16_t>(node.devices.size());
    for (uint16_t i = 0; i < n; ++i) {
      const LedgerDevice& d = node.devices[i];
      if (d.vendor != req.vendor) continue;
      const Work& u = s_.work[i];
      int64_t memreq = r.MemOn(d.devmem);
      int64_t dcores = f.no_cores         ? 0
                       : f.cores_in_units ? UnitCores(d, cores, memreq)
                       : f.core_mask      ? MaskCores(d, cores, u.cores)
                                          : cores;
      // Too few free cores for a mask: more than the device has, so the core check (after the
      // earlier ones, in upstream's order) says so.
      if (dcores < 0) dcores = int64_t{d.devcore} + 1;
      CardReason why = d.devcore <= 0 && f.cores_in_units
                           ? CardReason::kCardInsufficientCore
                           : CheckDevice(strs, node, i, d, u, f, *policy_, memreq, dcores, s_);
      if (why == CardReason::kCount && f.one_device && !OnPodsDevice(req.vendor, container, i)) {
        why = CardReason::kCardNotFoundCustomFilterRule;
      }
      double score = DeviceScore(d, u, memreq, dcores, ctx_.w);
      if (s_.decision != nullptr) {
        s_.decision->device_verdicts.push_back(
            DeviceVerdict{s_.verdict, i, static_cast<int16_t>(container), false,
                          why == CardReason::kCount, why, score});
      }
      if (why != CardReason::kCount) {
        fails->Add(why);
        continue;
      }
      double vendor_pref = f.share != nullptr && node.task_classes
                               ? f.share->DevicePreference(f.task_class, (*node.task_classes)[i])
                               : 0;
      s_.cands.push_back(Cand{i, u.slots == 0, d.numa, d.index, memreq, dcores,
                              d.devmem - u.mem - memreq, score, vendor_pref});
    }
  }

  // s_.order: the candidates in preference order (the vendor's own preference first, if any).
  void OrderCandidates(const VendorFilter& f, const GpuPolicy& policy) {
    s_.order.resize(s_.cands.size());
    for (uint16_t k = 0; k < s_.order.size(); ++k) s_.order[k] = k;
    if (f.share != nullptr) {
      std::sort(s_.order.begin(), s_.order.end(), [&](uint16_t a, uint16_t b) {
        if (s_.cands[a].vendor_pref != s_.cands[b].vendor_pref) {
          return s_.cands[a].vendor_pref > s_.cands[b].vendor_pref;
        }
        return Before(policy, s_.cands[a], s_.cands[b]);
      });
    } else {
      std::sort(s_.order.begin(), s_.order.end(),
                [&](uint16_t a, uint16_t b) { return Before(policy, s_.cands[a], s_.cands[b]); });
    }
  }

  // Looks for a NUMA node whose candidates can hold the request, trying NUMA nodes in the order
  // of their most preferred device. True with that node's candidates in s_.group (in order).
  bool FindNumaGroup(int32_t need, bool mig_request) {
    for (size_t gi = 0; gi < s_.order.size(); ++gi) {
      int32_t numa = s_.cands[s_.order[gi]].numa;
      // Each NUMA node is tried once, at its most preferred device.
      bool seen = false;
      for (size_t k = 0; k < gi; ++k) seen = seen || s_.cands[s_.order[k]].numa == numa;
      if (seen) continue;
      s_.group.clear();
      for (uint16_t k : s_.order) {
        if (s_.cands[k].numa == numa) s_.group.push_back(k);
      }
      if (static_cast<int32_t>(s_.group.size()) >= need ||
          (mig_request && !s_.group.empty() && Capacity(s_.group, need) >= need)) {
        return true;
      }
    }
    return false;
  }

  // The vendor's topology plug-in chooses `need` devices among `pool`.
  bool TakeByTopologyPlugin(uint16_t container, const Req& req, const std::vector<uint16_t>& pool,
                            NodeFailure& fails, NodeFailure* failure) {
    const LedgerStrings& strs = ctx_.ledger->strings();
    const LedgerNode& node = *node_;
    int32_t need = req.r.count;
    s_.topo.clear();
    for (uint16_t k : pool) {
      const LedgerDevice& d = node.devices[s_.cands[k].dev];
      s_.topo.push_back(device::DeviceCandidate{d.index, s_.cands[k].idle,
                                                strs.modes.Get(d.mode_name), d.group});
    }
    device::TopologyChoice choice = ctx_.filters[req.vendor].topology->ChooseDevices(s_.topo, need);
    if (static_cast<int32_t>(choice.picked.size()) != need) {
      if (!pool.empty()) {
        fails.Add(choice.topology_mismatch ? CardReason::kNumaNotFit
                                           : CardReason::kAllocatedCardsInsufficientRequest,
                  static_cast<uint16_t>(pool.size()));
      }
      *failure = fails;
      return false;
    }
    for (size_t p : choice.picked) {
      const Cand& c = s_.cands[pool[p]];
      Take(container, req, c.dev, c.memreq, c.cores);
    }
    return true;
  }

  // Topology-aware policy: `need` devices of `pool` by link score. One device is the one least
  // linked to the others (keeping well-connected GPUs free); several, the best-linked set.
  bool TakeByLinkScore(uint16_t container, const Req& req, const std::vector<uint16_t>& pool,
                       NodeFailure& fails, NodeFailure* failure) {
    const LedgerNode& node = *node_;
    int32_t need = req.r.count;
    if (static_cast<int32_t>(pool.size()) < need) {
      if (!pool.empty()) {
        fails.Add(CardReason::kAllocatedCardsInsufficientRequest,
                  static_cast<uint16_t>(pool.size()));
      }
      *failure = fails;
      return false;
    }
    if (static_cast<int32_t>(pool.size()) == need) {
      s_.pick = pool;
    } else if (need == 1) {
      s_.pick.push_back(LeastLinked(node, pool));
    } else {
      std::vector<uint16_t> chosen;
      BestCombination(node, pool, s_.cands, static_cast<size_t>(need), &chosen);
      s_.pick = std::move(chosen);
    }
    for (uint16_t k : s_.pick) {
      Take(container, req, s_.cands[k].dev, s_.cands[k].memreq, s_.cands[k].cores);
    }
    return true;
  }

  // The candidate of `pool` with the smallest sum of link scores to the others (the first such).
  uint16_t LeastLinked(const LedgerNode& node, const std::vector<uint16_t>& pool) const {
    int64_t best = -1;
    uint16_t best_k = pool[0];
    for (uint16_t a : pool) {
      int64_t sum = 0;
      for (uint16_t b : pool) {
        if (a != b) sum += node.PairScore(s_.cands[a].dev, s_.cands[b].dev);
      }
      if (best < 0 || sum < best) {
        best = sum;
        best_k = a;
      }
    }
    return best_k;
  }

  // Walks the preference order; a MIG device may host several instances of this request.
  bool TakeInOrder(uint16_t container, const Req& req, const std::vector<uint16_t>& pool,
                   NodeFailure& fails, NodeFailure* failure) {
    const LedgerStrings& strs = ctx_.ledger->strings();
    const LedgerNode& node = *node_;
    const VendorFilter& f = ctx_.filters[req.vendor];
    int32_t remaining = req.r.count;
    uint16_t taken_devices = 0;
    for (uint16_t k : pool) {
      if (remaining == 0) break;
      uint16_t dev = s_.cands[k].dev;
      const LedgerDevice& d = node.devices[dev];
      Take(container, req, dev, s_.cands[k].memreq, s_.cands[k].cores);
      --remaining;
      ++taken_devices;
      while (remaining > 0 && d.mode == DeviceMode::kMig &&
             CheckDevice(strs, node, dev, d, s_.work[dev], f, *policy_, s_.cands[k].memreq,
                         s_.cands[k].cores, s_) == CardReason::kCount) {
        Take(container, req, dev, s_.cands[k].memreq, s_.cands[k].cores);
        --remaining;
      }
    }
    if (remaining > 0) {
      if (taken_devices > 0)
        fails.Add(CardReason::kAllocatedCardsInsufficientRequest, taken_devices);
      *failure = fails;
      return false;
    }
    return true;
  }

  // The vendors' DevicePreference of the devices this evaluation took (before the pod).
  double VendorPreference() const {
    const LedgerNode& node = *node_;
    if (!node.task_classes) return 0;
    double sum = 0;
    for (const Taken& t : s_.taken) {
      const VendorFilter& f = ctx_.filters[t.vendor];
      if (f.share != nullptr) {
        sum += f.share->DevicePreference(f.task_class, (*node.task_classes)[t.dev]);
      }
    }
    return sum;
  }

  // The node's published preferences (Vendor::DecodeNodePreferences) for the number of each
  // vendor's devices this evaluation took.
  double NodeTablePreference(NodePolicy policy) const {
    if (!node_->preferences) return 0;
    double sum = 0;
    for (const auto& [vi, table] : *node_->preferences) {
      int32_t n = 0;
      for (size_t a = 0; a < s_.taken.size(); ++a) {
        const Taken& t = s_.taken[a];
        // A device two containers share counts once. (`vi` is copied into the lambda: clang 14,
        // which runs the thread-safety analysis, cannot capture a structured binding.)
        n += t.vendor == vi &&
             std::none_of(s_.taken.begin(), s_.taken.begin() + a, [&, v = vi](const Taken& u) {
               return u.vendor == v && u.dev == t.dev;
             });
      }
      const std::map<int32_t, double>& m =
          policy == NodePolicy::kSpread ? table.spread : table.binpack;
      if (auto it = m.find(n); n > 0 && it != m.end()) sum += it->second;
    }
    return sum;
  }

  // Whether the take `t` belongs to a whole-device request its vendor scores by links.
  bool LinkScored(const Taken& t) const {
    if (!ctx_.filters[t.vendor].link_score) return false;
    for (const Req& r : ctx_.containers[t.container]) {
      if (r.vendor == t.vendor) return r.r.Exclusive();
    }
    return false;
  }

  // NodeVerdict::preference (its link part, Vendor::scores_links): per such vendor, with a link
  // worth 10 between two devices of one group, 10 x the links among the devices its whole-device
  // requests took, less the links lost: those of the node's idle devices (before the pod) that
  // neither the taken set nor the idle rest keeps.
  double LinkScore() const {
    if (!ctx_.any_link_score) return 0;
    const LedgerNode& node = *node_;
    double sum = 0;
    for (size_t vi = 0; vi < ctx_.filters.size(); ++vi) {
      if (!ctx_.filters[vi].link_score) continue;
      std::vector<uint16_t> taken;  // once each
      for (const Taken& t : s_.taken) {
        if (t.vendor == vi && LinkScored(t) &&
            std::find(taken.begin(), taken.end(), t.dev) == taken.end()) {
          taken.push_back(t.dev);
        }
      }
      if (taken.empty()) continue;
      // Per group: idle devices, devices taken, idle devices not taken; a set of n devices of one
      // group holds n(n-1)/2 links.
      struct Counts {
        uint32_t group;
        int64_t n[3];
      };
      std::vector<Counts> per_group;
      for (size_t i = 0; i < node.devices.size(); ++i) {
        const LedgerDevice& d = node.devices[i];
        if (d.vendor != vi || d.group == 0) continue;
        auto it = std::find_if(per_group.begin(), per_group.end(),
                               [&](const Counts& c) { return c.group == d.group; });
        if (it == per_group.end()) it = per_group.insert(per_group.end(), Counts{d.group, {}});
        const bool took = std::find(taken.begin(), taken.end(), i) != taken.end();
        const bool idle = s_.base[i].slots == 0;
        it->n[0] += idle;
        it->n[1] += took;
        it->n[2] += idle && !took;
      }
      int64_t links[3] = {0, 0, 0};
      for (const Counts& c : per_group) {
        for (int k = 0; k < 3; ++k) links[k] += 10 * c.n[k] * (c.n[k] - 1) / 2;
      }
      const int64_t lost = links[0] - links[1] - links[2];
      sum += static_cast<double>(10 * links[1] - lost);
    }
    return sum;
  }

  // NodeVerdict::preference (its topology part): per (container, vendor) request of several
  // devices (but those LinkScore counts), the share of them in its biggest topology group.
  double Cohesion() const {
    const LedgerNode& node = *node_;
    auto group = [&](const Taken& t) { return node.devices[t.dev].group; };
    if (std::none_of(s_.taken.begin(), s_.taken.end(), [&](const Taken& t) { return group(t); })) {
      return 0;
    }
    double sum = 0;
    for (size_t a = 0; a < s_.taken.size(); ++a) {
      if (LinkScored(s_.taken[a])) continue;
      auto same_request = [&](const Taken& t) {
        return t.container == s_.taken[a].container && t.vendor == s_.taken[a].vendor;
      };
      // Each request once, at its first device.
      if (std::any_of(s_.taken.begin(), s_.taken.begin() + a, same_request)) continue;
      int32_t total = 0, best = 0;
      for (const Taken& t : s_.taken) {
        if (!same_request(t)) continue;
        ++total;
        if (group(t) == 0) continue;
        best = std::max<int32_t>(best, static_cast<int32_t>(std::count_if(
                                           s_.taken.begin(), s_.taken.end(), [&](const Taken& u) {
                                             return same_request(u) && group(u) == group(t);
                                           })));
      }
      if (total > 1) sum += static_cast<double>(best) / total;
    }
    return 10.0 * sum;
  }

  // Whether device `i` is the one earlier containers of the pod got from `vendor` (or none yet).
  bool OnPodsDevice(uint8_t vendor, uint16_t container, uint16_t i) const {
    for (const Taken& t : s_.taken) {
      if (t.vendor == vendor && t.container != container && t.dev != i) return false;
    }
    return true;
  }

  // The pod's charge here (per device max(init peak, app) minus what was there) within the room.
  bool QuotaFits() const {
    const LedgerNode& node = *node_;
    size_t vendors = ctx_.quota_mem.size();
    std::vector<int64_t> mem(vendors, 0), cores(vendors, 0);
    for (size_t i = 0; i < node.devices.size(); ++i) {
      uint8_t v = node.devices[i].vendor;
      if (v >= vendors) continue;
      mem[v] += std::max(s_.peak[i].mem, s_.work[i].mem) - s_.base[i].mem;
      cores[v] += std::max(s_.peak[i].cores, s_.work[i].cores) - s_.base[i].cores;
    }
    for (size_t v = 0; v < vendors; ++v) {
      if (ctx_.quota_mem[v] >= 0 && mem[v] > ctx_.quota_mem[v]) return false;
      if (ctx_.quota_cores[v] >= 0 && cores[v] > ctx_.quota_cores[v]) return false;
    }
    return true;
  }

  // How many instances a group of MIG-capable candidates could host (each non-MIG device: one).
  int32_t Capacity(const std::vector<uint16_t>& group, int32_t need) const {
    int32_t c = 0;
    for (uint16_t k : group) {
      c += node_->devices[s_.cands[k].dev].mode == DeviceMode::kMig ? need : 1;
    }
    return c;
  }

  void Take(uint16_t container, const Req& req, uint16_t dev, int64_t memreq, int64_t cores) {
    const LedgerDevice& d = node_->devices[dev];
    int32_t profile = -1;
    device::MigPlacement pl;
    if (d.mode == DeviceMode::kMig && FindMigSlot(*node_, dev, memreq, s_, &profile, &pl)) {
      const device::MigProfile& p = node_->mig->profiles[dev][profile];
      memreq = p.memory_mib;
      cores = p.core;
      s_.occ.push_back(MigOcc{dev, pl});
    }
    s_.taken.push_back(Taken{container, req.vendor, dev});
    Work& u = s_.work[dev];
    u.slots += 1;
    u.mem += memreq;
    u.cores += cores;
    if (s_.decision != nullptr) {
      for (auto it = s_.decision->device_verdicts.rbegin();
           it != s_.decision->device_verdicts.rend() && it->verdict == s_.verdict; ++it) {
        if (it->device == dev && it->container == container) {
          it->chosen = true;
          break;
        }
      }
    }
    if (s_.record) {
      s_.assigns.push_back(Assign{container, req.vendor, dev, static_cast<int32_t>(memreq),
                                  static_cast<int32_t>(cores), profile, pl});
    }
  }

  const PodContext& ctx_;
  Scratch& s_;
  const LedgerNode* node_ = nullptr;
  const GpuPolicy* policy_ = nullptr;
};

Result<PodContext> BuildContext(const Ledger& ledger, const PodSpec& pod,
                                const EngineOptions& options, const GpuPolicy& global_gpu,
                                ResolvedPolicies* resolved) {
  PodContext ctx;
  ctx.ledger = &ledger;
  ctx.global_gpu = &global_gpu;
  ctx.global_node = options.node_policy;
  const device::VendorRegistry& vendors = ledger.vendors();
  const LedgerStrings& strs = ledger.strings();

  if (std::string_view w = Lookup(pod.annotations, device::kDeviceScoringWeightsAnnotation);
      !device::text::TrimSpace(w).empty()) {
    Result<device::ScoringWeights> parsed = device::DecodeScoringWeights(w);
    if (!parsed.ok()) {
      return parsed.status().WithContext(std::string(device::kDeviceScoringWeightsAnnotation));
    }
    ctx.w = *parsed;
  }

  resolved->node = options.node_policy;
  resolved->gpu = global_gpu;
  if (std::string_view v = Lookup(pod.annotations, kNodeSchedulerPolicyAnnotation);
      ParseNodePolicy(v, &ctx.pod_node)) {
    ctx.has_pod_node = true;
    resolved->node = ctx.pod_node;
    resolved->node_source = PolicySource::kPod;
  }
  if (std::string_view v = Lookup(pod.annotations, kGpuSchedulerPolicyAnnotation); !v.empty()) {
    GpuPolicy p;
    if (ParseGpuPolicy(v, &p)) {
      ctx.has_pod_gpu = true;
      resolved->gpu = p;
      resolved->gpu_source = PolicySource::kPod;
      ctx.pod_gpu = std::move(p);
    }
    resolved->ignored =
        resolved->gpu_source == PolicySource::kPod ? ctx.pod_gpu.ignored : p.ignored;
  }

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
    const device::VendorAnnotationKeys& k = vendors.vendors()[vi]->annotation_keys();
    VendorFilter& f = ctx.filters[vi];
    // Case, '-', '_' and spaces do not count: users write "NVIDIA-GeForce-RTX-4090" for a card
    // that registers as "NVIDIA GeForce RTX 4090".
    for (std::string_view t : CommaList(Lookup(pod.annotations, k.use_type))) {
      if (std::string folded = device::text::FoldTypeName(t); !folded.empty()) {
        f.use_types.push_back(std::move(folded));
      }
    }
    for (std::string_view t : CommaList(Lookup(pod.annotations, k.nouse_type))) {
      if (std::string folded = device::text::FoldTypeName(t); !folded.empty()) {
        f.nouse_types.push_back(std::move(folded));
      }
    }
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
    f.cores_in_units = vendors.vendors()[vi]->cores_in_device_units();
    f.core_mask = vendors.vendors()[vi]->cores_as_bitmask();
    f.device_type_in_list = vendors.vendors()[vi]->lists_device_type();
    if (vendors.vendors()[vi]->has_topology_rule()) f.topology = vendors.vendors()[vi].get();
    f.equal_partitions = vendors.vendors()[vi]->equal_partitions();
    f.one_device = vendors.vendors()[vi]->one_device_per_pod();
    f.mutex_group = vendors.vendors()[vi]->mutex_takes_group();
    f.link_score = vendors.vendors()[vi]->scores_links(pod.annotations);
    ctx.any_link_score = ctx.any_link_score || f.link_score;
    if (vendors.vendors()[vi]->uses_task_classes()) {
      f.share = vendors.vendors()[vi].get();
      f.task_class =
          static_cast<uint8_t>(f.share->TaskClass(pod.annotations) % device::kTaskClassCount);
      f.no_cores = f.share->TaskTakesNoCores(f.task_class);
      if (!ctx.has_task_class) {
        ctx.has_task_class = true;
        ctx.task_class = f.task_class;
      }
    }
  }

  ctx.quota_mem.assign(vendors.vendors().size(), -1);
  ctx.quota_cores.assign(vendors.vendors().size(), -1);
  for (const QuotaRoom& q : pod.quota) {
    for (size_t vi = 0; vi < vendors.vendors().size(); ++vi) {
      if (vendors.vendors()[vi]->Key() != q.vendor) continue;
      if (q.mem_mib) ctx.quota_mem[vi] = std::max<int64_t>(0, *q.mem_mib);
      if (q.cores) ctx.quota_cores[vi] = std::max<int64_t>(0, *q.cores);
      ctx.has_quota = ctx.has_quota || q.mem_mib || q.cores;
    }
  }

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
  d.weights = ctx.w;
  d.container_count = pod.requests.containers.size();
  d.init_container_count = pod.requests.init_count;
  d.requests_devices = !pod.requests.Empty();
  d.task_class = ctx.task_class;
  if (!d.requests_devices) return d;

  Scratch s;
  if (trace == TraceLevel::kDevices) s.decision = &d;
  NodeEvaluator eval(ctx, s);
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
      eval.Evaluate(static_cast<uint32_t>(slots[i]), &v);
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

  // Materialise the chosen node's assignment (the evaluation is deterministic).
  const NodeVerdict& win = d.verdicts[d.chosen];
  const LedgerNode& node = ledger.nodes()[win.slot];
  d.node = std::string(win.node);
  Scratch rec;
  rec.record = true;
  NodeEvaluator again(ctx, rec);
  NodeVerdict check;
  again.Evaluate(static_cast<uint32_t>(win.slot), &check);
  if (!check.fit && from_cache) {
    // A remembered verdict outlived a change of the node it was about: forget the shape and
    // decide again from scratch. Never expected; the warning makes a missed version bump visible.
    HAMI_LOG(Warning) << "placement verdict cache was stale for " << d.node
                      << "; placing without it";
    cache_->Drop(shape_key);
    return PlaceSlots(ledger, pod, names, slots, trace, false);
  }
  if (!check.fit) return InternalError("placement on " + d.node + " did not reproduce");
  const device::VendorRegistry& vendors = ledger.vendors();
  for (const std::vector<Req>& c : ctx.containers) {
    for (const Req& r : c) {
      d.devices[std::string(vendors.vendors()[r.vendor]->Key())].resize(d.container_count);
    }
  }
  for (const Assign& a : rec.assigns) {
    const LedgerDevice& dev = node.devices[a.dev];
    std::string key(vendors.vendors()[a.vendor]->Key());
    device::ContainerDevices& list = d.devices[key][a.container];
    if (a.mig_profile >= 0) {
      device::MigAllocation m;
      m.container_index = a.container;
      m.device_index = static_cast<int32_t>(list.size());
      m.gpu_uuid = std::string(ledger.strings().uuids.Get(dev.uuid));
      m.profile = node.mig->profiles[a.dev][a.mig_profile].name;
      m.placement = a.placement;
      d.mig.push_back(std::move(m));
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
  return d;
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
