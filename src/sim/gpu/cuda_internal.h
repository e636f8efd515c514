// Per-process state of the simulated libcuda.so.1: handles behind the opaque CUDA types and the
// process-wide driver object that owns them.
//
// Handles are heap objects with a magic word checked on every use, so a garbage or stale
// handle yields CUDA_ERROR_INVALID_HANDLE/CONTEXT instead of a crash in the common case. Context
// objects are never freed (a destroyed context keeps its magic and reports
// CUDA_ERROR_CONTEXT_IS_DESTROYED), so a thread that still holds one cannot touch freed memory.
//
// Thread safety: Driver's maps are guarded by Driver::mu; each stream by its own mutex; events
// use atomics. Context fields other than `mu`-guarded ones are written only at creation or
// while holding Driver::mu. The current-context stack is thread-local.
#pragma once

#include <stdint.h>

#include <atomic>
#include <deque>
#include <map>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "common/thread_annotations.h"
#include "sim/gpu/sim_runtime.h"
#include "vgpu/cuda_abi.h"

namespace hami::sim {

// Magic words (ASCII tags) identifying live handles.
inline constexpr uint32_t kCtxMagic = 0x43545831;     // CTX1
inline constexpr uint32_t kStreamMagic = 0x53545231;  // STR1
inline constexpr uint32_t kEventMagic = 0x45564e31;   // EVN1
inline constexpr uint32_t kModuleMagic = 0x4d4f4431;  // MOD1
inline constexpr uint32_t kFuncMagic = 0x464e4331;    // FNC1
inline constexpr uint32_t kPoolMagic = 0x504f4f31;    // POO1
inline constexpr uint32_t kArrayMagic = 0x41525231;   // ARR1
inline constexpr uint32_t kGraphMagic = 0x47525031;   // GRP1
inline constexpr uint32_t kNodeMagic = 0x4e4f4431;    // NOD1
inline constexpr uint32_t kExecMagic = 0x45584531;    // EXE1

// The name of the busy kernel; see README.md.
inline constexpr const char kSpinKernelName[] = "hami_sim_spin";

// Launch-queue limit per stream (back-pressure); the queued-time limit is the config's
// max_queued_ms.
inline constexpr size_t kMaxPendingKernels = 1024;
// A single launch may not book more than this much simulated time (guards against overflow).
inline constexpr uint64_t kMaxKernelNs = 600ull * 1000000000ull;

inline constexpr uint64_t kVmmGranularity = 2ull << 20;

// Result codes the ABI header does not name.
inline constexpr CUresult kErrHostMemoryAlreadyRegistered = 712;
inline constexpr CUresult kErrHostMemoryNotRegistered = 713;
inline constexpr CUresult kErrDeviceUnavailable = 46;

}  // namespace hami::sim

struct CUstream_st;

struct CUctx_st {
  uint32_t magic = hami::sim::kCtxMagic;
  int ordinal = 0;  // CUDA ordinal: what memory is charged to (a GPU or a MIG device)
  int phys = 0;     // physical device index
  bool primary = false;
  std::atomic<bool> destroyed{false};  // written under Driver::mu
  unsigned flags = 0;
  uint64_t id = 0;                       // never reused; keys per-thread default streams
  std::atomic<uint64_t> max_tail_ns{0};  // latest completion time of work queued in this context
  CUstream_st* legacy_stream = nullptr;  // the NULL stream
};

struct CUstream_st {
  uint32_t magic = hami::sim::kStreamMagic;
  CUctx_st* ctx = nullptr;
  unsigned flags = 0;
  int priority = 0;
  hami::Mutex mu;
  uint64_t tail_ns GUARDED_BY(mu) = 0;          // completion time of the last queued work
  std::deque<uint64_t> pending GUARDED_BY(mu);  // completion times of queued kernels
};

struct CUevent_st {
  uint32_t magic = hami::sim::kEventMagic;
  CUctx_st* ctx = nullptr;
  unsigned flags = 0;
  std::atomic<uint64_t> time_ns{0};  // completion time of the recorded work; 0 = never recorded
};

struct CUmod_st {
  uint32_t magic = hami::sim::kModuleMagic;
  CUctx_st* ctx = nullptr;
  hami::Mutex mu;
  std::map<std::string, CUfunc_st*> functions GUARDED_BY(mu);
};

struct CUfunc_st {
  uint32_t magic = hami::sim::kFuncMagic;
  CUmod_st* module = nullptr;
  std::string name;
  bool spin = false;
};

struct CUmemPoolHandle_st {
  uint32_t magic = hami::sim::kPoolMagic;
  int phys = 0;
  int ordinal = 0;
  bool is_default = false;
  bool destroyed = false;
  CUmemPoolProps props{};
  // All guarded by Driver::mu (Drv().mu), which is not in scope here to annotate them with:
  uint64_t release_threshold = 0;
  uint64_t reserved = 0, reserved_high = 0, used = 0, used_high = 0;
  int reuse_follow_event = 1, reuse_opportunistic = 1, reuse_internal = 1;
  std::multimap<uint64_t, uintptr_t> free_blocks;  // size -> base
};

struct CUarray_st {
  uint32_t magic = hami::sim::kArrayMagic;
  int ordinal = 0;  // CUDA ordinal charged
  uint64_t bytes = 0;
};

