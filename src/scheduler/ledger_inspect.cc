// The ledger's read-only inspection: the canonical dump and its fingerprint, the consistency
// check, the over-committed devices and the memory estimate. Called by tests, benchmarks and the
// service's debug endpoints, never while placing a pod.
#include "scheduler/ledger.h"

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "scheduler/ledger_internal.h"

namespace hami::scheduler {
namespace {

using ledger_internal::Fnv;
using ledger_internal::Over;

// Final avalanche so that summing item hashes stays collision-resistant.
uint64_t Mix(uint64_t x) {
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdull;
  x ^= x >> 33;
  x *= 0xc4ceb9fe1a85ec53ull;
  x ^= x >> 33;
  return x;
}

std::string DeviceLine(const LedgerStrings& s, const LedgerNode& node, size_t i,
                       const device::VendorRegistry& vendors) {
  const LedgerDevice& d = node.devices[i];
  std::string out =
      "  dev " + std::string(s.uuids.Get(d.uuid)) +
      " vendor=" + std::string(vendors.vendors()[d.vendor]->Key()) +
      " idx=" + std::to_string(d.index) + " type=" + std::string(s.types.Get(d.type)) +
      " mode=" + std::string(s.modes.Get(d.mode_name)) + " count=" + std::to_string(d.count) +
      " mem=" + std::to_string(d.devmem) + " core=" + std::to_string(d.devcore) +
      " numa=" + std::to_string(d.numa) + " health=" + (d.health ? "1" : "0") +
      " cordon=" + (d.cordoned ? "1" : "0") + " used=" + std::to_string(d.used_slots) + "/" +
      std::to_string(d.used_mem) + "/" + std::to_string(d.used_cores) +
      " anomalies=" + std::to_string(d.mig_anomalies);
  if (d.group != 0) out += " group=" + std::string(s.groups.Get(d.group - 1));
  if (node.task_classes) {
    for (size_t c = 0; c < device::kTaskClassCount; ++c) {
      uint16_t n = (*node.task_classes)[i][c];
      if (n != 0) out += " class" + std::to_string(c) + "=" + std::to_string(n);
    }
  }
  if (node.mig) {
    std::vector<std::string> mig;
    for (const MigInUse& m : node.mig->in_use[i]) {
      mig.push_back(std::string(s.mig_profiles.Get(m.profile)) + "@" +
                    std::to_string(m.placement.start) + "+" + std::to_string(m.placement.size));
    }
    std::sort(mig.begin(), mig.end());
    for (const std::string& m : mig) out += " mig=" + m;
    for (const device::MigProfile& p : node.mig->profiles[i]) out += " profile=" + p.name;
  }
  return out;
}

std::string NodeText(const Ledger& l, const LedgerNode& node) {
  const LedgerStrings& s = l.strings();
  std::string out = "node " + std::string(s.nodes.Get(node.name));
  if (node.has_node_policy) out += " node-policy=" + std::string(NodePolicyName(node.node_policy));
  if (node.has_gpu_policy) out += " gpu-policy=" + node.gpu_policy.ToString();
  out += "\n";
  for (size_t i = 0; i < node.devices.size(); ++i) {
    out += DeviceLine(s, node, i, l.vendors()) + "\n";
  }
  if (node.preferences) {
    for (const auto& [vi, t] : *node.preferences) {
      out += "  prefer " + std::string(l.vendors().vendors()[vi]->Key());
      for (const auto& [n, v] : t.binpack)
        out += " binpack" + std::to_string(n) + "=" + std::to_string(v);
      for (const auto& [n, v] : t.spread)
        out += " spread" + std::to_string(n) + "=" + std::to_string(v);
      out += "\n";
    }
  }
  for (size_t i = 0; i < node.pair_scores.size(); ++i) {
    if (node.pair_scores[i] != 0) {
      out += "  link " + std::to_string(i) + "=" + std::to_string(node.pair_scores[i]) + "\n";
    }
  }
  return out;
}

std::string PodText(const Ledger& l, const LedgerPod& pod) {
  const LedgerStrings& s = l.strings();
  std::string out =
      "pod " + pod.uid + " " + pod.name_space + "/" + pod.name +
      " node=" + std::string(s.nodes.Get(l.nodes()[pod.node].name)) +
      (pod.state == PodState::kBound ? " bound"
                                     : " reserved-until=" + std::to_string(pod.expires_at));
  std::vector<std::string> items;
  for (const Charge& c : pod.charges) {
    items.push_back(" " + std::string(s.uuids.Get(c.uuid)) + ":" + std::to_string(c.slots) + "/" +
                    std::to_string(c.mem) + "/" + std::to_string(c.cores));
  }
  for (const MigCharge& m : pod.mig) {
    items.push_back(" mig:" + std::string(s.uuids.Get(m.uuid)) + ":" +
                    std::string(s.mig_profiles.Get(m.profile)) + "@" +
                    std::to_string(m.placement.start) + "+" + std::to_string(m.placement.size));
  }
  std::sort(items.begin(), items.end());
  for (const std::string& i : items) out += i;
  return out + "\n";
}

}  // namespace

std::string Ledger::CanonicalDump() const {
  std::vector<std::string> nodes;
  for (const LedgerNode& n : nodes_) {
    if (n.registered) nodes.push_back(NodeText(*this, n));
  }
  std::sort(nodes.begin(), nodes.end());
  std::vector<std::pair<std::string_view, uint32_t>> pods;
  pods.reserve(pod_by_uid_.size());
  for (const auto& [uid, slot] : pod_by_uid_) pods.emplace_back(uid, slot);
  std::sort(pods.begin(), pods.end());
  std::string out;
  for (const std::string& n : nodes) out += n;
  for (const auto& [uid, slot] : pods) out += PodText(*this, pods_[slot]);
  return out;
}

uint64_t Ledger::Fingerprint() const {
  // Order-independent: a sum of well-mixed per-item hashes.
  uint64_t h = 0;
  for (const LedgerNode& n : nodes_) {
    if (n.registered) h += Mix(Fnv(NodeText(*this, n)));
  }
  for (const auto& [uid, slot] : pod_by_uid_) h += Mix(Fnv(PodText(*this, pods_[slot])));
  return h;
}

Status Ledger::CheckConsistency() const {
  for (size_t ni = 0; ni < nodes_.size(); ++ni) {
    const LedgerNode& node = nodes_[ni];
    std::vector<LedgerDevice> expect = node.devices;
    for (LedgerDevice& d : expect) {
      d.used_slots = 0;
      d.used_mem = d.used_cores = 0;
    }
    for (size_t k = 0; k < node.pods.size(); ++k) {
      const LedgerPod& pod = pods_[node.pods[k]];
      if (!pod.live || pod.node != ni || pod.pos_in_node != k) {
        return InternalError("node pod index broken at " +
                             std::string(strings_.nodes.Get(node.name)));
      }
      for (const Charge& c : pod.charges) {
        for (LedgerDevice& d : expect) {
          if (d.uuid != c.uuid) continue;
          d.used_slots += c.slots;
          d.used_mem += c.mem;
          d.used_cores += c.cores;
        }
      }
    }
    for (size_t i = 0; i < expect.size(); ++i) {
      const LedgerDevice& a = expect[i];
      const LedgerDevice& b = node.devices[i];
      if (a.used_slots != b.used_slots || a.used_mem != b.used_mem ||
          a.used_cores != b.used_cores) {
        return InternalError("usage of " + std::string(strings_.uuids.Get(b.uuid)) +
                             " differs from the sum of its pods' charges");
      }
    }
  }
  size_t live = 0;
  for (size_t i = 0; i < pods_.size(); ++i) {
    if (!pods_[i].live) continue;
    ++live;
    auto it = pod_by_uid_.find(pods_[i].uid);
    if (it == pod_by_uid_.end() || it->second != i) return InternalError("pod uid index broken");
  }
  if (live != pod_by_uid_.size()) return InternalError("pod count mismatch");
  return OkStatus();
}

std::vector<OverCommit> Ledger::OverCommitted() const {
  std::vector<OverCommit> out;
  for (const LedgerNode& node : nodes_) {
    for (const LedgerDevice& d : node.devices) {
      if (Over(d)) {
        out.push_back(OverCommit{std::string(strings_.nodes.Get(node.name)),
                                 std::string(strings_.uuids.Get(d.uuid)), d.used_slots, d.count,
                                 d.used_mem, d.devmem, d.used_cores, d.devcore});
      }
    }
  }
  return out;
}

size_t Ledger::MemoryBytes() const {
  auto str = [](const std::string& s) { return s.capacity() > 15 ? s.capacity() + 1 : 0; };
  size_t b = sizeof(*this);
  b += strings_.uuids.MemoryBytes() + strings_.types.MemoryBytes() + strings_.modes.MemoryBytes() +
       strings_.nodes.MemoryBytes() + strings_.mig_profiles.MemoryBytes();
  b += nodes_.capacity() * sizeof(LedgerNode) + node_by_name_.capacity() * sizeof(int32_t);
  for (const LedgerNode& n : nodes_) {
    b += n.devices.capacity() * sizeof(LedgerDevice) + n.pods.capacity() * sizeof(uint32_t) +
         n.pair_scores.capacity() * sizeof(int32_t);
    if (n.mig) b += sizeof(NodeMig);
  }
  b += pods_.capacity() * sizeof(LedgerPod) + free_pods_.capacity() * sizeof(uint32_t);
  for (const LedgerPod& p : pods_) {
    b += str(p.uid) + str(p.name_space) + str(p.name) + p.charges.capacity() * sizeof(Charge) +
         p.mig.capacity() * sizeof(MigCharge);
  }
  for (const auto& [uid, slot] : pod_by_uid_) {
    b += str(uid) + sizeof(std::string) + sizeof(uint32_t) + 2 * sizeof(void*);
  }
  b += pod_by_uid_.bucket_count() * sizeof(void*);
  b += expiries_.size() * sizeof(Expiry);
  return b;
}

}  // namespace hami::scheduler
