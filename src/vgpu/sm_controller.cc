// The SM controller thread. Every tick, the one process of the container that holds the
// controller lease measures the container's SM utilisation of each limited device through NVML
// and steers that device's launch-gate cost (limiter.h) towards the limit. The other processes'
// threads only keep the launch gate and the slot table fresh.
#include <stdint.h>
#include <time.h>
#include <unistd.h>

#include "vgpu/limiter.h"
#include "vgpu/log.h"
#include "vgpu/runtime.h"
#include "vgpu/runtime_internal.h"

namespace hami::vgpu {
namespace {

// Controller period and lease staleness.
constexpr int64_t kTickNs = 100'000'000;
constexpr int64_t kLeaseStaleNs = 500'000'000;

uint64_t RealtimeUs() {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1'000'000 + static_cast<uint64_t>(ts.tv_nsec) / 1000;
}

struct DevControl {
  // Counters and clock at the last measurement: a control step covers the time since then.
  uint64_t prev_units = 0;
  uint64_t prev_throttled = 0;
  uint64_t prev_launches = 0;
  uint64_t since_us = 0;     // NVML samples newer than this are new to us
  uint64_t measured_us = 0;  // when the counters above were taken
  bool have_baseline = false;
  bool first_sample_seen = false;  // the first sample may reach back before the baseline
  int stale_ticks = 0;             // consecutive ticks with launches but no new NVML sample
  int blind_ticks = 0;  // consecutive measurements with launches but no utilisation of ours
  bool warned_blind = false;
  BacklogModel backlog;
};

// MeasureUtil's answers besides a utilisation.
constexpr double kUnmeasurable = -1;
constexpr double kNoNewSample = -2;
// A real driver produces a per-process sample only every sampling period (about 200 ms on an
// H100, twice the controller's tick); after this many ticks without one while kernels are
// launched, the container is taken to have used nothing.
constexpr int kMaxStaleTicks = 10;

// Sums the SM utilisation of the container's processes on container device `dev` over the NVML
// samples newer than `since_us`, and sets `*newest_us` to the newest sample's time. Returns
// kUnmeasurable if NVML cannot be asked, kNoNewSample if it has no sample newer than `since_us`.
// A real driver keeps one sample per process per sampling period; should several periods have
// passed, a process's samples are averaged, not added.
double MeasureUtil(Runtime& r, int dev, uint64_t since_us, uint64_t* newest_us) {
  RegionHeader* h = r.region->header();
  nvmlDevice_t handle = nullptr;
  if (r.nvml.nvmlDeviceGetHandleByUUID == nullptr ||
      r.nvml.nvmlDeviceGetProcessUtilization == nullptr ||
      r.nvml.nvmlDeviceGetHandleByUUID(h->devices[dev].uuid, &handle) != NVML_SUCCESS) {
    return kUnmeasurable;
  }
  nvmlProcessUtilizationSample_t samples[256];
  unsigned count = 256;
  nvmlReturn_t rc = r.nvml.nvmlDeviceGetProcessUtilization(handle, samples, &count, since_us);
  if (rc == NVML_ERROR_NOT_FOUND) return kNoNewSample;
  if (rc != NVML_SUCCESS) return kUnmeasurable;
  uint64_t newest = 0;
  for (unsigned i = 0; i < count; ++i) {
    if (samples[i].timeStamp > newest) newest = samples[i].timeStamp;
  }
  if (newest <= since_us) return kNoNewSample;
  *newest_us = newest;
  double total = 0;
  for (int s = 0; s < kMaxSlots; ++s) {
    int pid = h->slot_pid[s].load(std::memory_order_relaxed);
    if (pid == 0) continue;
    RegionSlot& slot = h->slots[s];
    int host_pid = slot.host_pid.load(std::memory_order_relaxed);
    unsigned key = static_cast<unsigned>(host_pid != 0 ? host_pid : pid);
    unsigned sum = 0, n = 0;
    for (unsigned i = 0; i < count; ++i) {
      if (samples[i].pid == key && samples[i].timeStamp > since_us) {
        sum += samples[i].smUtil;
        ++n;
      }
    }
    unsigned util = n == 0 ? 0 : (sum + n / 2) / n;
    slot.sm_util[dev].store(util > 100 ? 100 : util, std::memory_order_relaxed);
    total += util;
  }
  return total > 100 ? 100 : total;
}

bool HoldLease(RegionHeader* h, int64_t now) {
  const uint64_t me = static_cast<uint64_t>(getpid());
  uint64_t cur = h->controller.load(std::memory_order_acquire);
  if ((cur >> 32) == me) {
    h->controller_beat_ns.store(now, std::memory_order_relaxed);
    return true;
  }
  int64_t beat = h->controller_beat_ns.load(std::memory_order_relaxed);
  if (cur != 0 && now - beat < kLeaseStaleNs) return false;
  uint64_t next = (me << 32) | ((cur + 1) & 0xffffffffULL);
  if (!h->controller.compare_exchange_strong(cur, next)) return false;
  h->controller_beat_ns.store(now, std::memory_order_relaxed);
  VGPU_INFO("took over the SM controller for this container");
  return true;
}

// A device's limit and gate counters, as read at the start of a control step.
struct DevCounters {
  uint32_t lim;
  uint64_t units;
  uint64_t throttled;
  uint64_t launches;
};

// Makes `cur` the start of `c`'s next window and forgets the backlog learnt so far.
void ResetBaseline(DevControl& c, const DevCounters& cur, uint64_t now_us) {
  c.prev_units = cur.units;
  c.prev_throttled = cur.throttled;
  c.prev_launches = cur.launches;
  c.backlog = BacklogModel{};
  c.since_us = now_us;
  c.measured_us = now_us;
  c.first_sample_seen = false;
  c.stale_ticks = 0;
  c.have_baseline = true;
}

// Measures container device `dev` over the window since `c`'s last measurement, moving that
// baseline on whenever the window closes. Returns true and fills `*s` only for a reading the
// controller may act on.
bool MeasureWindow(Runtime& r, int dev, const DevCounters& cur, uint64_t now_us, DevControl& c,
                   ControlSample* s) {
  uint64_t du = cur.units - c.prev_units, dt = cur.throttled - c.prev_throttled;
  uint64_t newest_us = now_us;
  double util = MeasureUtil(r, dev, c.since_us, &newest_us);
  if (util == kNoNewSample) {
    // NVML has not sampled since the last step. Keep accumulating this step's launches
    // unless it stays silent for long while kernels run: then nothing of ours ran.
    if (du == 0 || ++c.stale_ticks < kMaxStaleTicks) return false;
    util = 0;
    newest_us = now_us;
  }
  c.stale_ticks = 0;
  uint64_t dl = cur.launches - c.prev_launches;
  c.prev_units = cur.units;
  c.prev_throttled = cur.throttled;
  c.prev_launches = cur.launches;
  // The counters cover the time since the last measurement (the sample itself covers the
  // driver's sampling period, which ends a little before now).
  int64_t window_ns = static_cast<int64_t>((now_us - c.measured_us) * 1000);
  c.measured_us = now_us;
  // Sample times come from the driver's clock; never step back or past our own.
  c.since_us = newest_us > c.since_us && newest_us <= now_us ? newest_us : now_us;
  if (util < 0) return false;
  if (!c.first_sample_seen) {
    // A driver's sample covers its own sampling period, which may have begun before the
    // counters' baseline (and before this process's first kernel): it would misstate both
    // the calibration and the backlog. Start from the next one.
    c.first_sample_seen = true;
    return false;
  }
  *s = ControlSample{static_cast<double>(cur.lim), util, du, dt, window_ns, dl};
  return true;
}

// Counts the windows of `s` in a row with launches but no utilisation, and logs once when there
// are enough of them to say that the limit on `dev` cannot be measured.
void WarnIfBlind(DevControl& c, int dev, uint32_t lim, const ControlSample& s) {
  // Launches happen but NVML attributes no utilisation to any of the container's processes:
  // NVML reports PIDs of another namespace (an ordinary container) and no host PID is
  // known yet. The limit cannot be measured; say so once instead of failing silently.
  c.blind_ticks = (s.units > 0 && s.util_percent == 0) ? c.blind_ticks + 1 : 0;
  if (c.blind_ticks >= 15 && !c.warned_blind) {
    c.warned_blind = true;
    VGPU_WARN(
        "device %d: kernels are launched but NVML reports no SM utilisation for this "
        "container's processes (host PIDs unknown?); the %u%% SM limit cannot be "
        "enforced until host PIDs are recorded in the region",
        dev, lim);
  }
}

// Feeds `s` to the controller and publishes the cost it chooses for device `d` (`dev`).
void SteerCost(RegionDevice& d, DevControl& c, int dev, uint32_t lim, const ControlSample& s) {
  uint64_t cost = d.ns_per_unit_q16.load(std::memory_order_relaxed);
  bool held = false;
  uint64_t next_cost = ControlStep(&c.backlog, cost, s, &held);
  if (held) {
    VGPU_DEBUG(
        "device %d: util %.1f%% (limit %u%%) over %.0f ms with admission held near the "
        "limit: work queued earlier (about %.0f units left); cost stays %.3f ns/unit",
        dev, s.util_percent, lim, s.window_ns / 1e6, c.backlog.backlog, cost / 65536.0);
    return;
  }
  if (next_cost != cost) {
    d.ns_per_unit_q16.store(next_cost, std::memory_order_relaxed);
    VGPU_DEBUG(
        "device %d: util %.1f%% (limit %u%%) over %.0f ms, %llu units, throttled %.1f ms: "
        "cost %.3f -> %.3f ns/unit",
        dev, s.util_percent, lim, s.window_ns / 1e6, static_cast<unsigned long long>(s.units),
        s.throttled_ns / 1e6, cost / 65536.0, next_cost / 65536.0);
  }
}

// One tick's control of container device `dev`, whose state between ticks is `c`.
void ControlDevice(Runtime& r, RegionHeader* h, int dev, DevControl& c, uint64_t now_us) {
  RegionDevice& d = h->devices[dev];
  const DevCounters cur{d.sm_limit.load(std::memory_order_relaxed),
                        d.work_units.load(std::memory_order_relaxed),
                        d.throttled_ns.load(std::memory_order_relaxed),
                        d.launches.load(std::memory_order_relaxed)};
  if (!c.have_baseline || cur.lim == 0 || cur.lim >= 100) {
    ResetBaseline(c, cur, now_us);
    return;
  }
  ControlSample s{};
  if (!MeasureWindow(r, dev, cur, now_us, c, &s)) return;
  d.util_percent.store(static_cast<uint32_t>(s.util_percent * 100), std::memory_order_relaxed);
  WarnIfBlind(c, dev, cur.lim, s);
  SteerCost(d, c, dev, cur.lim, s);
}

}  // namespace

void* WatcherMain(void*) {
  Runtime& r = Rt();
  RegionHeader* h = r.region->header();
  DevControl ctl[kMaxDevices];
  int64_t next = MonoNs() + kTickNs;
  for (uint64_t tick = 1;; ++tick) {
    SleepUntilMono(next);
    next += kTickNs;
    int64_t now = MonoNs();
    if (now > next) next = now + kTickNs;  // we overslept (suspended VM, debugger)
    uint64_t now_us = RealtimeUs();
    RefreshLaunchGate();
    if (tick % 10 == 0) r.region->SweepDead();
    bool leader = r.launch_gate.load(std::memory_order_relaxed) && HoldLease(h, now);
    if (!leader || !EnsureNvml()) {
      // A new leader (or NVML coming back) starts from fresh counters and samples.
      for (auto& c : ctl) c.have_baseline = false;
      continue;
    }
    int n = static_cast<int>(h->device_count.load(std::memory_order_acquire));
    for (int dev = 0; dev < n && dev < kMaxDevices; ++dev) {
      ControlDevice(r, h, dev, ctl[dev], now_us);
    }
  }
  return nullptr;
}

}  // namespace hami::vgpu
