// Simulated libcuda.so.1: device, managed and pinned host memory, pointer queries, copies and
// memsets.
//
// Device memory is host memory: each allocation is an anonymous MAP_NORESERVE mapping, so
// pointers are real addresses (memcpy works) and untouched bytes cost nothing. The bytes asked
// for are charged to this process on the device in the shared state; a charge past the
// device's physical memory (a MIG device: its GPU instance's memory) fails with
// CUDA_ERROR_OUT_OF_MEMORY.
//
// The other allocation families live beside this file: cuda_mempool.cc (stream-ordered),
// cuda_vmm.cc (virtual memory management) and cuda_array.cc (arrays); the bookkeeping they share
// is declared in cuda_memory_internal.h.

#include <string.h>
#include <sys/mman.h>

#include <algorithm>

#include "sim/gpu/cuda_internal.h"
#include "sim/gpu/cuda_memory_internal.h"
#include "sim/gpu/log.h"

namespace hami::sim {
namespace {

uint64_t PageRound(uint64_t n) {
  const uint64_t page = 4096;
  return (n + page - 1) / page * page;
}

void* MapAnonymous(uint64_t len) {
  void* p = mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
                 -1, 0);
  return p == MAP_FAILED ? nullptr : p;
}

// Unmaps and uncharges an allocation already removed from the map.
void ReleaseAllocation(uintptr_t base, const Allocation& a) {
  munmap(reinterpret_cast<void*>(base), a.map_len);
  UnchargeDevice(a.ordinal, a.size);
}

// Finds the allocation containing `ptr`.
std::map<uintptr_t, Allocation>::iterator FindContaining(Driver& d, uintptr_t ptr)
    REQUIRES(d.mu) {
  auto& m = d.allocations;
  auto it = m.upper_bound(ptr);
  if (it == m.begin()) return m.end();
  --it;
  if (ptr < it->first + it->second.size) return it;
  return m.end();
}

void Copy(void* dst, const void* src, size_t n) {
  if (n != 0) memmove(dst, src, n);
}

void Fill32(CUdeviceptr dst, unsigned int value, size_t n) {
  auto* p = reinterpret_cast<unsigned int*>(dst);
  std::fill(p, p + n, value);
}

}  // namespace

namespace {
MigChargeTarget MigTarget(const CudaDevice& d) {
  return MigChargeTarget{d.phys, d.gi_id, d.ci_id, d.uuid.c_str(), d.memory_bytes};
}
}  // namespace

bool ChargeDevice(int ordinal, uint64_t bytes) {
  int slot = ProcessSlot();
  if (slot < 0) return false;
  const CudaDevice& d = *DeviceOf(ordinal);
  if (d.mig) return Drv().rt->state().ChargeMig(slot, MigTarget(d), bytes);
  return Drv().rt->state().Charge(slot, d.phys, bytes);
}

void UnchargeDevice(int ordinal, uint64_t bytes) {
  int slot = ProcessSlot();
  if (slot < 0) return;
  const CudaDevice& d = *DeviceOf(ordinal);
  if (d.mig) {
    Drv().rt->state().UnchargeMig(slot, MigTarget(d), bytes);
  } else {
    Drv().rt->state().Uncharge(slot, d.phys, bytes);
  }
}

