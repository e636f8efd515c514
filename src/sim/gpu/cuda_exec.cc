// Simulated libcuda.so.1: modules, launches, streams and events (graphs: cuda_graph.cc).
//
// Execution model (README.md has the user-facing version): a stream is a completion time
// ("tail"). A launch of the busy kernel books its blocks on the device's shared SM timeline,
// starting no earlier than max(now, tail), and moves the tail to the kernel's end; any other
// kernel takes zero time and touches only the stream. Synchronisation sleeps until the tail;
// queries compare it with the clock.

#include <string.h>

#include <algorithm>
#include <memory>

#include "sim/gpu/clock.h"
#include "sim/gpu/cuda_exec_internal.h"
#include "sim/gpu/cuda_internal.h"
#include "sim/gpu/log.h"

namespace hami::sim {
namespace {

// Per-thread default streams, one per context (keyed by context id, never reused).
struct PerThreadStreams {
  std::vector<std::pair<uint64_t, std::unique_ptr<CUstream_st>>> streams;
};
thread_local PerThreadStreams t_streams;

CUstream_st* PerThreadStream(CUctx_st* ctx) {
  for (auto& [id, s] : t_streams.streams) {
    if (id == ctx->id) return s.get();
  }
  auto s = std::make_unique<CUstream_st>();
  s->ctx = ctx;
  CUstream_st* raw = s.get();
  t_streams.streams.emplace_back(ctx->id, std::move(s));
  return raw;
}

void AtomicMax(std::atomic<uint64_t>* a, uint64_t v) {
  uint64_t cur = a->load(std::memory_order_relaxed);
  while (cur < v && !a->compare_exchange_weak(cur, v, std::memory_order_release)) {
  }
}

// Blocks while the stream's launch queue is full. Called with s->mu held; releases it while
// sleeping and holds it again on return.
void ApplyBackPressure(CUstream_st* s) REQUIRES(s->mu) {
  const uint64_t max_queued_ns = Drv().rt->max_queued_ns();
  for (;;) {
    uint64_t now = MonotonicNs();
    while (!s->pending.empty() && s->pending.front() <= now) s->pending.pop_front();
    uint64_t wake = 0;
    if (s->pending.size() >= kMaxPendingKernels) {
      wake = s->pending[s->pending.size() - kMaxPendingKernels];
    }
    if (s->tail_ns > now + max_queued_ns) wake = std::max(wake, s->tail_ns - max_queued_ns);
    if (wake <= now) return;
    s->mu.Unlock();
    SleepUntilMonotonic(wake);
    s->mu.Lock();
  }
}

}  // namespace

CUresult PrepareLaunch(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                       unsigned by, unsigned bz, void** kernelParams, LaunchArgs* out) {
  if (f == nullptr || f->magic != kFuncMagic) return CUDA_ERROR_INVALID_HANDLE;
  if (gx == 0 || gy == 0 || gz == 0 || bx == 0 || by == 0 || bz == 0) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  uint64_t threads = static_cast<uint64_t>(bx) * by * bz;
  if (threads > 1024 || bz > 64) return CUDA_ERROR_INVALID_VALUE;
  out->func = f;
  out->blocks = static_cast<uint64_t>(gx) * gy * gz;
  out->threads_per_block = threads;
  out->spin_ns = 0;
  if (f->spin) {
    if (kernelParams == nullptr || kernelParams[0] == nullptr) return CUDA_ERROR_INVALID_VALUE;
    memcpy(&out->spin_ns, kernelParams[0], sizeof(uint64_t));
  }
  return CUDA_SUCCESS;
}

// Queues one prepared kernel on a stream.
CUresult Enqueue(CUstream_st* s, const LaunchArgs& a) {
  CUctx_st* ctx = s->ctx;
  if (!a.func->spin || a.spin_ns == 0) {
    // Fast path: zero-time kernel; never touches the shared state.
    hami::MutexLock lock(s->mu);
    if (s->tail_ns > MonotonicNs()) {
      ApplyBackPressure(s);
      s->pending.push_back(s->tail_ns);
    }
    return CUDA_SUCCESS;
  }
  // A MIG device's kernels book the SMs of its compute instance only (CudaDevice::sm_first).
  const CudaDevice& dev = *DeviceOf(ctx->ordinal);
  const auto sms = static_cast<uint64_t>(dev.sm_span);
  uint64_t waves = (a.blocks + sms - 1) / sms;
  if (static_cast<unsigned __int128>(waves) * a.spin_ns > kMaxKernelNs) {
    SimLogWarn("%s launch of %llu blocks x %llu ns would run longer than %llu s; rejected",
               kSpinKernelName, static_cast<unsigned long long>(a.blocks),
               static_cast<unsigned long long>(a.spin_ns),
               static_cast<unsigned long long>(kMaxKernelNs / 1000000000ull));
    return CUDA_ERROR_INVALID_VALUE;
  }
  int slot = ProcessSlot();
  if (slot < 0) return CUDA_ERROR_OUT_OF_MEMORY;
  hami::MutexLock lock(s->mu);
  ApplyBackPressure(s);
  uint64_t t0 = std::max(MonotonicNs(), s->tail_ns);
  uint64_t end = Drv().rt->state().ScheduleKernel(slot, dev.phys, dev.sm_first, dev.sm_span, t0,
                                                  a.blocks, a.spin_ns);
  s->tail_ns = end;
  s->pending.push_back(end);
  AtomicMax(&ctx->max_tail_ns, end);
  return CUDA_SUCCESS;
}

namespace {

CUresult Launch(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
                unsigned bz, CUstream hStream, void** kernelParams, bool per_thread,
                bool cooperative) {
  CUctx_st* ctx;
  CUresult rc = CurrentContext(&ctx);
  if (rc != CUDA_SUCCESS) return rc;
  LaunchArgs args;
  rc = PrepareLaunch(f, gx, gy, gz, bx, by, bz, kernelParams, &args);
  if (rc != CUDA_SUCCESS) return rc;
  CUstream_st* s;
  rc = ResolveStream(hStream, per_thread, &s);
  if (rc != CUDA_SUCCESS) return rc;
  if (cooperative && args.blocks > static_cast<uint64_t>(DeviceOf(s->ctx->ordinal)->sm_count)) {
    return CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE;
  }
  return Enqueue(s, args);
}

CUresult LaunchEx(const CUlaunchConfig* config, CUfunction f, void** kernelParams,
                  bool per_thread) {
  if (config == nullptr) return CUDA_ERROR_INVALID_VALUE;
  return Launch(f, config->gridDimX, config->gridDimY, config->gridDimZ, config->blockDimX,
                config->blockDimY, config->blockDimZ, config->hStream, kernelParams, per_thread,
                false);
}

CUresult StreamSync(CUstream hStream, bool per_thread) {
  CUresult rc = CheckInit();
  if (rc != CUDA_SUCCESS) return rc;
  CUstream_st* s;
  rc = ResolveStream(hStream, per_thread, &s);
  if (rc != CUDA_SUCCESS) return rc;
  SynchronizeStream(s);
  TrimPoolsAtSync();
  return CUDA_SUCCESS;
}

CUresult LoadModule(CUmodule* module) {
  CUctx_st* ctx;
  CUresult rc = CurrentContext(&ctx);
  if (rc != CUDA_SUCCESS) return rc;
  auto* m = new CUmod_st();
  m->ctx = ctx;
  {
    hami::MutexLock lock(Drv().mu);
    Drv().immortal.push_back(m);
  }
  *module = m;
  return CUDA_SUCCESS;
}

}  // namespace

CUresult ResolveStream(CUstream stream, bool per_thread, CUstream_st** out) {
  const auto raw = reinterpret_cast<uintptr_t>(stream);
  if (raw == 0 || raw == 1 || raw == 2) {  // NULL, CU_STREAM_LEGACY, CU_STREAM_PER_THREAD
    CUctx_st* ctx;
    CUresult rc = CurrentContext(&ctx);
    if (rc != CUDA_SUCCESS) return rc;
    bool pts = raw == 2 || (raw == 0 && per_thread);
    *out = pts ? PerThreadStream(ctx) : ctx->legacy_stream;
    return CUDA_SUCCESS;
  }
  if (stream->magic != kStreamMagic) return CUDA_ERROR_INVALID_HANDLE;
  if (stream->ctx->destroyed) return CUDA_ERROR_CONTEXT_IS_DESTROYED;
  *out = stream;
  return CUDA_SUCCESS;
}

void SynchronizeStream(CUstream_st* s) {
  uint64_t tail;
  {
    hami::MutexLock lock(s->mu);
    tail = s->tail_ns;
  }
  SleepUntilMonotonic(tail);
}

}  // namespace hami::sim

