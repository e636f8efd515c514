// Simulated libcuda.so.1: initialisation, error strings and contexts (devices: cuda_device.cc).

#include <stdio.h>
#include <string.h>

#include <algorithm>

#include "sim/gpu/clock.h"
#include "sim/gpu/cuda_internal.h"
#include "sim/gpu/log.h"
#include "sim/gpu/mig_state.h"
#include "sim/gpu/proc_liveness.h"

namespace hami::sim {
namespace {

thread_local std::vector<CUctx_st*> t_ctx_stack;

struct ErrorInfo {
  CUresult code;
  const char* name;
  const char* text;
};

const ErrorInfo kErrors[] = {
    {0, "CUDA_SUCCESS", "no error"},
    {1, "CUDA_ERROR_INVALID_VALUE", "invalid argument"},
    {2, "CUDA_ERROR_OUT_OF_MEMORY", "out of memory"},
    {3, "CUDA_ERROR_NOT_INITIALIZED", "initialization error"},
    {4, "CUDA_ERROR_DEINITIALIZED", "driver shutting down"},
    {34, "CUDA_ERROR_STUB_LIBRARY", "CUDA driver is a stub library"},
    {46, "CUDA_ERROR_DEVICE_UNAVAILABLE", "device busy or unavailable"},
    {100, "CUDA_ERROR_NO_DEVICE", "no CUDA-capable device is detected"},
    {101, "CUDA_ERROR_INVALID_DEVICE", "invalid device ordinal"},
    {200, "CUDA_ERROR_INVALID_IMAGE", "device kernel image is invalid"},
    {201, "CUDA_ERROR_INVALID_CONTEXT", "invalid device context"},
    {217, "CUDA_ERROR_PEER_ACCESS_UNSUPPORTED",
     "peer access is not supported between these two devices"},
    {218, "CUDA_ERROR_INVALID_PTX", "a PTX JIT compilation failed"},
    {301, "CUDA_ERROR_FILE_NOT_FOUND", "file not found"},
    {400, "CUDA_ERROR_INVALID_HANDLE", "invalid resource handle"},
    {401, "CUDA_ERROR_ILLEGAL_STATE", "the operation cannot be performed in the present state"},
    {500, "CUDA_ERROR_NOT_FOUND", "named symbol not found"},
    {600, "CUDA_ERROR_NOT_READY", "device not ready"},
    {700, "CUDA_ERROR_ILLEGAL_ADDRESS", "an illegal memory access was encountered"},
    {701, "CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES", "too many resources requested for launch"},
    {708, "CUDA_ERROR_PRIMARY_CONTEXT_ACTIVE",
     "primary context for the specified device has already been initialized"},
    {709, "CUDA_ERROR_CONTEXT_IS_DESTROYED", "context is destroyed"},
    {712, "CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED",
     "part or all of the requested memory range is already mapped"},
    {713, "CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED",
     "pointer does not correspond to a registered memory region"},
    {720, "CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE", "too many blocks in cooperative launch"},
    {800, "CUDA_ERROR_NOT_PERMITTED", "operation not permitted"},
    {801, "CUDA_ERROR_NOT_SUPPORTED", "operation not supported"},
    {999, "CUDA_ERROR_UNKNOWN", "unknown error"},
};

const ErrorInfo* FindError(CUresult code) {
  for (const ErrorInfo& e : kErrors) {
    if (e.code == code) return &e;
  }
  return nullptr;
}

CUctx_st* NewContext(Driver& d, int ordinal, bool primary, unsigned flags) REQUIRES(d.mu) {
  auto* ctx = new CUctx_st();
  ctx->ordinal = ordinal;
  ctx->phys = PhysOf(ordinal);
  ctx->primary = primary;
  ctx->flags = flags;
  ctx->id = d.next_ctx_id++;
  ctx->legacy_stream = new CUstream_st();
  ctx->legacy_stream->ctx = ctx;
  d.immortal.push_back(ctx);
  return ctx;
}

// Fails a context creation on a MIG device whose compute instance is gone (destroyed after this
// process resolved its visible devices): CUDA_ERROR_DEVICE_UNAVAILABLE.
CUresult CheckInstanceAlive(CUdevice dev) {
  const CudaDevice& d = *DeviceOf(dev);
  if (!d.mig) return CUDA_SUCCESS;
  const MigDeviceState snap = Drv().rt->state().MigSnapshot(d.phys);
  const MigGpuInstanceRecord* gi = MigFindGi(snap, d.gi_id);
  const MigComputeInstanceRecord* ci = gi != nullptr ? MigFindCi(*gi, d.ci_id) : nullptr;
  if (ci != nullptr && d.uuid == ci->uuid) return CUDA_SUCCESS;
  SimLogWarn("MIG device %s no longer exists", d.uuid.c_str());
  return kErrDeviceUnavailable;
}

// Attaches this process to (attach) or detaches it from the compute instance of MIG device `d`.
void SetMigAttachment(const CudaDevice& d, bool attach) {
  const pid_t pid = SimSelfPid();
  const uint64_t start = ProcessStartTime(pid);
  auto update = [&](MigDeviceState& m, bool) -> nvmlReturn_t {
    const MigGpuInstanceRecord* gi = MigFindGi(m, d.gi_id);
    const MigComputeInstanceRecord* ci = gi != nullptr ? MigFindCi(*gi, d.ci_id) : nullptr;
    if (ci == nullptr || d.uuid != ci->uuid) return NVML_ERROR_NOT_FOUND;
    return attach ? MigAttachProcess(&m, d.gi_id, d.ci_id, pid, start, &ProcessAlive)
                  : MigDetachProcess(&m, d.gi_id, d.ci_id, pid, start);
  };
  nvmlReturn_t rc = Drv().rt->state().UpdateMig(d.phys, update);
  if (attach && rc == NVML_ERROR_INSUFFICIENT_RESOURCES) {
    SimLogWarn("MIG device %s already runs %d processes: NVML does not list this one, and it "
               "does not keep the instance from being destroyed",
               d.uuid.c_str(), kMigMaxAttached);
  }
}

// Records a context of this process coming (+1) or going (-1) on CUDA device `ordinal`. On a
// whole GPU the shared state counts contexts; on a MIG device the process is attached to the
// compute instance while it holds one (NVML then lists it there, and the instance cannot be
// destroyed under it).
void NoteContext(int ordinal, int delta) {
  const CudaDevice& dev = *DeviceOf(ordinal);
  if (!dev.mig) {
    int slot = ProcessSlot();
    if (slot >= 0) Drv().rt->state().AddContext(slot, dev.phys, delta);
    return;
  }
  Driver& d = Drv();
  hami::MutexLock lock(d.mu);
  int& live = d.mig_contexts[static_cast<size_t>(ordinal)];
  const int before = live;
  live = std::max(0, live + delta);
  if ((before == 0) != (live == 0)) SetMigAttachment(dev, live > 0);
}

void RemoveFromThreadStack(CUctx_st* ctx) {
  t_ctx_stack.erase(std::remove(t_ctx_stack.begin(), t_ctx_stack.end(), ctx), t_ctx_stack.end());
}

}  // namespace

Driver& Drv() {
  static Driver* d = new Driver();
  return *d;
}

CUresult CheckInit() {
  Driver& d = Drv();
  if (d.initialized.load(std::memory_order_acquire)) return CUDA_SUCCESS;
  hami::MutexLock lock(d.mu);
  return d.init_result != CUDA_SUCCESS ? d.init_result : CUDA_ERROR_NOT_INITIALIZED;
}

int ProcessSlot() { return Drv().rt->Slot(); }

CUresult ResolveContext(CUcontext ctx, CUctx_st** out) {
  CUresult rc = CheckInit();
  if (rc != CUDA_SUCCESS) return rc;
  if (ctx == nullptr) return CurrentContext(out);
  if (ctx->magic != kCtxMagic) return CUDA_ERROR_INVALID_CONTEXT;
  if (ctx->destroyed) return CUDA_ERROR_CONTEXT_IS_DESTROYED;
  *out = ctx;
  return CUDA_SUCCESS;
}

CUresult CurrentContext(CUctx_st** out) {
  CUresult rc = CheckInit();
  if (rc != CUDA_SUCCESS) return rc;
  if (t_ctx_stack.empty() || t_ctx_stack.back() == nullptr) return CUDA_ERROR_INVALID_CONTEXT;
  CUctx_st* ctx = t_ctx_stack.back();
  if (ctx->destroyed) return CUDA_ERROR_CONTEXT_IS_DESTROYED;
  *out = ctx;
  return CUDA_SUCCESS;
}

}  // namespace hami::sim

