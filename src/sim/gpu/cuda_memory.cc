// Simulated libcuda.so.1: every allocation family, copies and memsets.
//
// Device memory is host memory: each allocation is an anonymous MAP_NORESERVE mapping, so
// pointers are real addresses (memcpy works) and untouched bytes cost nothing. The bytes asked
// for are charged to this process on the device in the shared state; a charge past the
// device's physical memory fails with CUDA_ERROR_OUT_OF_MEMORY.

#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>

#include "sim/gpu/cuda_internal.h"
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

// Charges `bytes` on `phys` to this process; false on out-of-memory (or a full process table).
bool ChargeDevice(int phys, uint64_t bytes) {
  int slot = ProcessSlot();
  if (slot < 0) return false;
  return Drv().rt->state().Charge(slot, phys, bytes);
}

void UnchargeDevice(int phys, uint64_t bytes) {
  int slot = ProcessSlot();
  if (slot >= 0) Drv().rt->state().Uncharge(slot, phys, bytes);
}

// Allocates device-visible memory for `ctx` and records it. Caller must not hold Drv().mu.
CUresult AllocateOnDevice(CUctx_st* ctx, uint64_t bytes, AllocKind kind, CUmemPoolHandle_st* pool,
                          CUdeviceptr* out) {
  if (bytes == 0) return CUDA_ERROR_INVALID_VALUE;
  int phys = pool != nullptr ? pool->phys : ctx->phys;
  if (!ChargeDevice(phys, bytes)) {
    SimLogDebug("allocation of %llu bytes on device %d: out of memory",
                static_cast<unsigned long long>(bytes), phys);
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  uint64_t len = PageRound(bytes);
  void* p = MapAnonymous(len);
  if (p == nullptr) {
    UnchargeDevice(phys, bytes);
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  Allocation a;
  a.size = bytes;
  a.map_len = len;
  a.phys = phys;
  a.ordinal = pool != nullptr ? pool->ordinal : ctx->ordinal;
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

// Unmaps and uncharges an allocation already removed from the map.
void ReleaseAllocation(uintptr_t base, const Allocation& a) {
  munmap(reinterpret_cast<void*>(base), a.map_len);
  UnchargeDevice(a.phys, a.size);
}

// Releases free blocks of `pool` until its reserved size is at most `keep`.
void TrimPoolLocked(Driver& d, CUmemPoolHandle_st* pool, uint64_t keep,
                    std::vector<std::pair<uintptr_t, Allocation>>* released) REQUIRES(d.mu) {
  // Largest blocks first: fewest releases to get under the target.
  while (pool->reserved > keep && !pool->free_blocks.empty()) {
    auto it = std::prev(pool->free_blocks.end());
    uintptr_t base = it->second;
    pool->free_blocks.erase(it);
    auto a = d.allocations.find(base);
    if (a == d.allocations.end()) continue;
    pool->reserved -= a->second.size;
    released->emplace_back(base, a->second);
    d.allocations.erase(a);
  }
}

void FinishRelease(const std::vector<std::pair<uintptr_t, Allocation>>& released) {
  for (const auto& [base, a] : released) ReleaseAllocation(base, a);
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

uint64_t ElementSize(CUarray_format f) {
  switch (f) {
    case CU_AD_FORMAT_UNSIGNED_INT8:
    case CU_AD_FORMAT_SIGNED_INT8:
      return 1;
    case CU_AD_FORMAT_UNSIGNED_INT16:
    case CU_AD_FORMAT_SIGNED_INT16:
    case CU_AD_FORMAT_HALF:
      return 2;
    case CU_AD_FORMAT_UNSIGNED_INT32:
    case CU_AD_FORMAT_SIGNED_INT32:
    case CU_AD_FORMAT_FLOAT:
      return 4;
    default:
      return 0;
  }
}

// Bytes of one array level, or 0 if the description is invalid.
uint64_t ArrayBytes(uint64_t w, uint64_t h, uint64_t depth, CUarray_format format,
                    unsigned channels) {
  uint64_t elem = ElementSize(format);
  if (elem == 0 || w == 0 || !(channels == 1 || channels == 2 || channels == 4)) return 0;
  unsigned __int128 bytes = static_cast<unsigned __int128>(w) * std::max<uint64_t>(h, 1) *
                            std::max<uint64_t>(depth, 1) * channels * elem;
  if (bytes > (static_cast<unsigned __int128>(1) << 56)) return 0;
  return static_cast<uint64_t>(bytes);
}

CUresult CheckDeviceLocation(const CUmemLocation& loc, int* ordinal, int* phys) {
  if (loc.type != CU_MEM_LOCATION_TYPE_DEVICE) return CUDA_ERROR_INVALID_VALUE;
  int p = PhysOf(loc.id);
  if (p < 0) return CUDA_ERROR_INVALID_DEVICE;
  *ordinal = loc.id;
  *phys = p;
  return CUDA_SUCCESS;
}

CUresult PoolAlloc(CUdeviceptr* dptr, size_t bytesize, CUmemoryPool pool, CUstream hStream,
                   bool per_thread) {
  CUctx_st* ctx;
  CUresult rc = CurrentContext(&ctx);
  if (rc != CUDA_SUCCESS) return rc;
  if (dptr == nullptr || bytesize == 0) return CUDA_ERROR_INVALID_VALUE;
  CUstream_st* s;
  rc = ResolveStream(hStream, per_thread, &s);
  if (rc != CUDA_SUCCESS) return rc;
  Driver& d = Drv();
  {
    hami::MutexLock lock(d.mu);
    if (pool == nullptr) pool = d.current_pool[s->ctx->ordinal];
    if (pool->magic != kPoolMagic || pool->destroyed) return CUDA_ERROR_INVALID_VALUE;
    // Reuse the smallest free block that fits.
    auto it = pool->free_blocks.lower_bound(bytesize);
    if (it != pool->free_blocks.end()) {
      uintptr_t base = it->second;
      pool->free_blocks.erase(it);
      Allocation& a = d.allocations[base];
      a.pool_free = false;
      pool->used += a.size;
      pool->used_high = std::max(pool->used_high, pool->used);
      *dptr = base;
      return CUDA_SUCCESS;
    }
    if (pool->props.maxSize != 0 && pool->reserved + bytesize > pool->props.maxSize) {
      return CUDA_ERROR_OUT_OF_MEMORY;
    }
  }
  rc = AllocateOnDevice(s->ctx, bytesize, AllocKind::kPool, pool, dptr);
  if (rc == CUDA_ERROR_OUT_OF_MEMORY) {
    // Like the real allocator, give back unused pool memory before reporting failure.
    std::vector<std::pair<uintptr_t, Allocation>> released;
    {
      hami::MutexLock lock(d.mu);
      TrimPoolLocked(d, pool, 0, &released);
    }
    FinishRelease(released);
    if (!released.empty()) rc = AllocateOnDevice(s->ctx, bytesize, AllocKind::kPool, pool, dptr);
  }
  if (rc != CUDA_SUCCESS) return rc;
  hami::MutexLock lock(d.mu);
  pool->reserved += bytesize;
  pool->reserved_high = std::max(pool->reserved_high, pool->reserved);
  pool->used += bytesize;
  pool->used_high = std::max(pool->used_high, pool->used);
  return CUDA_SUCCESS;
}

// Returns a pool block to its pool. Holds Drv().mu.
CUresult PoolFreeLocked(uintptr_t base, Allocation* a) {
  if (a->pool_free) return CUDA_ERROR_INVALID_VALUE;
  a->pool_free = true;
  a->pool->used -= std::min(a->pool->used, a->size);
  a->pool->free_blocks.emplace(a->size, base);
  return CUDA_SUCCESS;
}

CUresult PoolFree(CUdeviceptr dptr, CUstream hStream, bool per_thread) {
  CUresult rc = CheckInit();
  if (rc != CUDA_SUCCESS) return rc;
  CUstream_st* s;
  rc = ResolveStream(hStream, per_thread, &s);
  if (rc != CUDA_SUCCESS) return rc;
  Driver& d = Drv();
  std::vector<std::pair<uintptr_t, Allocation>> released;
  {
    hami::MutexLock lock(d.mu);
    auto it = d.allocations.find(static_cast<uintptr_t>(dptr));
    if (it == d.allocations.end()) return CUDA_ERROR_INVALID_VALUE;
    if (it->second.kind != AllocKind::kPool) {
      // Freeing a cuMemAlloc pointer stream-ordered is allowed; it is freed right away.
      released.emplace_back(it->first, it->second);
      d.allocations.erase(it);
    } else {
      rc = PoolFreeLocked(it->first, &it->second);
    }
  }
  FinishRelease(released);
  return rc;
}

void Copy(void* dst, const void* src, size_t n) {
  if (n != 0) memmove(dst, src, n);
}

void Fill32(CUdeviceptr dst, unsigned int value, size_t n) {
  auto* p = reinterpret_cast<unsigned int*>(dst);
  std::fill(p, p + n, value);
}

}  // namespace

void TrimPoolsAtSync() {
  Driver& d = Drv();
  std::vector<std::pair<uintptr_t, Allocation>> released;
  {
    hami::MutexLock lock(d.mu);
    for (CUmemPoolHandle_st* pool : d.default_pool) {
      TrimPoolLocked(d, pool, pool->release_threshold, &released);
    }
    for (CUmemPoolHandle_st* pool : d.current_pool) {
      if (!pool->is_default) TrimPoolLocked(d, pool, pool->release_threshold, &released);
    }
  }
  FinishRelease(released);
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
  uint64_t t = Drv().rt->device(ctx->phys).memory_bytes;
  uint64_t used = Drv().rt->state().UsedMemory(ctx->phys);
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

// ---------------------------------------------------------------- stream-ordered allocator

HAMI_SIM_EXPORT CUresult cuMemAllocAsync(CUdeviceptr* dptr, size_t bytesize, CUstream hStream) {
  return PoolAlloc(dptr, bytesize, nullptr, hStream, false);
}
HAMI_SIM_EXPORT CUresult cuMemAllocAsync_ptsz(CUdeviceptr* dptr, size_t bytesize,
                                              CUstream hStream) {
  return PoolAlloc(dptr, bytesize, nullptr, hStream, true);
}
HAMI_SIM_EXPORT CUresult cuMemAllocFromPoolAsync(CUdeviceptr* dptr, size_t bytesize,
                                                 CUmemoryPool pool, CUstream hStream) {
  if (pool == nullptr) return CUDA_ERROR_INVALID_VALUE;
  return PoolAlloc(dptr, bytesize, pool, hStream, false);
}
HAMI_SIM_EXPORT CUresult cuMemAllocFromPoolAsync_ptsz(CUdeviceptr* dptr, size_t bytesize,
                                                      CUmemoryPool pool, CUstream hStream) {
  if (pool == nullptr) return CUDA_ERROR_INVALID_VALUE;
  return PoolAlloc(dptr, bytesize, pool, hStream, true);
}
HAMI_SIM_EXPORT CUresult cuMemFreeAsync(CUdeviceptr dptr, CUstream hStream) {
  return PoolFree(dptr, hStream, false);
}
HAMI_SIM_EXPORT CUresult cuMemFreeAsync_ptsz(CUdeviceptr dptr, CUstream hStream) {
  return PoolFree(dptr, hStream, true);
}

HAMI_SIM_EXPORT CUresult cuMemPoolCreate(CUmemoryPool* pool, const CUmemPoolProps* poolProps) {
  CUresult rc = CheckInit();
  if (rc != CUDA_SUCCESS) return rc;
  if (pool == nullptr || poolProps == nullptr ||
      poolProps->allocType != CU_MEM_ALLOCATION_TYPE_PINNED) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  int ordinal, phys;
  rc = CheckDeviceLocation(poolProps->location, &ordinal, &phys);
  if (rc != CUDA_SUCCESS) return rc;
  auto* p = new CUmemPoolHandle_st();
  p->ordinal = ordinal;
  p->phys = phys;
  p->props = *poolProps;
  {
    hami::MutexLock lock(Drv().mu);
    Drv().immortal.push_back(p);
  }
  *pool = p;
  return CUDA_SUCCESS;
}

HAMI_SIM_EXPORT CUresult cuMemPoolDestroy(CUmemoryPool pool) {
  CUresult rc = CheckInit();
  if (rc != CUDA_SUCCESS) return rc;
  if (pool == nullptr || pool->magic != kPoolMagic || pool->destroyed || pool->is_default) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  std::vector<std::pair<uintptr_t, Allocation>> released;
  {
    hami::MutexLock lock(Drv().mu);
    TrimPoolLocked(Drv(), pool, 0, &released);
    pool->destroyed = true;
    for (auto& cur : Drv().current_pool) {
      if (cur == pool) cur = Drv().default_pool[pool->ordinal];
    }
  }
  FinishRelease(released);
  return CUDA_SUCCESS;
}

HAMI_SIM_EXPORT CUresult cuMemPoolTrimTo(CUmemoryPool pool, size_t minBytesToKeep) {
  CUresult rc = CheckInit();
  if (rc != CUDA_SUCCESS) return rc;
  if (pool == nullptr || pool->magic != kPoolMagic || pool->destroyed) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  std::vector<std::pair<uintptr_t, Allocation>> released;
  {
    hami::MutexLock lock(Drv().mu);
    TrimPoolLocked(Drv(), pool, minBytesToKeep, &released);
  }
  FinishRelease(released);
  return CUDA_SUCCESS;
}

HAMI_SIM_EXPORT CUresult cuMemPoolGetAttribute(CUmemoryPool pool, CUmemPool_attribute attr,
                                               void* value) {
  CUresult rc = CheckInit();
  if (rc != CUDA_SUCCESS) return rc;
  if (pool == nullptr || pool->magic != kPoolMagic || pool->destroyed || value == nullptr) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  hami::MutexLock lock(Drv().mu);
  switch (attr) {
    case CU_MEMPOOL_ATTR_REUSE_FOLLOW_EVENT_DEPENDENCIES:
      *static_cast<int*>(value) = pool->reuse_follow_event;
      return CUDA_SUCCESS;
    case CU_MEMPOOL_ATTR_REUSE_ALLOW_OPPORTUNISTIC:
      *static_cast<int*>(value) = pool->reuse_opportunistic;
      return CUDA_SUCCESS;
    case CU_MEMPOOL_ATTR_REUSE_ALLOW_INTERNAL_DEPENDENCIES:
      *static_cast<int*>(value) = pool->reuse_internal;
      return CUDA_SUCCESS;
    case CU_MEMPOOL_ATTR_RELEASE_THRESHOLD:
      *static_cast<cuuint64_t*>(value) = pool->release_threshold;
      return CUDA_SUCCESS;
    case CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT:
      *static_cast<cuuint64_t*>(value) = pool->reserved;
      return CUDA_SUCCESS;
    case CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH:
      *static_cast<cuuint64_t*>(value) = pool->reserved_high;
      return CUDA_SUCCESS;
    case CU_MEMPOOL_ATTR_USED_MEM_CURRENT:
      *static_cast<cuuint64_t*>(value) = pool->used;
      return CUDA_SUCCESS;
    case CU_MEMPOOL_ATTR_USED_MEM_HIGH:
      *static_cast<cuuint64_t*>(value) = pool->used_high;
      return CUDA_SUCCESS;
    default:
      return CUDA_ERROR_INVALID_VALUE;
  }
}

HAMI_SIM_EXPORT CUresult cuMemPoolSetAttribute(CUmemoryPool pool, CUmemPool_attribute attr,
                                               void* value) {
  CUresult rc = CheckInit();
  if (rc != CUDA_SUCCESS) return rc;
  if (pool == nullptr || pool->magic != kPoolMagic || pool->destroyed || value == nullptr) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  hami::MutexLock lock(Drv().mu);
  switch (attr) {
    case CU_MEMPOOL_ATTR_REUSE_FOLLOW_EVENT_DEPENDENCIES:
      pool->reuse_follow_event = *static_cast<int*>(value);
      return CUDA_SUCCESS;
    case CU_MEMPOOL_ATTR_REUSE_ALLOW_OPPORTUNISTIC:
      pool->reuse_opportunistic = *static_cast<int*>(value);
      return CUDA_SUCCESS;
    case CU_MEMPOOL_ATTR_REUSE_ALLOW_INTERNAL_DEPENDENCIES:
      pool->reuse_internal = *static_cast<int*>(value);
      return CUDA_SUCCESS;
    case CU_MEMPOOL_ATTR_RELEASE_THRESHOLD:
      pool->release_threshold = *static_cast<cuuint64_t*>(value);
      return CUDA_SUCCESS;
    case CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH:
      // Only a reset (to the current value) is allowed, and only by writing 0.
      if (*static_cast<cuuint64_t*>(value) != 0) return CUDA_ERROR_INVALID_VALUE;
      pool->reserved_high = pool->reserved;
      return CUDA_SUCCESS;
    case CU_MEMPOOL_ATTR_USED_MEM_HIGH:
      if (*static_cast<cuuint64_t*>(value) != 0) return CUDA_ERROR_INVALID_VALUE;
      pool->used_high = pool->used;
      return CUDA_SUCCESS;
    default:
      return CUDA_ERROR_INVALID_VALUE;
  }
}

HAMI_SIM_EXPORT CUresult cuDeviceGetDefaultMemPool(CUmemoryPool* pool, CUdevice dev) {
  CUresult rc = CheckInit();
  if (rc != CUDA_SUCCESS) return rc;
  if (PhysOf(dev) < 0) return CUDA_ERROR_INVALID_DEVICE;
  if (pool == nullptr) return CUDA_ERROR_INVALID_VALUE;
  *pool = Drv().default_pool[dev];
  return CUDA_SUCCESS;
}

HAMI_SIM_EXPORT CUresult cuDeviceGetMemPool(CUmemoryPool* pool, CUdevice dev) {
  CUresult rc = CheckInit();
  if (rc != CUDA_SUCCESS) return rc;
  if (PhysOf(dev) < 0) return CUDA_ERROR_INVALID_DEVICE;
  if (pool == nullptr) return CUDA_ERROR_INVALID_VALUE;
  hami::MutexLock lock(Drv().mu);
  *pool = Drv().current_pool[dev];
  return CUDA_SUCCESS;
}

HAMI_SIM_EXPORT CUresult cuDeviceSetMemPool(CUdevice dev, CUmemoryPool pool) {
  CUresult rc = CheckInit();
  if (rc != CUDA_SUCCESS) return rc;
  if (PhysOf(dev) < 0) return CUDA_ERROR_INVALID_DEVICE;
  if (pool == nullptr || pool->magic != kPoolMagic || pool->destroyed || pool->ordinal != dev) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  hami::MutexLock lock(Drv().mu);
  Drv().current_pool[dev] = pool;
  return CUDA_SUCCESS;
}

// ---------------------------------------------------------------- virtual memory management

HAMI_SIM_EXPORT CUresult cuMemGetAllocationGranularity(size_t* granularity,
                                                       const CUmemAllocationProp* prop,
                                                       CUmemAllocationGranularity_flags option) {
  CUresult rc = CheckInit();
  if (rc != CUDA_SUCCESS) return rc;
  if (granularity == nullptr || prop == nullptr || (option != 0 && option != 1)) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  int ordinal, phys;
  rc = CheckDeviceLocation(prop->location, &ordinal, &phys);
  if (rc != CUDA_SUCCESS) return rc;
  *granularity = kVmmGranularity;
  return CUDA_SUCCESS;
}

HAMI_SIM_EXPORT CUresult cuMemCreate(CUmemGenericAllocationHandle* handle, size_t size,
                                     const CUmemAllocationProp* prop, unsigned long long flags) {
  CUresult rc = CheckInit();
  if (rc != CUDA_SUCCESS) return rc;
  if (handle == nullptr || prop == nullptr || flags != 0 || size == 0 ||
      size % kVmmGranularity != 0 || prop->type != CU_MEM_ALLOCATION_TYPE_PINNED) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  int ordinal, phys;
  rc = CheckDeviceLocation(prop->location, &ordinal, &phys);
  if (rc != CUDA_SUCCESS) return rc;
  if (!ChargeDevice(phys, size)) return CUDA_ERROR_OUT_OF_MEMORY;
  int fd = memfd_create("hami-sim-vmm", MFD_CLOEXEC);
  if (fd < 0 || ftruncate(fd, static_cast<off_t>(size)) != 0) {
    if (fd >= 0) close(fd);
    UnchargeDevice(phys, size);
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  hami::MutexLock lock(Drv().mu);
  CUmemGenericAllocationHandle h = Drv().next_handle++;
  Drv().handles[h] = PhysicalHandle{fd, size, phys, ordinal, false, 0};
  *handle = h;
  return CUDA_SUCCESS;
}

namespace {
// Frees a physical handle once it is released and unmapped.
void MaybeDestroyHandleLocked(Driver& d, CUmemGenericAllocationHandle h) REQUIRES(d.mu) {
  auto it = d.handles.find(h);
  if (it == d.handles.end() || !it->second.released || it->second.mappings > 0) return;
  close(it->second.fd);
  UnchargeDevice(it->second.phys, it->second.size);
  d.handles.erase(it);
}
}  // namespace

HAMI_SIM_EXPORT CUresult cuMemRelease(CUmemGenericAllocationHandle handle) {
  CUresult rc = CheckInit();
  if (rc != CUDA_SUCCESS) return rc;
  hami::MutexLock lock(Drv().mu);
  auto it = Drv().handles.find(handle);
  if (it == Drv().handles.end() || it->second.released) return CUDA_ERROR_INVALID_VALUE;
  it->second.released = true;
  MaybeDestroyHandleLocked(Drv(), handle);
  return CUDA_SUCCESS;
}

HAMI_SIM_EXPORT CUresult cuMemAddressReserve(CUdeviceptr* ptr, size_t size, size_t alignment,
                                             CUdeviceptr addr, unsigned long long flags) {
  CUresult rc = CheckInit();
  if (rc != CUDA_SUCCESS) return rc;
  if (ptr == nullptr || size == 0 || size % kVmmGranularity != 0 ||
      (alignment & (alignment - 1)) != 0) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  uint64_t align = std::max<uint64_t>(alignment, kVmmGranularity);
  uint64_t len = size + align;
  void* p = mmap(nullptr, len, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED) return CUDA_ERROR_OUT_OF_MEMORY;
  uintptr_t raw = reinterpret_cast<uintptr_t>(p);
  uintptr_t base = (raw + align - 1) / align * align;
  if (base > raw) munmap(p, base - raw);
  uintptr_t tail = base + size;
  if (raw + len > tail) munmap(reinterpret_cast<void*>(tail), raw + len - tail);
  hami::MutexLock lock(Drv().mu);
  Drv().reservations[base] = size;
  *ptr = base;
  return CUDA_SUCCESS;
}

HAMI_SIM_EXPORT CUresult cuMemAddressFree(CUdeviceptr ptr, size_t size) {
  CUresult rc = CheckInit();
  if (rc != CUDA_SUCCESS) return rc;
  hami::MutexLock lock(Drv().mu);
  auto it = Drv().reservations.find(static_cast<uintptr_t>(ptr));
  if (it == Drv().reservations.end() || it->second != size) return CUDA_ERROR_INVALID_VALUE;
  auto m = Drv().mappings.lower_bound(static_cast<uintptr_t>(ptr));
  if (m != Drv().mappings.end() && m->first < ptr + size) return CUDA_ERROR_INVALID_VALUE;
  munmap(reinterpret_cast<void*>(ptr), size);
  Drv().reservations.erase(it);
  return CUDA_SUCCESS;
}

HAMI_SIM_EXPORT CUresult cuMemMap(CUdeviceptr ptr, size_t size, size_t offset,
                                  CUmemGenericAllocationHandle handle, unsigned long long flags) {
  CUresult rc = CheckInit();
  if (rc != CUDA_SUCCESS) return rc;
  if (flags != 0 || size == 0 || size % kVmmGranularity != 0 || offset % kVmmGranularity != 0) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  Driver& d = Drv();
  hami::MutexLock lock(d.mu);
  auto h = d.handles.find(handle);
  if (h == d.handles.end() || h->second.released || offset + size > h->second.size) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  auto r = d.reservations.upper_bound(static_cast<uintptr_t>(ptr));
  if (r == d.reservations.begin()) return CUDA_ERROR_INVALID_VALUE;
  --r;
  if (ptr + size > r->first + r->second) return CUDA_ERROR_INVALID_VALUE;
  auto m = d.mappings.upper_bound(static_cast<uintptr_t>(ptr + size - 1));
  if (m != d.mappings.begin() && std::prev(m)->first + std::prev(m)->second.size > ptr) {
    return CUDA_ERROR_INVALID_VALUE;  // overlaps an existing mapping
  }
  void* p = mmap(reinterpret_cast<void*>(ptr), size, PROT_NONE, MAP_SHARED | MAP_FIXED,
                 h->second.fd, static_cast<off_t>(offset));
  if (p == MAP_FAILED) return CUDA_ERROR_OUT_OF_MEMORY;
  d.mappings[static_cast<uintptr_t>(ptr)] = Mapping{size, handle};
  ++h->second.mappings;
  return CUDA_SUCCESS;
}

HAMI_SIM_EXPORT CUresult cuMemUnmap(CUdeviceptr ptr, size_t size) {
  CUresult rc = CheckInit();
  if (rc != CUDA_SUCCESS) return rc;
  Driver& d = Drv();
  hami::MutexLock lock(d.mu);
  // The range must be exactly covered by whole mappings.
  uintptr_t cur = static_cast<uintptr_t>(ptr);
  const uintptr_t end = cur + size;
  std::vector<uintptr_t> bases;
  while (cur < end) {
    auto m = d.mappings.find(cur);
    if (m == d.mappings.end()) return CUDA_ERROR_INVALID_VALUE;
    bases.push_back(cur);
    cur += m->second.size;
  }
  if (cur != end) return CUDA_ERROR_INVALID_VALUE;
  for (uintptr_t base : bases) {
    Mapping mp = d.mappings[base];
    mmap(reinterpret_cast<void*>(base), mp.size, PROT_NONE,
         MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED, -1, 0);
    d.mappings.erase(base);
    auto h = d.handles.find(mp.handle);
    if (h != d.handles.end()) {
      --h->second.mappings;
      MaybeDestroyHandleLocked(d, mp.handle);
    }
  }
  return CUDA_SUCCESS;
}

HAMI_SIM_EXPORT CUresult cuMemSetAccess(CUdeviceptr ptr, size_t size, const CUmemAccessDesc* desc,
                                        size_t count) {
  CUresult rc = CheckInit();
  if (rc != CUDA_SUCCESS) return rc;
  if (desc == nullptr || count == 0 || size == 0) return CUDA_ERROR_INVALID_VALUE;
  int flags = 0;
  for (size_t i = 0; i < count; ++i) {
    if (desc[i].location.type != CU_MEM_LOCATION_TYPE_DEVICE || PhysOf(desc[i].location.id) < 0) {
      return CUDA_ERROR_INVALID_DEVICE;
    }
    flags |= desc[i].flags;
  }
  Driver& d = Drv();
  hami::MutexLock lock(d.mu);
  uintptr_t cur = static_cast<uintptr_t>(ptr);
  const uintptr_t end = cur + size;
  while (cur < end) {
    auto m = d.mappings.upper_bound(cur);
    if (m == d.mappings.begin()) return CUDA_ERROR_INVALID_VALUE;
    --m;
    if (cur >= m->first + m->second.size) return CUDA_ERROR_INVALID_VALUE;
    cur = m->first + m->second.size;
  }
  // CU_MEM_ACCESS_FLAGS_PROT_READ = 1, PROT_READWRITE = 3.
  int prot = (flags & 3) == 3 ? PROT_READ | PROT_WRITE : (flags & 1) ? PROT_READ : PROT_NONE;
  if (mprotect(reinterpret_cast<void*>(ptr), size, prot) != 0) return CUDA_ERROR_INVALID_VALUE;
  return CUDA_SUCCESS;
}

// ---------------------------------------------------------------- arrays

namespace {
CUresult CreateArray(const CUDA_ARRAY3D_DESCRIPTOR& desc, unsigned levels, int* phys_out,
                     uint64_t* bytes_out) {
  CUctx_st* ctx;
  CUresult rc = CurrentContext(&ctx);
  if (rc != CUDA_SUCCESS) return rc;
  uint64_t total = 0;
  uint64_t w = desc.Width, h = desc.Height, dep = desc.Depth;
  for (unsigned level = 0; level < levels; ++level) {
    uint64_t b = ArrayBytes(w, h, dep, desc.Format, desc.NumChannels);
    if (b == 0) return CUDA_ERROR_INVALID_VALUE;
    total += b;
    w = std::max<uint64_t>(w / 2, 1);
    h = h == 0 ? 0 : std::max<uint64_t>(h / 2, 1);
    dep = dep == 0 ? 0 : std::max<uint64_t>(dep / 2, 1);
  }
  if (!ChargeDevice(ctx->phys, total)) return CUDA_ERROR_OUT_OF_MEMORY;
  *phys_out = ctx->phys;
  *bytes_out = total;
  return CUDA_SUCCESS;
}
}  // namespace

HAMI_SIM_EXPORT CUresult cuArrayCreate_v2(CUarray* pHandle,
                                          const CUDA_ARRAY_DESCRIPTOR* pAllocateArray) {
  if (pHandle == nullptr || pAllocateArray == nullptr) return CUDA_ERROR_INVALID_VALUE;
  CUDA_ARRAY3D_DESCRIPTOR d3{pAllocateArray->Width,  pAllocateArray->Height,      0,
                             pAllocateArray->Format, pAllocateArray->NumChannels, 0};
  return cuArray3DCreate_v2(pHandle, &d3);
}

HAMI_SIM_EXPORT CUresult cuArray3DCreate_v2(CUarray* pHandle,
                                            const CUDA_ARRAY3D_DESCRIPTOR* pAllocateArray) {
  if (pHandle == nullptr || pAllocateArray == nullptr) return CUDA_ERROR_INVALID_VALUE;
  int phys;
  uint64_t bytes;
  CUresult rc = CreateArray(*pAllocateArray, 1, &phys, &bytes);
  if (rc != CUDA_SUCCESS) return rc;
  auto* a = new CUarray_st();
  a->phys = phys;
  a->bytes = bytes;
  *pHandle = a;
  return CUDA_SUCCESS;
}

HAMI_SIM_EXPORT CUresult cuArrayDestroy(CUarray hArray) {
  CUresult rc = CheckInit();
  if (rc != CUDA_SUCCESS) return rc;
  if (hArray == nullptr || hArray->magic != kArrayMagic) return CUDA_ERROR_INVALID_HANDLE;
  hArray->magic = 0;
  UnchargeDevice(hArray->phys, hArray->bytes);
  delete hArray;
  return CUDA_SUCCESS;
}

HAMI_SIM_EXPORT CUresult cuMipmappedArrayCreate(CUmipmappedArray* pHandle,
                                                const CUDA_ARRAY3D_DESCRIPTOR* pMipmappedArrayDesc,
                                                unsigned int numMipmapLevels) {
  if (pHandle == nullptr || pMipmappedArrayDesc == nullptr || numMipmapLevels == 0 ||
      numMipmapLevels > 32) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  int phys;
  uint64_t bytes;
  CUresult rc = CreateArray(*pMipmappedArrayDesc, numMipmapLevels, &phys, &bytes);
  if (rc != CUDA_SUCCESS) return rc;
  auto* a = new CUmipmappedArray_st();
  a->phys = phys;
  a->bytes = bytes;
  *pHandle = a;
  return CUDA_SUCCESS;
}

HAMI_SIM_EXPORT CUresult cuMipmappedArrayDestroy(CUmipmappedArray hMipmappedArray) {
  CUresult rc = CheckInit();
  if (rc != CUDA_SUCCESS) return rc;
  if (hMipmappedArray == nullptr || hMipmappedArray->magic != kArrayMagic) {
    return CUDA_ERROR_INVALID_HANDLE;
  }
  hMipmappedArray->magic = 0;
  UnchargeDevice(hMipmappedArray->phys, hMipmappedArray->bytes);
  delete hMipmappedArray;
  return CUDA_SUCCESS;
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
