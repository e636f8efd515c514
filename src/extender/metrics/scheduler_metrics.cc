#include "extender/metrics/scheduler_metrics.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <deque>
#include <map>
#include <string_view>
#include <tuple>
#include <utility>

#include "common/prom_text.h"

namespace hami::extender {

using scheduler::Charge;
using scheduler::Ledger;
using scheduler::LedgerDevice;
using scheduler::LedgerNode;
using scheduler::LedgerPod;
using scheduler::LedgerStrings;
using scheduler::MigInUse;

namespace {

constexpr double kBytesPerMiB = 1048576.0;

// The row structs below hold label values already escaped (escaping once per row, not once per
// series, is a third of the rendering time saved).

// One registered device, in output order.
struct DeviceRow {
  const LedgerNode* node;
  size_t pos;  // in node->devices
  std::string_view node_name, uuid, type;
  const LedgerDevice& dev() const { return node->devices[pos]; }
};

// One device charge of one pod, in output order.
struct ChargeRow {
  std::string_view node_name, ns, pod_name;
  uint32_t device_index;  // UINT32_MAX when the device is not (or no longer) registered
  std::string_view uuid;
  const LedgerPod* pod;
  const Charge* charge;
};

// One MIG instance held on a device.
struct MigRow {
  const DeviceRow* device;
  std::string_view profile;
  device::MigPlacement placement;
};

struct QuotaRow {
  std::string_view ns, resource;
  double used, limit;
};

std::vector<uint32_t> SortedNodes(const Ledger& ledger) {
  const LedgerStrings& s = ledger.strings();
  std::vector<uint32_t> order;
  order.reserve(ledger.nodes().size());
  for (uint32_t i = 0; i < ledger.nodes().size(); ++i) {
    if (ledger.nodes()[i].registered) order.push_back(i);
  }
  std::sort(order.begin(), order.end(), [&](uint32_t a, uint32_t b) {
    return s.nodes.Get(ledger.nodes()[a].name) < s.nodes.Get(ledger.nodes()[b].name);
  });
  return order;
}

std::vector<QuotaRow> QuotaRows(const std::vector<QuotaMetric>& quotas) {
  constexpr std::string_view kLimitsPrefix = "limits.";
  std::map<std::pair<std::string_view, std::string_view>, std::pair<double, double>> merged;
  for (const QuotaMetric& q : quotas) {
    std::string_view resource = q.resource;
    if (resource.substr(0, kLimitsPrefix.size()) == kLimitsPrefix) {
      resource.remove_prefix(kLimitsPrefix.size());
    }
    auto [it, inserted] = merged.try_emplace({q.ns, resource}, q.used, q.limit);
    if (!inserted && q.limit < it->second.second) it->second = {q.used, q.limit};
  }
  std::vector<QuotaRow> rows;
  rows.reserve(merged.size());
  for (const auto& [key, v] : merged)
    rows.push_back(QuotaRow{key.first, key.second, v.first, v.second});
  return rows;
}

double MemoryRatio(const LedgerDevice& d) {
  return d.devmem > 0 ? static_cast<double>(d.used_mem) / d.devmem : 0.0;
}

// Label sets shared by the per-device families.
void DeviceLabels(PromPage& p, const DeviceRow& r) {
  p.Escaped("node", r.node_name);
  p.Escaped("device_uuid", r.uuid);
  p.IntLabel("device_index", r.dev().index);
}
void LegacyDeviceLabels(PromPage& p, const DeviceRow& r) {
  p.Escaped("nodeid", r.node_name);
  p.Escaped("deviceuuid", r.uuid);
  p.IntLabel("deviceidx", r.dev().index);
}

void RenderDevices(PromPage& p, const std::vector<DeviceRow>& rows) {
  p.Family("hami_gpu_memory_limit_bytes", "Device memory HAMi may allocate on a GPU, in bytes");
  for (const DeviceRow& r : rows) {
    p.Begin();
    DeviceLabels(p, r);
    p.Escaped("device_type", r.type);
    p.End(r.dev().devmem * kBytesPerMiB);
  }
  p.Family("hami_gpu_core_limit_ratio", "Device cores HAMi may allocate on a GPU, in percent");
  for (const DeviceRow& r : rows) {
    p.Begin();
    DeviceLabels(p, r);
    p.Escaped("device_type", r.type);
    p.End(r.dev().devcore);
  }
  p.Family("hami_gpu_memory_allocated_bytes", "Device memory allocated on a GPU, in bytes");
  for (const DeviceRow& r : rows) {
    p.Begin();
    DeviceLabels(p, r);
    p.Escaped("device_type", r.type);
    p.IntLabel("device_cores", r.dev().used_cores);
    p.End(static_cast<double>(r.dev().used_mem) * kBytesPerMiB);
  }
  // Upstream's name; declared untyped so that `promtool check metrics` does not take the
  // "_count" suffix for a summary's (PromQL treats both types alike).
  p.Family("hami_gpu_shared_count", "Number of tasks holding a share of a GPU", "untyped");
  for (const DeviceRow& r : rows) {
    p.Begin();
    DeviceLabels(p, r);
    p.Escaped("device_type", r.type);
    p.End(r.dev().used_slots);
  }
  p.Family("hami_gpu_core_allocated_ratio", "Device cores allocated on a GPU, in percent");
  for (const DeviceRow& r : rows) {
    p.Begin();
    DeviceLabels(p, r);
    p.Escaped("device_type", r.type);
    p.End(static_cast<double>(r.dev().used_cores));
  }
  p.Family("hami_node_gpu_overview", "GPU allocation overview on a node: allocated bytes");
  for (const DeviceRow& r : rows) {
    p.Begin();
    DeviceLabels(p, r);
    p.Escaped("device_type", r.type);
    p.IntLabel("device_cores", r.dev().used_cores);
    p.IntLabel("device_memory_limit", r.dev().devmem);
    p.End(static_cast<double>(r.dev().used_mem) * kBytesPerMiB);
  }
  p.Family("hami_node_gpu_memory_allocated_ratio",
           "Share of a GPU's memory that is allocated, from 0 to 1");
  for (const DeviceRow& r : rows) {
    p.Begin();
    DeviceLabels(p, r);
    p.End(MemoryRatio(r.dev()));
  }
}

void RenderLegacyDevices(PromPage& p, const std::vector<DeviceRow>& rows) {
  p.Family("GPUDeviceMemoryLimit", "Device memory limit of a GPU, in bytes (legacy name)");
  for (const DeviceRow& r : rows) {
    p.Begin();
    LegacyDeviceLabels(p, r);
    p.Escaped("devicetype", r.type);
    p.End(r.dev().devmem * kBytesPerMiB);
  }
  p.Family("GPUDeviceCoreLimit", "Device core limit of a GPU, in percent (legacy name)");
  for (const DeviceRow& r : rows) {
    p.Begin();
    LegacyDeviceLabels(p, r);
    p.Escaped("devicetype", r.type);
    p.End(r.dev().devcore);
  }
  p.Family("GPUDeviceMemoryAllocated", "Device memory allocated on a GPU, in bytes (legacy name)");
  for (const DeviceRow& r : rows) {
    p.Begin();
    LegacyDeviceLabels(p, r);
    p.IntLabel("devicecores", r.dev().used_cores);
    p.Escaped("devicetype", r.type);
    p.End(static_cast<double>(r.dev().used_mem) * kBytesPerMiB);
  }
  p.Family("GPUDeviceSharedNum", "Number of tasks holding a share of a GPU (legacy name)");
  for (const DeviceRow& r : rows) {
    p.Begin();
    LegacyDeviceLabels(p, r);
    p.Escaped("devicetype", r.type);
    p.End(r.dev().used_slots);
  }
  p.Family("GPUDeviceCoreAllocated", "Device cores allocated on a GPU, in percent (legacy name)");
  for (const DeviceRow& r : rows) {
    p.Begin();
    LegacyDeviceLabels(p, r);
    p.Escaped("devicetype", r.type);
    p.End(static_cast<double>(r.dev().used_cores));
  }
  p.Family("nodeGPUOverview", "GPU allocation overview on a node: allocated bytes (legacy name)");
  for (const DeviceRow& r : rows) {
    p.Begin();
    LegacyDeviceLabels(p, r);
    p.IntLabel("devicecores", r.dev().used_cores);
    p.IntLabel("devicememorylimit", r.dev().devmem);
    p.Escaped("devicetype", r.type);
    p.End(static_cast<double>(r.dev().used_mem) * kBytesPerMiB);
  }
  p.Family("nodeGPUMemoryPercentage",
           "Share of a GPU's memory that is allocated, from 0 to 1 (legacy name)");
  for (const DeviceRow& r : rows) {
    p.Begin();
    LegacyDeviceLabels(p, r);
    p.End(MemoryRatio(r.dev()));
  }
}

void RenderMig(PromPage& p, const std::vector<MigRow>& rows, bool legacy) {
  if (legacy) {
    // The legacy name is "<profile>-<gpu instance id>"; the scheduler does not know the id, so
    // instances of one profile on one GPU share a series.
    p.Family("nodeGPUMigInstance", "A MIG profile in use on a GPU (legacy name; always 1)");
    for (size_t i = 0; i < rows.size(); ++i) {
      const MigRow& m = rows[i];
      bool repeat = false;
      for (size_t j = i; j-- > 0 && rows[j].device == m.device;) {
        repeat |= rows[j].profile == m.profile;
      }
      if (repeat) continue;
      p.Begin();
      LegacyDeviceLabels(p, *m.device);
      p.Escaped("migname", m.profile);
      p.End(1);
    }
    return;
  }
  p.Family("hami_node_gpu_mig_instance_info", "A MIG instance held on a GPU (always 1)");
  for (const MigRow& m : rows) {
    p.Begin();
    DeviceLabels(p, *m.device);
    p.Label("mig_uuid", "");
    p.Escaped("profile", m.profile);
    p.Label("gpu_instance_id", "");
    p.Label("compute_instance_id", "");
    p.IntLabel("placement_start", m.placement.start);
    p.IntLabel("placement_size", m.placement.size);
    p.End(1);
  }
}

void RenderQuotas(PromPage& p, const std::vector<QuotaRow>& rows, bool legacy) {
  std::string limit;
  // The limit label is the quota's integer as written ("20000", never "2e+04").
  auto limit_text = [&](const QuotaRow& q) -> std::string_view {
    limit.clear();
    if (q.limit == std::trunc(q.limit) && std::fabs(q.limit) < 9007199254740992.0) {
      AppendPromInt(&limit, static_cast<int64_t>(q.limit));
    } else {
      AppendPromValue(&limit, q.limit);
    }
    return limit;
  };
  if (legacy) {
    p.Family("QuotaUsed", "Namespace use of a ResourceQuota limit (legacy name)");
    for (const QuotaRow& q : rows) {
      p.Begin();
      p.Label("quotanamespace", q.ns);
      p.Label("quotaName", q.resource);
      p.Label("limit", limit_text(q));
      p.End(q.used);
    }
    return;
  }
  p.Family("hami_resource_quota_used", "Namespace use of a ResourceQuota limit on a HAMi resource");
  for (const QuotaRow& q : rows) {
    p.Begin();
    p.Label("namespace", q.ns);
    p.Label("quota_name", q.resource);
    p.Label("limit", limit_text(q));
    p.End(q.used);
  }
  p.Family("hami_resource_quota_limit", "ResourceQuota limit on a HAMi resource in a namespace");
  for (const QuotaRow& q : rows) {
    p.Begin();
    p.Label("namespace", q.ns);
    p.Label("quota_name", q.resource);
    p.End(q.limit);
  }
}

void RenderCharges(PromPage& p, const std::vector<ChargeRow>& rows, bool legacy) {
  auto labels = [&](const ChargeRow& r) {
    p.Escaped("namespace", r.ns);
    p.Escaped("node", r.node_name);
    p.Escaped("pod", r.pod_name);
    p.Label("container_index", "0");
    p.Escaped("device_uuid", r.uuid);
  };
  auto legacy_labels = [&](const ChargeRow& r) {
    p.Escaped("podnamespace", r.ns);
    p.Escaped("nodename", r.node_name);
    p.Escaped("podname", r.pod_name);
    p.Label("containeridx", "0");
    p.Escaped("deviceuuid", r.uuid);
  };
  if (legacy) {
    p.Family("vGPUMemoryAllocated", "Device memory a pod holds on a GPU, in bytes (legacy name)");
    for (const ChargeRow& r : rows) {
      p.Begin();
      legacy_labels(r);
      p.End(r.charge->mem * kBytesPerMiB);
    }
    p.Family("vGPUCoreAllocated", "Device cores a pod holds on a GPU, in percent (legacy name)");
    for (const ChargeRow& r : rows) {
      p.Begin();
      legacy_labels(r);
      p.End(r.charge->cores);
    }
    return;
  }
  p.Family("hami_vgpu_memory_allocated_bytes", "Device memory a pod holds on a GPU, in bytes");
  for (const ChargeRow& r : rows) {
    p.Begin();
    labels(r);
    p.End(r.charge->mem * kBytesPerMiB);
  }
  p.Family("hami_vgpu_core_allocated_ratio", "Device cores a pod holds on a GPU, in percent");
  for (const ChargeRow& r : rows) {
    p.Begin();
    labels(r);
    p.End(r.charge->cores);
  }
}

// Every registered node's rows in output order, with label values escaped once. MigRow points
// into `devices`, which CollectRows reserves for every device up front so that it never
// reallocates; a LedgerRows is therefore filled in place and neither copied nor moved.
struct LedgerRows {
  LedgerRows() = default;
  LedgerRows(const LedgerRows&) = delete;
  LedgerRows& operator=(const LedgerRows&) = delete;

