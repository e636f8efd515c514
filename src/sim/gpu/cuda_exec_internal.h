// Kernel launch plumbing of the simulated libcuda.so.1, shared by cuda_exec.cc (direct launches)
// and cuda_graph.cc (graph launches). Nothing here is exported from the library.
//
// Thread safety: as in cuda_internal.h; Enqueue takes the stream's own mutex.
#pragma once

#include <stdint.h>

#include "sim/gpu/cuda_internal.h"

namespace hami::sim {

// A launch reduced to what the execution model needs.
struct LaunchArgs {
  CUfunc_st* func;
  uint64_t blocks;
  uint64_t threads_per_block;
  uint64_t spin_ns;  // only for the spin kernel
};

// Checks the function handle and the grid and block dimensions of a launch and fills `out`; the
// busy kernel's duration is read from its first kernel parameter.
CUresult PrepareLaunch(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                       unsigned by, unsigned bz, void** kernelParams, LaunchArgs* out);
// Books one prepared kernel on stream `s` (see the execution model in cuda_exec.cc); may block
// while the stream's launch queue is full. Caller must not hold s->mu.
CUresult Enqueue(CUstream_st* s, const LaunchArgs& a);

}  // namespace hami::sim
