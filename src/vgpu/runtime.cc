#include "vgpu/runtime.h"

#include <dlfcn.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "vgpu/dlsym_hook.h"
#include "vgpu/limiter.h"
#include "vgpu/log.h"
#include "vgpu/runtime_internal.h"

namespace hami::vgpu {
namespace {

constinit Runtime g_rt;

// The gate lets this much work through ahead of the rate (absorbs launch bursts).
constexpr int64_t kBurstNs = 10'000'000;

int GetTid() { return static_cast<int>(syscall(SYS_gettid)); }

}  // namespace

Runtime& Rt() { return g_rt; }

namespace {

// ---------------------------------------------------------------------------------------------
// Phase A

void LoadRealCuda(Runtime& r) {
  void* h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
  if (h == nullptr) h = dlopen("libcuda.so.1", RTLD_NOW);
  if (h == nullptr) {
    const char* e = dlerror();
    VGPU_INFO("libcuda.so.1 is not loadable (%s); CUDA calls cannot be forwarded", e ? e : "?");
    return;
  }
#define VGPU_LOAD(name) r.cuda.name = reinterpret_cast<decltype(&::name)>(RealDlsym(h, #name));
  VGPU_REAL_CUDA(VGPU_LOAD)
#undef VGPU_LOAD
  ResolveHookTargets(r.cuda);
}

std::atomic<bool> g_exiting{false};
std::atomic<bool> g_registering{false};  // a thread is registering this process's slot

void OnForkPrepare() { g_rt.table.ForkPrepare(); }
void OnForkParent() { g_rt.table.ForkParent(); }
void OnForkChild() {
  // The child owns none of the parent's allocations, slot or controller thread; it registers
  // itself on its next call.
  g_rt.table.ForkChild();
  if (g_rt.region != nullptr) g_rt.region->AfterFork();
  g_rt.slot.store(-1, std::memory_order_relaxed);
  g_registering.store(false, std::memory_order_relaxed);
  g_rt.watcher_started.store(false, std::memory_order_relaxed);
  g_rt.phase_b.store(0, std::memory_order_relaxed);
}

void WarnLimitMismatch(Runtime& r) {
  const RegionHeader* h = r.region->header();
  for (int i = 0; i < kMaxDevices; ++i) {
    uint64_t have = h->devices[i].mem_limit.load(std::memory_order_relaxed);
    if (r.cfg.mem_limit_set[i] && have != r.cfg.init.mem_limit[i]) {
      VGPU_WARN(
          "device %d: this process asks for a %llu-byte memory limit but the container's "
          "region (%s) already has %llu; the region's value applies",
          i, static_cast<unsigned long long>(r.cfg.init.mem_limit[i]), r.cfg.region_path,
          static_cast<unsigned long long>(have));
    }
    uint32_t sm = h->devices[i].sm_limit.load(std::memory_order_relaxed);
    if (r.cfg.sm_limit_set[i] && sm != r.cfg.init.sm_limit[i]) {
      VGPU_INFO("device %d: SM limit %u from the environment differs from the region's %u", i,
                r.cfg.init.sm_limit[i], sm);
    }
  }
}

void RecomputeLaunchGate(Runtime& r) {
  if (r.region != nullptr) {
    r.seen_config_gen.store(r.region->header()->config_gen.load(std::memory_order_acquire),
                            std::memory_order_relaxed);
  }
  bool any = false;
  if (r.region != nullptr && r.cfg.policy != CorePolicy::kDisable) {
    const RegionHeader* h = r.region->header();
    for (int i = 0; i < kMaxDevices; ++i) {
      uint32_t lim = h->devices[i].sm_limit.load(std::memory_order_relaxed);
      if (lim > 0 && lim < 100) any = true;
    }
  }
  r.launch_gate.store(any, std::memory_order_relaxed);
}

}  // namespace

// An entry point for the controller thread; the launch path and PhaseA call the local function
// directly, so the compiler treats it as it did before the controller moved to its own file.
void RefreshLaunchGate() { RecomputeLaunchGate(g_rt); }

namespace {

const char* GetEnv(const char* name) { return getenv(name); }

void PhaseA(Runtime& r) {
  InitLogLevelFromEnv();
  LoadConfig(GetEnv, &r.cfg);
  LoadRealCuda(r);
  if (r.cfg.control_disabled) {
    r.pass_through = true;
    VGPU_NOTICE("CUDA_DISABLE_CONTROL is set: no limits are enforced in this process");
    return;
  }
  char err[512] = {};
  r.region = Region::Open(r.cfg.region_path, r.cfg.init, err, sizeof(err));
  if (r.region == nullptr) {
    VGPU_ERROR("shared region unusable (%s); limits apply to this process alone", err);
    r.region = Region::CreatePrivate(r.cfg.init);
    if (r.region == nullptr) {
      VGPU_ERROR("cannot allocate a private region; running without enforcement");
      r.pass_through = true;
      return;
    }
  } else {
    WarnLimitMismatch(r);
  }
  for (int i = 0; i < kMaxDevices; ++i) r.ordinal_map[i].store(0, std::memory_order_relaxed);
  RecomputeLaunchGate(r);
  pthread_atfork(OnForkPrepare, OnForkParent, OnForkChild);
  MySlot();
  VGPU_INFO("initialised: region %s%s, slot %d", r.cfg.region_path,
            r.region->is_private() ? " (private)" : "", r.slot.load());
}

__attribute__((destructor)) void OnUnload() {
  g_exiting.store(true, std::memory_order_relaxed);
  Runtime& r = g_rt;
  int s = r.slot.exchange(-1);
  if (r.region != nullptr && s >= 0 &&
      r.region->header()->slot_pid[s].load(std::memory_order_relaxed) ==
          static_cast<int>(getpid())) {
    r.region->ReleaseSlot(s);
  }
}

// ---------------------------------------------------------------------------------------------
// Devices

void FormatUuid(const CUuuid& u, char* out, size_t len) {
  const auto* b = reinterpret_cast<const unsigned char*>(u.bytes);
  snprintf(out, len, "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x",
           b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13],
           b[14], b[15]);
}

bool CudaUuid(CUdevice dev, char* out, size_t len) {
  Runtime& r = g_rt;
  CUuuid u;
  CUresult rc = CUDA_ERROR_NOT_SUPPORTED;
  if (r.cuda.cuDeviceGetUuid_v2 != nullptr) {
    rc = r.cuda.cuDeviceGetUuid_v2(&u, dev);
  } else if (r.cuda.cuDeviceGetUuid != nullptr) {
    rc = r.cuda.cuDeviceGetUuid(&u, dev);
  }
  if (rc != CUDA_SUCCESS) return false;
  FormatUuid(u, out, len);
  return true;
}

// Records the container's devices in the region, in container order (NVML order inside the
// container, which is the order the device plugin numbered CUDA_DEVICE_MEMORY_LIMIT_<i> in).
void FillRegionDevices(Runtime& r) {
  RegionHeader* h = r.region->header();
  if (h->device_count.load(std::memory_order_acquire) > 0 && h->devices[0].uuid[0] != '\0') {
    return;
  }
  char uuids[kMaxDevices][kUuidLen] = {};
  int n = 0;
  // Without CUDA_VISIBLE_DEVICES, CUDA enumerates exactly the container's devices in container
  // order, and the driver is already initialised: ask it (cheap). Otherwise CUDA's numbering
  // is renumbered or partial and only NVML knows the container's order.
  const char* cvd = getenv("CUDA_VISIBLE_DEVICES");
  bool cuda_is_container_order = cvd == nullptr;
  auto from_cuda = [&] {
    int count = 0;
    if (r.cuda.cuDeviceGetCount == nullptr || r.cuda.cuDeviceGetCount(&count) != CUDA_SUCCESS) {
      return;
    }
    for (int i = 0; i < count && n < kMaxDevices; ++i) {
      if (!CudaUuid(i, uuids[n], kUuidLen)) break;
      ++n;
    }
  };
  if (cuda_is_container_order) from_cuda();
  if (n == 0 && EnsureNvml()) {
    unsigned count = 0;
    if (r.nvml.nvmlDeviceGetCount_v2(&count) == NVML_SUCCESS) {
      for (unsigned i = 0; i < count && n < kMaxDevices; ++i) {
        nvmlDevice_t d;
        if (r.nvml.nvmlDeviceGetHandleByIndex_v2(i, &d) != NVML_SUCCESS) break;
        if (r.nvml.nvmlDeviceGetUUID(d, uuids[n], kUuidLen) != NVML_SUCCESS) break;
        ++n;
      }
    }
  }
  if (n == 0 && !cuda_is_container_order) {
    from_cuda();
    if (n > 0) {
      VGPU_WARN(
          "NVML is unavailable: container devices were numbered in CUDA order, which "
          "CUDA_VISIBLE_DEVICES=%s changes; per-device limits may be applied to the wrong "
          "device",
          cvd);
    }
  }
  if (n > 0) {
    r.region->SetDevices(n, uuids);
    VGPU_INFO("container has %d device(s); device 0 is %s", n, uuids[0]);
  }
}

}  // namespace

