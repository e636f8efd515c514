#include "ctl/region_view.h"

#include <stdio.h>
#include <string.h>

#include <nlohmann/json.hpp>

#include "ctl/format.h"
#include "ctl/json.h"

namespace hami::ctl {
namespace {

constexpr int kKinds = static_cast<int>(vgpu::MemKind::kCount);

std::string Uuid(const char (&raw)[vgpu::kUuidLen]) {
  // The field is written by another process: never trust it to be terminated.
  return std::string(raw, strnlen(raw, vgpu::kUuidLen));
}

std::string LimitText(uint64_t limit) { return limit == 0 ? "unlimited" : FormatBytes(limit); }

std::string SmLimitText(uint32_t pct) {
  return pct == 0 || pct >= 100 ? "none" : std::to_string(pct) + "%";
}

std::string Fixed(double v, int decimals) {
  char buf[64];
  snprintf(buf, sizeof(buf), "%.*f", decimals, v);
  return buf;
}

bool SameQuota(const DeviceView& a, const DeviceView& b) {
  return a.mem_limit == b.mem_limit && a.sm_limit == b.sm_limit;
}

bool QuotaOnly(const DeviceView& d) {
  return d.uuid.empty() && d.mem_used == 0 && d.mem_peak == 0 && d.oom_denials == 0 &&
         d.launches == 0;
}

std::string KindBreakdown(const SlotDeviceView& d) {
  std::string out;
  for (int k = 0; k < kKinds; ++k) {
    if (d.by_kind[k] == 0) continue;
    if (!out.empty()) out += ' ';
    out += std::string(vgpu::MemKindName(static_cast<vgpu::MemKind>(k))) + "=" +
           FormatBytes(d.by_kind[k]);
  }
  return out.empty() ? "-" : out;
}

}  // namespace

bool ProcessAlive(int pid, uint64_t start_time) {
  uint64_t now_start = 0;
  return vgpu::ProcessStartTime(pid, &now_start) && now_start == start_time;
}

const char* SlotStatusName(uint32_t status) {
  switch (status) {
    case vgpu::kSlotFree:
      return "free";
    case vgpu::kSlotRunning:
      return "running";
    case vgpu::kSlotSuspended:
      return "suspended";
    default:
      return "unknown";
  }
}

RegionView Snapshot(const vgpu::RegionHeader& h, const std::string& path, const LivenessFn& alive) {
  constexpr auto kRelaxed = std::memory_order_relaxed;
  RegionView v;
  v.path = path;
  v.version = h.version;
  v.device_count = h.device_count.load(std::memory_order_acquire);
  v.priority = h.priority;
  v.utilization_switch = h.utilization_switch.load(kRelaxed);
  v.recent_kernel = h.recent_kernel.load(kRelaxed);
  v.last_kernel_time = h.last_kernel_time.load(kRelaxed);
  v.suspend_request = h.suspend_request.load(kRelaxed);
  v.proc_count = h.proc_count.load(kRelaxed);
  uint64_t controller = h.controller.load(kRelaxed);
  v.controller_pid = static_cast<int>(controller >> 32);
  v.controller_generation = static_cast<uint32_t>(controller & 0xffffffffULL);
  v.created_at = h.created_at.load(kRelaxed);

  for (int i = 0; i < vgpu::kMaxDevices; ++i) {
    const vgpu::RegionDevice& d = h.devices[i];
    DeviceView dv;
    dv.index = i;
    dv.uuid = Uuid(d.uuid);
    dv.mem_limit = d.mem_limit.load(kRelaxed);
    dv.mem_used = d.mem_used.load(kRelaxed);
    dv.mem_peak = d.mem_peak.load(kRelaxed);
    dv.oom_denials = d.oom_denials.load(kRelaxed);
    dv.sm_limit = d.sm_limit.load(kRelaxed);
    dv.util_percent = d.util_percent.load(kRelaxed) / 100.0;
    dv.ns_per_unit = static_cast<double>(d.ns_per_unit_q16.load(kRelaxed)) / 65536.0;
    dv.work_units = d.work_units.load(kRelaxed);
    dv.launches = d.launches.load(kRelaxed);
    dv.throttled_ns = d.throttled_ns.load(kRelaxed);
    // Recorded devices; before any are recorded, the quotas waiting for them; and any index
    // with usage (which a consistent region never has beyond the recorded devices).
    bool recorded = static_cast<uint32_t>(i) < v.device_count;
    bool quota = dv.mem_limit != 0 || dv.sm_limit != 0;
    bool used = dv.mem_used != 0 || dv.mem_peak != 0 || dv.oom_denials != 0 || dv.launches != 0 ||
                !dv.uuid.empty();
    if (recorded || used || (v.device_count == 0 && quota)) v.devices.push_back(dv);
  }

  for (int s = 0; s < vgpu::kMaxSlots; ++s) {
    const vgpu::RegionSlot& slot = h.slots[s];
    int pid = slot.pid.load(std::memory_order_acquire);
    if (pid == 0) continue;
    SlotView sv;
    sv.slot = s;
    sv.pid = pid;
    sv.host_pid = slot.host_pid.load(kRelaxed);
    sv.status = slot.status.load(kRelaxed);
    // From the host, a container's PID names another process; its host PID (recorded by the
    // node monitor) names the same one.
    sv.alive = alive(pid, slot.start_time) ||
               (sv.host_pid != 0 && sv.host_pid != pid && alive(sv.host_pid, slot.start_time));
    for (int d = 0; d < vgpu::kMaxDevices; ++d) {
      SlotDeviceView dv;
      dv.device = d;
      dv.used = slot.used[d].load(kRelaxed);
      dv.sm_util = slot.sm_util[d].load(kRelaxed);
      bool any_kind = false;
      for (int k = 0; k < kKinds; ++k) {
        dv.by_kind[k] = slot.used_by_kind[d][k].load(kRelaxed);
        any_kind |= dv.by_kind[k] != 0;
      }
      if (dv.used != 0 || dv.sm_util != 0 || any_kind) sv.devices.push_back(dv);
    }
    v.slots.push_back(sv);
  }
  return v;
}

std::string RenderRegionText(const RegionView& v) {
  std::string out;
  out += "region " + v.path + " (format v" + std::to_string(v.version) + ", created " +
         FormatEpochSeconds(v.created_at) + ")\n";
  out += "devices recorded: " + std::to_string(v.device_count) +
         ", processes: " + std::to_string(v.slots.size()) + "\n";
  std::string controller = v.controller_pid == 0
                               ? "none"
                               : "pid " + std::to_string(v.controller_pid) + " (generation " +
                                     std::to_string(v.controller_generation) + ")";
  out += "policy: utilization_switch=" + std::to_string(v.utilization_switch) +
         " recent_kernel=" + std::to_string(v.recent_kernel) +
         " suspend_request=" + std::to_string(v.suspend_request) +
         " priority=" + std::to_string(v.priority) + "\n";
  out += "last kernel: " + FormatEpochSeconds(v.last_kernel_time) +
         ", SM controller: " + controller + "\n";
  if (v.suspend_request != 0) out += "SUSPENDED: launches and allocations wait for a resume\n";

  out += "\n";
  std::vector<std::vector<std::string>> rows = {{"DEV", "UUID", "MEM LIMIT", "USED", "PEAK",
                                                 "OOM DENIALS", "SM LIMIT", "SM UTIL",
                                                 "COST ns/unit", "LAUNCHES", "THROTTLED"}};
  auto device_row = [](const std::string& index, const DeviceView& d) {
    return std::vector<std::string>{index,
                                    d.uuid.empty() ? "(not recorded yet)" : d.uuid,
                                    LimitText(d.mem_limit),
                                    FormatBytes(d.mem_used),
                                    FormatBytes(d.mem_peak),
                                    std::to_string(d.oom_denials),
                                    SmLimitText(d.sm_limit),
                                    Fixed(d.util_percent, 1) + "%",
                                    d.ns_per_unit == 0 ? "-" : Fixed(d.ns_per_unit, 3),
                                    std::to_string(d.launches),
                                    FormatDurationNs(d.throttled_ns)};
  };
  bool collapse = v.device_count == 0 && v.devices.size() == vgpu::kMaxDevices;
  for (const auto& d : v.devices) collapse = collapse && QuotaOnly(d) && SameQuota(d, v.devices[0]);
  if (v.devices.empty()) {
    out += "no devices recorded and no quotas set\n";
  } else if (collapse) {
    rows.push_back(device_row("all", v.devices[0]));
    out += RenderTable(rows);
  } else {
    for (const auto& d : v.devices) rows.push_back(device_row(std::to_string(d.index), d));
    out += RenderTable(rows);
  }

  out += "\n";
  if (v.slots.empty()) {
    out += "no processes\n";
    return out;
  }
  rows = {{"SLOT", "PID", "HOST PID", "STATUS", "ALIVE", "DEV", "USED", "BY KIND", "SM UTIL"}};
  for (const auto& s : v.slots) {
    std::vector<std::string> head = {std::to_string(s.slot), std::to_string(s.pid),
                                     s.host_pid == 0 ? "-" : std::to_string(s.host_pid),
                                     SlotStatusName(s.status), s.alive ? "yes" : "no"};
    if (s.devices.empty()) {
      head.insert(head.end(), {"-", "0 B", "-", "-"});
      rows.push_back(head);
      continue;
    }
    for (const auto& d : s.devices) {
      std::vector<std::string> row = head;
      row.insert(row.end(), {std::to_string(d.device), FormatBytes(d.used), KindBreakdown(d),
                             std::to_string(d.sm_util) + "%"});
      rows.push_back(row);
    }
  }
  out += RenderTable(rows);
  return out;
}

std::string RenderRegionJson(const RegionView& v) {
  using Ordered = nlohmann::ordered_json;
  Ordered doc;
  doc["path"] = v.path;
  doc["version"] = v.version;
  doc["created_at"] = v.created_at;
  doc["device_count"] = v.device_count;
  Ordered& policy = doc["policy"];
  policy["utilization_switch"] = v.utilization_switch;
  policy["recent_kernel"] = v.recent_kernel;
  policy["suspend_request"] = v.suspend_request;
  policy["priority"] = v.priority;
  policy["last_kernel_time"] = v.last_kernel_time;
  policy["controller_pid"] = v.controller_pid;
  policy["controller_generation"] = v.controller_generation;
  Ordered& devices = doc["devices"] = Ordered::array();
  for (const auto& d : v.devices) {
    Ordered o;
    o["index"] = d.index;
    o["uuid"] = d.uuid;
    o["mem_limit"] = d.mem_limit;
    o["mem_used"] = d.mem_used;
    o["mem_peak"] = d.mem_peak;
    o["oom_denials"] = d.oom_denials;
    o["sm_limit"] = d.sm_limit;
    o["sm_util_percent"] = JsonRounded(d.util_percent);
    o["limiter_ns_per_unit"] = JsonRounded(d.ns_per_unit);
    o["work_units"] = d.work_units;
    o["launches"] = d.launches;
    o["throttled_ns"] = d.throttled_ns;
    devices.push_back(std::move(o));
  }
  Ordered& processes = doc["processes"] = Ordered::array();
  for (const auto& s : v.slots) {
    Ordered o;
    o["slot"] = s.slot;
    o["pid"] = s.pid;
    o["host_pid"] = s.host_pid;
    o["status"] = SlotStatusName(s.status);
    o["alive"] = s.alive;
    Ordered& used = o["devices"] = Ordered::array();
    for (const auto& d : s.devices) {
      Ordered u;
      u["device"] = d.device;
      u["used"] = d.used;
      u["sm_util"] = d.sm_util;
      Ordered& by_kind = u["by_kind"] = Ordered::object();
      for (int k = 0; k < kKinds; ++k) {
        by_kind[vgpu::MemKindName(static_cast<vgpu::MemKind>(k))] = d.by_kind[k];
      }
      used.push_back(std::move(u));
    }
    processes.push_back(std::move(o));
  }
  return DumpJson(doc);
}

std::string RenderSummary(const RegionView& v) {
  std::string out;
  bool any = false;
  for (const auto& d : v.devices) {
    if (static_cast<uint32_t>(d.index) >= v.device_count && QuotaOnly(d)) continue;
    any = true;
    out += "hamictl: device " + std::to_string(d.index) +
           (d.uuid.empty() ? "" : " (" + d.uuid + ")") + ": peak " + FormatBytes(d.mem_peak) +
           " of " + (d.mem_limit == 0 ? "no limit" : FormatBytes(d.mem_limit)) + ", " +
           std::to_string(d.oom_denials) + " OOM denial" + (d.oom_denials == 1 ? "" : "s");
    if (d.sm_limit != 0 && d.sm_limit < 100) {
      out += ", SM limit " + std::to_string(d.sm_limit) + "% (last measured " +
             Fixed(d.util_percent, 1) + "%)";
    }
    out += "\n";
  }
  if (!any) out = "hamictl: summary: the command used no GPU (no device was recorded)\n";
  return out;
}

}  // namespace hami::ctl