struct CUmipmappedArray_st {
  uint32_t magic = hami::sim::kArrayMagic;
  int ordinal = 0;
  uint64_t bytes = 0;
};

struct CUgraphNode_st {
  uint32_t magic = hami::sim::kNodeMagic;
  CUgraph_st* graph = nullptr;
  CUDA_KERNEL_NODE_PARAMS_v2 params{};
  uint64_t spin_ns = 0;              // copied argument of a spin kernel
  void* param_array[1] = {nullptr};  // kernelParams handed back by GetParams
};

struct CUgraph_st {
  uint32_t magic = hami::sim::kGraphMagic;
  std::vector<CUgraphNode_st*> nodes;
};

struct CUgraphExec_st {
  uint32_t magic = hami::sim::kExecMagic;
  struct Kernel {
    CUfunc_st* func;
    uint64_t blocks;
    uint64_t spin_ns;
  };
  std::vector<Kernel> kernels;
};

namespace hami::sim {

enum class AllocKind { kDevice, kManaged, kPool };

struct Allocation {
  uint64_t size = 0;     // bytes charged
  uint64_t map_len = 0;  // bytes mmap'd
  int phys = 0;
  int ordinal = 0;
  AllocKind kind = AllocKind::kDevice;
  CUctx_st* ctx = nullptr;
  CUmemPoolHandle_st* pool = nullptr;
  bool pool_free = false;  // a pool block currently back in its pool
};

struct HostAllocation {
  uint64_t size = 0;
  uint64_t map_len = 0;
  bool registered = false;  // cuMemHostRegister'd user memory (not ours to unmap)
};

struct PhysicalHandle {
  int fd = -1;
  uint64_t size = 0;
  int phys = 0;
  int ordinal = 0;
  bool released = false;
  int mappings = 0;
};

struct Mapping {
  uint64_t size = 0;
  CUmemGenericAllocationHandle handle = 0;
};

// Process-wide driver state. Accessed through Drv().
struct Driver {
  Mutex mu;
  std::atomic<bool> initialized{false};
  CUresult init_result GUARDED_BY(mu) = CUDA_SUCCESS;
  SimRuntime* rt = nullptr;  // set once by cuInit

  std::vector<CUctx_st*> primary GUARDED_BY(mu);  // per ordinal
  // Live contexts per ordinal, counted for MIG devices only (see NoteContext).
  std::vector<int> mig_contexts GUARDED_BY(mu);
  std::vector<int> primary_refs GUARDED_BY(mu);
  std::vector<unsigned> primary_flags GUARDED_BY(mu);
  // Per ordinal; written by cuInit (under mu) before `initialized` is published, read-only after.
  std::vector<CUmemPoolHandle_st*> default_pool;
  std::vector<CUmemPoolHandle_st*> current_pool GUARDED_BY(mu);  // per ordinal
  // Device-visible allocations by base.
  std::map<uintptr_t, Allocation> allocations GUARDED_BY(mu);
  std::map<uintptr_t, HostAllocation> host GUARDED_BY(mu);  // pinned host memory by base
  std::map<CUmemGenericAllocationHandle, PhysicalHandle> handles GUARDED_BY(mu);
  std::map<uintptr_t, uint64_t> reservations GUARDED_BY(mu);  // VA reservations: base -> size
  std::map<uintptr_t, Mapping> mappings GUARDED_BY(mu);       // VMM mappings: base -> mapping
  // Contexts, modules (and through them functions) and pools live for the whole process, so
  // stale handles stay safe to check; this keeps them reachable.
  std::vector<void*> immortal GUARDED_BY(mu);
  CUmemGenericAllocationHandle next_handle GUARDED_BY(mu) = 0x1000;
  uint64_t next_ctx_id GUARDED_BY(mu) = 1;
};

Driver& Drv();

// --- helpers shared by the cuda_*.cc files ---

// CUDA_SUCCESS if cuInit succeeded; else the error every call must return.
CUresult CheckInit();
// The calling thread's current context, checked for validity.
CUresult CurrentContext(CUctx_st** ctx);
// Validates a context handle (nullptr = current).
CUresult ResolveContext(CUcontext ctx, CUctx_st** out);
// What CUDA ordinal `dev` is (a whole GPU or a MIG device), or nullptr if there is none.
const CudaDevice* DeviceOf(CUdevice dev);
// Physical index of CUDA ordinal `dev` (a MIG device's GPU), or -1.
int PhysOf(CUdevice dev);
// CUDA_SUCCESS if cuInit succeeded and `dev` is an ordinal; else the error to return.
CUresult CheckCudaDevice(CUdevice dev);
// Resolves a stream argument (0, CU_STREAM_LEGACY, CU_STREAM_PER_THREAD or a handle).
CUresult ResolveStream(CUstream stream, bool per_thread, CUstream_st** out);
// Waits for a stream's queued work to finish.
void SynchronizeStream(CUstream_st* s);
// Releases pool memory above each pool's release threshold (done at synchronisation points).
void TrimPoolsAtSync();
// Frees every allocation owned by `ctx` (context destroy / primary reset).
void FreeContextAllocations(CUctx_st* ctx);
// This process's slot in the shared state, or -1.
int ProcessSlot();

}  // namespace hami::sim

#define HAMI_SIM_EXPORT extern "C" __attribute__((visibility("default")))
