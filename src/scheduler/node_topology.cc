// The evaluator's choices and scores that depend on where devices sit: one NUMA node for a
// bound or numa-first request, the vendor's topology plug-in, sets chosen by link score, and the
// node preference from topology groups (Cohesion) and links (LinkScore).
#include <algorithm>
#include <vector>

#include "scheduler/placement_internal.h"

namespace hami::scheduler::placement_internal {
namespace {

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

// How many instances a group of MIG-capable candidates could host (each non-MIG device: one).
int32_t Capacity(const LedgerNode& node, const Scratch& s, const std::vector<uint16_t>& group,
                 int32_t need) {
  int32_t c = 0;
  for (uint16_t k : group) c += node.devices[s.cands[k].dev].mode == DeviceMode::kMig ? need : 1;
  return c;
}

// The candidate of `pool` with the smallest sum of link scores to the others (the first such).
uint16_t LeastLinked(const LedgerNode& node, const std::vector<Cand>& cands,
                     const std::vector<uint16_t>& pool) {
  int64_t best = -1;
  uint16_t best_k = pool[0];
  for (uint16_t a : pool) {
    int64_t sum = 0;
    for (uint16_t b : pool) {
      if (a != b) sum += node.PairScore(cands[a].dev, cands[b].dev);
    }
    if (best < 0 || sum < best) {
      best = sum;
      best_k = a;
    }
  }
  return best_k;
}

// Whether the take `t` belongs to a whole-device request its vendor scores by links.
bool LinkScored(const PodContext& ctx, const Taken& t) {
  if (!ctx.filters[t.vendor].link_score) return false;
  for (const Req& r : ctx.containers[t.container]) {
    if (r.vendor == t.vendor) return r.r.Exclusive();
  }
  return false;
}

}  // namespace

bool FindNumaGroup(const LedgerNode& node, int32_t need, bool mig_request, Scratch& s) {
  for (size_t gi = 0; gi < s.order.size(); ++gi) {
    int32_t numa = s.cands[s.order[gi]].numa;
    // Each NUMA node is tried once, at its most preferred device.
    bool seen = false;
    for (size_t k = 0; k < gi; ++k) seen = seen || s.cands[s.order[k]].numa == numa;
    if (seen) continue;
    s.group.clear();
    for (uint16_t k : s.order) {
      if (s.cands[k].numa == numa) s.group.push_back(k);
    }
    if (static_cast<int32_t>(s.group.size()) >= need ||
        (mig_request && !s.group.empty() && Capacity(node, s, s.group, need) >= need)) {
      return true;
    }
  }
  return false;
}

device::TopologyChoice ChooseByTopologyPlugin(const LedgerStrings& strs, const LedgerNode& node,
                                              const device::Vendor& plugin,
                                              const std::vector<uint16_t>& pool, int32_t need,
                                              Scratch& s) {
  s.topo.clear();
  for (uint16_t k : pool) {
    const LedgerDevice& d = node.devices[s.cands[k].dev];
    s.topo.push_back(device::DeviceCandidate{d.index, s.cands[k].idle,
                                             strs.modes.Get(d.mode_name), d.group});
  }
  return plugin.ChooseDevices(s.topo, need);
}

void ChooseByLinkScore(const LedgerNode& node, const std::vector<uint16_t>& pool, int32_t need,
                       Scratch& s) {
  if (static_cast<int32_t>(pool.size()) == need) {
    s.pick = pool;
  } else if (need == 1) {
    s.pick.assign(1, LeastLinked(node, s.cands, pool));
  } else {
    BestCombination(node, pool, s.cands, static_cast<size_t>(need), &s.pick);
  }
}

// NodeVerdict::preference (its link part, Vendor::scores_links): per such vendor, with a link
// worth 10 between two devices of one group, 10 x the links among the devices its whole-device
// requests took, less the links lost: those of the node's idle devices (before the pod) that
// neither the taken set nor the idle rest keeps.
double LinkScore(const PodContext& ctx, const LedgerNode& node, const Scratch& s) {
  if (!ctx.any_link_score) return 0;
  double sum = 0;
  for (size_t vi = 0; vi < ctx.filters.size(); ++vi) {
    if (!ctx.filters[vi].link_score) continue;
    std::vector<uint16_t> taken;  // once each
    for (const Taken& t : s.taken) {
      if (t.vendor == vi && LinkScored(ctx, t) &&
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
      const bool idle = s.base[i].slots == 0;
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
double Cohesion(const PodContext& ctx, const LedgerNode& node, const Scratch& s) {
  auto group = [&](const Taken& t) { return node.devices[t.dev].group; };
  if (std::none_of(s.taken.begin(), s.taken.end(), [&](const Taken& t) { return group(t); })) {
    return 0;
  }
  double sum = 0;
  for (size_t a = 0; a < s.taken.size(); ++a) {
    if (LinkScored(ctx, s.taken[a])) continue;
    auto same_request = [&](const Taken& t) {
      return t.container == s.taken[a].container && t.vendor == s.taken[a].vendor;
    };
    // Each request once, at its first device.
    if (std::any_of(s.taken.begin(), s.taken.begin() + a, same_request)) continue;
    int32_t total = 0, best = 0;
    for (const Taken& t : s.taken) {
      if (!same_request(t)) continue;
      ++total;
      if (group(t) == 0) continue;
      best = std::max<int32_t>(best, static_cast<int32_t>(std::count_if(
                                         s.taken.begin(), s.taken.end(), [&](const Taken& u) {
                                           return same_request(u) && group(u) == group(t);
                                         })));
    }
    if (total > 1) sum += static_cast<double>(best) / total;
  }
  return 10.0 * sum;
}

}  // namespace hami::scheduler::placement_internal