bool EnterProcess() {
  Runtime& r = g_rt;
  int p = r.phase_a.load(std::memory_order_acquire);
  if (__builtin_expect(p == 2, 1)) return !r.pass_through;
  const int tid = GetTid();
  int expected = 0;
  if (r.phase_a.compare_exchange_strong(expected, 1, std::memory_order_acq_rel)) {
    r.init_tid.store(tid, std::memory_order_relaxed);
    PhaseA(r);
    r.phase_a.store(2, std::memory_order_release);
    return !r.pass_through;
  }
  // Another thread is initialising; a call re-entering from inside initialisation itself
  // (the driver calling back into a hooked symbol) passes straight through.
  while (r.phase_a.load(std::memory_order_acquire) != 2) {
    if (r.init_tid.load(std::memory_order_relaxed) == tid) return false;
    sched_yield();
  }
  return !r.pass_through;
}

void EnterDevices() {
  Runtime& r = g_rt;
  if (r.phase_b.load(std::memory_order_acquire) == 2) return;
  if (!EnterProcess() || r.region == nullptr) return;
  int expected = 0;
  if (!r.phase_b.compare_exchange_strong(expected, 1, std::memory_order_acq_rel)) return;
  FillRegionDevices(r);
  r.phase_b.store(2, std::memory_order_release);
}

