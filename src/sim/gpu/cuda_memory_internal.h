// Allocation bookkeeping shared by the memory files of the simulated libcuda.so.1:
// cuda_memory.cc (plain, managed and host memory, queries, copies), cuda_mempool.cc (stream-ordered
// allocator), cuda_vmm.cc (virtual memory management) and cuda_array.cc (arrays). Nothing here is
// exported from the library.
//
// Thread safety: as in cuda_internal.h; where it matters, a function says whether its caller
// holds Drv().mu.
#pragma once

#include <stdint.h>

#include <utility>
#include <vector>

#include "sim/gpu/cuda_internal.h"

namespace hami::sim {

// Charges `bytes` on CUDA device `ordinal` (a whole GPU, or a MIG device: its GPU instance's
// memory) to this process in the shared state; false on out-of-memory or when the process has
// no slot.
bool ChargeDevice(int ordinal, uint64_t bytes);
// Takes back a charge made by ChargeDevice.
void UnchargeDevice(int ordinal, uint64_t bytes);
// Maps `bytes` of device-visible memory on the device of `pool` (or of `ctx` when `pool` is null),
// charges it and records it in Drv().allocations. Caller must not hold Drv().mu.
CUresult AllocateOnDevice(CUctx_st* ctx, uint64_t bytes, AllocKind kind, CUmemPoolHandle_st* pool,
                          CUdeviceptr* out);
// Unmaps and uncharges allocations the caller already took out of Drv().allocations; called
// after Drv().mu is released.
void FinishRelease(const std::vector<std::pair<uintptr_t, Allocation>>& released);
// CUDA_SUCCESS when `loc` names a visible device, with its CUDA ordinal and physical index.
CUresult CheckDeviceLocation(const CUmemLocation& loc, int* ordinal, int* phys);
// Puts a pool block back on its pool's free list (stream-ordered free). Caller holds Drv().mu.
CUresult PoolFreeLocked(uintptr_t base, Allocation* a);

}  // namespace hami::sim