using namespace hami::sim;  // NOLINT: the C ABI entry points below implement this namespace's API

// ---------------------------------------------------------------- modules and functions

HAMI_SIM_EXPORT CUresult cuModuleLoad(CUmodule* module, const char* fname) {
  if (module == nullptr || fname == nullptr) return CUDA_ERROR_INVALID_VALUE;
  return LoadModule(module);
}

HAMI_SIM_EXPORT CUresult cuModuleLoadData(CUmodule* module, const void* image) {
  if (module == nullptr || image == nullptr) return CUDA_ERROR_INVALID_VALUE;
  return LoadModule(module);
}

HAMI_SIM_EXPORT CUresult cuModuleLoadDataEx(CUmodule* module, const void* image,
                                            unsigned int numOptions, void* options,
                                            void** optionValues) {
  if (module == nullptr || image == nullptr) return CUDA_ERROR_INVALID_VALUE;
  return LoadModule(module);
}

HAMI_SIM_EXPORT CUresult cuModuleUnload(CUmodule hmod) {
  CUresult rc = CheckInit();
  if (rc != CUDA_SUCCESS) return rc;
  if (hmod == nullptr || hmod->magic != kModuleMagic) return CUDA_ERROR_INVALID_HANDLE;
  // Function handles stay valid memory (graphs and queued launches may still name them); the
  // module only stops resolving names.
  hmod->magic = 0;
  return CUDA_SUCCESS;
}

