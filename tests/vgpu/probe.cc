// vgpu_probe: a small CUDA driver API program used by the integration tests, benchmarks and the
// demo. It behaves like a real application: it reaches the driver the way the CUDA runtime does
// (dlopen + dlsym), the way cudart >= 11.3 does (cuGetProcAddress_v2 with base names), or by
// linking libcuda directly (the vgpu_probe_linked build), and it prints what it saw as
// key=value tokens, one line per result.
//
// Usage: vgpu_probe [--resolve dlsym|getproc] [--ptsz] COMMAND [options]
//   info                                  per device: total, cuMemGetInfo free/total
//   alloc --kind K --bytes B [--count N] [--hold] [--device D]
//   fill --kind K --chunk B [--max B]     allocate until failure (or until --max bytes)
//   spin --blocks N --block-ns X --duration-ms T [--mode kernel|ex|coop|graph]
//   race --bytes B --rounds N --sync FILE --id 0|1
//   crash-hold --bytes B                  allocate, print "ready", wait to be killed
//   fork --bytes B                        allocate in parent and in a forked child
//   nvml-mem                              NVML memory info v1 and v2 per device
//   launch-loop --count N                 N zero-time launches, timed
//   alloc-loop --count N --bytes B        N allocate+free pairs, timed
//   startup [--sync FILE --procs N]       time the first driver call (after a barrier)
//   workload [--mem-fraction F] [--duration-ms T]  a stand-in GPU job: takes F (0.5) of the free
//                                         memory it sees, keeps launching busy kernels, reports
//                                         each second, stops cleanly on SIGTERM (T = 0: no end)
// Kinds: data pitch managed async pool vmm array array3d mipmap.
#include <dlfcn.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <string>
#include <thread>
#include <vector>

#include "common/env_limits.h"
#include "nvml/abi.h"
#include "vgpu/cuda_abi.h"