int MySlot() {
  Runtime& r = g_rt;
  int s = r.slot.load(std::memory_order_acquire);
  if (__builtin_expect(s >= 0, 1)) return s;
  if (r.region == nullptr || g_exiting.load(std::memory_order_relaxed)) return -1;
  bool expected = false;
  if (!g_registering.compare_exchange_strong(expected, true)) {
    // Another thread registers right now; account nothing for this one call.
    return -1;
  }
  s = r.slot.load(std::memory_order_acquire);
  if (s < 0) {
    s = r.region->RegisterSelf();
    if (s < 0) {
      VGPU_ERROR(
          "the region %s has no free process slot (%d in use); this process is not "
          "accounted",
          r.cfg.region_path, kMaxSlots);
    }
    r.slot.store(s, std::memory_order_release);
  }
  g_registering.store(false);
  return s;
}

int RegionIndexForOrdinal(CUdevice ordinal) {
  Runtime& r = g_rt;
  if (ordinal < 0 || ordinal >= kMaxDevices || r.region == nullptr) return -1;
  int v = r.ordinal_map[ordinal].load(std::memory_order_acquire);
  if (__builtin_expect(v != 0, 1)) return v - 2;
  EnterDevices();
  char uuid[kUuidLen];
  int idx;
  if (CudaUuid(ordinal, uuid, sizeof(uuid))) {
    idx = r.region->FindDevice(uuid);
    if (idx < 0) {
      if (r.region->header()->device_count.load(std::memory_order_acquire) == 0) {
        idx = ordinal;  // nothing known about the container's devices: assume identity
      } else {
        VGPU_WARN(
            "CUDA device %d (%s) is not one of the container's devices; its memory is not "
            "accounted",
            ordinal, uuid);
      }
    }
  } else {
    idx = ordinal;
  }
  r.ordinal_map[ordinal].store(idx + 2, std::memory_order_release);
  return idx;
}

int CurrentRegionDevice() {
  Runtime& r = g_rt;
  if (r.cuda.cuCtxGetDevice == nullptr) return -1;
  CUdevice d = -1;
  if (r.cuda.cuCtxGetDevice(&d) != CUDA_SUCCESS) return -1;
  return RegionIndexForOrdinal(d);
}

namespace {
struct NvmlMapEntry {
  std::atomic<nvmlDevice_t> handle;
  std::atomic<int> index;
};
constinit NvmlMapEntry g_nvml_map[kMaxDevices * 2] = {};
}  // namespace

int RegionIndexForNvml(nvmlDevice_t handle) {
  Runtime& r = g_rt;
  if (handle == nullptr || r.region == nullptr) return -1;
  for (auto& e : g_nvml_map) {
    nvmlDevice_t h = e.handle.load(std::memory_order_acquire);
    if (h == handle) return e.index.load(std::memory_order_relaxed);
    if (h == nullptr) break;
  }
  if (!EnsureNvml()) return -1;
  FillRegionDevices(r);
  char uuid[kUuidLen];
  if (r.nvml.nvmlDeviceGetUUID(handle, uuid, sizeof(uuid)) != NVML_SUCCESS) return -1;
  int idx = r.region->FindDevice(uuid);
  for (auto& e : g_nvml_map) {
    nvmlDevice_t empty = nullptr;
    e.index.store(idx, std::memory_order_relaxed);
    if (e.handle.compare_exchange_strong(empty, handle, std::memory_order_release)) break;
    if (empty == handle) break;
  }
  return idx;
}

