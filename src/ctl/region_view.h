// A point-in-time copy of a shared region (src/vgpu/region.h) in plain values, and its renderings
// for `hamictl region show` (text table or JSON) and `hamictl run --summary`.
//
// Snapshot reads the region's atomics without its lock, the way the monitor does: each value is
// whole, but values written by different processes at the same moment may not add up exactly.
//
// Thread safety: Snapshot may run concurrently with any process using the region; the Render
// functions are pure.
#pragma once

#include <stdint.h>

#include <functional>
#include <string>
#include <vector>

#include "vgpu/region.h"

namespace hami::ctl {

struct DeviceView {
  int index = 0;
  std::string uuid;
  uint64_t mem_limit = 0;  // 0 = unlimited
  uint64_t mem_used = 0;
  uint64_t mem_peak = 0;
  uint64_t oom_denials = 0;
  uint32_t sm_limit = 0;    // percent; 0 or >= 100 = unlimited
  double util_percent = 0;  // container SM utilisation last measured by the controller
  double ns_per_unit = 0;   // limiter cost; 0 = not calibrated
  uint64_t work_units = 0;
  uint64_t launches = 0;
  uint64_t throttled_ns = 0;
};

struct SlotDeviceView {
  int device = 0;
  uint64_t used = 0;
  uint64_t by_kind[static_cast<int>(vgpu::MemKind::kCount)] = {};
  uint32_t sm_util = 0;
};

struct SlotView {
  int slot = 0;
  int pid = 0;
  int host_pid = 0;  // 0 = unknown
  uint32_t status = vgpu::kSlotFree;
  bool alive = false;
  std::vector<SlotDeviceView> devices;  // devices on which the process holds memory
};

struct RegionView {
  std::string path;
  uint32_t version = 0;
  uint32_t device_count = 0;  // devices recorded by libvgpu (0 until a process initialised CUDA)
  int32_t priority = 0;
  int32_t utilization_switch = 0;
  int32_t recent_kernel = 0;
  uint64_t last_kernel_time = 0;
  uint32_t suspend_request = 0;
  uint32_t proc_count = 0;
  int controller_pid = 0;  // SM controller lease holder; 0 = none
  uint32_t controller_generation = 0;
  uint64_t created_at = 0;
  // Recorded devices, plus any other index with usage; while no device is recorded yet, every
  // index that has a quota (quotas from the environment apply to all 16 indexes).
  std::vector<DeviceView> devices;
  std::vector<SlotView> slots;  // non-free slots, in slot order
};

// Whether the process in a slot still runs: (pid, start_time) as recorded by libvgpu.
using LivenessFn = std::function<bool(int pid, uint64_t start_time)>;
bool ProcessAlive(int pid, uint64_t start_time);

RegionView Snapshot(const vgpu::RegionHeader& h, const std::string& path,
                    const LivenessFn& alive = ProcessAlive);

const char* SlotStatusName(uint32_t status);

std::string RenderRegionText(const RegionView& v);
std::string RenderRegionJson(const RegionView& v);
// `hamictl run --summary`: one line per device with peak usage, limit and OOM denials.
std::string RenderSummary(const RegionView& v);

}  // namespace hami::ctl