namespace {

// name, base name for cuGetProcAddress, CUDA version to request, has a _ptsz variant.
#define PROBE_CUDA(X)                                                     \
  X(cuInit, "cuInit", 12000, false)                                       \
  X(cuDeviceGet, "cuDeviceGet", 12000, false)                             \
  X(cuDeviceGetAttribute, "cuDeviceGetAttribute", 12000, false)           \
  X(cuDeviceGetCount, "cuDeviceGetCount", 12000, false)                   \
  X(cuDeviceGetUuid_v2, "cuDeviceGetUuid", 12000, false)                  \
  X(cuDeviceTotalMem_v2, "cuDeviceTotalMem", 12000, false)                \
  X(cuDevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain", 12000, false)   \
  X(cuCtxSetCurrent, "cuCtxSetCurrent", 12000, false)                     \
  X(cuMemGetInfo_v2, "cuMemGetInfo", 12000, false)                        \
  X(cuMemAlloc_v2, "cuMemAlloc", 12000, false)                            \
  X(cuMemFree_v2, "cuMemFree", 12000, false)                              \
  X(cuMemAllocPitch_v2, "cuMemAllocPitch", 12000, false)                  \
  X(cuMemAllocManaged, "cuMemAllocManaged", 12000, false)                 \
  X(cuMemAllocAsync, "cuMemAllocAsync", 12000, true)                      \
  X(cuMemFreeAsync, "cuMemFreeAsync", 12000, true)                        \
  X(cuMemAllocFromPoolAsync, "cuMemAllocFromPoolAsync", 12000, true)      \
  X(cuDeviceGetDefaultMemPool, "cuDeviceGetDefaultMemPool", 12000, false) \
  X(cuMemCreate, "cuMemCreate", 12000, false)                             \
  X(cuMemRelease, "cuMemRelease", 12000, false)                           \
  X(cuArrayCreate_v2, "cuArrayCreate", 12000, false)                      \
  X(cuArray3DCreate_v2, "cuArray3DCreate", 12000, false)                  \
  X(cuArrayDestroy, "cuArrayDestroy", 12000, false)                       \
  X(cuMipmappedArrayCreate, "cuMipmappedArrayCreate", 12000, false)       \
  X(cuMipmappedArrayDestroy, "cuMipmappedArrayDestroy", 12000, false)     \
  X(cuModuleLoadData, "cuModuleLoadData", 12000, false)                   \
  X(cuModuleGetFunction, "cuModuleGetFunction", 12000, false)             \
  X(cuLaunchKernel, "cuLaunchKernel", 12000, true)                        \
  X(cuLaunchKernelEx, "cuLaunchKernelEx", 12000, true)                    \
  X(cuLaunchCooperativeKernel, "cuLaunchCooperativeKernel", 12000, true)  \
  X(cuStreamSynchronize, "cuStreamSynchronize", 12000, true)              \
  X(cuCtxSynchronize, "cuCtxSynchronize", 12000, false)                   \
  X(cuGraphCreate, "cuGraphCreate", 12000, false)                         \
  X(cuGraphAddKernelNode_v2, "cuGraphAddKernelNode", 12000, false)        \
  X(cuGraphInstantiateWithFlags, "cuGraphInstantiate", 12000, false)      \
  X(cuGraphLaunch, "cuGraphLaunch", 12000, true)                          \
  X(cuGraphExecDestroy, "cuGraphExecDestroy", 12000, false)               \
  X(cuGraphDestroy, "cuGraphDestroy", 12000, false)

struct Cuda {
#define PROBE_FIELD(name, base, ver, ptsz) decltype(&::name) name = nullptr;
  PROBE_CUDA(PROBE_FIELD)
#undef PROBE_FIELD
};

Cuda cu;
bool g_ptsz = false;

[[noreturn]] __attribute__((format(printf, 1, 2))) void Die(const char* fmt, ...) {
  fprintf(stderr, "vgpu_probe: ");
  va_list ap;
  va_start(ap, fmt);
  vfprintf(stderr, fmt, ap);
  va_end(ap);
  fprintf(stderr, "\n");
  exit(2);
}

void ResolveDlsym() {
  void* h = dlopen("libcuda.so.1", RTLD_NOW);
  if (h == nullptr) Die("cannot load libcuda.so.1: %s", dlerror());
  const char* suffix = g_ptsz ? "_ptsz" : "";
#define PROBE_DLSYM(name, base, ver, ptsz)                              \
  {                                                                     \
    std::string n = std::string(#name) + ((ptsz) ? suffix : "");        \
    cu.name = reinterpret_cast<decltype(cu.name)>(dlsym(h, n.c_str())); \
  }
  PROBE_CUDA(PROBE_DLSYM)
#undef PROBE_DLSYM
}

void ResolveGetProc() {
  void* h = dlopen("libcuda.so.1", RTLD_NOW);
  if (h == nullptr) Die("cannot load libcuda.so.1: %s", dlerror());
  auto gpa = reinterpret_cast<decltype(&::cuGetProcAddress_v2)>(dlsym(h, "cuGetProcAddress_v2"));
  if (gpa == nullptr) Die("libcuda.so.1 has no cuGetProcAddress_v2");
  const cuuint64_t flags =
      g_ptsz ? CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM : CU_GET_PROC_ADDRESS_DEFAULT;
#define PROBE_GPA(name, base, ver, ptsz)                  \
  {                                                       \
    void* p = nullptr;                                    \
    CUdriverProcAddressQueryResult st;                    \
    if (gpa(base, &p, ver, flags, &st) == CUDA_SUCCESS) { \
      cu.name = reinterpret_cast<decltype(cu.name)>(p);   \
    }                                                     \
  }
  PROBE_CUDA(PROBE_GPA)
#undef PROBE_GPA
}

#ifdef PROBE_LINKED
void ResolveLinked() {
#define PROBE_LINK(name, base, ver, ptsz) cu.name = &::name;
  PROBE_CUDA(PROBE_LINK)
#undef PROBE_LINK
}
#endif

void Check(CUresult rc, const char* what) {
  if (rc != CUDA_SUCCESS) {
    fprintf(stderr, "vgpu_probe: %s failed with CUresult %d\n", what, rc);
    exit(3);
  }
}

// Option parsing: --key value pairs after the command.
struct Args {
  std::vector<std::string> v;
  const char* Get(const char* key, const char* def = nullptr) const {
    for (size_t i = 0; i + 1 < v.size(); ++i) {
      if (v[i] == key) return v[i + 1].c_str();
    }
    return def;
  }
  bool Has(const char* key) const {
    for (const auto& s : v) {
      if (s == key) return true;
    }
    return false;
  }
  uint64_t Bytes(const char* key, const char* def) const {
    const char* s = Get(key, def);
    if (s == nullptr) Die("missing %s", key);
    uint64_t b = 0;
    if (const char* err = hami::ParseByteSize(s, &b)) Die("bad size: %s", err);
    return b;
  }
  long Num(const char* key, const char* def) const {
    const char* s = Get(key, def);
    if (s == nullptr) Die("missing %s", key);
    char* end = nullptr;
    long n = strtol(s, &end, 10);
    if (end == s || *end != '\0') Die("bad number for %s", key);
    return n;
  }
};

int g_device = 0;

void InitContext(int device) {
  Check(cu.cuInit(0), "cuInit");
  CUdevice dev;
  Check(cu.cuDeviceGet(&dev, device), "cuDeviceGet");
  CUcontext ctx;
  Check(cu.cuDevicePrimaryCtxRetain(&ctx, dev), "cuDevicePrimaryCtxRetain");
  Check(cu.cuCtxSetCurrent(ctx), "cuCtxSetCurrent");
}

// One allocation of a given kind, and how to undo it.
struct Allocation {
  std::string kind;
  uint64_t handle = 0;
};

CUresult AllocOne(const std::string& kind, uint64_t bytes, Allocation* out) {
  out->kind = kind;
  CUresult rc = CUDA_ERROR_INVALID_VALUE;
  if (kind == "data") {
    CUdeviceptr p = 0;
    rc = cu.cuMemAlloc_v2(&p, bytes);
    out->handle = p;
  } else if (kind == "pitch") {
    CUdeviceptr p = 0;
    size_t pitch = 0;
    rc = cu.cuMemAllocPitch_v2(&p, &pitch, bytes / 1024, 1024, 4);
    out->handle = p;
  } else if (kind == "managed") {
    CUdeviceptr p = 0;
    rc = cu.cuMemAllocManaged(&p, bytes, CU_MEM_ATTACH_GLOBAL);
    out->handle = p;
  } else if (kind == "async") {
    CUdeviceptr p = 0;
    rc = cu.cuMemAllocAsync(&p, bytes, nullptr);
    out->handle = p;
  } else if (kind == "pool") {
    CUmemoryPool pool = nullptr;
    rc = cu.cuDeviceGetDefaultMemPool(&pool, g_device);
    if (rc == CUDA_SUCCESS) {
      CUdeviceptr p = 0;
      rc = cu.cuMemAllocFromPoolAsync(&p, bytes, pool, nullptr);
      out->handle = p;
    }
  } else if (kind == "vmm") {
    CUmemAllocationProp prop{};
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = g_device;
    CUmemGenericAllocationHandle h = 0;
    rc = cu.cuMemCreate(&h, bytes, &prop, 0);
    out->handle = h;
  } else if (kind == "array") {
    CUDA_ARRAY_DESCRIPTOR d{};
    d.Width = bytes / 4 / 1024;
    d.Height = 1024;
    d.Format = CU_AD_FORMAT_FLOAT;
    d.NumChannels = 1;
    CUarray a = nullptr;
    rc = cu.cuArrayCreate_v2(&a, &d);
    out->handle = reinterpret_cast<uint64_t>(a);
  } else if (kind == "array3d") {
    CUDA_ARRAY3D_DESCRIPTOR d{};
    d.Width = bytes / 4 / 64 / 16;
    d.Height = 64;
    d.Depth = 16;
    d.Format = CU_AD_FORMAT_UNSIGNED_INT8;
    d.NumChannels = 4;
    CUarray a = nullptr;
    rc = cu.cuArray3DCreate_v2(&a, &d);
    out->handle = reinterpret_cast<uint64_t>(a);
  } else if (kind == "mipmap") {
    CUDA_ARRAY3D_DESCRIPTOR d{};
    d.Width = bytes / 4 / 1024;
    d.Height = 1024;
    d.Format = CU_AD_FORMAT_FLOAT;
    d.NumChannels = 1;
    CUmipmappedArray a = nullptr;
    rc = cu.cuMipmappedArrayCreate(&a, &d, 1);
    out->handle = reinterpret_cast<uint64_t>(a);
  } else {
    Die("unknown kind %s", kind.c_str());
  }
  return rc;
}

CUresult FreeOne(const Allocation& a) {
  if (a.kind == "vmm") return cu.cuMemRelease(a.handle);
  if (a.kind == "array" || a.kind == "array3d") {
    return cu.cuArrayDestroy(reinterpret_cast<CUarray>(a.handle));
  }
  if (a.kind == "mipmap") {
    return cu.cuMipmappedArrayDestroy(reinterpret_cast<CUmipmappedArray>(a.handle));
  }
  if (a.kind == "async" || a.kind == "pool") return cu.cuMemFreeAsync(a.handle, nullptr);
  return cu.cuMemFree_v2(a.handle);
}

void PrintMemInfo(const char* label) {
  size_t free_b = 0, total_b = 0;
  CUresult rc = cu.cuMemGetInfo_v2(&free_b, &total_b);
  printf("%s rc=%d free=%zu visible_total=%zu\n", label, rc, free_b, total_b);
}

int CmdInfo() {
  Check(cu.cuInit(0), "cuInit");
  int n = 0;
  Check(cu.cuDeviceGetCount(&n), "cuDeviceGetCount");
  for (int i = 0; i < n; ++i) {
    CUdevice dev;
    Check(cu.cuDeviceGet(&dev, i), "cuDeviceGet");
    CUuuid u;
    Check(cu.cuDeviceGetUuid_v2(&u, dev), "cuDeviceGetUuid");
    size_t total = 0;
    Check(cu.cuDeviceTotalMem_v2(&total, dev), "cuDeviceTotalMem");
    CUcontext ctx;
    Check(cu.cuDevicePrimaryCtxRetain(&ctx, dev), "cuDevicePrimaryCtxRetain");
    Check(cu.cuCtxSetCurrent(ctx), "cuCtxSetCurrent");
    size_t free_b = 0, vis_total = 0;
    Check(cu.cuMemGetInfo_v2(&free_b, &vis_total), "cuMemGetInfo");
    const auto* b = reinterpret_cast<const unsigned char*>(u.bytes);
    printf(
        "device=%d uuid=GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x "
        "total=%zu free=%zu visible_total=%zu\n",
        i, b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13],
        b[14], b[15], total, free_b, vis_total);
  }
  return 0;
}

void WaitForStdinClose() {
  char buf[64];
  while (read(0, buf, sizeof(buf)) > 0) {
  }
}

int CmdAlloc(const Args& a) {
  InitContext(g_device);
  std::string kind = a.Get("--kind", "data");
  uint64_t bytes = a.Bytes("--bytes", nullptr);
  long count = a.Num("--count", "1");
  std::vector<Allocation> held;
  int ok = 0, fail = 0;
  CUresult first_error = CUDA_SUCCESS;
  for (long i = 0; i < count; ++i) {
    Allocation al;
    CUresult rc = AllocOne(kind, bytes, &al);
    if (rc == CUDA_SUCCESS) {
      ++ok;
      held.push_back(al);
    } else {
      ++fail;
      if (first_error == CUDA_SUCCESS) first_error = rc;
    }
  }
  printf("kind=%s ok=%d fail=%d first_error=%d\n", kind.c_str(), ok, fail, first_error);
  PrintMemInfo("after_alloc");
  fflush(stdout);
  if (a.Has("--hold")) WaitForStdinClose();
  int free_errors = 0;
  for (const auto& al : held) free_errors += FreeOne(al) != CUDA_SUCCESS;
  printf("freed=%zu free_errors=%d\n", held.size(), free_errors);
  PrintMemInfo("after_free");
  return free_errors == 0 ? 0 : 1;
}

int CmdFill(const Args& a) {
  InitContext(g_device);
  std::string kind = a.Get("--kind", "data");
  uint64_t chunk = a.Bytes("--chunk", "256Mi");
  // --max bounds the fill (0: none). On a real GPU, managed memory can oversubscribe the card, so
  // a fill of it must stop even where no quota stops it.
  uint64_t max = a.Bytes("--max", "0");
  uint64_t total = 0;
  std::vector<Allocation> held;
  CUresult rc;
  for (;;) {
    Allocation al;
    rc = AllocOne(kind, chunk, &al);
    if (rc != CUDA_SUCCESS) break;
    held.push_back(al);
    total += chunk;
    if (held.size() > 100000 || (max != 0 && total >= max)) break;
  }
  printf("allocated=%llu chunks=%zu error=%d\n", static_cast<unsigned long long>(total),
         held.size(), rc);
  PrintMemInfo("full");
  fflush(stdout);
  if (a.Has("--hold")) WaitForStdinClose();
  for (const auto& al : held) FreeOne(al);
  return 0;
}

int64_t NowNs() {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

// Measures this process's SM utilisation through NVML's per-process samples while the probe
// runs: a thread polls every 50 ms from Start() to Stop() and averages the samples newer than
// the last one seen, each weighted by the time it covers. This reads both kinds of driver
// alike: the simulator's exact mode answers each poll with one sample covering the time since
// the last, a real driver (or the simulator's nvml_sample_ms mode) produces one sample per
// sampling period and answers NOT_FOUND in between.
// This process's PID as NVML reports it: the host's. Inside a PID namespace the simulated driver
// learns it from the host procfs handed down in HAMI_SIM_HOST_PROC_FD, and so does the probe.
int NvmlPid() {
  static const int pid = [] {
    const char* fd = getenv("HAMI_SIM_HOST_PROC_FD");
    char buf[32];
    ssize_t n = fd != nullptr ? readlinkat(atoi(fd), "self", buf, sizeof(buf) - 1) : -1;
    if (n <= 0) return static_cast<int>(getpid());
    buf[n] = '\0';
    return atoi(buf);
  }();
  return pid;
}

class UtilSampler {
 public:
  bool Start(int device, unsigned long long since_us) {
    void* h = dlopen("libnvidia-ml.so.1", RTLD_NOW);
    if (h == nullptr) return false;
    auto init = reinterpret_cast<decltype(&::nvmlInit_v2)>(dlsym(h, "nvmlInit_v2"));
    auto by_index = reinterpret_cast<decltype(&::nvmlDeviceGetHandleByIndex_v2)>(
        dlsym(h, "nvmlDeviceGetHandleByIndex_v2"));
    util_ = reinterpret_cast<decltype(&::nvmlDeviceGetProcessUtilization)>(
        dlsym(h, "nvmlDeviceGetProcessUtilization"));
    if (init == nullptr || by_index == nullptr || util_ == nullptr || init() != NVML_SUCCESS ||
        by_index(static_cast<unsigned>(device), &dev_) != NVML_SUCCESS) {
      return false;
    }
    last_us_ = since_us;
    thread_ = std::thread([this] {
      while (!stop_.load()) {
        usleep(50000);
        Poll();
      }
    });
    return true;
  }
  // Stops polling (after one last poll) and prints nothing; Average() and Min() are then valid.
  void Stop() {
    if (!thread_.joinable()) return;
    stop_.store(true);
    thread_.join();
    Poll();
  }
  double Average() const { return weight_ > 0 ? sum_ / weight_ : (thread_ok_ ? 0 : -1); }
  double Min() const { return samples_ > 0 ? min_ : -1; }
  int Samples() const { return samples_; }

 private:
  void Poll() {
    thread_ok_ = true;
    nvmlProcessUtilizationSample_t s[256];
    unsigned count = 256;
    if (util_(dev_, s, &count, last_us_) != NVML_SUCCESS) return;
    unsigned long long newest = last_us_;
    unsigned mine = 0;
    for (unsigned i = 0; i < count; ++i) {
      if (s[i].timeStamp > newest) newest = s[i].timeStamp;
      if (s[i].pid == static_cast<unsigned>(NvmlPid())) mine += s[i].smUtil;
    }
    if (newest <= last_us_) return;
    double w = static_cast<double>(newest - last_us_);
    sum_ += w * mine;
    weight_ += w;
    if (samples_ == 0 || mine < min_) min_ = mine;
    ++samples_;
    last_us_ = newest;
  }

  decltype(&::nvmlDeviceGetProcessUtilization) util_ = nullptr;
  nvmlDevice_t dev_ = nullptr;
  unsigned long long last_us_ = 0;
  std::thread thread_;
  std::atomic<bool> stop_{false};
  bool thread_ok_ = false;
  double sum_ = 0, weight_ = 0, min_ = 0;
  int samples_ = 0;
};

unsigned long long RealtimeUs() {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<unsigned long long>(ts.tv_sec) * 1000000ULL + ts.tv_nsec / 1000;
}

// The two kernels the probe launches. The simulated driver recognises its own module image;
// a real driver rejects that image, and then gets the same kernels as PTX (JIT-compiled for the
// device): hami_sim_spin keeps each block busy for param 0 nanoseconds of the GPU's global
// timer, hami_sim_noop returns at once. So `spin` and `launch-loop` run on a real GPU too.
CUmodule LoadKernels() {
  static const char kSimImage[] = "hami-sim-module";
  static const char kPtx[] =
      ".version 7.0\n"
      ".target sm_70\n"
      ".address_size 64\n"
      ".visible .entry hami_sim_spin(.param .u64 block_ns)\n"
      "{\n"
      "  .reg .pred %p<2>;\n"
      "  .reg .b64 %rd<5>;\n"
      "  ld.param.u64 %rd1, [block_ns];\n"
      "  mov.u64 %rd2, %globaltimer;\n"
      "  add.s64 %rd3, %rd2, %rd1;\n"
      "SPIN:\n"
      "  mov.u64 %rd4, %globaltimer;\n"
      "  setp.lt.u64 %p1, %rd4, %rd3;\n"
      "  @%p1 bra SPIN;\n"
      "  ret;\n"
      "}\n"
      ".visible .entry hami_sim_noop()\n"
      "{\n"
      "  ret;\n"
      "}\n";
  CUmodule mod = nullptr;
  if (cu.cuModuleLoadData(&mod, kSimImage) == CUDA_SUCCESS) return mod;
  Check(cu.cuModuleLoadData(&mod, kPtx), "cuModuleLoadData (PTX)");
  return mod;
}

int CmdSpin(const Args& a) {
  InitContext(g_device);
  unsigned blocks = static_cast<unsigned>(a.Num("--blocks", "108"));
  uint64_t block_ns = static_cast<uint64_t>(a.Num("--block-ns", "1000000"));
  int64_t duration_ns = a.Num("--duration-ms", "1000") * 1000000;
  int64_t warmup_ns = a.Num("--warmup-ms", "0") * 1000000;
  std::string mode = a.Get("--mode", "kernel");
  CUmodule mod = LoadKernels();
  CUfunction fn;
  Check(cu.cuModuleGetFunction(&fn, mod, "hami_sim_spin"), "cuModuleGetFunction");
  void* params[] = {&block_ns};
  CUgraphExec exec = nullptr;
  CUgraph graph = nullptr;
  if (mode == "graph") {
    Check(cu.cuGraphCreate(&graph, 0), "cuGraphCreate");
    CUDA_KERNEL_NODE_PARAMS_v2 p{};
    p.func = fn;
    p.gridDimX = blocks;
    p.gridDimY = p.gridDimZ = 1;
    p.blockDimX = 128;
    p.blockDimY = p.blockDimZ = 1;
    p.kernelParams = params;
    CUgraphNode node;
    Check(cu.cuGraphAddKernelNode_v2(&node, graph, nullptr, 0, &p), "cuGraphAddKernelNode");
    Check(cu.cuGraphInstantiateWithFlags(&exec, graph, 0), "cuGraphInstantiate");
  }
  auto launch = [&]() -> CUresult {
    if (mode == "kernel") {
      return cu.cuLaunchKernel(fn, blocks, 1, 1, 128, 1, 1, 0, nullptr, params, nullptr);
    }
    if (mode == "ex") {
      CUlaunchConfig c{};
      c.gridDimX = blocks;
      c.gridDimY = c.gridDimZ = 1;
      c.blockDimX = 128;
      c.blockDimY = c.blockDimZ = 1;
      return cu.cuLaunchKernelEx(&c, fn, params, nullptr);
    }
    if (mode == "coop") {
      return cu.cuLaunchCooperativeKernel(fn, blocks, 1, 1, 128, 1, 1, 0, nullptr, params);
    }
    return cu.cuGraphLaunch(exec, nullptr);
  };
  int64_t start = NowNs();
  int64_t measure_from = start + warmup_ns;
  UtilSampler sampler;
  bool measuring = false;
  long launches = 0;
  while (NowNs() - start < warmup_ns + duration_ns) {
    if (!measuring && NowNs() >= measure_from) {
      measuring = true;
      sampler.Start(g_device, RealtimeUs());
    }
    Check(launch(), "launch");
    ++launches;
  }
  // Measure the utilisation of the window before draining the queue.
  sampler.Stop();
  Check(cu.cuCtxSynchronize(), "cuCtxSynchronize");
  int64_t elapsed = NowNs() - start;
  printf("launches=%ld elapsed_ms=%.1f sm_util=%.1f sm_util_min=%.0f util_samples=%d\n", launches,
         elapsed / 1e6, sampler.Average(), sampler.Min(), sampler.Samples());
  if (exec != nullptr) {
    cu.cuGraphExecDestroy(exec);
    cu.cuGraphDestroy(graph);
  }
  return 0;
}

volatile sig_atomic_t g_stop = 0;

// The simulated kubelet's stand-in for a container image it cannot run: what a GPU job does
// under its quota, in the pod's log.
int CmdWorkload(const Args& a) {
  signal(SIGTERM, [](int) { g_stop = 1; });
  signal(SIGINT, [](int) { g_stop = 1; });
  double fraction = atof(a.Get("--mem-fraction", "0.5"));
  if (!(fraction >= 0 && fraction <= 1)) Die("--mem-fraction must be within [0, 1]");
  int64_t duration_ns = a.Num("--duration-ms", "0") * 1000000;
  InitContext(g_device);
  size_t free_b = 0, total_b = 0;
  Check(cu.cuMemGetInfo_v2(&free_b, &total_b), "cuMemGetInfo");
  uint64_t want =
      static_cast<uint64_t>(static_cast<double>(free_b) * fraction) & ~uint64_t{0xFFFFF};
  CUdeviceptr p = 0;
  CUresult rc = want > 0 ? cu.cuMemAlloc_v2(&p, want) : CUDA_SUCCESS;
  printf("workload: device %d memory total=%zuMiB free=%zuMiB allocated=%lluMiB rc=%d\n", g_device,
         total_b >> 20, free_b >> 20,
         static_cast<unsigned long long>(rc == CUDA_SUCCESS ? want >> 20 : 0), rc);
  const char* sm_limit = getenv("CUDA_DEVICE_SM_LIMIT");
  printf("workload: CUDA_DEVICE_SM_LIMIT=%s\n", sm_limit != nullptr ? sm_limit : "(unset)");
  fflush(stdout);
  CUmodule mod = LoadKernels();
  CUfunction fn;
  Check(cu.cuModuleGetFunction(&fn, mod, "hami_sim_spin"), "cuModuleGetFunction");
  // One block per SM: alone and unlimited, the workload keeps the whole GPU busy.
  int sms = 0;
  CUdevice dev;
  Check(cu.cuDeviceGet(&dev, g_device), "cuDeviceGet");
  if (cu.cuDeviceGetAttribute(&sms, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, dev) !=
          CUDA_SUCCESS ||
      sms <= 0) {
    sms = 16;
  }
  const unsigned blocks = static_cast<unsigned>(a.Num("--blocks", std::to_string(sms).c_str()));
  uint64_t block_ns = 2000000;
  void* params[] = {&block_ns};
  int64_t start = NowNs(), next_report = start + 1000000000;
  long launches = 0;
  while (!g_stop && (duration_ns == 0 || NowNs() - start < duration_ns)) {
    Check(cu.cuLaunchKernel(fn, blocks, 1, 1, 128, 1, 1, 0, nullptr, params, nullptr), "launch");
    ++launches;
    if (NowNs() >= next_report) {
      printf("workload: kernels=%ld\n", launches);
      fflush(stdout);
      next_report += 1000000000;
    }
  }
  cu.cuCtxSynchronize();
  if (p != 0) cu.cuMemFree_v2(p);
  printf("workload: stopped after %ld kernels\n", launches);
  return 0;
}

// Allocate+free pairs of one size, timed.
int CmdAllocLoop(const Args& a) {
  InitContext(g_device);
  long count = a.Num("--count", "100000");
  uint64_t bytes = a.Bytes("--bytes", "1Mi");
  int64_t start = NowNs();
  for (long i = 0; i < count; ++i) {
    CUdeviceptr p = 0;
    if (cu.cuMemAlloc_v2(&p, bytes) != CUDA_SUCCESS) Die("allocation %ld failed", i);
    cu.cuMemFree_v2(p);
  }
  int64_t elapsed = NowNs() - start;
  printf("pairs=%ld ns_per_pair=%.2f\n", count, static_cast<double>(elapsed) / count);
  return 0;
}

// Start-up latency: optionally waits on a shared barrier with its siblings, then times the
// first driver call (cuInit, which is where the enforcement library initialises).
int CmdStartup(const Args& a) {
  const char* path = a.Get("--sync");
  long n = a.Num("--procs", "1");
  if (path != nullptr) {
    FILE* f = fopen(path, "r+");
    if (f == nullptr) Die("cannot open %s", path);
    void* m = mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fileno(f), 0);
    if (m == MAP_FAILED) Die("cannot map %s", path);
    auto* counter = static_cast<std::atomic<long>*>(m);
    counter->fetch_add(1);
    while (counter->load() < n) usleep(50);
  }
  int64_t t0 = NowNs();
  Check(cu.cuInit(0), "cuInit");
  int64_t t1 = NowNs();
  CUdevice dev;
  Check(cu.cuDeviceGet(&dev, 0), "cuDeviceGet");
  CUcontext ctx;
  Check(cu.cuDevicePrimaryCtxRetain(&ctx, dev), "cuDevicePrimaryCtxRetain");
  Check(cu.cuCtxSetCurrent(ctx), "cuCtxSetCurrent");
  CUdeviceptr p = 0;
  Check(cu.cuMemAlloc_v2(&p, 1 << 20), "cuMemAlloc");
  int64_t t2 = NowNs();
  cu.cuMemFree_v2(p);
  printf("first_call_ns=%lld first_alloc_ns=%lld\n", static_cast<long long>(t1 - t0),
         static_cast<long long>(t2 - t0));
  return 0;
}

int CmdLaunchLoop(const Args& a) {
  InitContext(g_device);
  long count = a.Num("--count", "1000000");
  CUmodule mod = LoadKernels();
  CUfunction fn;
  Check(cu.cuModuleGetFunction(&fn, mod, "hami_sim_noop"), "cuModuleGetFunction");
  int64_t start = NowNs();
  for (long i = 0; i < count; ++i) {
    cu.cuLaunchKernel(fn, 1, 1, 1, 32, 1, 1, 0, nullptr, nullptr, nullptr);
  }
  int64_t elapsed = NowNs() - start;
  printf("launches=%ld ns_per_launch=%.2f\n", count, static_cast<double>(elapsed) / count);
  return 0;
}

// Two processes allocate `bytes` at the same instant, `rounds` times, synchronised through a
// shared file; the harness checks that exactly one wins each round.
int CmdRace(const Args& a) {
  InitContext(g_device);
  uint64_t bytes = a.Bytes("--bytes", nullptr);
  long rounds = a.Num("--rounds", "1000");
  long id = a.Num("--id", nullptr);
  const char* path = a.Get("--sync");
  if (path == nullptr) Die("missing --sync");
  FILE* f = fopen(path, "r+");
  if (f == nullptr) Die("cannot open %s", path);
  void* m = mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fileno(f), 0);
  if (m == MAP_FAILED) Die("cannot map %s", path);
  auto* shared = static_cast<std::atomic<long>*>(m);  // [0] barrier, [1] bad, [2..3] winners
  long bad = 0;
  auto barrier = [&](long target) {
    shared[0].fetch_add(1);
    while (shared[0].load() < target) {
    }
  };
  for (long round = 0; round < rounds; ++round) {
    barrier(2 * (3 * round + 1));
    CUdeviceptr p = 0;
    bool won = cu.cuMemAlloc_v2(&p, bytes) == CUDA_SUCCESS;
    if (won) shared[2 + round % 2].fetch_add(1);
    barrier(2 * (3 * round + 2));
    if (id == 0) {
      long winners = shared[2 + round % 2].exchange(0);
      if (winners != 1) ++bad;
    }
    if (won) cu.cuMemFree_v2(p);
    barrier(2 * (3 * round + 3));
  }
  if (id == 0) printf("rounds=%ld bad_rounds=%ld\n", rounds, bad);
  return 0;
}

int CmdCrashHold(const Args& a) {
  InitContext(g_device);
  uint64_t bytes = a.Bytes("--bytes", nullptr);
  CUdeviceptr p = 0;
  Check(cu.cuMemAlloc_v2(&p, bytes), "cuMemAlloc");
  printf("ready\n");
  fflush(stdout);
  for (;;) pause();
}

int CmdFork(const Args& a) {
  InitContext(g_device);
  uint64_t bytes = a.Bytes("--bytes", nullptr);
  CUdeviceptr p = 0;
  Check(cu.cuMemAlloc_v2(&p, bytes), "cuMemAlloc parent");
  PrintMemInfo("parent_after_alloc");
  fflush(stdout);
  pid_t child = fork();
  if (child == 0) {
    InitContext(g_device);
    CUdeviceptr q = 0;
    CUresult rc = cu.cuMemAlloc_v2(&q, bytes);
    printf("child_alloc rc=%d\n", rc);
    PrintMemInfo("child_after_alloc");
    fflush(stdout);
    if (rc == CUDA_SUCCESS) cu.cuMemFree_v2(q);
    PrintMemInfo("child_after_free");
    fflush(stdout);
    _exit(0);
  }
  int status = 0;
  waitpid(child, &status, 0);
  PrintMemInfo("parent_after_child");
  Check(cu.cuMemFree_v2(p), "cuMemFree parent");
  PrintMemInfo("parent_after_free");
  return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : 1;
}

int CmdNvmlMem() {
  void* h = dlopen("libnvidia-ml.so.1", RTLD_NOW);
  if (h == nullptr) Die("cannot load libnvidia-ml.so.1: %s", dlerror());
  auto init = reinterpret_cast<decltype(&::nvmlInit_v2)>(dlsym(h, "nvmlInit_v2"));
  auto count_fn =
      reinterpret_cast<decltype(&::nvmlDeviceGetCount_v2)>(dlsym(h, "nvmlDeviceGetCount_v2"));
  auto by_index = reinterpret_cast<decltype(&::nvmlDeviceGetHandleByIndex_v2)>(
      dlsym(h, "nvmlDeviceGetHandleByIndex_v2"));
  auto mem1 =
      reinterpret_cast<decltype(&::nvmlDeviceGetMemoryInfo)>(dlsym(h, "nvmlDeviceGetMemoryInfo"));
  auto mem2 = reinterpret_cast<decltype(&::nvmlDeviceGetMemoryInfo_v2)>(
      dlsym(h, "nvmlDeviceGetMemoryInfo_v2"));
  if (!init || !count_fn || !by_index || !mem1 || !mem2 || init() != NVML_SUCCESS) {
    Die("NVML unusable");
  }
  unsigned n = 0;
  count_fn(&n);
  for (unsigned i = 0; i < n; ++i) {
    nvmlDevice_t d;
    by_index(i, &d);
    nvmlMemory_t m1{};
    nvmlMemory_v2_t m2{};
    m2.version = nvmlMemory_v2;
    nvmlReturn_t r1 = mem1(d, &m1), r2 = mem2(d, &m2);
    printf(
        "nvml_device=%u rc1=%d total=%llu used=%llu free=%llu rc2=%d total2=%llu used2=%llu "
        "free2=%llu reserved2=%llu\n",
        i, r1, m1.total, m1.used, m1.free, r2, m2.total, m2.used, m2.free, m2.reserved);
  }
  return 0;
}

}  // namespace

