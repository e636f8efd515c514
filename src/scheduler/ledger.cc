#include "scheduler/ledger.h"

#include <algorithm>
#include <atomic>
#include <limits>
#include <map>

#include "device/mig_allocation.h"
#include "device/text_util.h"
#include "device/topology_score.h"

namespace hami::scheduler {
namespace {

constexpr uint64_t kFnvOffset = 1469598103934665603ull;
constexpr uint64_t kFnvPrime = 1099511628211ull;

uint64_t Fnv(std::string_view s, uint64_t h = kFnvOffset) {
  for (unsigned char c : s) {
    h ^= c;
    h *= kFnvPrime;
  }
  return h;
}

// Final avalanche so that summing item hashes stays collision-resistant.
uint64_t Mix(uint64_t x) {
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdull;
  x ^= x >> 33;
  x *= 0xc4ceb9fe1a85ec53ull;
  x ^= x >> 33;
  return x;
}

int32_t Saturate(int64_t v) {
  if (v > std::numeric_limits<int32_t>::max()) return std::numeric_limits<int32_t>::max();
  return static_cast<int32_t>(v);
}

DeviceMode ModeOf(std::string_view mode) {
  if (mode == device::kModeHamiCore) return DeviceMode::kHamiCore;
  if (mode == device::kModeMig) return DeviceMode::kMig;
  if (mode == device::kModeMps) return DeviceMode::kMps;
  return DeviceMode::kOther;
}

std::string_view Lookup(const device::Annotations& a, std::string_view key) {
  if (key.empty()) return {};
  auto it = a.find(key);
  return it == a.end() ? std::string_view() : std::string_view(it->second);
}

bool Has(const device::Annotations& a, std::string_view key) {
  return !key.empty() && a.find(key) != a.end();
}

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

namespace {

using VendorList = std::vector<std::unique_ptr<device::Vendor>>;

// Forgets everything BuildDevices derives from a node's registration.
void ResetDevices(LedgerNode& node) {
  node.devices.clear();
  node.mig.reset();
  node.task_classes.reset();
  node.preferences.reset();
  node.pair_scores.clear();
  node.registered = false;
  node.has_gpu_policy = node.has_node_policy = false;
}

LedgerDevice MakeDevice(LedgerStrings& strings, const device::DeviceInfo& info, uint8_t vendor) {
  LedgerDevice d;
  d.uuid = strings.uuids.Intern(info.id);
  d.type = strings.types.Intern(info.type);
  d.mode_name = strings.modes.Intern(info.mode);
  d.index = info.index;
  d.count = info.count;
  d.devmem = info.devmem;
  d.devcore = info.devcore;
  d.numa = info.numa;
  d.vendor = vendor;
  d.mode = ModeOf(info.mode);
  d.health = info.health;
  d.group = info.group.empty() ? 0 : strings.groups.Intern(info.group) + 1;
  return d;
}

// Appends one decoded device. Once a node has a MIG device its MIG tables run parallel to
// `devices` (empty entries for the others); a MIG device's profiles are kept smallest first.
void AddDevice(LedgerStrings& strings, LedgerNode& node, device::DeviceInfo& info,
               uint8_t vendor) {
  LedgerDevice d = MakeDevice(strings, info, vendor);
  if (d.mode == DeviceMode::kMig && !node.mig) node.mig = std::make_unique<NodeMig>();
  node.devices.push_back(d);
  if (!node.mig) return;
  node.mig->profiles.resize(node.devices.size());
  node.mig->in_use.resize(node.devices.size());
  if (d.mode != DeviceMode::kMig) return;
  std::vector<device::MigProfile> profiles = std::move(info.mig_profiles);
  std::stable_sort(profiles.begin(), profiles.end(),
                   [](const device::MigProfile& a, const device::MigProfile& b) {
                     if (a.memory_mib != b.memory_mib) return a.memory_mib < b.memory_mib;
                     return a.slice_count < b.slice_count;
                   });
  for (const device::MigProfile& p : profiles) strings.mig_profiles.Intern(p.name);
  node.mig->profiles.back() = std::move(profiles);
}

// Each vendor's node preference table (only vendors that declare preference annotations).
void DecodePreferences(const VendorList& vendor_list, const NodeObject& obj, LedgerNode& node) {
  for (size_t vi = 0; vi < vendor_list.size(); ++vi) {
    if (vendor_list[vi]->node_preference_annotations().empty()) continue;
    device::NodePreferenceTable t = vendor_list[vi]->DecodeNodePreferences(
        device::NodeView{obj.name, obj.annotations, obj.capacity, &obj.labels});
    if (t.empty()) continue;
    if (!node.preferences) {
      node.preferences =
          std::make_unique<std::vector<std::pair<uint8_t, device::NodePreferenceTable>>>();
    }
    node.preferences->emplace_back(static_cast<uint8_t>(vi), std::move(t));
  }
}

// Task-class counters exist only when some device's vendor uses them.
void AllocateTaskClasses(const VendorList& vendor_list, LedgerNode& node) {
  for (const LedgerDevice& d : node.devices) {
    if (vendor_list[d.vendor]->uses_task_classes()) {
      node.task_classes =
          std::make_unique<std::vector<device::TaskClassCounts>>(node.devices.size());
      break;
    }
  }
}

// Cordon: UUIDs excluded from new allocations.
void MarkCordoned(const LedgerStrings& strings, const NodeObject& obj, LedgerNode& node) {
  for (std::string_view raw :
       device::text::Split(Lookup(obj.annotations, device::kDeviceCordonAnnotation), ',')) {
    std::string_view id = device::text::TrimSpace(raw);
    if (id.empty()) continue;
    uint32_t uuid = strings.uuids.Find(id);
    for (LedgerDevice& d : node.devices) {
      if (d.uuid == uuid) d.cordoned = true;
    }
  }
}

// Policies on the node.
void ReadNodePolicies(const NodeObject& obj, LedgerNode& node) {
  if (std::string_view v = Lookup(obj.annotations, kNodeSchedulerPolicyAnnotation); !v.empty()) {
    node.has_node_policy = ParseNodePolicy(v, &node.node_policy);
  }
  if (std::string_view v = Lookup(obj.annotations, kGpuSchedulerPolicyAnnotation); !v.empty()) {
    node.has_gpu_policy = ParseGpuPolicy(v, &node.gpu_policy);
  }
}

// Spreads one (uuid a, uuid b, score) entry over the device matrix.
void AddPairScore(LedgerNode& node, uint32_t a, uint32_t b, int64_t score) {
  size_t n = node.devices.size();
  for (size_t i = 0; i < n; ++i) {
    if (node.devices[i].uuid != a) continue;
    for (size_t j = 0; j < n; ++j) {
      if (node.devices[j].uuid != b || i == j) continue;
      int32_t s = Saturate(std::max<int64_t>(score, 0));
      // Either side's entry counts (upstream reads both directions).
      node.pair_scores[i * n + j] = std::max(node.pair_scores[i * n + j], s);
      node.pair_scores[j * n + i] = std::max(node.pair_scores[j * n + i], s);
    }
  }
}

// Topology pair scores, as an n x n matrix over `devices`. An annotation that does not decode is
// ignored: the returned note says so, and the node schedules without topology.
Status DecodePairScoreMatrix(const LedgerStrings& strings, const NodeObject& obj,
                             LedgerNode& node) {
  if (!Has(obj.annotations, device::kNvidiaPairScoreAnnotation) || node.devices.empty()) {
    return OkStatus();
  }
  Result<device::DevicePairScores> scores =
      device::DecodePairScores(Lookup(obj.annotations, device::kNvidiaPairScoreAnnotation));
  if (!scores.ok()) {
    return scores.status().WithContext("node " + obj.name + " " +
                                       std::string(device::kNvidiaPairScoreAnnotation) +
                                       " (ignored)");
  }
  size_t n = node.devices.size();
  node.pair_scores.assign(n * n, 0);
  for (const device::DevicePairScore& row : *scores) {
    uint32_t a = strings.uuids.Find(row.uuid);
    for (const auto& [peer, score] : row.scores) {
      AddPairScore(node, a, strings.uuids.Find(peer), score);
    }
  }
  return OkStatus();
}

}  // namespace

Status Ledger::BuildDevices(const NodeObject& obj, LedgerNode& node, bool* undecodable) {
  *undecodable = false;
  ResetDevices(node);
  Status broken;
  const auto& vendor_list = vendors_.vendors();
  for (size_t vi = 0; vi < vendor_list.size(); ++vi) {
    Result<std::vector<device::DeviceInfo>> infos = vendor_list[vi]->DecodeNodeDevices(
        device::NodeView{obj.name, obj.annotations, obj.capacity, &obj.labels});
    if (!infos.ok()) {
      if (infos.status().code() == StatusCode::kNotFound) continue;
      // One vendor's broken registration leaves its devices out; the node's other vendors stay.
      if (broken.ok()) broken = infos.status().WithContext("node " + obj.name);
      *undecodable = true;
      continue;
    }
    for (device::DeviceInfo& info : *infos) {
      AddDevice(strings_, node, info, static_cast<uint8_t>(vi));
    }
  }
  if (node.mig) {
    node.mig->profiles.resize(node.devices.size());
    node.mig->in_use.resize(node.devices.size());
  }
  node.registered = !node.devices.empty();
  DecodePreferences(vendor_list, obj, node);
  AllocateTaskClasses(vendor_list, node);
  MarkCordoned(strings_, obj, node);
  ReadNodePolicies(obj, node);
  Status note = DecodePairScoreMatrix(strings_, obj, node);
  return broken.ok() ? note : broken;
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

namespace {
// More slots, memory or cores in use than the device has.
bool Over(const LedgerDevice& d) {
  return d.used_slots > d.count || d.used_mem > d.devmem || d.used_cores > d.devcore;
}
}  // namespace

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

namespace {

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