// Allocates device-visible memory for `ctx` and records it. Caller must not hold Drv().mu.
CUresult AllocateOnDevice(CUctx_st* ctx, uint64_t bytes, AllocKind kind, CUmemPoolHandle_st* pool,
                          CUdeviceptr* out) {
  if (bytes == 0) return CUDA_ERROR_INVALID_VALUE;
  const int phys = pool != nullptr ? pool->phys : ctx->phys;
  const int ordinal = pool != nullptr ? pool->ordinal : ctx->ordinal;
  if (!ChargeDevice(ordinal, bytes)) {
    SimLogDebug("allocation of %llu bytes on CUDA device %d: out of memory",
                static_cast<unsigned long long>(bytes), ordinal);
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  uint64_t len = PageRound(bytes);
  void* p = MapAnonymous(len);
  if (p == nullptr) {
    UnchargeDevice(ordinal, bytes);
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  Allocation a;
  a.size = bytes;
  a.map_len = len;
  a.phys = phys;
  a.ordinal = ordinal;
  a.kind = kind;
  a.ctx = ctx;
  a.pool = pool;
  {
    hami::MutexLock lock(Drv().mu);
    Drv().allocations[reinterpret_cast<uintptr_t>(p)] = a;
  }
  *out = reinterpret_cast<CUdeviceptr>(p);
  return CUDA_SUCCESS;
}

void FinishRelease(const std::vector<std::pair<uintptr_t, Allocation>>& released) {
  for (const auto& [base, a] : released) ReleaseAllocation(base, a);
}

CUresult CheckDeviceLocation(const CUmemLocation& loc, int* ordinal, int* phys) {
  if (loc.type != CU_MEM_LOCATION_TYPE_DEVICE) return CUDA_ERROR_INVALID_VALUE;
  int p = PhysOf(loc.id);
  if (p < 0) return CUDA_ERROR_INVALID_DEVICE;
  *ordinal = loc.id;
  *phys = p;
  return CUDA_SUCCESS;
}

void FreeContextAllocations(CUctx_st* ctx) {
  Driver& d = Drv();
  std::vector<std::pair<uintptr_t, Allocation>> released;
  {
    hami::MutexLock lock(d.mu);
    for (auto it = d.allocations.begin(); it != d.allocations.end();) {
      if (it->second.ctx == ctx && it->second.kind != AllocKind::kPool) {
        released.emplace_back(it->first, it->second);
        it = d.allocations.erase(it);
      } else {
        ++it;
      }
    }
  }
  FinishRelease(released);
}

}  // namespace hami::sim

using namespace hami::sim;  // NOLINT: the C ABI entry points below implement this namespace's API

// ---------------------------------------------------------------- plain, pitch, managed

HAMI_SIM_EXPORT CUresult cuMemAlloc_v2(CUdeviceptr* dptr, size_t bytesize) {
  CUctx_st* ctx;
  CUresult rc = CurrentContext(&ctx);
  if (rc != CUDA_SUCCESS) return rc;
  if (dptr == nullptr) return CUDA_ERROR_INVALID_VALUE;
  return AllocateOnDevice(ctx, bytesize, AllocKind::kDevice, nullptr, dptr);
}

HAMI_SIM_EXPORT CUresult cuMemFree_v2(CUdeviceptr dptr) {
  CUresult rc = CheckInit();
  if (rc != CUDA_SUCCESS) return rc;
  if (dptr == 0) return CUDA_SUCCESS;
  Driver& d = Drv();
  std::vector<std::pair<uintptr_t, Allocation>> released;
  {
    hami::MutexLock lock(d.mu);
    auto it = d.allocations.find(static_cast<uintptr_t>(dptr));
    if (it == d.allocations.end()) return CUDA_ERROR_INVALID_VALUE;
    if (it->second.kind == AllocKind::kPool) return PoolFreeLocked(it->first, &it->second);
    released.emplace_back(it->first, it->second);
    d.allocations.erase(it);
  }
  FinishRelease(released);
  return CUDA_SUCCESS;
}

HAMI_SIM_EXPORT CUresult cuMemAllocPitch_v2(CUdeviceptr* dptr, size_t* pPitch, size_t widthInBytes,
                                            size_t height, unsigned int elementSizeBytes) {
  CUctx_st* ctx;
  CUresult rc = CurrentContext(&ctx);
  if (rc != CUDA_SUCCESS) return rc;
  if (dptr == nullptr || pPitch == nullptr || widthInBytes == 0 || height == 0 ||
      !(elementSizeBytes == 4 || elementSizeBytes == 8 || elementSizeBytes == 16)) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  const size_t kPitchAlign = 512;
  size_t pitch = (widthInBytes + kPitchAlign - 1) / kPitchAlign * kPitchAlign;
  if (height > (UINT64_MAX / pitch)) return CUDA_ERROR_INVALID_VALUE;
  rc = AllocateOnDevice(ctx, static_cast<uint64_t>(pitch) * height, AllocKind::kDevice, nullptr,
                        dptr);
  if (rc == CUDA_SUCCESS) *pPitch = pitch;
  return rc;
}

HAMI_SIM_EXPORT CUresult cuMemAllocManaged(CUdeviceptr* dptr, size_t bytesize, unsigned int flags) {
  CUctx_st* ctx;
  CUresult rc = CurrentContext(&ctx);
  if (rc != CUDA_SUCCESS) return rc;
  if (dptr == nullptr || !(flags == CU_MEM_ATTACH_GLOBAL || flags == CU_MEM_ATTACH_HOST)) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  return AllocateOnDevice(ctx, bytesize, AllocKind::kManaged, nullptr, dptr);
}

// ---------------------------------------------------------------- host memory

HAMI_SIM_EXPORT CUresult cuMemHostAlloc(void** pp, size_t bytesize, unsigned int flags) {
  CUctx_st* ctx;
  CUresult rc = CurrentContext(&ctx);
  if (rc != CUDA_SUCCESS) return rc;
  if (pp == nullptr || bytesize == 0 || (flags & ~0xFu)) return CUDA_ERROR_INVALID_VALUE;
  uint64_t len = PageRound(bytesize);
  void* p = MapAnonymous(len);
  if (p == nullptr) return CUDA_ERROR_OUT_OF_MEMORY;
  hami::MutexLock lock(Drv().mu);
  Drv().host[reinterpret_cast<uintptr_t>(p)] = HostAllocation{bytesize, len, false};
  *pp = p;
  return CUDA_SUCCESS;
}

HAMI_SIM_EXPORT CUresult cuMemAllocHost_v2(void** pp, size_t bytesize) {
  return cuMemHostAlloc(pp, bytesize, 0);
}

HAMI_SIM_EXPORT CUresult cuMemFreeHost(void* p) {
  CUresult rc = CheckInit();
  if (rc != CUDA_SUCCESS) return rc;
  HostAllocation h;
  {
    hami::MutexLock lock(Drv().mu);
    auto it = Drv().host.find(reinterpret_cast<uintptr_t>(p));
    if (it == Drv().host.end() || it->second.registered) return CUDA_ERROR_INVALID_VALUE;
    h = it->second;
    Drv().host.erase(it);
  }
  munmap(p, h.map_len);
  return CUDA_SUCCESS;
}

HAMI_SIM_EXPORT CUresult cuMemHostRegister_v2(void* p, size_t bytesize, unsigned int flags) {
  CUctx_st* ctx;
  CUresult rc = CurrentContext(&ctx);
  if (rc != CUDA_SUCCESS) return rc;
  if (p == nullptr || bytesize == 0) return CUDA_ERROR_INVALID_VALUE;
  hami::MutexLock lock(Drv().mu);
  auto& host = Drv().host;
  uintptr_t base = reinterpret_cast<uintptr_t>(p);
  auto it = host.upper_bound(base + bytesize - 1);
  if (it != host.begin() && std::prev(it)->first + std::prev(it)->second.size > base) {
    return kErrHostMemoryAlreadyRegistered;
  }
  host[base] = HostAllocation{bytesize, 0, true};
  return CUDA_SUCCESS;
}

HAMI_SIM_EXPORT CUresult cuMemHostUnregister(void* p) {
  CUresult rc = CheckInit();
  if (rc != CUDA_SUCCESS) return rc;
  hami::MutexLock lock(Drv().mu);
  auto it = Drv().host.find(reinterpret_cast<uintptr_t>(p));
  if (it == Drv().host.end() || !it->second.registered) return kErrHostMemoryNotRegistered;
  Drv().host.erase(it);
  return CUDA_SUCCESS;
}

// ---------------------------------------------------------------- queries

HAMI_SIM_EXPORT CUresult cuMemGetInfo_v2(size_t* free, size_t* total) {
  CUctx_st* ctx;
  CUresult rc = CurrentContext(&ctx);
  if (rc != CUDA_SUCCESS) return rc;
  if (free == nullptr || total == nullptr) return CUDA_ERROR_INVALID_VALUE;
  const CudaDevice& d = *DeviceOf(ctx->ordinal);
  uint64_t t = d.memory_bytes;
  uint64_t used = d.mig ? Drv().rt->state().MigUsedMemory(d.phys, d.gi_id)
                        : Drv().rt->state().UsedMemory(d.phys);
  *total = t;
  *free = used >= t ? 0 : t - used;
  return CUDA_SUCCESS;
}

HAMI_SIM_EXPORT CUresult cuMemGetAddressRange_v2(CUdeviceptr* pbase, size_t* psize,
                                                 CUdeviceptr dptr) {
  CUresult rc = CheckInit();
  if (rc != CUDA_SUCCESS) return rc;
  hami::MutexLock lock(Drv().mu);
  auto it = FindContaining(Drv(), static_cast<uintptr_t>(dptr));
  if (it != Drv().allocations.end()) {
    if (pbase != nullptr) *pbase = it->first;
    if (psize != nullptr) *psize = it->second.size;
    return CUDA_SUCCESS;
  }
  auto& maps = Drv().mappings;
  auto m = maps.upper_bound(static_cast<uintptr_t>(dptr));
  if (m != maps.begin()) {
    --m;
    if (dptr < m->first + m->second.size) {
      if (pbase != nullptr) *pbase = m->first;
      if (psize != nullptr) *psize = m->second.size;
      return CUDA_SUCCESS;
    }
  }
  return CUDA_ERROR_NOT_FOUND;
}

HAMI_SIM_EXPORT CUresult cuPointerGetAttribute(void* data, CUpointer_attribute attribute,
                                               CUdeviceptr ptr) {
  CUresult rc = CheckInit();
  if (rc != CUDA_SUCCESS) return rc;
  if (data == nullptr) return CUDA_ERROR_INVALID_VALUE;
  hami::MutexLock lock(Drv().mu);
  auto it = FindContaining(Drv(), static_cast<uintptr_t>(ptr));
  if (it != Drv().allocations.end()) {
    const Allocation& a = it->second;
    switch (attribute) {
      case CU_POINTER_ATTRIBUTE_CONTEXT:
        *static_cast<CUcontext*>(data) = a.ctx;
        return CUDA_SUCCESS;
      case CU_POINTER_ATTRIBUTE_MEMORY_TYPE:
        *static_cast<unsigned int*>(data) = CU_MEMORYTYPE_DEVICE;
        return CUDA_SUCCESS;
      case CU_POINTER_ATTRIBUTE_DEVICE_POINTER:
        *static_cast<CUdeviceptr*>(data) = ptr;
        return CUDA_SUCCESS;
      case CU_POINTER_ATTRIBUTE_IS_MANAGED:
        *static_cast<unsigned int*>(data) = a.kind == AllocKind::kManaged ? 1 : 0;
        return CUDA_SUCCESS;
      case CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL:
        *static_cast<int*>(data) = a.ordinal;
        return CUDA_SUCCESS;
      case CU_POINTER_ATTRIBUTE_RANGE_START_ADDR:
        *static_cast<CUdeviceptr*>(data) = it->first;
        return CUDA_SUCCESS;
      case CU_POINTER_ATTRIBUTE_RANGE_SIZE:
        *static_cast<size_t*>(data) = a.size;
        return CUDA_SUCCESS;
      default:
        return CUDA_ERROR_INVALID_VALUE;
    }
  }
  auto& host = Drv().host;
  auto h = host.upper_bound(static_cast<uintptr_t>(ptr));
  if (h != host.begin() && ptr < std::prev(h)->first + std::prev(h)->second.size) {
    --h;
    switch (attribute) {
      case CU_POINTER_ATTRIBUTE_MEMORY_TYPE:
        *static_cast<unsigned int*>(data) = CU_MEMORYTYPE_HOST;
        return CUDA_SUCCESS;
      case CU_POINTER_ATTRIBUTE_DEVICE_POINTER:
        *static_cast<CUdeviceptr*>(data) = ptr;
        return CUDA_SUCCESS;
      case CU_POINTER_ATTRIBUTE_IS_MANAGED:
        *static_cast<unsigned int*>(data) = 0;
        return CUDA_SUCCESS;
      case CU_POINTER_ATTRIBUTE_RANGE_START_ADDR:
        *static_cast<CUdeviceptr*>(data) = h->first;
        return CUDA_SUCCESS;
      case CU_POINTER_ATTRIBUTE_RANGE_SIZE:
        *static_cast<size_t*>(data) = h->second.size;
        return CUDA_SUCCESS;
      default:
        return CUDA_ERROR_INVALID_VALUE;
    }
  }
  return CUDA_ERROR_INVALID_VALUE;
}

// ---------------------------------------------------------------- copies and memsets
// Copies happen at call time; asynchronous ones only validate their stream. Simulated kernels
// never touch memory, so there is nothing a copy could be ordered against.

#define HAMI_SIM_COPY_PROLOGUE(dst, src) \
  CUresult rc = CheckInit();             \
  if (rc != CUDA_SUCCESS) return rc;     \
  if ((dst) == 0 || (src) == 0) return CUDA_ERROR_INVALID_VALUE

HAMI_SIM_EXPORT CUresult cuMemcpy(CUdeviceptr dst, CUdeviceptr src, size_t ByteCount) {
  HAMI_SIM_COPY_PROLOGUE(dst, src);
  Copy(reinterpret_cast<void*>(dst), reinterpret_cast<const void*>(src), ByteCount);
  return CUDA_SUCCESS;
}

HAMI_SIM_EXPORT CUresult cuMemcpyAsync(CUdeviceptr dst, CUdeviceptr src, size_t ByteCount,
                                       CUstream hStream) {
  HAMI_SIM_COPY_PROLOGUE(dst, src);
  CUstream_st* s;
  rc = ResolveStream(hStream, false, &s);
  if (rc != CUDA_SUCCESS) return rc;
  Copy(reinterpret_cast<void*>(dst), reinterpret_cast<const void*>(src), ByteCount);
  return CUDA_SUCCESS;
}

HAMI_SIM_EXPORT CUresult cuMemcpyHtoD_v2(CUdeviceptr dstDevice, const void* srcHost,
                                         size_t ByteCount) {
  return cuMemcpy(dstDevice, reinterpret_cast<CUdeviceptr>(srcHost), ByteCount);
}

HAMI_SIM_EXPORT CUresult cuMemcpyDtoH_v2(void* dstHost, CUdeviceptr srcDevice, size_t ByteCount) {
  return cuMemcpy(reinterpret_cast<CUdeviceptr>(dstHost), srcDevice, ByteCount);
}

HAMI_SIM_EXPORT CUresult cuMemcpyDtoD_v2(CUdeviceptr dstDevice, CUdeviceptr srcDevice,
                                         size_t ByteCount) {
  return cuMemcpy(dstDevice, srcDevice, ByteCount);
}

HAMI_SIM_EXPORT CUresult cuMemcpyHtoDAsync_v2(CUdeviceptr dstDevice, const void* srcHost,
                                              size_t ByteCount, CUstream hStream) {
  return cuMemcpyAsync(dstDevice, reinterpret_cast<CUdeviceptr>(srcHost), ByteCount, hStream);
}

HAMI_SIM_EXPORT CUresult cuMemcpyDtoHAsync_v2(void* dstHost, CUdeviceptr srcDevice,
                                              size_t ByteCount, CUstream hStream) {
  return cuMemcpyAsync(reinterpret_cast<CUdeviceptr>(dstHost), srcDevice, ByteCount, hStream);
}

HAMI_SIM_EXPORT CUresult cuMemsetD8_v2(CUdeviceptr dstDevice, unsigned char uc, size_t N) {
  HAMI_SIM_COPY_PROLOGUE(dstDevice, 1);
  memset(reinterpret_cast<void*>(dstDevice), uc, N);
  return CUDA_SUCCESS;
}

HAMI_SIM_EXPORT CUresult cuMemsetD32_v2(CUdeviceptr dstDevice, unsigned int ui, size_t N) {
  HAMI_SIM_COPY_PROLOGUE(dstDevice, 1);
  if (dstDevice % 4 != 0) return CUDA_ERROR_INVALID_VALUE;
  Fill32(dstDevice, ui, N);
  return CUDA_SUCCESS;
}

HAMI_SIM_EXPORT CUresult cuMemsetD8Async(CUdeviceptr dstDevice, unsigned char uc, size_t N,
                                         CUstream hStream) {
  CUstream_st* s;
  CUresult rc = CheckInit();
  if (rc == CUDA_SUCCESS) rc = ResolveStream(hStream, false, &s);
  if (rc != CUDA_SUCCESS) return rc;
  return cuMemsetD8_v2(dstDevice, uc, N);
}

HAMI_SIM_EXPORT CUresult cuMemsetD32Async(CUdeviceptr dstDevice, unsigned int ui, size_t N,
                                          CUstream hStream) {
  CUstream_st* s;
  CUresult rc = CheckInit();
  if (rc == CUDA_SUCCESS) rc = ResolveStream(hStream, false, &s);
  if (rc != CUDA_SUCCESS) return rc;
  return cuMemsetD32_v2(dstDevice, ui, N);
}
