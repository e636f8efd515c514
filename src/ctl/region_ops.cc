#include "ctl/region_ops.h"

#include <time.h>

#include "ctl/format.h"

namespace hami::ctl {
namespace {

int64_t MonoMs() {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000 + ts.tv_nsec / 1'000'000;
}

std::vector<int> LiveNotSuspended(const vgpu::RegionHeader& h, const LivenessFn& alive, int* live) {
  std::vector<int> pids;
  *live = 0;
  for (int s = 0; s < vgpu::kMaxSlots; ++s) {
    const vgpu::RegionSlot& slot = h.slots[s];
    int pid = slot.pid.load(std::memory_order_acquire);
    if (pid == 0 || !alive(pid, slot.start_time)) continue;
    ++*live;
    if (slot.status.load(std::memory_order_relaxed) != vgpu::kSlotSuspended) pids.push_back(pid);
  }
  return pids;
}

bool CheckDevice(const vgpu::RegionHeader& h, const char* flag, int device, std::string* error) {
  uint32_t count = h.device_count.load(std::memory_order_acquire);
  if (device >= 0 && count > 0 && static_cast<uint32_t>(device) >= count) {
    *error = std::string(flag) + ": device " + std::to_string(device) + " does not exist (the " +
             "region records " + std::to_string(count) + " device" + (count == 1 ? "" : "s") + ")";
    return false;
  }
  return true;
}

}  // namespace

RegionPtr AttachRegion(const std::string& path, std::string* error) {
  char err[512] = {};
  RegionPtr r(vgpu::Region::Attach(path.c_str(), err, sizeof(err)));
  if (r == nullptr) *error = err;
  return r;
}

SuspendOutcome Suspend(vgpu::Region& r, int wait_ms, const LivenessFn& alive) {
  vgpu::RegionHeader* h = r.header();
  h->suspend_request.store(1, std::memory_order_seq_cst);
  SuspendOutcome out;
  const int64_t deadline = MonoMs() + (wait_ms > 0 ? wait_ms : 0);
  for (;;) {
    out.not_suspended = LiveNotSuspended(*h, alive, &out.live);
    if (out.not_suspended.empty() || MonoMs() >= deadline) return out;
    // libvgpu polls the flag every 5 ms while paused and on every launch or allocation; asking
    // as often is enough to notice without spinning.
    struct timespec ts = {0, 5'000'000};
    nanosleep(&ts, nullptr);
  }
}

void Resume(vgpu::Region& r) { r.header()->suspend_request.store(0, std::memory_order_seq_cst); }

std::vector<int> Sweep(vgpu::Region& r) {
  const vgpu::RegionHeader* h = r.header();
  std::vector<int> before(vgpu::kMaxSlots);
  for (int s = 0; s < vgpu::kMaxSlots; ++s) {
    before[s] = h->slots[s].pid.load(std::memory_order_acquire);
  }
  r.SweepDead();
  std::vector<int> reclaimed;
  for (int s = 0; s < vgpu::kMaxSlots; ++s) {
    if (before[s] != 0 && h->slots[s].pid.load(std::memory_order_acquire) != before[s]) {
      reclaimed.push_back(before[s]);
    }
  }
  return reclaimed;
}

bool SetQuotas(vgpu::Region& r, const std::vector<MemQuota>& mem,
               const std::vector<CoreQuota>& cores, std::vector<std::string>* notes,
               std::string* error) {
  vgpu::RegionHeader* h = r.header();
  // Validate everything before changing anything.
  for (const auto& q : mem) {
    if (!CheckDevice(*h, "--mem", q.device, error)) return false;
  }
  for (const auto& q : cores) {
    if (!CheckDevice(*h, "--cores", q.device, error)) return false;
  }
  // Quotas for every device first, so that a per-device quota given alongside wins.
  auto apply_mem = [&](int dev, uint64_t bytes) {
    h->devices[dev].mem_limit.store(bytes, std::memory_order_relaxed);
    uint64_t used = r.Used(dev);
    if (bytes != 0 && used > bytes) {
      notes->push_back("device " + std::to_string(dev) + " already uses " + FormatBytes(used) +
                       ", more than the new " + FormatBytes(bytes) +
                       " limit: existing allocations stay, new ones fail until usage drops");
    }
  };
  for (bool global : {true, false}) {
    for (const auto& q : mem) {
      if ((q.device < 0) != global) continue;
      if (global) {
        for (int d = 0; d < vgpu::kMaxDevices; ++d) apply_mem(d, q.bytes);
      } else {
        apply_mem(q.device, q.bytes);
      }
    }
    for (const auto& q : cores) {
      if ((q.device < 0) != global) continue;
      for (int d = global ? 0 : q.device; d < (global ? vgpu::kMaxDevices : q.device + 1); ++d) {
        h->devices[d].sm_limit.store(static_cast<uint32_t>(q.percent), std::memory_order_relaxed);
      }
    }
  }
  // Tell running processes that limits changed (they re-evaluate their SM gate on next launch).
  h->config_gen.fetch_add(1, std::memory_order_release);
  return true;
}

}  // namespace hami::ctl
