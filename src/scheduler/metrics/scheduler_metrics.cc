#include "scheduler/metrics/scheduler_metrics.h"

#include <sys/mman.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <deque>
#include <map>
#include <string_view>
#include <tuple>
#include <utility>

namespace hami::scheduler {
namespace {

constexpr double kBytesPerMiB = 1048576.0;

// Appends a label value or HELP text escaped for the text format: backslash, newline and (label
// values only) the double quote.
bool NeedsEscaping(std::string_view s) {
  bool plain = true;
  for (char c : s) plain &= c != '\\' && c != '\n' && c != '"';
  return !plain;
}

void AppendEscaped(std::string* out, std::string_view s, bool quote) {
  if (!NeedsEscaping(s)) {
    out->append(s);
    return;
  }
  for (char c : s) {
    switch (c) {
      case '\\':
        out->append("\\\\");
        break;
      case '\n':
        out->append("\\n");
        break;
      case '"':
        if (quote) {
          out->append("\\\"");
          break;
        }
        [[fallthrough]];
      default:
        out->push_back(c);
    }
  }
}

template <typename Int>
void AppendInt(std::string* out, Int v) {
  char buf[24];
  auto [end, ec] = std::to_chars(buf, buf + sizeof(buf), v);
  out->append(buf, end);
}

// Appends `v` the way Prometheus' Go client prints sample values (strconv 'g' with the shortest
// precision): plain decimals for exponents -4..5, scientific ("3.221225472e+09") outside.
void AppendValue(std::string* out, double v) {
  if (std::isnan(v)) {
    out->append("NaN");
    return;
  }
  if (std::isinf(v)) {
    out->append(v > 0 ? "+Inf" : "-Inf");
    return;
  }
  // Whole numbers below 2^53 (every value here but the ratios) are exact, so their shortest
  // representation is their digits without trailing zeros: format them without floating point.
  if (v == std::trunc(v) && std::fabs(v) < 9007199254740992.0) {
    int64_t i = static_cast<int64_t>(v);
    if (i > -1000000 && i < 1000000) {
      AppendInt(out, i);
      return;
    }
    char digits[24];
    auto [end, ec] = std::to_chars(digits, digits + sizeof(digits), i < 0 ? -i : i);
    int exponent = static_cast<int>(end - digits) - 1;
    while (end > digits + 1 && end[-1] == '0') --end;
    if (i < 0) out->push_back('-');
    out->push_back(digits[0]);
    if (end > digits + 1) out->append(1, '.').append(digits + 1, end);
    out->append("e+");
    if (exponent < 10) out->push_back('0');
    AppendInt(out, exponent);
    return;
  }
  char buf[40];
  auto [end, ec] = std::to_chars(buf, buf + sizeof(buf), v, std::chars_format::scientific);
  std::string_view sci(buf, static_cast<size_t>(end - buf));
  int exponent = 0;
  size_t e = sci.find('e');
  std::from_chars(sci.data() + e + (sci[e + 1] == '+' ? 2 : 1), sci.data() + sci.size(), exponent);
  if (exponent < -4 || exponent >= 6) {
    out->append(sci);
    return;
  }
  auto [fend, fec] = std::to_chars(buf, buf + sizeof(buf), v, std::chars_format::fixed);
  out->append(buf, fend);
}

// Builds the page family by family. A family's HELP/TYPE header is written with its first
// series, so families without series do not appear.
class Page {
 public:
  explicit Page(size_t reserve) {
    out_.reserve(reserve);
#ifdef MADV_HUGEPAGE
    // A large cluster's page is tens of MiB, written once. Faulting that in 4 KiB pages costs
    // more than rendering it (measured: 130 ms vs 12 ms for 47 MiB in a VM), so ask for huge
    // pages over the aligned middle of the buffer. Advisory: failure changes nothing.
    constexpr uintptr_t kHuge = uintptr_t{2} << 20;
    if (reserve >= 4 * kHuge) {
      uintptr_t begin = (reinterpret_cast<uintptr_t>(out_.data()) + kHuge - 1) & ~(kHuge - 1);
      uintptr_t end = (reinterpret_cast<uintptr_t>(out_.data()) + reserve) & ~(kHuge - 1);
      if (end > begin) madvise(reinterpret_cast<void*>(begin), end - begin, MADV_HUGEPAGE);
    }
#endif
  }

  void Family(std::string_view name, std::string_view help) {
    name_ = name;
    help_ = help;
    header_written_ = false;
  }

  // Starts a series of the current family; follow with Label()s and End().
  void Begin() {
    if (!header_written_) {
      out_.append("# HELP ").append(name_).push_back(' ');
      AppendEscaped(&out_, help_, /*quote=*/false);
      out_.append("\n# TYPE ").append(name_).append(" gauge\n");
      header_written_ = true;
    }
    out_.append(name_).push_back('{');
  }
  void Label(std::string_view key, std::string_view value) {
    out_.append(key).append("=\"");
    AppendEscaped(&out_, value, /*quote=*/true);
    out_.append("\",");
  }
  // A label whose value is already escaped (the per-row strings below).
  void Escaped(std::string_view key, std::string_view value) {
    out_.append(key).append("=\"").append(value).append("\",");
  }
  template <typename Int>
  void IntLabel(std::string_view key, Int value) {
    out_.append(key).append("=\"");
    AppendInt(&out_, value);
    out_.append("\",");
  }
  void End(double value) {
    out_.append("zone=\"vGPU\"} ");
    AppendValue(&out_, value);
    out_.push_back('\n');
  }