using namespace hami::sim;  // NOLINT: the C ABI entry points below implement this namespace's API

// ---------------------------------------------------------------- init, version, errors

HAMI_SIM_EXPORT CUresult cuInit(unsigned int flags) {
  if (flags != 0) return CUDA_ERROR_INVALID_VALUE;
  Driver& d = Drv();
  if (d.initialized.load(std::memory_order_acquire)) return CUDA_SUCCESS;
  hami::MutexLock lock(d.mu);
  if (d.initialized.load()) return CUDA_SUCCESS;
  SimRuntime* rt = SimRuntime::Get();
  if (rt == nullptr) {
    d.init_result = CUDA_ERROR_NO_DEVICE;
    return d.init_result;
  }
  if (rt->cuda_devices().empty()) {
    SimLogDebug("cuInit: no device visible to CUDA");
    d.init_result = CUDA_ERROR_NO_DEVICE;
    return d.init_result;
  }
  d.rt = rt;
  size_t n = rt->cuda_devices().size();
  d.mig_contexts.assign(n, 0);
  d.primary.assign(n, nullptr);
  d.primary_refs.assign(n, 0);
  d.primary_flags.assign(n, 0);
  d.default_pool.assign(n, nullptr);
  for (size_t i = 0; i < n; ++i) {
    auto* pool = new CUmemPoolHandle_st();
    pool->ordinal = static_cast<int>(i);
    pool->phys = rt->cuda_devices()[i].phys;
    pool->is_default = true;
    pool->props.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
    pool->props.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    pool->props.location.id = static_cast<int>(i);
    d.default_pool[i] = pool;
  }
  d.current_pool = d.default_pool;
  d.initialized.store(true, std::memory_order_release);
  SimLogDebug("cuInit: %zu devices", n);
  return CUDA_SUCCESS;
}