constexpr const char kUsage[] =
    "usage: vgpu_probe [--resolve dlsym|getproc] [--ptsz] COMMAND [options]\n"
    "commands (every one also takes --device D):\n"
    "  info                                  per device: total, cuMemGetInfo free/total\n"
    "  alloc --bytes B [--kind K] [--count N] [--hold]\n"
    "  fill [--kind K] [--chunk B] [--max B] [--hold]   allocate until failure (or --max)\n"
    "  spin --blocks N --block-ns X --duration-ms T [--mode kernel|ex|coop|graph] "
    "[--warmup-ms W]\n"
    "  race --bytes B --rounds N --sync FILE --id 0|1\n"
    "  crash-hold --bytes B                  allocate, print \"ready\", wait to be killed\n"
    "  fork --bytes B                        allocate in parent and in a forked child\n"
    "  nvml-mem                              NVML memory info v1 and v2 per device\n"
    "  launch-loop --count N                 N zero-time launches, timed\n"
    "  alloc-loop --count N --bytes B        N allocate+free pairs, timed\n"
    "  startup [--sync FILE --procs N]       time the first driver call (after a barrier)\n"
    "  workload [--mem-fraction F] [--duration-ms T] [--blocks N]   a stand-in GPU job\n"
    "kinds: data pitch managed async pool vmm array array3d mipmap\n";

