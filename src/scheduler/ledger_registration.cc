// The ledger's reading of a node's registration: each vendor's devices with their MIG profiles,
// the vendors' node preferences, task-class counters, cordoned devices, the node's scheduling
// policies and topology pair scores. Runs on node updates only, never while placing a pod.
#include "scheduler/ledger.h"

#include <algorithm>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "device/text_util.h"
#include "device/topology_score.h"
#include "scheduler/ledger_internal.h"

namespace hami::scheduler {
namespace {

using ledger_internal::Has;
using ledger_internal::Lookup;
using ledger_internal::Saturate;

using VendorList = std::vector<std::unique_ptr<device::Vendor>>;

DeviceMode ModeOf(std::string_view mode) {
  if (mode == device::kModeHamiCore) return DeviceMode::kHamiCore;
  if (mode == device::kModeMig) return DeviceMode::kMig;
  if (mode == device::kModeMps) return DeviceMode::kMps;
  return DeviceMode::kOther;
}

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

}  // namespace hami::scheduler