HAMI_SIM_EXPORT CUresult cuDriverGetVersion(int* version) {
  if (version == nullptr) return CUDA_ERROR_INVALID_VALUE;
  SimRuntime* rt = SimRuntime::Get();
  *version = rt != nullptr ? rt->state().cuda_driver_version() : 12040;
  return CUDA_SUCCESS;
}

HAMI_SIM_EXPORT CUresult cuGetErrorString(CUresult error, const char** str) {
  if (str == nullptr) return CUDA_ERROR_INVALID_VALUE;
  const ErrorInfo* e = FindError(error);
  if (e == nullptr) {
    *str = nullptr;
    return CUDA_ERROR_INVALID_VALUE;
  }
  *str = e->text;
  return CUDA_SUCCESS;
}

HAMI_SIM_EXPORT CUresult cuGetErrorName(CUresult error, const char** str) {
  if (str == nullptr) return CUDA_ERROR_INVALID_VALUE;
  const ErrorInfo* e = FindError(error);
  if (e == nullptr) {
    *str = nullptr;
    return CUDA_ERROR_INVALID_VALUE;
  }
  *str = e->name;
  return CUDA_SUCCESS;
}

// ---------------------------------------------------------------- primary contexts

HAMI_SIM_EXPORT CUresult cuDevicePrimaryCtxRetain(CUcontext* pctx, CUdevice dev) {
  CUresult rc = CheckCudaDevice(dev);
  if (rc == CUDA_SUCCESS) rc = CheckInstanceAlive(dev);
  if (rc != CUDA_SUCCESS) return rc;
  if (pctx == nullptr) return CUDA_ERROR_INVALID_VALUE;
  Driver& d = Drv();
  bool first = false;
  {
    hami::MutexLock lock(d.mu);
    if (d.primary[dev] == nullptr) {
      d.primary[dev] = NewContext(d, dev, true, d.primary_flags[dev]);
    }
    CUctx_st* ctx = d.primary[dev];
    if (d.primary_refs[dev]++ == 0) {
      ctx->destroyed = false;
      ctx->flags = d.primary_flags[dev];
      first = true;
    }
    *pctx = ctx;
  }
  if (first) NoteContext(dev, +1);
  return CUDA_SUCCESS;
}