// The options each command reads: anything else is refused (a mistyped option silently ignored
// would measure something other than what was asked). Flags take no value.
struct CommandOptions {
  const char* command;
  std::vector<std::string> valued, flags;
};
const std::vector<CommandOptions>& KnownCommands() {
  static const std::vector<CommandOptions> k = {
      {"info", {}, {}},
      {"alloc", {"--bytes", "--kind", "--count"}, {"--hold"}},
      {"fill", {"--kind", "--chunk", "--max"}, {"--hold"}},
      {"spin", {"--blocks", "--block-ns", "--duration-ms", "--mode", "--warmup-ms"}, {}},
      {"race", {"--bytes", "--rounds", "--sync", "--id"}, {}},
      {"crash-hold", {"--bytes"}, {}},
      {"fork", {"--bytes"}, {}},
      {"nvml-mem", {}, {}},
      {"launch-loop", {"--count"}, {}},
      {"alloc-loop", {"--count", "--bytes"}, {}},
      {"startup", {"--sync", "--procs"}, {}},
      {"workload", {"--mem-fraction", "--duration-ms", "--blocks"}, {}},
  };
  return k;
}

void CheckOptions(const std::string& cmd, const Args& args) {
  const CommandOptions* known = nullptr;
  for (const CommandOptions& c : KnownCommands()) {
    if (cmd == c.command) known = &c;
  }
  if (known == nullptr) {
    fprintf(stderr, "vgpu_probe: unknown command %s\n%s", cmd.c_str(), kUsage);
    exit(2);
  }
  auto in = [](const std::vector<std::string>& list, const std::string& s) {
    for (const std::string& x : list) {
      if (x == s) return true;
    }
    return false;
  };
  for (size_t i = 0; i < args.v.size(); ++i) {
    const std::string& a = args.v[i];
    if (a == "--device" || in(known->valued, a)) {
      if (i + 1 >= args.v.size()) Die("%s %s needs a value", cmd.c_str(), a.c_str());
      ++i;
    } else if (!in(known->flags, a)) {
      fprintf(stderr, "vgpu_probe: %s does not take %s\n%s", cmd.c_str(), a.c_str(), kUsage);
      exit(2);
    }
  }
}

