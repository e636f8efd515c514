// NodeEvaluator's fitting of a pod on one node: upstream's per-device checks in upstream's order,
// candidate ordering by the GPU policy, taking devices, the node's usage score. The hot path of
// a cold filter: every device of every offered node passes through CollectCandidates.
#include <algorithm>
#include <bit>
#include <string>
#include <string_view>
#include <vector>

#include "scheduler/placement_internal.h"

namespace hami::scheduler::placement_internal {
namespace {

double DeviceScore(const LedgerDevice& d, const Work& u, int64_t memreq, int64_t cores,
                   const device::ScoringWeights& w) {
  if (d.count == 0 || d.devcore == 0 || d.devmem == 0) return 0;
  return 10.0 * (w.slot * static_cast<double>(u.slots + 1) / d.count +
                 w.core * static_cast<double>(u.cores + cores) / d.devcore +
                 w.memory * static_cast<double>(u.mem + memreq) / d.devmem);
}

// Whether device `d`'s type and mode pass the vendor's type selectors and mode selection (the
// answer per type and mode id is remembered in the filter).
bool TypeOk(const VendorFilter& f, const LedgerStrings& s, const LedgerDevice& d) {
  if (!f.use_types.empty() || !f.nouse_types.empty()) {
    uint8_t& t = f.type_ok[d.type];
    if (t == 0) {
      std::string type = device::text::FoldTypeName(s.types.Get(d.type));
      bool ok = f.use_types.empty();
      for (const std::string& u : f.use_types) ok = ok || type.find(u) != std::string::npos;
      for (const std::string& u : f.nouse_types) ok = ok && type.find(u) == std::string::npos;
      t = ok ? 1 : 2;
    }
    if (t == 2) return false;
  }
  if (f.has_mode) {
    uint8_t& m = f.mode_ok[d.mode_name];
    if (m == 0) {
      std::string_view mode = s.modes.Get(d.mode_name);
      m = (f.mode_exact ? f.mode_value == mode : f.mode_value.find(mode) != std::string::npos)
              ? 1
              : 2;
    }
    if (m == 2) return false;
  }
  return true;
}

// Whether device `d` passes the vendor's UUID selectors.
bool UuidOk(const VendorFilter& f, const LedgerDevice& d) {
  if (f.has_use_uuid &&
      std::find(f.use_uuids.begin(), f.use_uuids.end(), d.uuid) == f.use_uuids.end()) {
    return false;
  }
  return std::find(f.nouse_uuids.begin(), f.nouse_uuids.end(), d.uuid) == f.nouse_uuids.end();
}

// Upstream's per-device checks, in upstream's order. kCount = the device passes.
CardReason CheckDevice(const LedgerStrings& strs, const LedgerNode& node, uint16_t i,
                       const LedgerDevice& d, const Work& u, const VendorFilter& f,
                       const GpuPolicy& policy, int64_t memreq, int64_t cores, const Scratch& s) {
  if (!d.Healthy()) return CardReason::kCardNotHealth;
  if (d.cordoned) return CardReason::kCardCordoned;
  if (!TypeOk(f, strs, d)) return CardReason::kCardTypeMismatch;
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
  if (!UuidOk(f, d)) return CardReason::kCardUuidMismatch;
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
  // A MIG device's compute is split by its placements, not by the core sum: profile figures are
  // rounded up (seven 1g on an A100 sum to 105), so only FindMigSlot decides (upstream's B12).
  if (!f.no_cores && d.mode != DeviceMode::kMig) {
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
    if (!f.mig_allowed || !FindMigSlot(node, i, memreq, cores, s, &p, &pl)) {
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

// Fits one pod (its PodContext) on nodes one at a time, in the Scratch it is given.
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
    v->preference = Preference(v->policy);
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
      if (FindNumaGroup(*node_, need, mig_request, s_)) {
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
      if (d.mode == DeviceMode::kMig) MigRequest(node, i, r, &memreq, &dcores);
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

  // The vendor's topology plug-in chooses `need` devices among `pool`.
  bool TakeByTopologyPlugin(uint16_t container, const Req& req, const std::vector<uint16_t>& pool,
                            NodeFailure& fails, NodeFailure* failure) {
    int32_t need = req.r.count;
    device::TopologyChoice choice = ChooseByTopologyPlugin(
        ctx_.ledger->strings(), *node_, *ctx_.filters[req.vendor].topology, pool, need, s_);
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

  // Topology-aware policy: `need` devices of `pool` by link score (ChooseByLinkScore).
  bool TakeByLinkScore(uint16_t container, const Req& req, const std::vector<uint16_t>& pool,
                       NodeFailure& fails, NodeFailure* failure) {
    int32_t need = req.r.count;
    if (static_cast<int32_t>(pool.size()) < need) {
      if (!pool.empty()) {
        fails.Add(CardReason::kAllocatedCardsInsufficientRequest,
                  static_cast<uint16_t>(pool.size()));
      }
      *failure = fails;
      return false;
    }
    ChooseByLinkScore(*node_, pool, need, s_);
    for (uint16_t k : s_.pick) {
      Take(container, req, s_.cands[k].dev, s_.cands[k].memreq, s_.cands[k].cores);
    }
    return true;
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

  // NodeVerdict::preference with the pod placed. The topology parts (node_topology.cc) are not
  // called when they cannot count: no device taken in a topology group (most nodes), no vendor
  // scored by links.
  double Preference(NodePolicy policy) const {
    const bool grouped = std::any_of(s_.taken.begin(), s_.taken.end(), [&](const Taken& t) {
      return node_->devices[t.dev].group != 0;
    });
    return (grouped ? Cohesion(ctx_, *node_, s_) : 0) +
           (ctx_.any_link_score ? LinkScore(ctx_, *node_, s_) : 0) + VendorPreference() +
           NodeTablePreference(policy);
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

  void Take(uint16_t container, const Req& req, uint16_t dev, int64_t memreq,
            int64_t cores) {
    const LedgerDevice& d = node_->devices[dev];
    int32_t profile = -1;
    device::MigPlacement pl;
    if (d.mode == DeviceMode::kMig &&
        FindMigSlot(*node_, dev, memreq, cores, s_, &profile, &pl)) {
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

}  // namespace

void EvaluateNode(const PodContext& ctx, Scratch& s, uint32_t slot, NodeVerdict* v) {
  NodeEvaluator(ctx, s).Evaluate(slot, v);
}

}  // namespace hami::scheduler::placement_internal