namespace {
// Tears down the primary context of `dev` (refcount reached zero, or reset).
void DeactivatePrimary(int dev, bool was_active) {
  Driver& d = Drv();
  CUctx_st* ctx = nullptr;
  {
    hami::MutexLock lock(d.mu);
    ctx = d.primary[dev];
    if (ctx == nullptr) return;
    d.primary_refs[dev] = 0;
  }
  SynchronizeStream(ctx->legacy_stream);
  FreeContextAllocations(ctx);
  {
    hami::MutexLock lock(d.mu);
    ctx->destroyed = true;
  }
  if (was_active) NoteContext(dev, -1);
}
}  // namespace

HAMI_SIM_EXPORT CUresult cuDevicePrimaryCtxRelease_v2(CUdevice dev) {
  CUresult rc = CheckCudaDevice(dev);
  if (rc != CUDA_SUCCESS) return rc;
  Driver& d = Drv();
  {
    hami::MutexLock lock(d.mu);
    if (d.primary_refs[dev] == 0) return CUDA_ERROR_INVALID_CONTEXT;
    if (--d.primary_refs[dev] > 0) return CUDA_SUCCESS;
  }
  DeactivatePrimary(dev, true);
  return CUDA_SUCCESS;
}

HAMI_SIM_EXPORT CUresult cuDevicePrimaryCtxGetState(CUdevice dev, unsigned int* flags,
                                                    int* active) {
  CUresult rc = CheckCudaDevice(dev);
  if (rc != CUDA_SUCCESS) return rc;
  if (flags == nullptr || active == nullptr) return CUDA_ERROR_INVALID_VALUE;
  Driver& d = Drv();
  hami::MutexLock lock(d.mu);
  *flags = d.primary_flags[dev];
  *active = d.primary_refs[dev] > 0 ? 1 : 0;
  return CUDA_SUCCESS;
}

HAMI_SIM_EXPORT CUresult cuDevicePrimaryCtxSetFlags_v2(CUdevice dev, unsigned int flags) {
  CUresult rc = CheckCudaDevice(dev);
  if (rc != CUDA_SUCCESS) return rc;
  if (flags & ~0x1Fu) return CUDA_ERROR_INVALID_VALUE;
  Driver& d = Drv();
  hami::MutexLock lock(d.mu);
  d.primary_flags[dev] = flags;
  if (d.primary[dev] != nullptr) d.primary[dev]->flags = flags;
  return CUDA_SUCCESS;
}

HAMI_SIM_EXPORT CUresult cuDevicePrimaryCtxReset_v2(CUdevice dev) {
  CUresult rc = CheckCudaDevice(dev);
  if (rc != CUDA_SUCCESS) return rc;
  bool active;
  {
    hami::MutexLock lock(Drv().mu);
    active = Drv().primary_refs[dev] > 0;
  }
  DeactivatePrimary(dev, active);
  return CUDA_SUCCESS;
}

// ---------------------------------------------------------------- regular contexts

HAMI_SIM_EXPORT CUresult cuCtxCreate_v2(CUcontext* pctx, unsigned int flags, CUdevice dev) {
  CUresult rc = CheckCudaDevice(dev);
  if (rc == CUDA_SUCCESS) rc = CheckInstanceAlive(dev);
  if (rc != CUDA_SUCCESS) return rc;
  if (pctx == nullptr) return CUDA_ERROR_INVALID_VALUE;
  CUctx_st* ctx;
  {
    hami::MutexLock lock(Drv().mu);
    ctx = NewContext(Drv(), dev, false, flags);
  }
  NoteContext(ctx->ordinal, +1);
  t_ctx_stack.push_back(ctx);
  *pctx = ctx;
  return CUDA_SUCCESS;
}

HAMI_SIM_EXPORT CUresult cuCtxCreate_v3(CUcontext* pctx, void* paramsArray, int numParams,
                                        unsigned int flags, CUdevice dev) {
  if (numParams < 0 || (numParams > 0 && paramsArray == nullptr)) return CUDA_ERROR_INVALID_VALUE;
  return cuCtxCreate_v2(pctx, flags, dev);
}

HAMI_SIM_EXPORT CUresult cuCtxCreate_v4(CUcontext* pctx, void* ctxCreateParams, unsigned int flags,
                                        CUdevice dev) {
  return cuCtxCreate_v2(pctx, flags, dev);
}