HAMI_SIM_EXPORT CUresult cuModuleGetFunction(CUfunction* hfunc, CUmodule hmod, const char* name) {
  CUresult rc = CheckInit();
  if (rc != CUDA_SUCCESS) return rc;
  if (hfunc == nullptr || name == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (hmod == nullptr || hmod->magic != kModuleMagic) return CUDA_ERROR_INVALID_HANDLE;
  hami::MutexLock lock(hmod->mu);
  auto it = hmod->functions.find(name);
  if (it == hmod->functions.end()) {
    auto* f = new CUfunc_st();
    f->module = hmod;
    f->name = name;
    f->spin = strcmp(name, kSpinKernelName) == 0;
    it = hmod->functions.emplace(name, f).first;
  }
  *hfunc = it->second;
  return CUDA_SUCCESS;
}

HAMI_SIM_EXPORT CUresult cuFuncGetAttribute(int* pi, int attrib, CUfunction hfunc) {
  CUresult rc = CheckInit();
  if (rc != CUDA_SUCCESS) return rc;
  if (pi == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (hfunc == nullptr || hfunc->magic != kFuncMagic) return CUDA_ERROR_INVALID_HANDLE;
  switch (attrib) {
    case 0:
      *pi = 1024;
      break;  // MAX_THREADS_PER_BLOCK
    case 4:
      *pi = 32;
      break;  // NUM_REGS
    case 5:   // PTX_VERSION
    case 6:
      *pi = 80;
      break;  // BINARY_VERSION
    case 8:
      *pi = 49152;
      break;  // MAX_DYNAMIC_SHARED_SIZE_BYTES
    case 9:
      *pi = -1;
      break;  // PREFERRED_SHARED_MEMORY_CARVEOUT
    default:
      if (attrib < 0 || attrib > 20) return CUDA_ERROR_INVALID_VALUE;
      *pi = 0;
  }
  return CUDA_SUCCESS;
}

// ---------------------------------------------------------------- launches

HAMI_SIM_EXPORT CUresult cuLaunchKernel(CUfunction f, unsigned int gridDimX, unsigned int gridDimY,
                                        unsigned int gridDimZ, unsigned int blockDimX,
                                        unsigned int blockDimY, unsigned int blockDimZ,
                                        unsigned int sharedMemBytes, CUstream hStream,
                                        void** kernelParams, void** extra) {
  return Launch(f, gridDimX, gridDimY, gridDimZ, blockDimX, blockDimY, blockDimZ, hStream,
                kernelParams, false, false);
}

HAMI_SIM_EXPORT CUresult cuLaunchKernel_ptsz(CUfunction f, unsigned int gridDimX,
                                             unsigned int gridDimY, unsigned int gridDimZ,
                                             unsigned int blockDimX, unsigned int blockDimY,
                                             unsigned int blockDimZ, unsigned int sharedMemBytes,
                                             CUstream hStream, void** kernelParams, void** extra) {
  return Launch(f, gridDimX, gridDimY, gridDimZ, blockDimX, blockDimY, blockDimZ, hStream,
                kernelParams, true, false);
}

HAMI_SIM_EXPORT CUresult cuLaunchKernelEx(const CUlaunchConfig* config, CUfunction f,
                                          void** kernelParams, void** extra) {
  return LaunchEx(config, f, kernelParams, false);
}

HAMI_SIM_EXPORT CUresult cuLaunchKernelEx_ptsz(const CUlaunchConfig* config, CUfunction f,
                                               void** kernelParams, void** extra) {
  return LaunchEx(config, f, kernelParams, true);
}

HAMI_SIM_EXPORT CUresult cuLaunchCooperativeKernel(CUfunction f, unsigned int gridDimX,
                                                   unsigned int gridDimY, unsigned int gridDimZ,
                                                   unsigned int blockDimX, unsigned int blockDimY,
                                                   unsigned int blockDimZ,
                                                   unsigned int sharedMemBytes, CUstream hStream,
                                                   void** kernelParams) {
  return Launch(f, gridDimX, gridDimY, gridDimZ, blockDimX, blockDimY, blockDimZ, hStream,
                kernelParams, false, true);
}

HAMI_SIM_EXPORT CUresult cuLaunchCooperativeKernel_ptsz(
    CUfunction f, unsigned int gridDimX, unsigned int gridDimY, unsigned int gridDimZ,
    unsigned int blockDimX, unsigned int blockDimY, unsigned int blockDimZ,
    unsigned int sharedMemBytes, CUstream hStream, void** kernelParams) {
  return Launch(f, gridDimX, gridDimY, gridDimZ, blockDimX, blockDimY, blockDimZ, hStream,
                kernelParams, true, true);
}

// ---------------------------------------------------------------- streams

HAMI_SIM_EXPORT CUresult cuStreamCreateWithPriority(CUstream* phStream, unsigned int flags,
                                                    int priority) {
  CUctx_st* ctx;
  CUresult rc = CurrentContext(&ctx);
  if (rc != CUDA_SUCCESS) return rc;
  if (phStream == nullptr || flags > 1) return CUDA_ERROR_INVALID_VALUE;
  auto* s = new CUstream_st();
  s->ctx = ctx;
  s->flags = flags;
  s->priority = priority;
  *phStream = s;
  return CUDA_SUCCESS;
}

HAMI_SIM_EXPORT CUresult cuStreamCreate(CUstream* phStream, unsigned int Flags) {
  return cuStreamCreateWithPriority(phStream, Flags, 0);
}

HAMI_SIM_EXPORT CUresult cuStreamDestroy_v2(CUstream hStream) {
  CUresult rc = CheckInit();
  if (rc != CUDA_SUCCESS) return rc;
  if (hStream == nullptr || reinterpret_cast<uintptr_t>(hStream) <= 2 ||
      hStream->magic != kStreamMagic) {
    return CUDA_ERROR_INVALID_HANDLE;
  }
  // Queued work still completes (its time is booked in the context's max tail); the handle
  // dies now.
  hStream->magic = 0;
  delete hStream;
  return CUDA_SUCCESS;
}

HAMI_SIM_EXPORT CUresult cuStreamSynchronize(CUstream hStream) {
  return StreamSync(hStream, false);
}

HAMI_SIM_EXPORT CUresult cuStreamSynchronize_ptsz(CUstream hStream) {
  return StreamSync(hStream, true);
}

HAMI_SIM_EXPORT CUresult cuStreamQuery(CUstream hStream) {
  CUresult rc = CheckInit();
  if (rc != CUDA_SUCCESS) return rc;
  CUstream_st* s;
  rc = ResolveStream(hStream, false, &s);
  if (rc != CUDA_SUCCESS) return rc;
  hami::MutexLock lock(s->mu);
  return MonotonicNs() >= s->tail_ns ? CUDA_SUCCESS : CUDA_ERROR_NOT_READY;
}

// ---------------------------------------------------------------- events

HAMI_SIM_EXPORT CUresult cuEventCreate(CUevent* phEvent, unsigned int Flags) {
  CUctx_st* ctx;
  CUresult rc = CurrentContext(&ctx);
  if (rc != CUDA_SUCCESS) return rc;
  if (phEvent == nullptr || (Flags & ~0xFu)) return CUDA_ERROR_INVALID_VALUE;
  auto* e = new CUevent_st();
  e->ctx = ctx;
  e->flags = Flags;
  *phEvent = e;
  return CUDA_SUCCESS;
}

HAMI_SIM_EXPORT CUresult cuEventRecord(CUevent hEvent, CUstream hStream) {
  CUresult rc = CheckInit();
  if (rc != CUDA_SUCCESS) return rc;
  if (hEvent == nullptr || hEvent->magic != kEventMagic) return CUDA_ERROR_INVALID_HANDLE;
  CUstream_st* s;
  rc = ResolveStream(hStream, false, &s);
  if (rc != CUDA_SUCCESS) return rc;
  hami::MutexLock lock(s->mu);
  hEvent->time_ns.store(std::max(MonotonicNs(), s->tail_ns), std::memory_order_release);
  return CUDA_SUCCESS;
}

HAMI_SIM_EXPORT CUresult cuEventSynchronize(CUevent hEvent) {
  CUresult rc = CheckInit();
  if (rc != CUDA_SUCCESS) return rc;
  if (hEvent == nullptr || hEvent->magic != kEventMagic) return CUDA_ERROR_INVALID_HANDLE;
  SleepUntilMonotonic(hEvent->time_ns.load(std::memory_order_acquire));
  TrimPoolsAtSync();
  return CUDA_SUCCESS;
}

HAMI_SIM_EXPORT CUresult cuEventQuery(CUevent hEvent) {
  CUresult rc = CheckInit();
  if (rc != CUDA_SUCCESS) return rc;
  if (hEvent == nullptr || hEvent->magic != kEventMagic) return CUDA_ERROR_INVALID_HANDLE;
  return MonotonicNs() >= hEvent->time_ns.load(std::memory_order_acquire) ? CUDA_SUCCESS
                                                                          : CUDA_ERROR_NOT_READY;
}

HAMI_SIM_EXPORT CUresult cuEventElapsedTime(float* pMilliseconds, CUevent hStart, CUevent hEnd) {
  CUresult rc = CheckInit();
  if (rc != CUDA_SUCCESS) return rc;
  if (pMilliseconds == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (hStart == nullptr || hStart->magic != kEventMagic || hEnd == nullptr ||
      hEnd->magic != kEventMagic) {
    return CUDA_ERROR_INVALID_HANDLE;
  }
  const unsigned kDisableTiming = 0x2;
  if ((hStart->flags | hEnd->flags) & kDisableTiming) return CUDA_ERROR_INVALID_HANDLE;
  uint64_t a = hStart->time_ns.load(), b = hEnd->time_ns.load();
  if (a == 0 || b == 0) return CUDA_ERROR_INVALID_HANDLE;  // never recorded
  uint64_t now = MonotonicNs();
  if (a > now || b > now) return CUDA_ERROR_NOT_READY;
  *pMilliseconds = static_cast<float>((static_cast<double>(b) - static_cast<double>(a)) / 1e6);
  return CUDA_SUCCESS;
}

HAMI_SIM_EXPORT CUresult cuEventDestroy_v2(CUevent hEvent) {
  CUresult rc = CheckInit();
  if (rc != CUDA_SUCCESS) return rc;
  if (hEvent == nullptr || hEvent->magic != kEventMagic) return CUDA_ERROR_INVALID_HANDLE;
  hEvent->magic = 0;
  delete hEvent;
  return CUDA_SUCCESS;
}