  // `v` as a label value: itself, or an escaped copy kept in `escaped_store`.
  std::string_view Escape(std::string_view v) {
    if (!PromNeedsEscaping(v)) return v;
    std::string& e = escaped_store.emplace_back();
    AppendPromEscaped(&e, v, /*quote=*/true);
    return e;
  }

  std::deque<std::string> escaped_store;  // stable storage for the rare values that need escaping
  std::vector<DeviceRow> devices;
  std::vector<ChargeRow> charges;
  std::vector<MigRow> migs;
};

// Appends `node`'s devices, by index then UUID.
void AddDeviceRows(const LedgerStrings& s, const LedgerNode& node, std::string_view node_name,
                   LedgerRows* rows) {
  std::vector<DeviceRow>& devices = rows->devices;
  size_t first = devices.size();
  for (size_t i = 0; i < node.devices.size(); ++i) {
    const LedgerDevice& d = node.devices[i];
    devices.push_back(DeviceRow{&node, i, node_name, rows->Escape(s.uuids.Get(d.uuid)),
                                rows->Escape(s.types.Get(d.type))});
  }
  std::sort(devices.begin() + static_cast<ptrdiff_t>(first), devices.end(),
            [](const DeviceRow& a, const DeviceRow& b) {
              return std::tie(a.dev().index, a.uuid) < std::tie(b.dev().index, b.uuid);
            });
}

// Appends the MIG instances held on `node`'s devices, whose rows start at `first_device`.
void AddMigRows(const LedgerStrings& s, const LedgerNode& node, size_t first_device,
                LedgerRows* rows) {
  std::vector<MigRow>& migs = rows->migs;
  size_t first_mig = migs.size();
  if (node.mig) {
    for (size_t r = first_device; r < rows->devices.size(); ++r) {
      const DeviceRow& device = rows->devices[r];
      if (device.pos >= node.mig->in_use.size()) continue;
      for (const MigInUse& m : node.mig->in_use[device.pos]) {
        migs.push_back(MigRow{&device, rows->Escape(s.mig_profiles.Get(m.profile)), m.placement});
      }
    }
  }
  // Within a device: by placement, then profile (placements of live instances do not overlap,
  // so this is the GPU's slice order).
  std::sort(migs.begin() + static_cast<ptrdiff_t>(first_mig), migs.end(),
            [](const MigRow& a, const MigRow& b) {
              return std::tie(a.device, a.placement.start, a.placement.size, a.profile) <
                     std::tie(b.device, b.placement.start, b.placement.size, b.profile);
            });
}

// Appends every charge of the pods on `node`, by device, then namespace, name and UID of the pod.
void AddChargeRows(const Ledger& ledger, const LedgerNode& node, std::string_view node_name,
                   LedgerRows* rows) {
  const LedgerStrings& s = ledger.strings();
  std::vector<ChargeRow>& charges = rows->charges;
  size_t first_charge = charges.size();
  for (uint32_t slot : node.pods) {
    const LedgerPod* pod = ledger.FindPodSlot(slot);
    if (pod == nullptr) continue;
    for (const Charge& c : pod->charges) {
      uint32_t index = UINT32_MAX;
      for (const LedgerDevice& d : node.devices) {
        if (d.uuid == c.uuid) {
          index = d.index;
          break;
        }
      }
      charges.push_back(ChargeRow{node_name, rows->Escape(pod->name_space),
                                  rows->Escape(pod->name), index,
                                  rows->Escape(s.uuids.Get(c.uuid)), pod, &c});
    }
  }
  std::sort(charges.begin() + static_cast<ptrdiff_t>(first_charge), charges.end(),
            [](const ChargeRow& a, const ChargeRow& b) {
              return std::tie(a.device_index, a.uuid, a.ns, a.pod_name, a.pod->uid) <
                     std::tie(b.device_index, b.uuid, b.ns, b.pod_name, b.pod->uid);
            });
}

// Fills `rows` (empty) from every registered node, in node-name order.
void CollectRows(const Ledger& ledger, LedgerRows* rows) {
  const LedgerStrings& s = ledger.strings();
  std::vector<uint32_t> order = SortedNodes(ledger);
  size_t device_count = 0;
  for (uint32_t n : order) device_count += ledger.nodes()[n].devices.size();
  rows->devices.reserve(device_count);
  for (uint32_t n : order) {
    const LedgerNode& node = ledger.nodes()[n];
    std::string_view node_name = rows->Escape(s.nodes.Get(node.name));
    size_t first = rows->devices.size();
    AddDeviceRows(s, node, node_name, rows);
    AddMigRows(s, node, first, rows);
    AddChargeRows(ledger, node, node_name, rows);
  }
}

void RenderPending(PromPage& p, const PendingPods& pending) {
  p.Family("hami_scheduler_pending_pods",
           "Pods waiting for hami-scheduler to place them (no node yet), per namespace");
  for (const auto& [ns, count] : pending) {
    if (count <= 0) continue;
    p.Begin();
    p.Label("namespace", ns);
    p.End(static_cast<double>(count));
  }
}

// The service's counters; consecutive entries of one family share its header.
void RenderCounters(PromPage& p, const std::vector<CounterMetric>& counters) {
  for (size_t i = 0; i < counters.size(); ++i) {
    const CounterMetric& c = counters[i];
    if (i == 0 || counters[i - 1].family != c.family) p.Family(c.family, c.help, c.type);
    p.Begin();
    if (!c.label_key.empty()) p.Label(c.label_key, c.label_value);
    p.End(static_cast<double>(c.value));
  }
}

void RenderBuildInfo(PromPage& p, const BuildInfo& build) {
  p.Family("hami_build_info", "Build of the running hami-scheduler (always 1)");
  p.Begin();
  p.Label("version", build.version);
  p.Label("revision", build.revision);
  p.Label("build_date", build.build_date);
  p.Label("compiler", build.compiler);
  p.Label("platform", build.platform);
  p.End(1);
}

}  // namespace

std::string RenderSchedulerMetrics(const Ledger& ledger, const std::vector<QuotaMetric>& quotas,
                                   const BuildInfo& build, const MetricsOptions& options,
                                   const PendingPods& pending,
                                   const std::vector<CounterMetric>& counters) {
  LedgerRows rows;
  CollectRows(ledger, &rows);
  std::vector<QuotaRow> quota_rows = QuotaRows(quotas);

  // About 170 bytes per series: 7 device families (+7 legacy), 2 (+2) per charge.
  size_t per_device = options.legacy ? 14 : 7, per_charge = options.legacy ? 4 : 2;
  PromPage p((rows.devices.size() * per_device + rows.charges.size() * per_charge +
              rows.migs.size() * 2 + quota_rows.size() * 3) *
                 170 +
             4096);
  RenderDevices(p, rows.devices);
  RenderMig(p, rows.migs, /*legacy=*/false);
  RenderQuotas(p, quota_rows, /*legacy=*/false);
  RenderCharges(p, rows.charges, /*legacy=*/false);
  RenderPending(p, pending);
  RenderCounters(p, counters);
  RenderBuildInfo(p, build);
  if (options.legacy) {
    RenderLegacyDevices(p, rows.devices);
    RenderMig(p, rows.migs, /*legacy=*/true);
    RenderQuotas(p, quota_rows, /*legacy=*/true);
    RenderCharges(p, rows.charges, /*legacy=*/true);
  }
  return p.Take();
}

}  // namespace hami::extender