HAMI_SIM_EXPORT CUresult cuCtxDestroy_v2(CUcontext ctx) {
  CUresult rc = CheckInit();
  if (rc != CUDA_SUCCESS) return rc;
  if (ctx == nullptr || ctx->magic != kCtxMagic) return CUDA_ERROR_INVALID_CONTEXT;
  if (ctx->primary) return CUDA_ERROR_INVALID_CONTEXT;
  {
    hami::MutexLock lock(Drv().mu);
    if (ctx->destroyed) return CUDA_ERROR_CONTEXT_IS_DESTROYED;
  }
  SleepUntilMonotonic(ctx->max_tail_ns.load());
  FreeContextAllocations(ctx);
  {
    hami::MutexLock lock(Drv().mu);
    ctx->destroyed = true;
  }
  RemoveFromThreadStack(ctx);
  NoteContext(ctx->ordinal, -1);
  return CUDA_SUCCESS;
}

HAMI_SIM_EXPORT CUresult cuCtxGetCurrent(CUcontext* pctx) {
  CUresult rc = CheckInit();
  if (rc != CUDA_SUCCESS) return rc;
  if (pctx == nullptr) return CUDA_ERROR_INVALID_VALUE;
  *pctx = t_ctx_stack.empty() ? nullptr : t_ctx_stack.back();
  return CUDA_SUCCESS;
}

HAMI_SIM_EXPORT CUresult cuCtxSetCurrent(CUcontext ctx) {
  CUresult rc = CheckInit();
  if (rc != CUDA_SUCCESS) return rc;
  if (ctx != nullptr && ctx->magic != kCtxMagic) return CUDA_ERROR_INVALID_CONTEXT;
  if (ctx == nullptr) {
    if (!t_ctx_stack.empty()) t_ctx_stack.pop_back();
    return CUDA_SUCCESS;
  }
  if (t_ctx_stack.empty()) {
    t_ctx_stack.push_back(ctx);
  } else {
    t_ctx_stack.back() = ctx;
  }
  return CUDA_SUCCESS;
}

HAMI_SIM_EXPORT CUresult cuCtxPushCurrent_v2(CUcontext ctx) {
  CUresult rc = CheckInit();
  if (rc != CUDA_SUCCESS) return rc;
  if (ctx == nullptr || ctx->magic != kCtxMagic) return CUDA_ERROR_INVALID_CONTEXT;
  t_ctx_stack.push_back(ctx);
  return CUDA_SUCCESS;
}

HAMI_SIM_EXPORT CUresult cuCtxPopCurrent_v2(CUcontext* pctx) {
  CUresult rc = CheckInit();
  if (rc != CUDA_SUCCESS) return rc;
  if (t_ctx_stack.empty()) return CUDA_ERROR_INVALID_CONTEXT;
  if (pctx != nullptr) *pctx = t_ctx_stack.back();
  t_ctx_stack.pop_back();
  return CUDA_SUCCESS;
}

HAMI_SIM_EXPORT CUresult cuCtxGetDevice(CUdevice* device) {
  CUctx_st* ctx;
  CUresult rc = CurrentContext(&ctx);
  if (rc != CUDA_SUCCESS) return rc;
  if (device == nullptr) return CUDA_ERROR_INVALID_VALUE;
  *device = ctx->ordinal;
  return CUDA_SUCCESS;
}

HAMI_SIM_EXPORT CUresult cuCtxSynchronize(void) {
  CUctx_st* ctx;
  CUresult rc = CurrentContext(&ctx);
  if (rc != CUDA_SUCCESS) return rc;
  SleepUntilMonotonic(ctx->max_tail_ns.load(std::memory_order_acquire));
  TrimPoolsAtSync();
  return CUDA_SUCCESS;
}

HAMI_SIM_EXPORT CUresult cuCtxGetApiVersion(CUcontext ctx, unsigned int* version) {
  CUctx_st* c;
  CUresult rc = ResolveContext(ctx, &c);
  if (rc != CUDA_SUCCESS) return rc;
  if (version == nullptr) return CUDA_ERROR_INVALID_VALUE;
  *version = 3020;
  return CUDA_SUCCESS;
}