bool EnsureNvml() {
  Runtime& r = g_rt;
  int s = r.nvml_state.load(std::memory_order_acquire);
  if (s == 2) return true;
  if (s == 3) return false;
  int expected = 0;
  if (!r.nvml_state.compare_exchange_strong(expected, 1)) {
    while ((s = r.nvml_state.load(std::memory_order_acquire)) == 1) sched_yield();
    return s == 2;
  }
  void* h = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_NOLOAD);
  if (h == nullptr) h = dlopen("libnvidia-ml.so.1", RTLD_NOW);
  bool ok = h != nullptr;
  if (ok) {
#define VGPU_LOAD(name) r.nvml.name = reinterpret_cast<decltype(&::name)>(RealDlsym(h, #name));
    VGPU_REAL_NVML(VGPU_LOAD)
#undef VGPU_LOAD
    ResolveNvmlHookTargets(h);
    ok = r.nvml.nvmlInit_v2 != nullptr && r.nvml.nvmlDeviceGetCount_v2 != nullptr &&
         r.nvml.nvmlDeviceGetHandleByIndex_v2 != nullptr && r.nvml.nvmlDeviceGetUUID != nullptr &&
         r.nvml.nvmlInit_v2() == NVML_SUCCESS;
  }
  if (!ok) VGPU_INFO("NVML is unavailable; SM utilisation cannot be measured");
  r.nvml_state.store(ok ? 2 : 3, std::memory_order_release);
  return ok;
}

// ---------------------------------------------------------------------------------------------
// Memory