  std::string Take() { return std::move(out_); }

 private:
  std::string out_;
  std::string_view name_, help_;
  bool header_written_ = false;
};

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
void DeviceLabels(Page& p, const DeviceRow& r) {
  p.Escaped("node", r.node_name);
  p.Escaped("device_uuid", r.uuid);
  p.IntLabel("device_index", r.dev().index);
}
void LegacyDeviceLabels(Page& p, const DeviceRow& r) {
  p.Escaped("nodeid", r.node_name);
  p.Escaped("deviceuuid", r.uuid);
  p.IntLabel("deviceidx", r.dev().index);
}

void RenderDevices(Page& p, const std::vector<DeviceRow>& rows) {
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
  p.Family("hami_gpu_shared_count", "Number of tasks holding a share of a GPU");
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

void RenderLegacyDevices(Page& p, const std::vector<DeviceRow>& rows) {
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

void RenderMig(Page& p, const std::vector<MigRow>& rows, bool legacy) {
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

void RenderQuotas(Page& p, const std::vector<QuotaRow>& rows, bool legacy) {
  std::string limit;
  // The limit label is the quota's integer as written ("20000", never "2e+04").
  auto limit_text = [&](const QuotaRow& q) -> std::string_view {
    limit.clear();
    if (q.limit == std::trunc(q.limit) && std::fabs(q.limit) < 9007199254740992.0) {
      AppendInt(&limit, static_cast<int64_t>(q.limit));
    } else {
      AppendValue(&limit, q.limit);
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

void RenderCharges(Page& p, const std::vector<ChargeRow>& rows, bool legacy) {
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

}  // namespace

std::string RenderSchedulerMetrics(const Ledger& ledger, const std::vector<QuotaMetric>& quotas,
                                   const BuildInfo& build, const MetricsOptions& options) {
  const LedgerStrings& s = ledger.strings();
  std::deque<std::string> escaped_store;  // stable storage for the rare values that need escaping
  auto escaped = [&](std::string_view v) -> std::string_view {
    if (!NeedsEscaping(v)) return v;
    std::string& e = escaped_store.emplace_back();
    AppendEscaped(&e, v, /*quote=*/true);
    return e;
  };
  std::vector<DeviceRow> devices;
  std::vector<ChargeRow> charges;
  std::vector<MigRow> migs;
  std::vector<uint32_t> order = SortedNodes(ledger);

  size_t device_count = 0;
  for (uint32_t n : order) device_count += ledger.nodes()[n].devices.size();
  devices.reserve(device_count);
  for (uint32_t n : order) {
    const LedgerNode& node = ledger.nodes()[n];
    std::string_view node_name = escaped(s.nodes.Get(node.name));
    size_t first = devices.size();
    for (size_t i = 0; i < node.devices.size(); ++i) {
      const LedgerDevice& d = node.devices[i];
      devices.push_back(DeviceRow{&node, i, node_name, escaped(s.uuids.Get(d.uuid)),
                                  escaped(s.types.Get(d.type))});
    }
    std::sort(devices.begin() + static_cast<ptrdiff_t>(first), devices.end(),
              [](const DeviceRow& a, const DeviceRow& b) {
                return std::tie(a.dev().index, a.uuid) < std::tie(b.dev().index, b.uuid);
              });

    size_t first_mig = migs.size();
    if (node.mig) {
      for (size_t r = first; r < devices.size(); ++r) {
        if (devices[r].pos >= node.mig->in_use.size()) continue;
        for (const MigInUse& m : node.mig->in_use[devices[r].pos]) {
          migs.push_back(MigRow{&devices[r], escaped(s.mig_profiles.Get(m.profile)), m.placement});
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
        charges.push_back(ChargeRow{node_name, escaped(pod->name_space), escaped(pod->name), index,
                                    escaped(s.uuids.Get(c.uuid)), pod, &c});
      }
    }
    std::sort(charges.begin() + static_cast<ptrdiff_t>(first_charge), charges.end(),
              [](const ChargeRow& a, const ChargeRow& b) {
                return std::tie(a.device_index, a.uuid, a.ns, a.pod_name, a.pod->uid) <
                       std::tie(b.device_index, b.uuid, b.ns, b.pod_name, b.pod->uid);
              });
  }
  // MigRow points into `devices`, which no longer grows.
  std::vector<QuotaRow> quota_rows = QuotaRows(quotas);

  // About 170 bytes per series: 7 device families (+7 legacy), 2 (+2) per charge.
  size_t per_device = options.legacy ? 14 : 7, per_charge = options.legacy ? 4 : 2;
  Page p((devices.size() * per_device + charges.size() * per_charge + migs.size() * 2 +
          quota_rows.size() * 3) *
             170 +
         4096);
  RenderDevices(p, devices);
  RenderMig(p, migs, /*legacy=*/false);
  RenderQuotas(p, quota_rows, /*legacy=*/false);
  RenderCharges(p, charges, /*legacy=*/false);
  p.Family("hami_build_info", "Build of the running hami-scheduler (always 1)");
  p.Begin();
  p.Label("version", build.version);
  p.Label("revision", build.revision);
  p.Label("build_date", build.build_date);
  p.Label("compiler", build.compiler);
  p.Label("platform", build.platform);
  p.End(1);
  if (options.legacy) {
    RenderLegacyDevices(p, devices);
    RenderMig(p, migs, /*legacy=*/true);
    RenderQuotas(p, quota_rows, /*legacy=*/true);
    RenderCharges(p, charges, /*legacy=*/true);
  }
  return p.Take();
}

}  // namespace hami::scheduler
