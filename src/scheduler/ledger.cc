#include "scheduler/ledger.h"

#include <algorithm>
#include <atomic>
#include <limits>
#include <map>

#include "device/mig_allocation.h"
#include "device/text_util.h"
#include "device/topology_score.h"
#include "scheduler/ledger_internal.h"

namespace hami::scheduler {
namespace {

using ledger_internal::Fnv;
using ledger_internal::Has;
using ledger_internal::kFnvOffset;
using ledger_internal::Lookup;
using ledger_internal::Over;
using ledger_internal::Saturate;

}  // namespace

std::vector<CollapsedCharge> CollapsePodDevices(const device::PodDevices& devices,
                                                size_t init_count, bool init_done) {
  struct Acc {
    int64_t init_mem = 0, init_cores = 0;
    bool init_used = false;
    int64_t app_mem = 0, app_cores = 0, app_slots = 0;
  };
  std::map<std::string_view, Acc> acc;
  for (const auto& [vendor, list] : devices) {
    for (size_t c = 0; c < list.size(); ++c) {
      bool init = c < init_count;
      if (init && init_done) continue;
      for (const device::ContainerDevice& d : list[c]) {
        Acc& a = acc[d.uuid];
        if (init) {
          a.init_used = true;
          a.init_mem = std::max<int64_t>(a.init_mem, d.mem_mib);
          a.init_cores = std::max<int64_t>(a.init_cores, d.cores);
        } else {
          a.app_mem += d.mem_mib;
          a.app_cores += d.cores;
          a.app_slots += 1;
        }
      }
    }
  }
  std::vector<CollapsedCharge> out;
  out.reserve(acc.size());
  for (const auto& [uuid, a] : acc) {
    CollapsedCharge c;
    c.uuid = uuid;
    c.slots = Saturate(std::max<int64_t>({a.app_slots, a.init_used ? 1 : 0, 1}));
    c.mem = Saturate(std::max(a.init_mem, a.app_mem));
    c.cores = Saturate(std::max(a.init_cores, a.app_cores));
    out.push_back(c);
  }
  return out;
}

Ledger::Ledger(const device::VendorRegistry& vendors, const Clock& clock, LedgerOptions options)
    : vendors_(vendors), clock_(clock), options_(options) {
  for (const auto& v : vendors_.vendors()) {
    for (const std::string* k :
         {&v->annotation_keys().node_register, &v->annotation_keys().node_setting}) {
      if (!k->empty()) device_keys_.push_back(*k);
    }
    for (std::string& k : v->node_preference_annotations()) device_keys_.push_back(std::move(k));
  }
  std::sort(device_keys_.begin(), device_keys_.end());
  device_keys_.erase(std::unique(device_keys_.begin(), device_keys_.end()), device_keys_.end());
}

namespace {

uint64_t NextNodeVersion() {
  static std::atomic<uint64_t> counter{0};
  return counter.fetch_add(1, std::memory_order_relaxed) + 1;
}

}  // namespace

uint32_t Ledger::NodeSlot(std::string_view name) {
  uint32_t id = strings_.nodes.Intern(name);
  if (id >= node_by_name_.size()) node_by_name_.resize(id + 1, -1);
  if (node_by_name_[id] < 0) {
    node_by_name_[id] = static_cast<int32_t>(nodes_.size());
    LedgerNode n;
    n.name = id;
    n.version = NextNodeVersion();
    nodes_.push_back(std::move(n));
  }
  return static_cast<uint32_t>(node_by_name_[id]);
}

int32_t Ledger::FindNode(std::string_view name) const {
  uint32_t id = strings_.nodes.Find(name);
  if (id == StringInterner::kNotFound || id >= node_by_name_.size()) return -1;
  return node_by_name_[id];
}

const LedgerPod* Ledger::FindPod(std::string_view uid) const {
  auto it = pod_by_uid_.find(std::string(uid));
  return it == pod_by_uid_.end() ? nullptr : &pods_[it->second];
}

Status Ledger::UpsertNode(const NodeObject& obj) {
  uint64_t h = kFnvOffset;
  auto mix_key = [&](std::string_view key) {
    h = Fnv(key, h);
    h = Fnv(Has(obj.annotations, key) ? "=1" : "=0", h);
    h = Fnv(Lookup(obj.annotations, key), h);
  };
  for (const std::string& key : device_keys_) mix_key(key);
  for (const auto& [res, amount] : obj.capacity) {
    h = Fnv(res, h);
    h = Fnv(std::to_string(amount), h);
  }
  for (const auto& [key, value] : obj.labels) {
    h = Fnv(key, h);
    h = Fnv(value, h);
  }
  mix_key(device::kDeviceCordonAnnotation);
  mix_key(device::kNvidiaPairScoreAnnotation);
  mix_key(kNodeSchedulerPolicyAnnotation);
  mix_key(kGpuSchedulerPolicyAnnotation);
  h |= 1;  // never 0, the "nothing built" value

  uint32_t slot = NodeSlot(obj.name);
  LedgerNode& node = nodes_[slot];
  if (node.registration_hash == h) return OkStatus();
  node.registration_hash = h;
  node.version = NextNodeVersion();
  bool undecodable = false;
  Status s = BuildDevices(obj, node, &undecodable);
  // Devices start empty: re-apply every pod held on this node.
  for (uint32_t p : node.pods) ApplyPod(p, +1);
  // A registration that did not decode is retried (and reported) on the next update.
  if (undecodable) node.registration_hash = 0;
  return s;
}

void Ledger::RemoveNode(std::string_view name) {
  int32_t slot = FindNode(name);
  if (slot < 0) return;
  LedgerNode& node = nodes_[slot];
  node.devices.clear();
  node.devices.shrink_to_fit();
  node.mig.reset();
  node.task_classes.reset();
  node.preferences.reset();
  node.pair_scores.clear();
  node.registered = false;
  node.has_gpu_policy = node.has_node_policy = false;
  node.registration_hash = 0;
  node.version = NextNodeVersion();
}

void Ledger::ApplyPod(uint32_t pod_slot, int sign) {
  LedgerPod& pod = pods_[pod_slot];
  LedgerNode& node = nodes_[pod.node];
  node.version = NextNodeVersion();
  if (node.devices.empty()) return;
  auto find = [&](uint32_t uuid) -> int {
    for (size_t i = 0; i < node.devices.size(); ++i) {
      if (node.devices[i].uuid == uuid) return static_cast<int>(i);
    }
    return -1;
  };
  for (const Charge& c : pod.charges) {
    int i = find(c.uuid);
    if (i < 0) continue;
    LedgerDevice& d = node.devices[i];
    d.used_slots += sign * c.slots;
    d.used_mem += sign * int64_t{c.mem};
    d.used_cores += sign * int64_t{c.cores};
    if (node.task_classes) {
      const device::Vendor& v = *vendors_.vendors()[d.vendor];
      if (v.uses_task_classes()) {
        const bool exclusive = d.devcore > 0 && c.cores >= d.devcore;
        uint8_t cls = v.ChargeClass(pod.task_class, exclusive) % device::kTaskClassCount;
        (*node.task_classes)[i][cls] = static_cast<uint16_t>((*node.task_classes)[i][cls] + sign);
      }
    }
    if (d.mode == DeviceMode::kMig) {
      bool reserved = std::any_of(pod.mig.begin(), pod.mig.end(),
                                  [&](const MigCharge& m) { return m.uuid == c.uuid; });
      if (!reserved) d.mig_anomalies += sign;
    }
  }
  for (const MigCharge& m : pod.mig) {
    int i = find(m.uuid);
    if (i < 0) continue;
    LedgerDevice& d = node.devices[i];
    if (d.mode != DeviceMode::kMig || !node.mig) {
      d.mig_anomalies += sign;
      continue;
    }
    std::vector<MigInUse>& in_use = node.mig->in_use[i];
    if (sign > 0) {
      in_use.push_back(MigInUse{m.profile, m.placement, pod_slot});
    } else {
      for (size_t k = 0; k < in_use.size(); ++k) {
        if (in_use[k].pod == pod_slot && in_use[k].profile == m.profile &&
            in_use[k].placement == m.placement) {
          in_use.erase(in_use.begin() + static_cast<ptrdiff_t>(k));
          break;
        }
      }
    }
  }
}

void Ledger::DetachPod(uint32_t pod_slot) {
  LedgerPod& pod = pods_[pod_slot];
  std::vector<uint32_t>& list = nodes_[pod.node].pods;
  uint32_t last = list.back();
  list[pod.pos_in_node] = last;
  pods_[last].pos_in_node = pod.pos_in_node;
  list.pop_back();
}

Status Ledger::StorePod(std::string_view uid, std::string_view ns, std::string_view name,
                        std::string_view node_name, const device::PodDevices& devices,
                        size_t init_count, bool init_done,
                        const std::vector<device::MigAllocation>& mig, PodState state,
                        int64_t expires_at, uint8_t task_class) {
  std::vector<CollapsedCharge> collapsed = CollapsePodDevices(devices, init_count, init_done);
  uint32_t node_slot = NodeSlot(node_name);

  uint32_t slot;
  auto it = pod_by_uid_.find(std::string(uid));
  if (it != pod_by_uid_.end()) {
    slot = it->second;
    ApplyPod(slot, -1);
    DetachPod(slot);
  } else {
    if (!free_pods_.empty()) {
      slot = free_pods_.back();
      free_pods_.pop_back();
    } else {
      slot = static_cast<uint32_t>(pods_.size());
      pods_.emplace_back();
    }
    pod_by_uid_.emplace(std::string(uid), slot);
  }
  LedgerPod& pod = pods_[slot];
  pod.uid.assign(uid);
  pod.name_space.assign(ns);
  pod.name.assign(name);
  pod.node = node_slot;
  pod.state = state;
  pod.live = true;
  pod.expires_at = state == PodState::kReserved ? expires_at : 0;
  pod.task_class = task_class;
  ++pod.generation;
  pod.charges.clear();
  pod.charges.reserve(collapsed.size());
  for (const CollapsedCharge& c : collapsed) {
    pod.charges.push_back(Charge{strings_.uuids.Intern(c.uuid), c.slots, c.mem, c.cores});
  }
  pod.mig.clear();
  for (const device::MigAllocation& m : mig) {
    if (init_done && static_cast<size_t>(m.container_index) < init_count) continue;
    pod.mig.push_back(MigCharge{strings_.uuids.Intern(m.gpu_uuid),
                                strings_.mig_profiles.Intern(m.profile), m.placement});
  }
  LedgerNode& node = nodes_[node_slot];
  pod.pos_in_node = static_cast<uint32_t>(node.pods.size());
  node.pods.push_back(slot);
  ApplyPod(slot, +1);
  if (state == PodState::kReserved) expiries_.push(Expiry{expires_at, slot, pod.generation});
  return OkStatus();
}

Status Ledger::UpsertPod(const PodObject& obj, std::vector<std::string>* dropped) {
  std::string_view node = Lookup(obj.annotations, kAssignedNodeAnnotation);
  if (node.empty() || obj.phase == PodPhase::kSucceeded || obj.phase == PodPhase::kFailed) {
    RemovePod(obj.uid);
    return OkStatus();
  }
  Result<device::PodDevices> devices =
      device::DecodePodDevices(vendors_, obj.annotations, device::PodDeviceList::kAllocated);
  if (!devices.ok()) {
    RemovePod(obj.uid);
    return devices.status().WithContext("pod " + obj.name_space + "/" + obj.name);
  }
  if (devices->empty()) {
    RemovePod(obj.uid);
    return OkStatus();
  }
  std::vector<device::MigAllocation> mig;
  if (Has(obj.annotations, device::kMigAllocationsAnnotation)) {
    Result<std::vector<device::MigAllocation>> m =
        device::DecodeMigAllocations(Lookup(obj.annotations, device::kMigAllocationsAnnotation));
    if (!m.ok()) {
      RemovePod(obj.uid);
      return m.status().WithContext("pod " + obj.name_space + "/" + obj.name);
    }
    mig = std::move(m).value();
  }

  int64_t now = clock_.NowUnixSeconds();
  PodState state = obj.node_name.empty() ? PodState::kReserved : PodState::kBound;
  const LedgerPod* existing = FindPod(obj.uid);
  // Confirm() may run ahead of the informer: never fall back from bound to reserved.
  if (existing != nullptr && existing->state == PodState::kBound) state = PodState::kBound;
  int64_t expires_at = 0;
  if (state == PodState::kReserved) {
    int64_t since = now;
    int64_t t = 0;
    std::string_view stamp =
        device::text::TrimSpace(Lookup(obj.annotations, kAssignedTimeAnnotation));
    if (device::text::ParseInt(stamp, 0, std::numeric_limits<int64_t>::max() / 2, &t) == nullptr) {
      since = t;
    } else if (existing != nullptr) {
      since = existing->expires_at - options_.reservation_ttl_seconds;
    }
    expires_at = since + options_.reservation_ttl_seconds;
    if (expires_at <= now) {
      RemovePod(obj.uid);
      return OkStatus();
    }
  }
  HAMI_RETURN_IF_ERROR(StorePod(obj.uid, obj.name_space, obj.name, node, *devices,
                                obj.init_container_count, obj.init_containers_done, mig, state,
                                expires_at, TaskClassOf(*devices, obj.annotations)));
  return GuardCapacity(obj.uid, dropped);
}
// A placement seen on a pod is a claim, not a fact, until the pod is bound: a scheduler that gave
// its reservation up may have left it behind. So a reserved pod that would over-commit a device
// is not counted, and a bound pod (what runs) displaces reserved ones from a device it would
// over-commit.
Status Ledger::GuardCapacity(std::string_view uid, std::vector<std::string>* dropped) {
  auto it = pod_by_uid_.find(std::string(uid));
  if (it == pod_by_uid_.end()) return OkStatus();
  const uint32_t slot = it->second;
  LedgerNode& node = nodes_[pods_[slot].node];
  auto device_of = [&](uint32_t uuid) -> LedgerDevice* {
    for (LedgerDevice& d : node.devices) {
      if (d.uuid == uuid) return &d;
    }
    return nullptr;
  };
  if (pods_[slot].state == PodState::kReserved) {
    for (const Charge& c : pods_[slot].charges) {
      const LedgerDevice* d = device_of(c.uuid);
      if (d == nullptr || !Over(*d)) continue;
      std::string why = "pod " + pods_[slot].name_space + "/" + pods_[slot].name +
                        ": its placement on " + std::string(strings_.nodes.Get(node.name)) +
                        " would over-commit " + std::string(strings_.uuids.Get(d->uuid)) +
                        " (a reservation given up earlier); not counted";
      RemovePod(uid);
      return FailedPreconditionError(why);
    }
    return OkStatus();
  }
  for (const Charge& c : pods_[slot].charges) {
    LedgerDevice* d = device_of(c.uuid);
    if (d == nullptr || !Over(*d)) continue;
    // Newest reservations go first (they are the likeliest leftovers).
    std::vector<uint32_t> reserved;
    for (uint32_t p : node.pods) {
      const LedgerPod& other = pods_[p];
      if (other.state != PodState::kReserved || p == slot) continue;
      for (const Charge& oc : other.charges) {
        if (oc.uuid == c.uuid) {
          reserved.push_back(p);
          break;
        }
      }
    }
    std::sort(reserved.begin(), reserved.end(), [&](uint32_t a, uint32_t b) {
      return pods_[a].expires_at > pods_[b].expires_at;
    });
    for (uint32_t p : reserved) {
      if (!Over(*d)) break;
      if (dropped != nullptr) dropped->push_back(pods_[p].name_space + "/" + pods_[p].name);
      std::string other_uid = pods_[p].uid;
      RemovePod(other_uid);
    }
  }
  return OkStatus();
}

void Ledger::RemovePod(std::string_view uid) {
  auto it = pod_by_uid_.find(std::string(uid));
  if (it == pod_by_uid_.end()) return;
  uint32_t slot = it->second;
  ApplyPod(slot, -1);
  DetachPod(slot);
  LedgerPod& pod = pods_[slot];
  pod.live = false;
  ++pod.generation;
  std::string().swap(pod.uid);
  std::string().swap(pod.name_space);
  std::string().swap(pod.name);
  std::vector<Charge>().swap(pod.charges);
  std::vector<MigCharge>().swap(pod.mig);
  pod_by_uid_.erase(it);
  free_pods_.push_back(slot);
}

uint8_t Ledger::TaskClassOf(const device::PodDevices& devices,
                            const device::Annotations& pod) const {
  for (const auto& [key, list] : devices) {
    const device::Vendor* v = vendors_.Find(key);
    if (v != nullptr && v->uses_task_classes()) {
      return static_cast<uint8_t>(v->TaskClass(pod) % device::kTaskClassCount);
    }
  }
  return 0;
}

Status Ledger::Reserve(const Reservation& r) {
  int32_t node = FindNode(r.node);
  if (node < 0 || !nodes_[node].registered) {
    return FailedPreconditionError("reserve " + r.name_space + "/" + r.name + ": node " +
                                   device::text::Quote(r.node) + " is not registered");
  }
  int64_t since = r.since != 0 ? r.since : clock_.NowUnixSeconds();
  int64_t expires_at = since + options_.reservation_ttl_seconds;
  return StorePod(r.uid, r.name_space, r.name, r.node, r.devices, r.init_container_count, false,
                  r.mig, PodState::kReserved, expires_at, r.task_class);
}

Status Ledger::Confirm(std::string_view uid) {
  auto it = pod_by_uid_.find(std::string(uid));
  if (it == pod_by_uid_.end()) return NotFoundError("no reservation for pod " + std::string(uid));
  LedgerPod& pod = pods_[it->second];
  pod.state = PodState::kBound;
  pod.expires_at = 0;
  ++pod.generation;
  return OkStatus();
}

size_t Ledger::ExpireReservations() {
  int64_t now = clock_.NowUnixSeconds();
  size_t n = 0;
  while (!expiries_.empty() && expiries_.top().at <= now) {
    Expiry e = expiries_.top();
    expiries_.pop();
    const LedgerPod& pod = pods_[e.pod];
    if (!pod.live || pod.generation != e.generation || pod.state != PodState::kReserved) continue;
    std::string uid = pod.uid;
    RemovePod(uid);
    ++n;
  }
  return n;
}
}  // namespace hami::scheduler
