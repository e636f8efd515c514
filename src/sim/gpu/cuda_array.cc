// Simulated libcuda.so.1: CUDA arrays and mipmapped arrays. They hold no memory of their own;
// their size is only charged to the process on the device.

#include <algorithm>

#include "sim/gpu/cuda_internal.h"
#include "sim/gpu/cuda_memory_internal.h"

namespace hami::sim {
namespace {

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

}  // namespace
}  // namespace hami::sim

using namespace hami::sim;  // NOLINT: the C ABI entry points below implement this namespace's API

// ---------------------------------------------------------------- arrays

namespace {
CUresult CreateArray(const CUDA_ARRAY3D_DESCRIPTOR& desc, unsigned levels, int* ordinal_out,
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
  if (!ChargeDevice(ctx->ordinal, total)) return CUDA_ERROR_OUT_OF_MEMORY;
  *ordinal_out = ctx->ordinal;
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
  int ordinal;
  uint64_t bytes;
  CUresult rc = CreateArray(*pAllocateArray, 1, &ordinal, &bytes);
  if (rc != CUDA_SUCCESS) return rc;
  auto* a = new CUarray_st();
  a->ordinal = ordinal;
  a->bytes = bytes;
  *pHandle = a;
  return CUDA_SUCCESS;
}

HAMI_SIM_EXPORT CUresult cuArrayDestroy(CUarray hArray) {
  CUresult rc = CheckInit();
  if (rc != CUDA_SUCCESS) return rc;
  if (hArray == nullptr || hArray->magic != kArrayMagic) return CUDA_ERROR_INVALID_HANDLE;
  hArray->magic = 0;
  UnchargeDevice(hArray->ordinal, hArray->bytes);
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
  int ordinal;
  uint64_t bytes;
  CUresult rc = CreateArray(*pMipmappedArrayDesc, numMipmapLevels, &ordinal, &bytes);
  if (rc != CUDA_SUCCESS) return rc;
  auto* a = new CUmipmappedArray_st();
  a->ordinal = ordinal;
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
  UnchargeDevice(hMipmappedArray->ordinal, hMipmappedArray->bytes);
  delete hMipmappedArray;
  return CUDA_SUCCESS;
}
