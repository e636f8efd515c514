// Simulated libcuda.so.1: cuGetProcAddress, which maps a base API name ("cuMemAlloc") and the
// CUDA version the caller was built for to the matching versioned entry point
// ("cuMemAlloc_v2"), and to the per-thread-default-stream variant ("..._ptsz") when asked.
//
// Each table row names the first CUDA version (1000*major + 10*minor) at which that export
// became what the base name means. Lookup picks the row with the highest such version not above
// the caller's; if every row is newer, the symbol is reported as VERSION_NOT_SUFFICIENT.
// Versioned names themselves ("cuMemAlloc_v2") are not base names and are not found, as with
// the real driver.

#include <string.h>

#include "sim/gpu/cuda_internal.h"

namespace hami::sim {
namespace {

#define FN(f) reinterpret_cast<void*>(&f)

struct ProcEntry {
  const char* name;  // base name
  int since;         // first CUDA version this row applies to
  void* fn;          // legacy / default-stream entry point
  void* fn_ptsz;     // per-thread default stream variant, or nullptr if none
};

const ProcEntry kProcTable[] = {
    {"cuInit", 2000, FN(cuInit), nullptr},
    {"cuDriverGetVersion", 2020, FN(cuDriverGetVersion), nullptr},
    {"cuGetProcAddress", 11030, FN(cuGetProcAddress), nullptr},
    {"cuGetProcAddress", 12000, FN(cuGetProcAddress_v2), nullptr},
    {"cuGetErrorString", 6000, FN(cuGetErrorString), nullptr},
    {"cuGetErrorName", 6000, FN(cuGetErrorName), nullptr},

    {"cuDeviceGet", 2000, FN(cuDeviceGet), nullptr},
    {"cuDeviceGetCount", 2000, FN(cuDeviceGetCount), nullptr},
    {"cuDeviceGetName", 2000, FN(cuDeviceGetName), nullptr},
    {"cuDeviceGetUuid", 9020, FN(cuDeviceGetUuid), nullptr},
    {"cuDeviceGetUuid", 11040, FN(cuDeviceGetUuid_v2), nullptr},
    {"cuDeviceTotalMem", 3020, FN(cuDeviceTotalMem_v2), nullptr},
    {"cuDeviceGetAttribute", 2000, FN(cuDeviceGetAttribute), nullptr},
    {"cuDeviceGetPCIBusId", 4010, FN(cuDeviceGetPCIBusId), nullptr},
    {"cuDeviceGetByPCIBusId", 4010, FN(cuDeviceGetByPCIBusId), nullptr},
    {"cuDeviceCanAccessPeer", 4000, FN(cuDeviceCanAccessPeer), nullptr},
    {"cuDeviceGetDefaultMemPool", 11020, FN(cuDeviceGetDefaultMemPool), nullptr},
    {"cuDeviceGetMemPool", 11020, FN(cuDeviceGetMemPool), nullptr},
    {"cuDeviceSetMemPool", 11020, FN(cuDeviceSetMemPool), nullptr},

    {"cuDevicePrimaryCtxRetain", 7000, FN(cuDevicePrimaryCtxRetain), nullptr},
    {"cuDevicePrimaryCtxRelease", 11000, FN(cuDevicePrimaryCtxRelease_v2), nullptr},
    {"cuDevicePrimaryCtxGetState", 7000, FN(cuDevicePrimaryCtxGetState), nullptr},
    {"cuDevicePrimaryCtxSetFlags", 11000, FN(cuDevicePrimaryCtxSetFlags_v2), nullptr},
    {"cuDevicePrimaryCtxReset", 11000, FN(cuDevicePrimaryCtxReset_v2), nullptr},
    {"cuCtxCreate", 3020, FN(cuCtxCreate_v2), nullptr},
    {"cuCtxCreate", 11040, FN(cuCtxCreate_v3), nullptr},
    {"cuCtxCreate", 12050, FN(cuCtxCreate_v4), nullptr},
    {"cuCtxDestroy", 4000, FN(cuCtxDestroy_v2), nullptr},
    {"cuCtxGetCurrent", 4000, FN(cuCtxGetCurrent), nullptr},
    {"cuCtxSetCurrent", 4000, FN(cuCtxSetCurrent), nullptr},
    {"cuCtxPushCurrent", 4000, FN(cuCtxPushCurrent_v2), nullptr},
    {"cuCtxPopCurrent", 4000, FN(cuCtxPopCurrent_v2), nullptr},
    {"cuCtxGetDevice", 2000, FN(cuCtxGetDevice), nullptr},
    {"cuCtxSynchronize", 2000, FN(cuCtxSynchronize), nullptr},
    {"cuCtxGetApiVersion", 3020, FN(cuCtxGetApiVersion), nullptr},

    {"cuMemAlloc", 3020, FN(cuMemAlloc_v2), nullptr},
    {"cuMemFree", 3020, FN(cuMemFree_v2), nullptr},
    {"cuMemAllocPitch", 3020, FN(cuMemAllocPitch_v2), nullptr},
    {"cuMemAllocManaged", 6000, FN(cuMemAllocManaged), nullptr},
    {"cuMemAllocHost", 3020, FN(cuMemAllocHost_v2), nullptr},
    {"cuMemHostAlloc", 2020, FN(cuMemHostAlloc), nullptr},
    {"cuMemFreeHost", 2000, FN(cuMemFreeHost), nullptr},
    {"cuMemHostRegister", 4000, FN(cuMemHostRegister_v2), nullptr},
    {"cuMemHostUnregister", 4000, FN(cuMemHostUnregister), nullptr},
    {"cuMemGetInfo", 3020, FN(cuMemGetInfo_v2), nullptr},
    {"cuMemGetAddressRange", 3020, FN(cuMemGetAddressRange_v2), nullptr},
    {"cuPointerGetAttribute", 4000, FN(cuPointerGetAttribute), nullptr},

    {"cuMemAllocAsync", 11020, FN(cuMemAllocAsync), FN(cuMemAllocAsync_ptsz)},
    {"cuMemFreeAsync", 11020, FN(cuMemFreeAsync), FN(cuMemFreeAsync_ptsz)},
    {"cuMemAllocFromPoolAsync", 11020, FN(cuMemAllocFromPoolAsync),
     FN(cuMemAllocFromPoolAsync_ptsz)},
    {"cuMemPoolCreate", 11020, FN(cuMemPoolCreate), nullptr},
    {"cuMemPoolDestroy", 11020, FN(cuMemPoolDestroy), nullptr},
    {"cuMemPoolTrimTo", 11020, FN(cuMemPoolTrimTo), nullptr},
    {"cuMemPoolGetAttribute", 11020, FN(cuMemPoolGetAttribute), nullptr},
    {"cuMemPoolSetAttribute", 11020, FN(cuMemPoolSetAttribute), nullptr},

    {"cuMemCreate", 10020, FN(cuMemCreate), nullptr},
    {"cuMemRelease", 10020, FN(cuMemRelease), nullptr},
    {"cuMemAddressReserve", 10020, FN(cuMemAddressReserve), nullptr},
    {"cuMemAddressFree", 10020, FN(cuMemAddressFree), nullptr},
    {"cuMemMap", 10020, FN(cuMemMap), nullptr},
    {"cuMemUnmap", 10020, FN(cuMemUnmap), nullptr},
    {"cuMemSetAccess", 10020, FN(cuMemSetAccess), nullptr},
    {"cuMemGetAllocationGranularity", 10020, FN(cuMemGetAllocationGranularity), nullptr},

    {"cuArrayCreate", 3020, FN(cuArrayCreate_v2), nullptr},
    {"cuArray3DCreate", 3020, FN(cuArray3DCreate_v2), nullptr},
    {"cuArrayDestroy", 2000, FN(cuArrayDestroy), nullptr},
    {"cuMipmappedArrayCreate", 5000, FN(cuMipmappedArrayCreate), nullptr},
    {"cuMipmappedArrayDestroy", 5000, FN(cuMipmappedArrayDestroy), nullptr},

    {"cuMemcpy", 4000, FN(cuMemcpy), nullptr},
    {"cuMemcpyAsync", 4000, FN(cuMemcpyAsync), nullptr},
    {"cuMemcpyHtoD", 3020, FN(cuMemcpyHtoD_v2), nullptr},
    {"cuMemcpyDtoH", 3020, FN(cuMemcpyDtoH_v2), nullptr},
    {"cuMemcpyDtoD", 3020, FN(cuMemcpyDtoD_v2), nullptr},
    {"cuMemcpyHtoDAsync", 3020, FN(cuMemcpyHtoDAsync_v2), nullptr},
    {"cuMemcpyDtoHAsync", 3020, FN(cuMemcpyDtoHAsync_v2), nullptr},
    {"cuMemsetD8", 3020, FN(cuMemsetD8_v2), nullptr},
    {"cuMemsetD32", 3020, FN(cuMemsetD32_v2), nullptr},
    {"cuMemsetD8Async", 3020, FN(cuMemsetD8Async), nullptr},
    {"cuMemsetD32Async", 3020, FN(cuMemsetD32Async), nullptr},

    {"cuModuleLoad", 2000, FN(cuModuleLoad), nullptr},
    {"cuModuleLoadData", 2000, FN(cuModuleLoadData), nullptr},
    {"cuModuleLoadDataEx", 2010, FN(cuModuleLoadDataEx), nullptr},
    {"cuModuleUnload", 2000, FN(cuModuleUnload), nullptr},
    {"cuModuleGetFunction", 2000, FN(cuModuleGetFunction), nullptr},
    {"cuFuncGetAttribute", 2020, FN(cuFuncGetAttribute), nullptr},

    {"cuLaunchKernel", 4000, FN(cuLaunchKernel), FN(cuLaunchKernel_ptsz)},
    {"cuLaunchKernelEx", 11060, FN(cuLaunchKernelEx), FN(cuLaunchKernelEx_ptsz)},
    {"cuLaunchCooperativeKernel", 9000, FN(cuLaunchCooperativeKernel),
     FN(cuLaunchCooperativeKernel_ptsz)},

    {"cuStreamCreate", 2000, FN(cuStreamCreate), nullptr},
    {"cuStreamCreateWithPriority", 5050, FN(cuStreamCreateWithPriority), nullptr},
    {"cuStreamDestroy", 4000, FN(cuStreamDestroy_v2), nullptr},
    {"cuStreamSynchronize", 2000, FN(cuStreamSynchronize), FN(cuStreamSynchronize_ptsz)},
    {"cuStreamQuery", 2000, FN(cuStreamQuery), nullptr},
    {"cuEventCreate", 2000, FN(cuEventCreate), nullptr},
    {"cuEventRecord", 2000, FN(cuEventRecord), nullptr},
    {"cuEventSynchronize", 2000, FN(cuEventSynchronize), nullptr},
    {"cuEventQuery", 2000, FN(cuEventQuery), nullptr},
    {"cuEventElapsedTime", 2000, FN(cuEventElapsedTime), nullptr},
    {"cuEventDestroy", 4000, FN(cuEventDestroy_v2), nullptr},

    {"cuGraphCreate", 10000, FN(cuGraphCreate), nullptr},
    {"cuGraphDestroy", 10000, FN(cuGraphDestroy), nullptr},
    {"cuGraphAddKernelNode", 10000, FN(cuGraphAddKernelNode), nullptr},
    {"cuGraphAddKernelNode", 12000, FN(cuGraphAddKernelNode_v2), nullptr},
    {"cuGraphGetNodes", 10000, FN(cuGraphGetNodes), nullptr},
    {"cuGraphNodeGetType", 10000, FN(cuGraphNodeGetType), nullptr},
    {"cuGraphKernelNodeGetParams", 10000, FN(cuGraphKernelNodeGetParams), nullptr},
    {"cuGraphKernelNodeGetParams", 12000, FN(cuGraphKernelNodeGetParams_v2), nullptr},
    // CUDA 12 headers turn cuGraphInstantiate into the three-argument WithFlags form.
    {"cuGraphInstantiate", 10000, FN(cuGraphInstantiate), nullptr},
    {"cuGraphInstantiate", 11000, FN(cuGraphInstantiate_v2), nullptr},
    {"cuGraphInstantiate", 12000, FN(cuGraphInstantiateWithFlags), nullptr},
    {"cuGraphInstantiateWithFlags", 11040, FN(cuGraphInstantiateWithFlags), nullptr},
    {"cuGraphLaunch", 10000, FN(cuGraphLaunch), FN(cuGraphLaunch_ptsz)},
    {"cuGraphExecDestroy", 10000, FN(cuGraphExecDestroy), nullptr},
};

#undef FN

CUresult Resolve(const char* symbol, void** pfn, int cudaVersion, cuuint64_t flags,
                 CUdriverProcAddressQueryResult* status) {
  if (symbol == nullptr || pfn == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (flags > CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM) return CUDA_ERROR_INVALID_VALUE;
  *pfn = nullptr;
  const ProcEntry* best = nullptr;
  bool known = false;
  for (const ProcEntry& e : kProcTable) {
    if (strcmp(e.name, symbol) != 0) continue;
    known = true;
    if (e.since <= cudaVersion && (best == nullptr || e.since > best->since)) best = &e;
  }
  if (best == nullptr) {
    if (status != nullptr) {
      *status =
          known ? CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT : CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
    }
    return CUDA_ERROR_NOT_FOUND;
  }
  bool per_thread = (flags & CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM) != 0;
  *pfn = per_thread && best->fn_ptsz != nullptr ? best->fn_ptsz : best->fn;
  if (status != nullptr) *status = CU_GET_PROC_ADDRESS_SUCCESS;
  return CUDA_SUCCESS;
}

}  // namespace
}  // namespace hami::sim

// Like the real driver, lookup works before cuInit (the runtime resolves cuInit this way).
HAMI_SIM_EXPORT CUresult cuGetProcAddress(const char* symbol, void** pfn, int cudaVersion,
                                          cuuint64_t flags) {
  return hami::sim::Resolve(symbol, pfn, cudaVersion, flags, nullptr);
}

HAMI_SIM_EXPORT CUresult cuGetProcAddress_v2(const char* symbol, void** pfn, int cudaVersion,
                                             cuuint64_t flags,
                                             CUdriverProcAddressQueryResult* symbolStatus) {
  return hami::sim::Resolve(symbol, pfn, cudaVersion, flags, symbolStatus);
}