int main(int argc, char** argv) {
  std::string resolve = "dlsym";
  int i = 1;
  for (; i < argc && strncmp(argv[i], "-", 1) == 0; ++i) {
    if (strcmp(argv[i], "--resolve") == 0 && i + 1 < argc) {
      resolve = argv[++i];
    } else if (strcmp(argv[i], "--ptsz") == 0) {
      g_ptsz = true;
    } else if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
      fputs(kUsage, stdout);
      return 0;
    } else {
      fprintf(stderr, "vgpu_probe: unknown global option %s\n%s", argv[i], kUsage);
      return 2;
    }
  }
  if (i >= argc) {
    fputs(kUsage, stderr);
    return 2;
  }
  std::string cmd = argv[i++];
  if (cmd == "help") {
    fputs(kUsage, stdout);
    return 0;
  }
  Args args;
  for (; i < argc; ++i) args.v.push_back(argv[i]);
  CheckOptions(cmd, args);
  if (const char* d = args.Get("--device")) g_device = atoi(d);
  if (cmd == "nvml-mem") return CmdNvmlMem();
#ifdef PROBE_LINKED
  if (resolve == "link") {
    ResolveLinked();
  } else
#endif
      if (resolve == "getproc") {
    ResolveGetProc();
  } else if (resolve == "dlsym") {
    ResolveDlsym();
  } else {
    Die("unknown resolution mode %s", resolve.c_str());
  }
  if (cmd == "info") return CmdInfo();
  if (cmd == "alloc") return CmdAlloc(args);
  if (cmd == "fill") return CmdFill(args);
  if (cmd == "spin") return CmdSpin(args);
  if (cmd == "race") return CmdRace(args);
  if (cmd == "crash-hold") return CmdCrashHold(args);
  if (cmd == "fork") return CmdFork(args);
  if (cmd == "launch-loop") return CmdLaunchLoop(args);
  if (cmd == "alloc-loop") return CmdAllocLoop(args);
  if (cmd == "startup") return CmdStartup(args);
  if (cmd == "workload") return CmdWorkload(args);
  Die("unknown command %s", cmd.c_str());
}
