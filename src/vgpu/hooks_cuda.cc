// Exported CUDA driver hooks. Each one forwards to the real driver; memory hooks charge the
// container's quota before allocating (and give it back when the allocation fails or is freed),
// launch hooks pass through the SM limiter, info hooks show the quota instead of the card.
//
// Conventions:
//  * Charge before the real allocation, so two processes can never both pass the check and
//    then both allocate (the region's critical section is the single point of decision).
//  * Forget the record before the real free, and give the bytes back after it: the driver may
//    hand the same address to another thread the moment it is freed.
//  * Anything we cannot attribute (no context, unknown device, pointer we never saw) is passed
//    through untouched. Freeing an untracked pointer still frees it.
#include <stdlib.h>

#include "vgpu/dlsym_hook.h"
#include "vgpu/export.h"
#include "vgpu/limiter.h"
#include "vgpu/log.h"
#include "vgpu/runtime.h"

namespace hami::vgpu {
namespace {

// Calls the real function `name` or, if the driver lacks it, fails like a missing driver would.
#define REAL_OR_FAIL(name)                                                  \
  ::hami::vgpu::EnterProcess();                                             \
  auto real = Rt().cuda.name;                                               \
  if (real == nullptr) {                                                    \
    VGPU_ERROR("%s called but the real driver does not provide it", #name); \
    return CUDA_ERROR_NOT_SUPPORTED;                                        \
  }

// Records an accounted allocation; if the record cannot be stored (out of host memory) the
// allocation is undone so that accounting never drifts.
template <typename FreeFn>
CUresult Track(KeySpace space, uint64_t key, int dev, MemKind kind, uint64_t bytes, FreeFn undo) {
  if (Rt().table.Insert(space, key, dev, kind, bytes)) return CUDA_SUCCESS;
  VGPU_ERROR("cannot record an allocation (host memory exhausted); undoing it");
  undo();
  Uncharge(dev, bytes, kind);
  return CUDA_ERROR_OUT_OF_MEMORY;
}

// Gives back what `key` was charged, after the caller freed it successfully.
void Forget(const AllocRecord& rec) { Uncharge(rec.dev, rec.bytes, rec.kind); }

uint64_t ElementBytes(CUarray_format f) {
  switch (f) {
    case CU_AD_FORMAT_UNSIGNED_INT8:
    case CU_AD_FORMAT_SIGNED_INT8:
      return 1;
    case CU_AD_FORMAT_UNSIGNED_INT16:
    case CU_AD_FORMAT_SIGNED_INT16:
    case CU_AD_FORMAT_HALF:
      return 2;
    default:
      return 4;  // 32-bit formats; conservative for packed/compressed ones
  }
}

uint64_t ArrayBytes(size_t w, size_t h, size_t d, CUarray_format f, unsigned channels) {
  uint64_t hh = h == 0 ? 1 : h, dd = d == 0 ? 1 : d;
  return static_cast<uint64_t>(w) * hh * dd * ElementBytes(f) * (channels == 0 ? 1 : channels);
}

uint64_t MipmapBytes(const CUDA_ARRAY3D_DESCRIPTOR* desc, unsigned levels) {
  uint64_t total = 0;
  size_t w = desc->Width, h = desc->Height, d = desc->Depth;
  for (unsigned i = 0; i < levels && i < 32; ++i) {
    total += ArrayBytes(w, h, d, desc->Format, desc->NumChannels);
    w = w > 1 ? w / 2 : 1;
    h = h > 1 ? h / 2 : h;
    d = d > 1 ? d / 2 : d;
  }
  return total;
}

// Plain device allocation shared by cuMemAlloc, managed and the async family.
template <typename AllocFn, typename FreeFn>
CUresult AllocateAccounted(CUdeviceptr* dptr, size_t bytes, MemKind kind, const char* api,
                           AllocFn alloc, FreeFn free_fn) {
  if (!EnterProcess() || dptr == nullptr || bytes == 0) return alloc();
  WaitIfPaused();
  int dev = CurrentRegionDevice();
  if (dev < 0) return alloc();
  if (!Charge(dev, bytes, kind, api)) return CUDA_ERROR_OUT_OF_MEMORY;
  CUresult rc = alloc();
  if (rc != CUDA_SUCCESS) {
    Uncharge(dev, bytes, kind);
    return rc;
  }
  CUdeviceptr p = *dptr;
  return Track(KeySpace::kPointer, p, dev, kind, bytes, [&] { free_fn(p); });
}

template <typename FreeFn>
CUresult FreeAccounted(KeySpace space, uint64_t key, FreeFn free_fn) {
  AllocRecord rec;
  bool known = EnterProcess() && key != 0 && Rt().table.Remove(space, key, &rec);
  CUresult rc = free_fn();
  if (!known) return rc;
  if (rc == CUDA_SUCCESS) {
    Forget(rec);
  } else {
    Rt().table.Insert(space, key, rec.dev, rec.kind, rec.bytes);  // still allocated
  }
  return rc;
}

// Common prologue of every launch: pause point, then the SM limiter if any limit may apply.
inline void BeforeLaunch(uint64_t gx, uint64_t gy, uint64_t gz, uint64_t bx, uint64_t by,
                         uint64_t bz) {
  if (LaunchPrologue()) GateLaunch(LaunchUnits(gx, gy, gz, bx, by, bz));
}

uint64_t GraphUnits(CUgraph graph) {
  Runtime& r = Rt();
  if (r.cuda.cuGraphGetNodes == nullptr || r.cuda.cuGraphNodeGetType == nullptr) return 0;
  size_t n = 0;
  if (r.cuda.cuGraphGetNodes(graph, nullptr, &n) != CUDA_SUCCESS || n == 0) return 0;
  auto* nodes = static_cast<CUgraphNode*>(malloc(n * sizeof(CUgraphNode)));
  if (nodes == nullptr) return 0;
  uint64_t units = 0;
  if (r.cuda.cuGraphGetNodes(graph, nodes, &n) == CUDA_SUCCESS) {
    for (size_t i = 0; i < n; ++i) {
      CUgraphNodeType type;
      if (r.cuda.cuGraphNodeGetType(nodes[i], &type) != CUDA_SUCCESS ||
          type != CU_GRAPH_NODE_TYPE_KERNEL) {
        continue;
      }
      if (r.cuda.cuGraphKernelNodeGetParams_v2 != nullptr) {
        CUDA_KERNEL_NODE_PARAMS_v2 p{};
        if (r.cuda.cuGraphKernelNodeGetParams_v2(nodes[i], &p) == CUDA_SUCCESS) {
          units += LaunchUnits(p.gridDimX, p.gridDimY, p.gridDimZ, p.blockDimX, p.blockDimY,
                               p.blockDimZ);
        }
      } else if (r.cuda.cuGraphKernelNodeGetParams != nullptr) {
        CUDA_KERNEL_NODE_PARAMS_v1 p{};
        if (r.cuda.cuGraphKernelNodeGetParams(nodes[i], &p) == CUDA_SUCCESS) {
          units += LaunchUnits(p.gridDimX, p.gridDimY, p.gridDimZ, p.blockDimX, p.blockDimY,
                               p.blockDimZ);
        }
      }
    }
  }
  free(nodes);
  return units;
}

void RecordGraph(CUresult rc, CUgraphExec* exec, CUgraph graph) {
  if (rc != CUDA_SUCCESS || exec == nullptr || !EnterProcess()) return;
  uint64_t units = GraphUnits(graph);
  if (units > 0) {
    Rt().table.Insert(KeySpace::kGraphExec, reinterpret_cast<uint64_t>(*exec), -1, MemKind::kData,
                      units);
  }
}

void BeforeGraphLaunch(CUgraphExec exec) {
  if (!LaunchPrologue()) return;
  AllocRecord rec;
  if (Rt().table.Find(KeySpace::kGraphExec, reinterpret_cast<uint64_t>(exec), &rec)) {
    GateLaunch(rec.bytes);
  }
}

CUresult ProcAddress(const char* symbol, void** pfn, int version, cuuint64_t flags, CUresult rc) {
  if (rc != CUDA_SUCCESS || pfn == nullptr || *pfn == nullptr || symbol == nullptr) return rc;
  void* mapped = MapRealToHook(*pfn);
  if (mapped == *pfn) {
    // The driver returned an address that is not one of its exports we know (drivers may hand
    // out internal entry points): fall back to resolving the name ourselves.
    if (const char* name = VersionedHookName(symbol, version, flags); name != nullptr) {
      if (void* hook = HookFor(name); hook != nullptr) mapped = hook;
    }
  }
  *pfn = mapped;
  return rc;
}

}  // namespace
}  // namespace hami::vgpu

using namespace hami::vgpu;  // NOLINT: the exported hooks live in the global namespace

// ---- Initialisation and lookup ----

VGPU_EXPORT CUresult cuInit(unsigned int flags) {
  REAL_OR_FAIL(cuInit);
  CUresult rc = real(flags);
  if (rc == CUDA_SUCCESS && EnterProcess()) EnterDevices();
  return rc;
}

VGPU_EXPORT CUresult cuGetProcAddress(const char* symbol, void** pfn, int cudaVersion,
                                      cuuint64_t flags) {
  REAL_OR_FAIL(cuGetProcAddress);
  return ProcAddress(symbol, pfn, cudaVersion, flags, real(symbol, pfn, cudaVersion, flags));
}

VGPU_EXPORT CUresult cuGetProcAddress_v2(const char* symbol, void** pfn, int cudaVersion,
                                         cuuint64_t flags,
                                         CUdriverProcAddressQueryResult* symbolStatus) {
  REAL_OR_FAIL(cuGetProcAddress_v2);
  return ProcAddress(symbol, pfn, cudaVersion, flags,
                     real(symbol, pfn, cudaVersion, flags, symbolStatus));
}

// ---- Plain, pitch and managed allocations ----

VGPU_EXPORT CUresult cuMemAlloc_v2(CUdeviceptr* dptr, size_t bytesize) {
  REAL_OR_FAIL(cuMemAlloc_v2);
  auto free_fn = Rt().cuda.cuMemFree_v2;
  return AllocateAccounted(
      dptr, bytesize, MemKind::kData, "cuMemAlloc", [&] { return real(dptr, bytesize); },
      [&](CUdeviceptr p) {
        if (free_fn) free_fn(p);
      });
}

VGPU_EXPORT CUresult cuMemFree_v2(CUdeviceptr dptr) {
  REAL_OR_FAIL(cuMemFree_v2);
  return FreeAccounted(KeySpace::kPointer, dptr, [&] { return real(dptr); });
}

VGPU_EXPORT CUresult cuMemAllocManaged(CUdeviceptr* dptr, size_t bytesize, unsigned int flags) {
  REAL_OR_FAIL(cuMemAllocManaged);
  auto free_fn = Rt().cuda.cuMemFree_v2;
  return AllocateAccounted(
      dptr, bytesize, MemKind::kManaged, "cuMemAllocManaged",
      [&] { return real(dptr, bytesize, flags); },
      [&](CUdeviceptr p) {
        if (free_fn) free_fn(p);
      });
}

VGPU_EXPORT CUresult cuMemAllocPitch_v2(CUdeviceptr* dptr, size_t* pPitch, size_t widthInBytes,
                                        size_t height, unsigned int elementSizeBytes) {
  REAL_OR_FAIL(cuMemAllocPitch_v2);
  auto call = [&] { return real(dptr, pPitch, widthInBytes, height, elementSizeBytes); };
  if (!EnterProcess() || dptr == nullptr || pPitch == nullptr || widthInBytes == 0 || height == 0) {
    return call();
  }
  WaitIfPaused();
  int dev = CurrentRegionDevice();
  if (dev < 0) return call();
  // The driver's pitch is not known before the call: charge a 512-byte-aligned estimate, then
  // settle the difference against the quota once the real pitch is known.
  uint64_t estimate = ((static_cast<uint64_t>(widthInBytes) + 511) & ~511ULL) * height;
  if (!Charge(dev, estimate, MemKind::kData, "cuMemAllocPitch")) return CUDA_ERROR_OUT_OF_MEMORY;
  CUresult rc = call();
  if (rc != CUDA_SUCCESS) {
    Uncharge(dev, estimate, MemKind::kData);
    return rc;
  }
  uint64_t actual = static_cast<uint64_t>(*pPitch) * height;
  auto free_fn = Rt().cuda.cuMemFree_v2;
  if (actual > estimate && !Charge(dev, actual - estimate, MemKind::kData, "cuMemAllocPitch")) {
    if (free_fn) free_fn(*dptr);
    Uncharge(dev, estimate, MemKind::kData);
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  if (actual < estimate) Uncharge(dev, estimate - actual, MemKind::kData);
  CUdeviceptr p = *dptr;
  return Track(KeySpace::kPointer, p, dev, MemKind::kData, actual, [&] {
    if (free_fn) free_fn(p);
  });
}

// ---- Stream-ordered allocator ----

#define VGPU_ASYNC_ALLOC(name, free_name)                                                      \
  VGPU_EXPORT CUresult name(CUdeviceptr* dptr, size_t bytesize, CUstream hStream) {            \
    REAL_OR_FAIL(name);                                                                        \
    auto free_fn = Rt().cuda.free_name;                                                        \
    return AllocateAccounted(                                                                  \
        dptr, bytesize, MemKind::kAsync, #name, [&] { return real(dptr, bytesize, hStream); }, \
        [&](CUdeviceptr p) {                                                                   \
          if (free_fn) free_fn(p, hStream);                                                    \
        });                                                                                    \
  }
VGPU_ASYNC_ALLOC(cuMemAllocAsync, cuMemFreeAsync)
VGPU_ASYNC_ALLOC(cuMemAllocAsync_ptsz, cuMemFreeAsync_ptsz)
#undef VGPU_ASYNC_ALLOC

#define VGPU_POOL_ALLOC(name, free_name)                                           \
  VGPU_EXPORT CUresult name(CUdeviceptr* dptr, size_t bytesize, CUmemoryPool pool, \
                            CUstream hStream) {                                    \
    REAL_OR_FAIL(name);                                                            \
    auto free_fn = Rt().cuda.free_name;                                            \
    return AllocateAccounted(                                                      \
        dptr, bytesize, MemKind::kAsync, #name,                                    \
        [&] { return real(dptr, bytesize, pool, hStream); },                       \
        [&](CUdeviceptr p) {                                                       \
          if (free_fn) free_fn(p, hStream);                                        \
        });                                                                        \
  }
VGPU_POOL_ALLOC(cuMemAllocFromPoolAsync, cuMemFreeAsync)
VGPU_POOL_ALLOC(cuMemAllocFromPoolAsync_ptsz, cuMemFreeAsync_ptsz)
#undef VGPU_POOL_ALLOC

VGPU_EXPORT CUresult cuMemFreeAsync(CUdeviceptr dptr, CUstream hStream) {
  REAL_OR_FAIL(cuMemFreeAsync);
  return FreeAccounted(KeySpace::kPointer, dptr, [&] { return real(dptr, hStream); });
}

VGPU_EXPORT CUresult cuMemFreeAsync_ptsz(CUdeviceptr dptr, CUstream hStream) {
  REAL_OR_FAIL(cuMemFreeAsync_ptsz);
  return FreeAccounted(KeySpace::kPointer, dptr, [&] { return real(dptr, hStream); });
}

// ---- Virtual memory management ----

VGPU_EXPORT CUresult cuMemCreate(CUmemGenericAllocationHandle* handle, size_t size,
                                 const CUmemAllocationProp* prop, unsigned long long flags) {
  REAL_OR_FAIL(cuMemCreate);
  auto call = [&] { return real(handle, size, prop, flags); };
  if (!EnterProcess() || handle == nullptr || prop == nullptr || size == 0 ||
      prop->location.type != CU_MEM_LOCATION_TYPE_DEVICE) {
    return call();
  }
  WaitIfPaused();
  int dev = RegionIndexForOrdinal(prop->location.id);
  if (dev < 0) return call();
  if (!Charge(dev, size, MemKind::kVmm, "cuMemCreate")) return CUDA_ERROR_OUT_OF_MEMORY;
  CUresult rc = call();
  if (rc != CUDA_SUCCESS) {
    Uncharge(dev, size, MemKind::kVmm);
    return rc;
  }
  CUmemGenericAllocationHandle hnd = *handle;
  auto release = Rt().cuda.cuMemRelease;
  return Track(KeySpace::kVmmHandle, hnd, dev, MemKind::kVmm, size, [&] {
    if (release) release(hnd);
  });
}

VGPU_EXPORT CUresult cuMemRelease(CUmemGenericAllocationHandle handle) {
  REAL_OR_FAIL(cuMemRelease);
  return FreeAccounted(KeySpace::kVmmHandle, handle, [&] { return real(handle); });
}

// ---- Arrays ----

template <typename CreateFn, typename DestroyFn>
CUresult CreateArrayAccounted(KeySpace space, void** out, uint64_t bytes, const char* api,
                              CreateFn create, DestroyFn destroy) {
  if (!EnterProcess() || out == nullptr || bytes == 0) return create();
  WaitIfPaused();
  int dev = CurrentRegionDevice();
  if (dev < 0) return create();
  if (!Charge(dev, bytes, MemKind::kArray, api)) return CUDA_ERROR_OUT_OF_MEMORY;
  CUresult rc = create();
  if (rc != CUDA_SUCCESS) {
    Uncharge(dev, bytes, MemKind::kArray);
    return rc;
  }
  void* h = *out;
  return Track(space, reinterpret_cast<uint64_t>(h), dev, MemKind::kArray, bytes,
               [&] { destroy(h); });
}

VGPU_EXPORT CUresult cuArrayCreate_v2(CUarray* pHandle, const CUDA_ARRAY_DESCRIPTOR* desc) {
  REAL_OR_FAIL(cuArrayCreate_v2);
  auto destroy = Rt().cuda.cuArrayDestroy;
  uint64_t bytes = desc == nullptr
                       ? 0
                       : ArrayBytes(desc->Width, desc->Height, 1, desc->Format, desc->NumChannels);
  return CreateArrayAccounted(
      KeySpace::kArray, reinterpret_cast<void**>(pHandle), bytes, "cuArrayCreate",
      [&] { return real(pHandle, desc); },
      [&](void* h) {
        if (destroy) destroy(static_cast<CUarray>(h));
      });
}

VGPU_EXPORT CUresult cuArray3DCreate_v2(CUarray* pHandle, const CUDA_ARRAY3D_DESCRIPTOR* desc) {
  REAL_OR_FAIL(cuArray3DCreate_v2);
  auto destroy = Rt().cuda.cuArrayDestroy;
  uint64_t bytes = desc == nullptr ? 0
                                   : ArrayBytes(desc->Width, desc->Height, desc->Depth,
                                                desc->Format, desc->NumChannels);
  return CreateArrayAccounted(
      KeySpace::kArray, reinterpret_cast<void**>(pHandle), bytes, "cuArray3DCreate",
      [&] { return real(pHandle, desc); },
      [&](void* h) {
        if (destroy) destroy(static_cast<CUarray>(h));
      });
}

VGPU_EXPORT CUresult cuArrayDestroy(CUarray hArray) {
  REAL_OR_FAIL(cuArrayDestroy);
  return FreeAccounted(KeySpace::kArray, reinterpret_cast<uint64_t>(hArray),
                       [&] { return real(hArray); });
}

VGPU_EXPORT CUresult cuMipmappedArrayCreate(CUmipmappedArray* pHandle,
                                            const CUDA_ARRAY3D_DESCRIPTOR* desc,
                                            unsigned int numMipmapLevels) {
  REAL_OR_FAIL(cuMipmappedArrayCreate);
  auto destroy = Rt().cuda.cuMipmappedArrayDestroy;
  uint64_t bytes = desc == nullptr ? 0 : MipmapBytes(desc, numMipmapLevels);
  return CreateArrayAccounted(
      KeySpace::kMipmap, reinterpret_cast<void**>(pHandle), bytes, "cuMipmappedArrayCreate",
      [&] { return real(pHandle, desc, numMipmapLevels); },
      [&](void* h) {
        if (destroy) destroy(static_cast<CUmipmappedArray>(h));
      });
}

VGPU_EXPORT CUresult cuMipmappedArrayDestroy(CUmipmappedArray hMipmappedArray) {
  REAL_OR_FAIL(cuMipmappedArrayDestroy);
  return FreeAccounted(KeySpace::kMipmap, reinterpret_cast<uint64_t>(hMipmappedArray),
                       [&] { return real(hMipmappedArray); });
}

// ---- What the container sees ----

VGPU_EXPORT CUresult cuMemGetInfo_v2(size_t* free, size_t* total) {
  REAL_OR_FAIL(cuMemGetInfo_v2);
  CUresult rc = real(free, total);
  if (rc != CUDA_SUCCESS || free == nullptr || total == nullptr || !EnterProcess()) return rc;
  int dev = CurrentRegionDevice();
  if (dev < 0) return rc;
  uint64_t limit = Rt().region->Limit(dev);
  if (limit == 0) return rc;
  uint64_t used = Rt().region->Used(dev);
  uint64_t t = limit < *total ? limit : *total;
  uint64_t f = used >= t ? 0 : t - used;
  if (f > *free) f = *free;  // the card itself may be fuller than our quota says
  *total = static_cast<size_t>(t);
  *free = static_cast<size_t>(f);
  return rc;
}

VGPU_EXPORT CUresult cuDeviceTotalMem_v2(size_t* bytes, CUdevice dev) {
  REAL_OR_FAIL(cuDeviceTotalMem_v2);
  CUresult rc = real(bytes, dev);
  if (rc != CUDA_SUCCESS || bytes == nullptr || !EnterProcess()) return rc;
  int idx = RegionIndexForOrdinal(dev);
  if (idx < 0) return rc;
  uint64_t limit = Rt().region->Limit(idx);
  if (limit != 0 && limit < *bytes) *bytes = static_cast<size_t>(limit);
  return rc;
}

// ---- Launches ----

#define VGPU_LAUNCH(name)                                                                          \
  VGPU_EXPORT CUresult name(CUfunction f, unsigned int gridDimX, unsigned int gridDimY,            \
                            unsigned int gridDimZ, unsigned int blockDimX, unsigned int blockDimY, \
                            unsigned int blockDimZ, unsigned int sharedMemBytes, CUstream hStream, \
                            void** kernelParams, void** extra) {                                   \
    REAL_OR_FAIL(name);                                                                            \
    BeforeLaunch(gridDimX, gridDimY, gridDimZ, blockDimX, blockDimY, blockDimZ);                   \
    return real(f, gridDimX, gridDimY, gridDimZ, blockDimX, blockDimY, blockDimZ, sharedMemBytes,  \
                hStream, kernelParams, extra);                                                     \
  }
VGPU_LAUNCH(cuLaunchKernel)
VGPU_LAUNCH(cuLaunchKernel_ptsz)
#undef VGPU_LAUNCH

#define VGPU_LAUNCH_EX(name)                                                                 \
  VGPU_EXPORT CUresult name(const CUlaunchConfig* config, CUfunction f, void** kernelParams, \
                            void** extra) {                                                  \
    REAL_OR_FAIL(name);                                                                      \
    if (config != nullptr) {                                                                 \
      BeforeLaunch(config->gridDimX, config->gridDimY, config->gridDimZ, config->blockDimX,  \
                   config->blockDimY, config->blockDimZ);                                    \
    }                                                                                        \
    return real(config, f, kernelParams, extra);                                             \
  }
VGPU_LAUNCH_EX(cuLaunchKernelEx)
VGPU_LAUNCH_EX(cuLaunchKernelEx_ptsz)
#undef VGPU_LAUNCH_EX

#define VGPU_LAUNCH_COOP(name)                                                                     \
  VGPU_EXPORT CUresult name(CUfunction f, unsigned int gridDimX, unsigned int gridDimY,            \
                            unsigned int gridDimZ, unsigned int blockDimX, unsigned int blockDimY, \
                            unsigned int blockDimZ, unsigned int sharedMemBytes, CUstream hStream, \
                            void** kernelParams) {                                                 \
    REAL_OR_FAIL(name);                                                                            \
    BeforeLaunch(gridDimX, gridDimY, gridDimZ, blockDimX, blockDimY, blockDimZ);                   \
    return real(f, gridDimX, gridDimY, gridDimZ, blockDimX, blockDimY, blockDimZ, sharedMemBytes,  \
                hStream, kernelParams);                                                            \
  }
VGPU_LAUNCH_COOP(cuLaunchCooperativeKernel)
VGPU_LAUNCH_COOP(cuLaunchCooperativeKernel_ptsz)
#undef VGPU_LAUNCH_COOP

// ---- Graphs: the cost of a graph is known at instantiation, charged at each launch ----

VGPU_EXPORT CUresult cuGraphInstantiateWithFlags(CUgraphExec* phGraphExec, CUgraph hGraph,
                                                 unsigned long long flags) {
  REAL_OR_FAIL(cuGraphInstantiateWithFlags);
  CUresult rc = real(phGraphExec, hGraph, flags);
  RecordGraph(rc, phGraphExec, hGraph);
  return rc;
}

// The legacy five-argument forms (CUDA 10-11 headers), still exported by the driver.
#define VGPU_GRAPH_INSTANTIATE_LEGACY(name)                                                     \
  VGPU_EXPORT CUresult name(CUgraphExec* phGraphExec, CUgraph hGraph, CUgraphNode* phErrorNode, \
                            char* logBuffer, size_t bufferSize) {                               \
    REAL_OR_FAIL(name);                                                                         \
    CUresult rc = real(phGraphExec, hGraph, phErrorNode, logBuffer, bufferSize);                \
    RecordGraph(rc, phGraphExec, hGraph);                                                       \
    return rc;                                                                                  \
  }
VGPU_GRAPH_INSTANTIATE_LEGACY(cuGraphInstantiate)
VGPU_GRAPH_INSTANTIATE_LEGACY(cuGraphInstantiate_v2)
#undef VGPU_GRAPH_INSTANTIATE_LEGACY

VGPU_EXPORT CUresult cuGraphLaunch(CUgraphExec hGraphExec, CUstream hStream) {
  REAL_OR_FAIL(cuGraphLaunch);
  BeforeGraphLaunch(hGraphExec);
  return real(hGraphExec, hStream);
}

VGPU_EXPORT CUresult cuGraphLaunch_ptsz(CUgraphExec hGraphExec, CUstream hStream) {
  REAL_OR_FAIL(cuGraphLaunch_ptsz);
  BeforeGraphLaunch(hGraphExec);
  return real(hGraphExec, hStream);
}

VGPU_EXPORT CUresult cuGraphExecDestroy(CUgraphExec hGraphExec) {
  REAL_OR_FAIL(cuGraphExecDestroy);
  AllocRecord rec;
  if (EnterProcess()) {
    Rt().table.Remove(KeySpace::kGraphExec, reinterpret_cast<uint64_t>(hGraphExec), &rec);
  }
  return real(hGraphExec);
}
