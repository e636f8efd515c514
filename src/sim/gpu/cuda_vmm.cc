// Simulated libcuda.so.1: virtual memory management (cuMemCreate, cuMemAddressReserve, cuMemMap,
// ...).
//
// A physical handle is a memfd of the requested size, charged to the process when created and
// uncharged once it is both released and unmapped; a reservation is a PROT_NONE anonymous range;
// mapping places the memfd over part of a reservation.

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <iterator>
#include <vector>

#include "sim/gpu/cuda_internal.h"
#include "sim/gpu/cuda_memory_internal.h"

using namespace hami::sim;  // NOLINT: the C ABI entry points below implement this namespace's API

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
  if (!ChargeDevice(ordinal, size)) return CUDA_ERROR_OUT_OF_MEMORY;
  int fd = memfd_create("hami-sim-vmm", MFD_CLOEXEC);
  if (fd < 0 || ftruncate(fd, static_cast<off_t>(size)) != 0) {
    if (fd >= 0) close(fd);
    UnchargeDevice(ordinal, size);
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
  UnchargeDevice(it->second.ordinal, it->second.size);
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
