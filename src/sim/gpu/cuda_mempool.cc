// Simulated libcuda.so.1: the stream-ordered allocator (cuMemAllocAsync and friends) and its
// memory pools.
//
// A pool block is an ordinary device allocation (AllocKind::kPool) that stays mapped and charged
// while it sits on its pool's free list; pools give free blocks back at synchronisation points
// (above their release threshold), on cuMemPoolTrimTo and before reporting out-of-memory.

#include <algorithm>
#include <iterator>
#include <utility>
#include <vector>

#include "sim/gpu/cuda_internal.h"
#include "sim/gpu/cuda_memory_internal.h"

namespace hami::sim {

// Returns a pool block to its pool. Holds Drv().mu.
CUresult PoolFreeLocked(uintptr_t base, Allocation* a) {
  if (a->pool_free) return CUDA_ERROR_INVALID_VALUE;
  a->pool_free = true;
  a->pool->used -= std::min(a->pool->used, a->size);
  a->pool->free_blocks.emplace(a->size, base);
  return CUDA_SUCCESS;
}

namespace {

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

}  // namespace hami::sim

using namespace hami::sim;  // NOLINT: the C ABI entry points below implement this namespace's API

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