namespace {

// A refusal is an error line, printed whatever LIBCUDA_LOG_LEVEL says: a job that dies with
// CUDA_ERROR_OUT_OF_MEMORY on a card with free memory must show why in its container's log. A
// program that retries in a loop would flood that log, so at most one line a second is written;
// the next one says how many were left out.
void LogRefusal(const char* api, int dev, uint64_t bytes, const ReserveResult& res) {
  static std::atomic<int64_t> last_ns{INT64_MIN};
  static std::atomic<uint64_t> unlogged{0};
  int64_t now = MonoNs();
  int64_t last = last_ns.load(std::memory_order_relaxed);
  if (last != INT64_MIN && now - last < 1'000'000'000) {
    unlogged.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  if (!last_ns.compare_exchange_strong(last, now, std::memory_order_relaxed)) {
    unlogged.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  uint64_t skipped = unlogged.exchange(0, std::memory_order_relaxed);
  char tail[64] = "";
  if (skipped > 0) {
    snprintf(tail, sizeof tail, "; %llu earlier refusal(s) not shown",
             static_cast<unsigned long long>(skipped));
  }
  constexpr double kMiB = 1024.0 * 1024.0;
  VGPU_ERROR(
      "%s: out of memory: %llu bytes (%.1f MiB) on device %d refused by the container's memory "
      "limit: %.1f of %.1f MiB in use (CUDA_DEVICE_MEMORY_LIMIT)%s",
      api, static_cast<unsigned long long>(bytes), static_cast<double>(bytes) / kMiB, dev,
      static_cast<double>(res.used) / kMiB, static_cast<double>(res.limit) / kMiB, tail);
}

}  // namespace

bool Charge(int dev, uint64_t bytes, MemKind kind, const char* api) {
  Runtime& r = g_rt;
  int slot = MySlot();
  if (slot < 0 || dev < 0) return true;
  ReserveResult res = r.region->Reserve(slot, dev, bytes, kind);
  if (!res.ok) {
    LogRefusal(api, dev, bytes, res);
    return false;
  }
  VGPU_DEBUG("%s: +%llu bytes on device %d (%llu in use)", api,
             static_cast<unsigned long long>(bytes), dev,
             static_cast<unsigned long long>(res.used + bytes));
  return true;
}

void Uncharge(int dev, uint64_t bytes, MemKind kind) {
  Runtime& r = g_rt;
  int slot = r.slot.load(std::memory_order_acquire);
  if (slot < 0 || dev < 0 || r.region == nullptr) return;
  r.region->Unreserve(slot, dev, bytes, kind);
}

// ---------------------------------------------------------------------------------------------
// Launches

void WaitIfPaused() {
  Runtime& r = g_rt;
  if (r.region == nullptr) return;
  RegionHeader* h = r.region->header();
  if (__builtin_expect(h->suspend_request.load(std::memory_order_relaxed) == 0 &&
                           h->recent_kernel.load(std::memory_order_relaxed) >= 0,
                       1)) {
    return;
  }
  int slot = MySlot();
  if (slot >= 0) h->slots[slot].status.store(kSlotSuspended, std::memory_order_relaxed);
  VGPU_NOTICE("paused (%s); waiting to be resumed",
              h->suspend_request.load() ? "suspended by hamictl" : "a higher-priority task runs");
  while (h->suspend_request.load(std::memory_order_relaxed) != 0 ||
         h->recent_kernel.load(std::memory_order_relaxed) < 0) {
    SleepUntilMono(MonoNs() + 5'000'000);
  }
  if (slot >= 0) h->slots[slot].status.store(kSlotRunning, std::memory_order_relaxed);
  VGPU_NOTICE("resumed");
}

bool LaunchPrologue() {
  if (!EnterProcess()) return false;
  Runtime& r = g_rt;
  Region* region = r.region;
  if (region == nullptr) return r.launch_gate.load(std::memory_order_relaxed);
  RegionHeader* h = region->header();
  int32_t rk = h->recent_kernel.load(std::memory_order_relaxed);
  if (__builtin_expect(rk < 0 || h->suspend_request.load(std::memory_order_relaxed) != 0, 0)) {
    WaitIfPaused();
    rk = h->recent_kernel.load(std::memory_order_relaxed);
  }
  // The container is active for the monitor's feedback (recent_kernel 2, a negative value is
  // its "wait" and stays) and last ran a kernel this second: stores only when they change.
  if (__builtin_expect(rk != 2, 0) && rk >= 0) h->recent_kernel.compare_exchange_strong(rk, 2);
  uint64_t now_s = static_cast<uint64_t>(time(nullptr));
  if (__builtin_expect(h->last_kernel_time.load(std::memory_order_relaxed) != now_s, 0)) {
    h->last_kernel_time.store(now_s, std::memory_order_relaxed);
  }
  if (__builtin_expect(h->config_gen.load(std::memory_order_relaxed) !=
                           r.seen_config_gen.load(std::memory_order_relaxed),
                       0)) {
    RecomputeLaunchGate(r);
  }
  return r.launch_gate.load(std::memory_order_relaxed);
}

void GateLaunch(uint64_t units) {
  Runtime& r = g_rt;
  // The controller thread is started by the first launch that may need it, not at start-up:
  // most processes of a container never launch under an SM limit.
  if (__builtin_expect(!r.watcher_started.load(std::memory_order_relaxed), 0)) StartWatcher();
  int dev = CurrentRegionDevice();
  if (dev < 0) return;
  RegionHeader* h = r.region->header();
  RegionDevice& d = h->devices[dev];
  uint32_t lim = d.sm_limit.load(std::memory_order_relaxed);
  if (lim == 0 || lim >= 100) return;
  if (r.cfg.policy == CorePolicy::kDefault &&
      h->utilization_switch.load(std::memory_order_relaxed) == 0) {
    return;
  }
  d.work_units.fetch_add(units, std::memory_order_relaxed);
  d.launches.fetch_add(1, std::memory_order_relaxed);
  uint64_t cost = d.ns_per_unit_q16.load(std::memory_order_relaxed);
  if (cost == 0) return;  // not calibrated yet: the controller is measuring
  int64_t now = MonoNs();
  int64_t wait_until = GcraAdmit(d.tat_ns, now, CostNs(cost, units), kBurstNs);
  if (wait_until > now) {
    d.throttled_ns.fetch_add(static_cast<uint64_t>(wait_until - now), std::memory_order_relaxed);
    SleepUntilMono(wait_until);
  }
}

// ---------------------------------------------------------------------------------------------
// Controller thread. Its body is WatcherMain in sm_controller.cc; starting it stays here, in the
// same file as its only caller GateLaunch, so that the compiler can keep inlining the cheap
// early checks into the launch path.

void StartWatcher() {
  Runtime& r = g_rt;
  if (r.region == nullptr || r.pass_through || r.cfg.policy == CorePolicy::kDisable) return;
  bool expected = false;
  if (!r.watcher_started.compare_exchange_strong(expected, true)) return;
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
  pthread_attr_setstacksize(&attr, 256 * 1024);
  // The application's signals must never be delivered to our thread.
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &old);
  pthread_t t;
  int rc = pthread_create(&t, &attr, WatcherMain, nullptr);
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
  pthread_attr_destroy(&attr);
  if (rc != 0) {
    VGPU_ERROR("cannot start the SM controller thread: %s; SM limits are not enforced",
               strerror(rc));
    r.watcher_started.store(false);
  }
}

}  // namespace hami::vgpu
