// Integration tests of the simulated GPU driver: every scenario runs in worker processes (this
// binary re-executed with --worker NAME) that dlopen the simulated libcuda.so.1 and
// libnvidia-ml.so.1, each test with its own HAMI_SIM_STATE. Processes synchronise through
// pipes and waitpid, never sleeps.

#include <dlfcn.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "common/subprocess.h"
#include "sim_test_support.h"

namespace hami::simtest {
namespace {

constexpr uint64_t kGiB = 1ull << 30;
constexpr uint64_t kMs = 1000000;

uint64_t NowNs(clockid_t clock) {
  timespec ts;
  clock_gettime(clock, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
}

// ----------------------------------------------------------------------------- workers

#define W_CHECK(cond)                                                           \
  do {                                                                          \
    if (!(cond)) {                                                              \
      fprintf(stderr, "worker check failed at line %d: %s\n", __LINE__, #cond); \
      return 1;                                                                 \
    }                                                                           \
  } while (0)
#define CU(call) W_CHECK((call) == CUDA_SUCCESS)
#define NV(call) W_CHECK((call) == NVML_SUCCESS)

std::string UuidString(const CUuuid& u) {
  const auto* b = reinterpret_cast<const unsigned char*>(u.bytes);
  char s[64];
  snprintf(s, sizeof(s), "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x",
           b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13],
           b[14], b[15]);
  return s;
}

int SetUp(Cuda& cu, int ordinal) {
  W_CHECK(cu.Load());
  CU(cu.cuInit(0));
  CUdevice dev;
  CU(cu.cuDeviceGet(&dev, ordinal));
  CUcontext ctx;
  CU(cu.cuDevicePrimaryCtxRetain(&ctx, dev));
  CU(cu.cuCtxSetCurrent(ctx));
  return 0;
}

CUfunction Function(Cuda& cu, const char* name) {
  static const char kImage[] = "any image";
  CUmodule mod = nullptr;
  CUfunction f = nullptr;
  if (cu.cuModuleLoadData(&mod, kImage) != CUDA_SUCCESS) return nullptr;
  if (cu.cuModuleGetFunction(&f, mod, name) != CUDA_SUCCESS) return nullptr;
  return f;
}

void Ready() {
  printf("ready\n");
  fflush(stdout);
}

void WaitForParent() {
  char buf[64];
  while (read(0, buf, sizeof(buf)) > 0) {
  }
}

// hold GIB [ORDINAL]: allocate, say ready, hold until stdin closes.
int WorkerHold(int argc, char** argv) {
  Cuda cu;
  int ordinal = argc > 1 ? atoi(argv[1]) : 0;
  if (SetUp(cu, ordinal) != 0) return 1;
  CUdeviceptr p;
  CU(cu.cuMemAlloc_v2(&p, strtoull(argv[0], nullptr, 10) * kGiB));
  Ready();
  WaitForParent();
  CU(cu.cuMemFree_v2(p));
  return 0;
}

// meminfo: CUDA and NVML views of device 0's memory.
int WorkerMeminfo(int, char**) {
  Cuda cu;
  Nvml nv;
  if (SetUp(cu, 0) != 0) return 1;
  W_CHECK(nv.Load());
  size_t free = 0, total = 0;
  CU(cu.cuMemGetInfo_v2(&free, &total));
  NV(nv.nvmlInit_v2());
  nvmlDevice_t d;
  NV(nv.nvmlDeviceGetHandleByIndex_v2(0, &d));
  nvmlMemory_t m;
  NV(nv.nvmlDeviceGetMemoryInfo(d, &m));
  nvmlMemory_v2_t m2{};
  m2.version = nvmlMemory_v2;
  NV(nv.nvmlDeviceGetMemoryInfo_v2(d, &m2));
  W_CHECK(m2.used == m.used);
  unsigned n = 0;
  W_CHECK(nv.nvmlDeviceGetComputeRunningProcesses_v3(d, &n, nullptr) ==
          NVML_ERROR_INSUFFICIENT_SIZE);
  std::vector<nvmlProcessInfo_t> infos(n);
  NV(nv.nvmlDeviceGetComputeRunningProcesses_v3(d, &n, infos.data()));
  std::vector<nvmlProcessInfo_v1_t> v1(n + 1);
  unsigned n1 = n + 1;
  NV(nv.nvmlDeviceGetComputeRunningProcesses(d, &n1, v1.data()));
  W_CHECK(n1 == n);
  printf("cuda_free=%zu\ncuda_total=%zu\nnvml_used=%llu\nnvml_free=%llu\n", free, total, m.used,
         m.free);
  std::string procs;
  for (unsigned i = 0; i < n; ++i) {
    W_CHECK(v1[i].pid == infos[i].pid && v1[i].usedGpuMemory == infos[i].usedGpuMemory);
    procs +=
        std::to_string(infos[i].pid) + ":" + std::to_string(infos[i].usedGpuMemory / kGiB) + ",";
  }
  printf("procs=%s\nself=%d\n", procs.c_str(), static_cast<int>(getpid()));
  return 0;
}

// oom: the device's physical size is the limit.
int WorkerOom(int, char**) {
  Cuda cu;
  if (SetUp(cu, 0) != 0) return 1;
  CUdeviceptr a, b, c;
  CU(cu.cuMemAlloc_v2(&a, 70 * kGiB));
  printf("second=%d\n", cu.cuMemAlloc_v2(&b, 20 * kGiB));
  CU(cu.cuMemAlloc_v2(&c, 10 * kGiB));  // exactly fills the device
  CUdeviceptr d;
  printf("one_more_byte=%d\n", cu.cuMemAlloc_v2(&d, 1));
  size_t free, total;
  CU(cu.cuMemGetInfo_v2(&free, &total));
  printf("free=%zu\n", free);
  return 0;
}

// alloc GIB: one allocation attempt.
int WorkerAlloc(int, char** argv) {
  Cuda cu;
  if (SetUp(cu, 0) != 0) return 1;
  CUdeviceptr p;
  printf("rc=%d\n", cu.cuMemAlloc_v2(&p, strtoull(argv[0], nullptr, 10) * kGiB));
  return 0;
}

// util: 54 blocks x 1 ms back-to-back for 300 ms on a 108-SM device.
int WorkerUtil(int, char**) {
  Cuda cu;
  Nvml nv;
  if (SetUp(cu, 0) != 0) return 1;
  W_CHECK(nv.Load());
  NV(nv.nvmlInit_v2());
  nvmlDevice_t d;
  NV(nv.nvmlDeviceGetHandleByIndex_v2(0, &d));
  CUfunction spin = Function(cu, "hami_sim_spin");
  W_CHECK(spin != nullptr);
  uint64_t busy = kMs;
  void* params[] = {&busy};
  const unsigned long long last_seen_us = NowNs(CLOCK_REALTIME) / 1000;
  const uint64_t start = NowNs(CLOCK_MONOTONIC);
  for (int i = 0; i < 300; ++i) {
    CU(cu.cuLaunchKernel(spin, 54, 1, 1, 128, 1, 1, 0, nullptr, params, nullptr));
  }
  CU(cu.cuCtxSynchronize());
  const uint64_t elapsed = NowNs(CLOCK_MONOTONIC) - start;
  unsigned n = 0;
  W_CHECK(nv.nvmlDeviceGetProcessUtilization(d, nullptr, &n, last_seen_us) ==
          NVML_ERROR_INSUFFICIENT_SIZE);
  std::vector<nvmlProcessUtilizationSample_t> s(n);
  NV(nv.nvmlDeviceGetProcessUtilization(d, s.data(), &n, last_seen_us));
  W_CHECK(n == 1 && s[0].pid == static_cast<unsigned>(getpid()));
  nvmlUtilization_t u;
  NV(nv.nvmlDeviceGetUtilizationRates(d, &u));
  // The same window after the work: nothing new.
  unsigned long long after_us = NowNs(CLOCK_REALTIME) / 1000;
  printf("smutil=%u\ngpu=%u\nelapsed_ms=%llu\n", s[0].smUtil, u.gpu,
         static_cast<unsigned long long>(elapsed / kMs));
  std::vector<nvmlProcessUtilizationSample_t> s2(4);
  unsigned n2 = 4;
  nvmlReturn_t rc = nv.nvmlDeviceGetProcessUtilization(d, s2.data(), &n2, after_us);
  printf("later=%u\n", rc == NVML_SUCCESS && n2 > 0 ? s2[0].smUtil : 0);
  return 0;
}

// contend: full-device kernels, started when the parent says so.
int WorkerContend(int, char**) {
  Cuda cu;
  Nvml nv;
  if (SetUp(cu, 0) != 0) return 1;
  W_CHECK(nv.Load());
  NV(nv.nvmlInit_v2());
  nvmlDevice_t d;
  NV(nv.nvmlDeviceGetHandleByIndex_v2(0, &d));
  CUfunction spin = Function(cu, "hami_sim_spin");
  W_CHECK(spin != nullptr);
  Ready();
  std::string go;
  W_CHECK(ReadLine(0, &go) && go == "go");
  uint64_t busy = kMs;
  void* params[] = {&busy};
  const unsigned long long last_seen_us = NowNs(CLOCK_REALTIME) / 1000;
  const uint64_t start = NowNs(CLOCK_MONOTONIC);
  for (int i = 0; i < 400; ++i) {
    CU(cu.cuLaunchKernel(spin, 108, 1, 1, 256, 1, 1, 0, nullptr, params, nullptr));
  }
  CU(cu.cuCtxSynchronize());
  const uint64_t elapsed = NowNs(CLOCK_MONOTONIC) - start;
  std::vector<nvmlProcessUtilizationSample_t> s(8);
  unsigned n = 8;
  NV(nv.nvmlDeviceGetProcessUtilization(d, s.data(), &n, last_seen_us));
  for (unsigned i = 0; i < n; ++i) {
    if (s[i].pid == static_cast<unsigned>(getpid())) printf("smutil=%u\n", s[i].smUtil);
  }
  printf("elapsed_ms=%llu\nstart_us=%llu\nend_us=%llu\n",
         static_cast<unsigned long long>(elapsed / kMs),
         static_cast<unsigned long long>(start / 1000),
         static_cast<unsigned long long>((start + elapsed) / 1000));
  return 0;
}

// visible: what CUDA and NVML each see.
int WorkerVisible(int, char**) {
  Cuda cu;
  Nvml nv;
  W_CHECK(cu.Load() && nv.Load());
  int rc = cu.cuInit(0);
  printf("cuinit=%d\n", rc);
  int count = 0;
  if (rc == CUDA_SUCCESS) CU(cu.cuDeviceGetCount(&count));
  printf("cuda_count=%d\n", count);
  for (int i = 0; i < count; ++i) {
    CUuuid u;
    CU(cu.cuDeviceGetUuid(&u, i));
    printf("cuda_uuid_%d=%s\n", i, UuidString(u).c_str());
  }
  NV(nv.nvmlInit_v2());
  unsigned n = 0;
  NV(nv.nvmlDeviceGetCount_v2(&n));
  printf("nvml_count=%u\n", n);
  for (unsigned i = 0; i < n; ++i) {
    nvmlDevice_t d;
    NV(nv.nvmlDeviceGetHandleByIndex_v2(i, &d));
    char uuid[NVML_DEVICE_UUID_BUFFER_SIZE];
    NV(nv.nvmlDeviceGetUUID(d, uuid, sizeof(uuid)));
    unsigned minor = 0;
    NV(nv.nvmlDeviceGetMinorNumber(d, &minor));
    printf("nvml_uuid_%u=%s\nnvml_minor_%u=%u\n", i, uuid, i, minor);
  }
  return 0;
}

// graph: kernel nodes run in order on the stream and take their simulated time.
int WorkerGraph(int, char**) {
  Cuda cu;
  if (SetUp(cu, 0) != 0) return 1;
  CUfunction spin = Function(cu, "hami_sim_spin");
  CUfunction other = Function(cu, "vector_add");
  W_CHECK(spin != nullptr && other != nullptr);
  CUgraph g;
  CU(cu.cuGraphCreate(&g, 0));
  uint64_t busy = 20 * kMs;
  void* params[] = {&busy};
  CUDA_KERNEL_NODE_PARAMS_v2 p{};
  p.func = spin;
  p.gridDimX = 108;
  p.gridDimY = p.gridDimZ = 1;
  p.blockDimX = 256;
  p.blockDimY = p.blockDimZ = 1;
  p.kernelParams = params;
  CUgraphNode n1, n2, n3;
  CU(cu.cuGraphAddKernelNode_v2(&n1, g, nullptr, 0, &p));
  CU(cu.cuGraphAddKernelNode_v2(&n2, g, &n1, 1, &p));
  busy = 999 * kMs;  // values are captured at node creation
  CUDA_KERNEL_NODE_PARAMS_v1 p1{};
  p1.func = other;
  p1.gridDimX = p1.gridDimY = p1.gridDimZ = 1;
  p1.blockDimX = p1.blockDimY = p1.blockDimZ = 1;
  CU(cu.cuGraphAddKernelNode(&n3, g, &n2, 1, &p1));
  size_t count = 0;
  CU(cu.cuGraphGetNodes(g, nullptr, &count));
  W_CHECK(count == 3);
  CUgraphNodeType type = -1;
  CU(cu.cuGraphNodeGetType(n2, &type));
  W_CHECK(type == CU_GRAPH_NODE_TYPE_KERNEL);
  CUDA_KERNEL_NODE_PARAMS_v2 got{};
  CU(cu.cuGraphKernelNodeGetParams_v2(n1, &got));
  W_CHECK(got.func == spin && got.gridDimX == 108);
  W_CHECK(*static_cast<uint64_t*>(got.kernelParams[0]) == 20 * kMs);
  CUgraphExec e1, e2, e3;
  CU(cu.cuGraphInstantiateWithFlags(&e1, g, 0));
  CU(cu.cuGraphInstantiate(&e2, g, nullptr, nullptr, 0));
  CU(cu.cuGraphInstantiate_v2(&e3, g, nullptr, nullptr, 0));
  CUstream s;
  CU(cu.cuStreamCreate(&s, 0));
  CUevent before, after;
  CU(cu.cuEventCreate(&before, 0));
  CU(cu.cuEventCreate(&after, 0));
  // 300 ms of full-device work ahead of the graph: the query below sees the stream busy even if
  // this process is descheduled for a while after launching.
  uint64_t block = 300 * kMs;
  void* block_params[] = {&block};
  CU(cu.cuLaunchKernel(spin, 108, 1, 1, 256, 1, 1, 0, s, block_params, nullptr));
  CU(cu.cuEventRecord(before, s));
  CU(cu.cuGraphLaunch(e1, s));
  CU(cu.cuEventRecord(after, s));
  printf("query_during=%d\n", cu.cuStreamQuery(s));
  CU(cu.cuEventSynchronize(after));
  float ms = 0;
  CU(cu.cuEventElapsedTime(&ms, before, after));
  printf("query_after=%d\nelapsed_ms=%.3f\n", cu.cuStreamQuery(s), ms);
  CU(cu.cuGraphExecDestroy(e1));
  CU(cu.cuGraphExecDestroy(e2));
  CU(cu.cuGraphExecDestroy(e3));
  CU(cu.cuGraphDestroy(g));
  CU(cu.cuEventDestroy_v2(before));
  CU(cu.cuEventDestroy_v2(after));
  CU(cu.cuStreamDestroy_v2(s));
  return 0;
}

// launch: queue semantics, back-pressure, cooperative limits and the zero-time fast path.
int WorkerLaunch(int, char**) {
  Cuda cu;
  if (SetUp(cu, 0) != 0) return 1;
  CUfunction spin = Function(cu, "hami_sim_spin");
  CUfunction other = Function(cu, "saxpy");
  W_CHECK(spin != nullptr && other != nullptr);
  CUstream s;
  CU(cu.cuStreamCreate(&s, 0));
  // Zero-time kernels complete at once.
  for (int i = 0; i < 10000; ++i) {
    CU(cu.cuLaunchKernel(other, 1024, 1, 1, 256, 1, 1, 0, s, nullptr, nullptr));
  }
  printf("fast_query=%d\n", cu.cuStreamQuery(s));
  // 400 x 1 ms of full-device work: launches may run at most ~200 ms ahead.
  uint64_t busy = kMs;
  void* params[] = {&busy};
  const uint64_t start = NowNs(CLOCK_MONOTONIC);
  for (int i = 0; i < 400; ++i) {
    CU(cu.cuLaunchKernel(spin, 108, 1, 1, 64, 1, 1, 0, s, params, nullptr));
  }
  const uint64_t launched = NowNs(CLOCK_MONOTONIC) - start;
  printf("busy_query=%d\n", cu.cuStreamQuery(s));
  CU(cu.cuStreamSynchronize(s));
  const uint64_t done = NowNs(CLOCK_MONOTONIC) - start;
  printf("launch_ms=%llu\ndone_ms=%llu\nidle_query=%d\n",
         static_cast<unsigned long long>(launched / kMs),
         static_cast<unsigned long long>(done / kMs), cu.cuStreamQuery(s));
  printf("coop_ok=%d\ncoop_big=%d\n",
         cu.cuLaunchCooperativeKernel(spin, 108, 1, 1, 32, 1, 1, 0, s, params),
         cu.cuLaunchCooperativeKernel(spin, 109, 1, 1, 32, 1, 1, 0, s, params));
  printf("bad_block=%d\n", cu.cuLaunchKernel(other, 1, 1, 1, 2048, 1, 1, 0, s, nullptr, nullptr));
  printf("spin_no_params=%d\n", cu.cuLaunchKernel(spin, 1, 1, 1, 1, 1, 1, 0, s, nullptr, nullptr));
  int sms = 0, cc = 0, threads = 0;
  CU(cu.cuDeviceGetAttribute(&sms, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, 0));
  CU(cu.cuDeviceGetAttribute(&cc, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, 0));
  CU(cu.cuDeviceGetAttribute(&threads, CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR, 0));
  printf("sms=%d\ncc_major=%d\nthreads_per_sm=%d\n", sms, cc, threads);
  CU(cu.cuStreamSynchronize(s));
  CU(cu.cuStreamDestroy_v2(s));
  return 0;
}

// families: every allocation family charges (and releases) device memory.
int WorkerFamilies(int, char**) {
  Cuda cu;
  if (SetUp(cu, 0) != 0) return 1;
  auto used = [&cu] {
    size_t free = 0, total = 0;
    cu.cuMemGetInfo_v2(&free, &total);
    return static_cast<uint64_t>(total - free);
  };
  W_CHECK(used() == 0);
  // Pitch: rows padded to 512 bytes.
  CUdeviceptr p;
  size_t pitch = 0;
  CU(cu.cuMemAllocPitch_v2(&p, &pitch, 1000, 10, 4));
  W_CHECK(pitch == 1024 && used() == 10240);
  CU(cu.cuMemFree_v2(p));
  // Managed memory is device memory; host memory is not.
  CU(cu.cuMemAllocManaged(&p, 3 * kGiB, CU_MEM_ATTACH_GLOBAL));
  unsigned managed = 0;
  CU(cu.cuPointerGetAttribute(&managed, CU_POINTER_ATTRIBUTE_IS_MANAGED, p + 100));
  W_CHECK(managed == 1 && used() == 3 * kGiB);
  CUdeviceptr base;
  size_t size;
  CU(cu.cuMemGetAddressRange_v2(&base, &size, p + 12345));
  W_CHECK(base == p && size == 3 * kGiB);
  CU(cu.cuMemFree_v2(p));
  void* host;
  CU(cu.cuMemAllocHost_v2(&host, kGiB));
  W_CHECK(used() == 0);
  CU(cu.cuMemFreeHost(host));
  // Copies and memsets really move bytes.
  CU(cu.cuMemAlloc_v2(&p, 4096));
  CU(cu.cuMemsetD32_v2(p, 0xdeadbeef, 1024));
  uint32_t words[4] = {};
  CU(cu.cuMemcpyDtoH_v2(words, p + 16, sizeof(words)));
  W_CHECK(words[0] == 0xdeadbeef && words[3] == 0xdeadbeef);
  const char msg[] = "hello";
  CU(cu.cuMemcpyHtoD_v2(p, msg, sizeof(msg)));
  char back[sizeof(msg)];
  CU(cu.cuMemcpyDtoH_v2(back, p, sizeof(msg)));
  W_CHECK(strcmp(back, "hello") == 0);
  CU(cu.cuMemFree_v2(p));
  // Stream-ordered pool: memory stays reserved until a synchronisation trims the pool.
  CUmemoryPool pool;
  CU(cu.cuDeviceGetDefaultMemPool(&pool, 0));
  CU(cu.cuMemAllocAsync(&p, kGiB, nullptr));
  cuuint64_t reserved = 0, used_pool = 0, high = 0;
  CU(cu.cuMemPoolGetAttribute(pool, CU_MEMPOOL_ATTR_USED_MEM_CURRENT, &used_pool));
  W_CHECK(used_pool == kGiB && used() == kGiB);
  CU(cu.cuMemFreeAsync(p, nullptr));
  CU(cu.cuMemPoolGetAttribute(pool, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT, &reserved));
  CU(cu.cuMemPoolGetAttribute(pool, CU_MEMPOOL_ATTR_USED_MEM_CURRENT, &used_pool));
  W_CHECK(reserved == kGiB && used_pool == 0 && used() == kGiB);
  CU(cu.cuMemAllocAsync(&p, kGiB / 2, nullptr));  // reuses the free block
  W_CHECK(used() == kGiB);
  CU(cu.cuMemFreeAsync(p, nullptr));
  CU(cu.cuCtxSynchronize());
  CU(cu.cuMemPoolGetAttribute(pool, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT, &reserved));
  CU(cu.cuMemPoolGetAttribute(pool, CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH, &high));
  W_CHECK(reserved == 0 && high == kGiB && used() == 0);
  cuuint64_t zero = 0;
  CU(cu.cuMemPoolSetAttribute(pool, CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH, &zero));
  CU(cu.cuMemPoolGetAttribute(pool, CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH, &high));
  W_CHECK(high == 0);
  // VMM: physical memory is charged at create, freed when released and unmapped.
  CUmemAllocationProp prop{};
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = 0;
  size_t gran = 0;
  CU(cu.cuMemGetAllocationGranularity(&gran, &prop, 0));
  W_CHECK(gran == (2u << 20));
  CUmemGenericAllocationHandle h;
  W_CHECK(cu.cuMemCreate(&h, gran + 1, &prop, 0) == CUDA_ERROR_INVALID_VALUE);
  CU(cu.cuMemCreate(&h, 4 * gran, &prop, 0));
  W_CHECK(used() == 4 * gran);
  CUdeviceptr va;
  CU(cu.cuMemAddressReserve(&va, 4 * gran, 0, 0, 0));
  CU(cu.cuMemMap(va, 4 * gran, 0, h, 0));
  CUmemAccessDesc access{};
  access.location = prop.location;
  access.flags = 3;  // read/write
  CU(cu.cuMemSetAccess(va, 4 * gran, &access, 1));
  CU(cu.cuMemsetD32_v2(va + gran, 7, 16));
  CU(cu.cuMemRelease(h));
  W_CHECK(used() == 4 * gran);  // still mapped
  CU(cu.cuMemUnmap(va, 4 * gran));
  W_CHECK(used() == 0);
  CU(cu.cuMemAddressFree(va, 4 * gran));
  // Arrays: width * height * depth * channels * element size; mipmaps sum their levels.
  CUDA_ARRAY3D_DESCRIPTOR desc{};
  desc.Width = 1024;
  desc.Height = 512;
  desc.Depth = 2;
  desc.Format = CU_AD_FORMAT_FLOAT;
  desc.NumChannels = 4;
  CUarray arr;
  CU(cu.cuArray3DCreate_v2(&arr, &desc));
  W_CHECK(used() == 1024ull * 512 * 2 * 4 * 4);
  CU(cu.cuArrayDestroy(arr));
  desc.Depth = 0;
  CUmipmappedArray mip;
  CU(cu.cuMipmappedArrayCreate(&mip, &desc, 2));
  W_CHECK(used() == 1024ull * 512 * 16 + 512ull * 256 * 16);
  CU(cu.cuMipmappedArrayDestroy(mip));
  W_CHECK(used() == 0);
  printf("ok=1\n");
  return 0;
}

// xid: wait on an NVML event set for an XID on NVML device 1.
int WorkerXid(int, char**) {
  Nvml nv;
  W_CHECK(nv.Load());
  NV(nv.nvmlInit_v2());
  nvmlDevice_t d;
  NV(nv.nvmlDeviceGetHandleByIndex_v2(1, &d));
  nvmlEventSet_t set;
  NV(nv.nvmlEventSetCreate(&set));
  NV(nv.nvmlDeviceRegisterEvents(d, nvmlEventTypeXidCriticalError, set));
  nvmlEventData_t data{};
  printf("first_wait=%d\n", nv.nvmlEventSetWait_v2(set, &data, 20));
  Ready();
  nvmlReturn_t rc = nv.nvmlEventSetWait_v2(set, &data, 20000);
  printf("rc=%d\ntype=%llu\nxid=%llu\nsame_device=%d\n", rc, data.eventType, data.eventData,
         data.device == d ? 1 : 0);
  NV(nv.nvmlEventSetFree(set));
  NV(nv.nvmlShutdown());
  return 0;
}

// init: result codes of cuInit and nvmlInit.
int WorkerInit(int, char**) {
  Cuda cu;
  Nvml nv;
  W_CHECK(cu.Load() && nv.Load());
  printf("cuinit=%d\nnvmlinit=%d\n", cu.cuInit(0), nv.nvmlInit_v2());
  printf("cuinit_again=%d\n", cu.cuInit(0));
  return 0;
}

// ----------------------------------------------------------------------------- MIG workers

// Prints key=value for an NVML call's return code.
#define NV_PRINT(key, call) printf("%s=%d\n", key, static_cast<int>(call))

int NvmlDevice(Nvml& nv, int index, nvmlDevice_t* d) {
  W_CHECK(nv.Load());
  NV(nv.nvmlInit_v2());
  NV(nv.nvmlDeviceGetHandleByIndex_v2(static_cast<unsigned>(index), d));
  return 0;
}

// mig-mode DEV MODE: SetMigMode and the modes after it.
int WorkerMigMode(int, char** argv) {
  Nvml nv;
  nvmlDevice_t d;
  if (NvmlDevice(nv, atoi(argv[0]), &d) != 0) return 1;
  nvmlReturn_t activation = NVML_ERROR_UNKNOWN;
  NV_PRINT("set", nv.nvmlDeviceSetMigMode(d, static_cast<unsigned>(atoi(argv[1])), &activation));
  printf("activation=%d\n", activation);
  unsigned cur = 9, pending = 9;
  NV_PRINT("get", nv.nvmlDeviceGetMigMode(d, &cur, &pending));
  printf("current=%u\npending=%u\n", cur, pending);
  return 0;
}

// mig-create DEV: enables MIG, creates a 3g GI at {4,4} with one full CI and reads it all back.
int WorkerMigCreate(int, char** argv) {
  Nvml nv;
  nvmlDevice_t d;
  if (NvmlDevice(nv, atoi(argv[0]), &d) != 0) return 1;
  nvmlReturn_t activation;
  NV(nv.nvmlDeviceSetMigMode(d, NVML_DEVICE_MIG_ENABLE, &activation));
  W_CHECK(activation == NVML_SUCCESS);
  nvmlGpuInstanceProfileInfo_t info{};
  NV(nv.nvmlDeviceGetGpuInstanceProfileInfo(d, NVML_GPU_INSTANCE_PROFILE_3_SLICE, &info));
  nvmlGpuInstanceProfileInfo_v2_t info2{};
  info2.version = nvmlGpuInstanceProfileInfo_v2;
  NV(nv.nvmlDeviceGetGpuInstanceProfileInfoV(d, NVML_GPU_INSTANCE_PROFILE_3_SLICE, &info2));
  printf("profile_id=%u\nprofile_mib=%llu\nprofile_sms=%u\nprofile_name=%s\n", info.id,
         info.memorySizeMB, info.multiprocessorCount, info2.name);
  NV_PRINT("profile_6slice", nv.nvmlDeviceGetGpuInstanceProfileInfo(
                                 d, NVML_GPU_INSTANCE_PROFILE_6_SLICE, &info));
  NV_PRINT("profile_past_count", nv.nvmlDeviceGetGpuInstanceProfileInfo(
                                     d, NVML_GPU_INSTANCE_PROFILE_COUNT, &info));
  unsigned n = 0;
  NV(nv.nvmlDeviceGetGpuInstancePossiblePlacements_v2(d, info2.id, nullptr, &n));
  std::vector<nvmlGpuInstancePlacement_t> pl(n);
  NV(nv.nvmlDeviceGetGpuInstancePossiblePlacements_v2(d, info2.id, pl.data(), &n));
  std::string starts;
  for (const auto& p : pl) starts += std::to_string(p.start) + ":" + std::to_string(p.size) + ",";
  printf("placements=%s\n", starts.c_str());
  nvmlGpuInstance_t gi;
  nvmlGpuInstancePlacement_t bad{2, 4};
  NV_PRINT("create_bad_placement",
           nv.nvmlDeviceCreateGpuInstanceWithPlacement(d, info2.id, &bad, &gi));
  nvmlGpuInstancePlacement_t at{4, 4};
  NV(nv.nvmlDeviceCreateGpuInstanceWithPlacement(d, info2.id, &at, &gi));
  nvmlGpuInstance_t other;
  nvmlGpuInstancePlacement_t inside{4, 2};
  NV_PRINT("create_overlap", nv.nvmlDeviceCreateGpuInstanceWithPlacement(d, 14, &inside, &other));
  unsigned left = 0;
  NV(nv.nvmlDeviceGetGpuInstanceRemainingCapacity(d, info2.id, &left));
  printf("remaining=%u\n", left);
  nvmlGpuInstanceInfo_t gii{};
  NV(nv.nvmlGpuInstanceGetInfo(gi, &gii));
  printf("gi_id=%u\ngi_profile=%u\ngi_placement=%u:%u\ngi_parent_ok=%d\n", gii.id, gii.profileId,
         gii.placement.start, gii.placement.size, gii.device == d ? 1 : 0);
  nvmlComputeInstanceProfileInfo_v2_t cpi{};
  cpi.version = nvmlComputeInstanceProfileInfo_v2;
  NV(nv.nvmlGpuInstanceGetComputeInstanceProfileInfoV(gi, NVML_COMPUTE_INSTANCE_PROFILE_3_SLICE,
                                                      NVML_COMPUTE_INSTANCE_ENGINE_PROFILE_SHARED,
                                                      &cpi));
  printf("ci_profile_name=%s\n", cpi.name);
  nvmlComputeInstance_t ci;
  NV(nv.nvmlGpuInstanceCreateComputeInstance(gi, cpi.id, &ci));
  nvmlComputeInstanceInfo_t cii{};
  NV(nv.nvmlComputeInstanceGetInfo_v2(ci, &cii));
  printf("ci_id=%u\nci_gi_ok=%d\n", cii.id, cii.gpuInstance == gi ? 1 : 0);
  unsigned max = 0;
  NV(nv.nvmlDeviceGetMaxMigDeviceCount(d, &max));
  printf("max_mig=%u\n", max);
  nvmlDevice_t mig, none;
  NV(nv.nvmlDeviceGetMigDeviceHandleByIndex(d, 0, &mig));
  NV_PRINT("mig_index_1", nv.nvmlDeviceGetMigDeviceHandleByIndex(d, 1, &none));
  char uuid[NVML_DEVICE_UUID_V2_BUFFER_SIZE];
  NV(nv.nvmlDeviceGetUUID(mig, uuid, sizeof(uuid)));
  char name[NVML_DEVICE_NAME_V2_BUFFER_SIZE];
  NV(nv.nvmlDeviceGetName(mig, name, sizeof(name)));
  unsigned is_mig = 9, is_mig_gpu = 9, gid = 99, cid = 99;
  NV(nv.nvmlDeviceIsMigDeviceHandle(mig, &is_mig));
  NV(nv.nvmlDeviceIsMigDeviceHandle(d, &is_mig_gpu));
  NV(nv.nvmlDeviceGetGpuInstanceId(mig, &gid));
  NV(nv.nvmlDeviceGetComputeInstanceId(mig, &cid));
  nvmlDevice_t parent;
  NV(nv.nvmlDeviceGetDeviceHandleFromMigDeviceHandle(mig, &parent));
  nvmlDeviceAttributes_t attr{};
  NV(nv.nvmlDeviceGetAttributes_v2(mig, &attr));
  nvmlMemory_t mem{};
  NV(nv.nvmlDeviceGetMemoryInfo(mig, &mem));
  nvmlDevice_t by_uuid;
  NV(nv.nvmlDeviceGetHandleByUUID(uuid, &by_uuid));
  printf("uuid=%s\nname=%s\nis_mig=%u\nis_mig_gpu=%u\nmig_gi=%u\nmig_ci=%u\nparent_ok=%d\n", uuid,
         name, is_mig, is_mig_gpu, gid, cid, parent == d ? 1 : 0);
  printf("attr_sms=%u\nattr_gi_slices=%u\nattr_mib=%llu\nmem_total_mib=%llu\nby_uuid_ok=%d\n",
         attr.multiprocessorCount, attr.gpuInstanceSliceCount, attr.memorySizeMB,
         mem.total >> 20, by_uuid == mig ? 1 : 0);
  return 0;
}

// mig-list DEV: what another process sees of the GPU's instances (3g profile).
int WorkerMigList(int, char** argv) {
  Nvml nv;
  nvmlDevice_t d;
  if (NvmlDevice(nv, atoi(argv[0]), &d) != 0) return 1;
  unsigned cur = 9, pending = 9;
  NV(nv.nvmlDeviceGetMigMode(d, &cur, &pending));
  printf("current=%u\n", cur);
  nvmlGpuInstance_t gis[2];
  unsigned n = 2;
  nvmlReturn_t listed = nv.nvmlDeviceGetGpuInstances(d, 9, gis, &n);
  printf("list=%d\n", listed);
  if (listed != NVML_SUCCESS) n = 0;
  printf("gis=%u\n", n);
  for (unsigned i = 0; i < n; ++i) {
    nvmlGpuInstanceInfo_t info{};
    NV(nv.nvmlGpuInstanceGetInfo(gis[i], &info));
    nvmlComputeInstance_t cis[2];
    unsigned m = 2;
    NV(nv.nvmlGpuInstanceGetComputeInstances(gis[i], NVML_COMPUTE_INSTANCE_PROFILE_3_SLICE, cis,
                                             &m));
    printf("gi_%u=%u:%u cis=%u\n", i, info.id, info.placement.start, m);
  }
  nvmlDevice_t mig;
  nvmlReturn_t rc = nv.nvmlDeviceGetMigDeviceHandleByIndex(d, 0, &mig);
  printf("mig_index_0=%d\n", rc);
  if (rc == NVML_SUCCESS) {
    char uuid[NVML_DEVICE_UUID_V2_BUFFER_SIZE];
    NV(nv.nvmlDeviceGetUUID(mig, uuid, sizeof(uuid)));
    unsigned procs = 0;
    NV_PRINT("procs_rc", nv.nvmlDeviceGetComputeRunningProcesses_v3(mig, &procs, nullptr));
    printf("uuid=%s\nmig_procs=%u\n", uuid, procs);
  }
  return 0;
}

// mig-destroy DEV: tears down GI 2 (CI first), printing each step's result.
int WorkerMigDestroy(int, char** argv) {
  Nvml nv;
  nvmlDevice_t d;
  if (NvmlDevice(nv, atoi(argv[0]), &d) != 0) return 1;
  nvmlGpuInstance_t gi;
  NV_PRINT("gi_by_id", nv.nvmlDeviceGetGpuInstanceById(d, 2, &gi));
  NV_PRINT("gi_with_ci", nv.nvmlGpuInstanceDestroy(gi));
  nvmlComputeInstance_t ci;
  NV(nv.nvmlGpuInstanceGetComputeInstanceById(gi, 0, &ci));
  nvmlReturn_t rc = nv.nvmlComputeInstanceDestroy(ci);
  printf("ci=%d\n", rc);
  if (rc != NVML_SUCCESS) return 0;
  NV_PRINT("ci_again", nv.nvmlComputeInstanceDestroy(ci));
  NV_PRINT("gi", nv.nvmlGpuInstanceDestroy(gi));
  NV_PRINT("gi_by_id_after", nv.nvmlDeviceGetGpuInstanceById(d, 2, &gi));
  nvmlDevice_t mig;
  NV_PRINT("mig_index_0", nv.nvmlDeviceGetMigDeviceHandleByIndex(d, 0, &mig));
  return 0;
}

// idle: says ready and waits for stdin to close (a process to attach to a MIG device).
int WorkerIdle(int, char**) {
  Ready();
  WaitForParent();
  return 0;
}

// mig-api: the rest of the MIG surface in one process on device 1 (checks, then ok=1).
int WorkerMigApi(int, char**) {
  Nvml nv;
  nvmlDevice_t d;
  if (NvmlDevice(nv, 1, &d) != 0) return 1;
  nvmlGpuInstance_t gi, gi2;
  // MIG off: placements are listed, nothing can be created or listed.
  unsigned n = 0;
  NV(nv.nvmlDeviceGetGpuInstancePossiblePlacements_v2(d, 19, nullptr, &n));
  W_CHECK(n == 7);
  W_CHECK(nv.nvmlDeviceCreateGpuInstance(d, 19, &gi) == NVML_ERROR_NOT_SUPPORTED);
  W_CHECK(nv.nvmlDeviceGetGpuInstanceRemainingCapacity(d, 19, &n) == NVML_ERROR_NOT_SUPPORTED);
  unsigned max = 9;
  NV(nv.nvmlDeviceGetMaxMigDeviceCount(d, &max));
  W_CHECK(max == 0);
  nvmlReturn_t activation;
  NV(nv.nvmlDeviceSetMigMode(d, NVML_DEVICE_MIG_ENABLE, &activation));
  W_CHECK(activation == NVML_SUCCESS);
  W_CHECK(nv.nvmlDeviceSetMigMode(d, 7, &activation) == NVML_ERROR_INVALID_ARGUMENT);
  // Profile info: v3 layout, and a version the sim does not know.
  nvmlGpuInstanceProfileInfo_v3_t v3{};
  v3.version = nvmlGpuInstanceProfileInfo_v3;
  NV(nv.nvmlDeviceGetGpuInstanceProfileInfoV(
      d, NVML_GPU_INSTANCE_PROFILE_1_SLICE_REV2,
      reinterpret_cast<nvmlGpuInstanceProfileInfo_v2_t*>(&v3)));
  W_CHECK(v3.id == 15 && v3.memorySizeMB == 19968 && v3.instanceCount == 4);
  W_CHECK(strcmp(v3.name, "MIG 1g.20gb") == 0);
  nvmlGpuInstanceProfileInfo_v2_t bad{};
  bad.version = 1;
  W_CHECK(nv.nvmlDeviceGetGpuInstanceProfileInfoV(d, 0, &bad) ==
          NVML_ERROR_ARGUMENT_VERSION_MISMATCH);
  // Placements: a small buffer gets the count back.
  nvmlGpuInstancePlacement_t pl[2];
  n = 2;
  W_CHECK(nv.nvmlDeviceGetGpuInstancePossiblePlacements_v2(d, 19, pl, &n) ==
          NVML_ERROR_INSUFFICIENT_SIZE);
  W_CHECK(n == 7);
  // Two 1g instances placed by the driver; the list buffer's capacity is *count.
  NV(nv.nvmlDeviceCreateGpuInstance(d, 19, &gi));
  NV(nv.nvmlDeviceCreateGpuInstance(d, 19, &gi2));
  nvmlGpuInstance_t list[7];
  n = 1;
  W_CHECK(nv.nvmlDeviceGetGpuInstances(d, 19, list, &n) == NVML_ERROR_INSUFFICIENT_SIZE);
  W_CHECK(n == 2);
  W_CHECK(nv.nvmlDeviceGetGpuInstances(d, 19, nullptr, &n) == NVML_ERROR_INVALID_ARGUMENT);
  n = 7;
  NV(nv.nvmlDeviceGetGpuInstances(d, 19, list, &n));
  W_CHECK(n == 2);
  NV(nv.nvmlDeviceGetGpuInstanceRemainingCapacity(d, 19, &n));
  W_CHECK(n == 5);
  W_CHECK(nv.nvmlDeviceGetGpuInstanceById(d, 3, &gi2) == NVML_ERROR_NOT_FOUND);
  // A 7g GI cannot fit any more; destroy the 1g ones and make one.
  W_CHECK(nv.nvmlDeviceCreateGpuInstance(d, 0, &gi2) == NVML_ERROR_INSUFFICIENT_RESOURCES);
  NV(nv.nvmlGpuInstanceDestroy(list[0]));
  NV(nv.nvmlGpuInstanceDestroy(list[1]));
  nvmlGpuInstanceInfo_t info;
  W_CHECK(nv.nvmlGpuInstanceGetInfo(list[0], &info) == NVML_ERROR_NOT_FOUND);  // stale handle
  NV(nv.nvmlDeviceCreateGpuInstance(d, 0, &gi));
  // Compute instances inside it: placements, capacity, placement create.
  nvmlComputeInstanceProfileInfo_t cpi{};
  NV(nv.nvmlGpuInstanceGetComputeInstanceProfileInfo(gi, NVML_COMPUTE_INSTANCE_PROFILE_2_SLICE,
                                                     NVML_COMPUTE_INSTANCE_ENGINE_PROFILE_SHARED,
                                                     &cpi));
  W_CHECK(cpi.sliceCount == 2 && cpi.multiprocessorCount == 28 && cpi.instanceCount == 3);
  W_CHECK(nv.nvmlGpuInstanceGetComputeInstanceProfileInfo(gi, 0, 1, &cpi) ==
          NVML_ERROR_INVALID_ARGUMENT);
  W_CHECK(nv.nvmlGpuInstanceGetComputeInstanceProfileInfo(
              gi, NVML_COMPUTE_INSTANCE_PROFILE_6_SLICE, 0, &cpi) == NVML_ERROR_NOT_SUPPORTED);
  nvmlComputeInstancePlacement_t cpl[3];
  n = 3;
  NV(nv.nvmlGpuInstanceGetComputeInstancePossiblePlacements(gi, cpi.id, cpl, &n));
  W_CHECK(n == 3 && cpl[2].start == 4 && cpl[2].size == 2);
  nvmlComputeInstance_t ci, ci2;
  NV(nv.nvmlGpuInstanceCreateComputeInstanceWithPlacement(gi, cpi.id, &cpl[2], &ci));
  NV(nv.nvmlGpuInstanceCreateComputeInstance(gi, NVML_COMPUTE_INSTANCE_PROFILE_1_SLICE, &ci2));
  nvmlComputeInstanceInfo_t cii{};
  NV(nv.nvmlComputeInstanceGetInfo_v2(ci2, &cii));
  W_CHECK(cii.id == 1 && cii.placement.start == 0 && cii.placement.size == 1);
  NV(nv.nvmlGpuInstanceGetComputeInstanceRemainingCapacity(gi, cpi.id, &n));
  W_CHECK(n == 1);  // {2,2} is still free
  // Two MIG devices, ordered by (GI, CI); a stale MIG handle is NOT_FOUND.
  nvmlDevice_t m0, m1;
  NV(nv.nvmlDeviceGetMigDeviceHandleByIndex(d, 0, &m0));
  NV(nv.nvmlDeviceGetMigDeviceHandleByIndex(d, 1, &m1));
  unsigned id0 = 9, id1 = 9;
  NV(nv.nvmlDeviceGetComputeInstanceId(m0, &id0));
  NV(nv.nvmlDeviceGetComputeInstanceId(m1, &id1));
  W_CHECK(id0 == 0 && id1 == 1);
  nvmlMemory_v2_t mem{};
  mem.version = nvmlMemory_v2;
  NV(nv.nvmlDeviceGetMemoryInfo_v2(m0, &mem));
  W_CHECK(mem.total == 80384ull << 20 && mem.used == 0);
  W_CHECK(nv.nvmlDeviceGetGpuInstanceId(d, &id0) == NVML_ERROR_NOT_SUPPORTED);
  nvmlDeviceAttributes_t attr;
  W_CHECK(nv.nvmlDeviceGetAttributes_v2(d, &attr) == NVML_ERROR_NOT_SUPPORTED);
  NV(nv.nvmlDeviceGetAttributes_v2(m1, &attr));
  W_CHECK(attr.multiprocessorCount == 14 && attr.computeInstanceSliceCount == 1 &&
          attr.gpuInstanceSliceCount == 7);
  char uuid[NVML_DEVICE_UUID_V2_BUFFER_SIZE];
  NV(nv.nvmlComputeInstanceDestroy(ci));
  W_CHECK(nv.nvmlDeviceGetUUID(m0, uuid, sizeof(uuid)) == NVML_ERROR_NOT_FOUND);
  W_CHECK(nv.nvmlDeviceGetHandleByUUID("MIG-00000000-0000-0000-0000-000000000000", &m0) ==
          NVML_ERROR_NOT_FOUND);
  printf("ok=1\n");
  return 0;
}

int RunWorker(int argc, char** argv) {
  struct {
    const char* name;
    int (*fn)(int, char**);
  } workers[] = {
      {"hold", WorkerHold},         {"meminfo", WorkerMeminfo}, {"oom", WorkerOom},
      {"alloc", WorkerAlloc},       {"util", WorkerUtil},       {"contend", WorkerContend},
      {"visible", WorkerVisible},   {"graph", WorkerGraph},     {"launch", WorkerLaunch},
      {"families", WorkerFamilies}, {"xid", WorkerXid},         {"init", WorkerInit},
      {"mig-mode", WorkerMigMode},  {"mig-create", WorkerMigCreate},
      {"mig-list", WorkerMigList},  {"mig-destroy", WorkerMigDestroy},
      {"mig-api", WorkerMigApi},    {"idle", WorkerIdle},
  };
  for (const auto& w : workers) {
    if (strcmp(argv[0], w.name) == 0) {
      int rc = w.fn(argc - 1, argv + 1);
      fflush(stdout);
      return rc;
    }
  }
  fprintf(stderr, "unknown worker %s\n", argv[0]);
  return 2;
}

// ----------------------------------------------------------------------------- tests

std::string SelfPath() {
  char buf[4096];
  ssize_t n = readlink("/proc/self/exe", buf, sizeof(buf) - 1);
  return n > 0 ? std::string(buf, static_cast<size_t>(n)) : std::string();
}

class SimTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/hami-sim-it-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    env_ = {{"HAMI_SIM_STATE", dir_ + "/state"},
            {"HAMI_SIM_CONFIG", "\x01"},
            {"CUDA_VISIBLE_DEVICES", "\x01"},
            {"NVIDIA_VISIBLE_DEVICES", "\x01"}};
  }
  void TearDown() override {
    std::string cmd = "rm -rf '" + dir_ + "'";
    ASSERT_EQ(system(cmd.c_str()), 0);
  }

  Child Start(const std::string& worker, const std::vector<std::string>& args = {},
              const Env& extra = {}) {
    std::vector<std::string> argv = {SelfPath(), "--worker", worker};
    argv.insert(argv.end(), args.begin(), args.end());
    Env env = env_;
    env.insert(env.end(), extra.begin(), extra.end());
    return Spawn(argv, env);
  }

  // Runs a worker to completion; returns its key=value output (and "exit" = status).
  std::map<std::string, std::string> Run(const std::string& worker,
                                         const std::vector<std::string>& args = {},
                                         const Env& extra = {}, std::string* err = nullptr) {
    Child c = Start(worker, args, extra);
    std::string out;
    int status = Finish(&c, &out, err);
    auto kv = KeyValueLines(out);
    kv["exit"] = std::to_string(status);
    return kv;
  }

  // Reads the child's stdout up to its "ready" line; earlier lines go to *before.
  void WaitReady(Child* c, std::string* before = nullptr) {
    std::string line;
    while (ReadLine(c->out_fd, &line) && line != "ready") {
      if (before != nullptr) *before += line + "\n";
    }
    ASSERT_EQ(line, "ready");
  }

  int Simctl(const std::vector<std::string>& args, std::string* out) {
    std::vector<std::string> argv = {HAMI_SIMCTL_PATH};
    argv.insert(argv.end(), args.begin(), args.end());
    Child c = Spawn(argv, env_);
    return Finish(&c, out);
  }

  std::string dir_;
  Env env_;
};

TEST_F(SimTest, MemoryAccountingAcrossTwoProcesses) {
  Child a = Start("hold", {"10"});
  WaitReady(&a);
  Child b = Start("hold", {"5"});
  WaitReady(&b);
  auto kv = Run("meminfo");
  ASSERT_EQ(kv["exit"], "0");
  EXPECT_EQ(kv["cuda_total"], std::to_string(80 * kGiB));
  EXPECT_EQ(kv["cuda_free"], std::to_string(65 * kGiB));
  EXPECT_EQ(kv["nvml_used"], std::to_string(15 * kGiB));
  const std::string& procs = kv["procs"];
  EXPECT_NE(procs.find(std::to_string(a.pid) + ":10,"), std::string::npos) << procs;
  EXPECT_NE(procs.find(std::to_string(b.pid) + ":5,"), std::string::npos) << procs;
  EXPECT_NE(procs.find(kv["self"] + ":0,"), std::string::npos) << procs;  // context, no memory
  std::string status;
  ASSERT_EQ(Simctl({"status"}, &status), 0);
  EXPECT_NE(status.find(std::to_string(a.pid)), std::string::npos) << status;
  EXPECT_NE(status.find("15360 MiB / 81920 MiB"), std::string::npos) << status;
  EXPECT_EQ(Finish(&a), 0);
  EXPECT_EQ(Finish(&b), 0);
  kv = Run("meminfo");
  EXPECT_EQ(kv["nvml_used"], "0");
}

TEST_F(SimTest, PhysicalOutOfMemory) {
  auto kv = Run("oom");
  ASSERT_EQ(kv["exit"], "0");
  EXPECT_EQ(kv["second"], std::to_string(CUDA_ERROR_OUT_OF_MEMORY));
  EXPECT_EQ(kv["one_more_byte"], std::to_string(CUDA_ERROR_OUT_OF_MEMORY));
  EXPECT_EQ(kv["free"], "0");
}

TEST_F(SimTest, DeadProcessMemoryIsReclaimed) {
  Child a = Start("hold", {"60"});
  WaitReady(&a);
  EXPECT_EQ(Run("alloc", {"30"})["rc"], std::to_string(CUDA_ERROR_OUT_OF_MEMORY));
  kill(a.pid, SIGKILL);
  EXPECT_EQ(Finish(&a), 128 + SIGKILL);
  EXPECT_EQ(Run("alloc", {"30"})["rc"], "0");
  EXPECT_EQ(Run("meminfo")["nvml_used"], "0");
}

// The timing tests below assert only what the simulated timeline guarantees however loaded the
// machine is: work takes at least its booked time, utilisation never exceeds the share of SMs
// the work occupied. How closely the simulator tracks real time (utilisation exactly 50 %, the
// two contending processes finishing together in 800 ms, a 40 ms graph measured as 40 ms) is
// measured by `vgpu_bench --only sim --check` (bench/RESULTS.md): on a busy test machine a worker
// may be descheduled for any length of time.
TEST_F(SimTest, UtilisationOfAKnownSpinWorkload) {
  auto kv = Run("util");
  ASSERT_EQ(kv["exit"], "0");
  // 54 of 108 SMs busy back-to-back for 300 ms: at most 50 %, over a window at least that long.
  EXPECT_GE(std::stoi(kv["elapsed_ms"]), 300);
  EXPECT_GT(std::stoi(kv["smutil"]), 0);
  EXPECT_LE(std::stoi(kv["smutil"]), 50) << "elapsed " << kv["elapsed_ms"] << " ms";
  // Device view over the last second: at most 300 ms at 50 %.
  EXPECT_LE(std::stoi(kv["gpu"]), 15);
  EXPECT_EQ(kv["later"], "0");
}

TEST_F(SimTest, TwoProcessesContendForTheSms) {
  Child a = Start("contend");
  Child b = Start("contend");
  WaitReady(&a);
  WaitReady(&b);
  ASSERT_EQ(write(a.in_fd, "go\n", 3), 3);
  ASSERT_EQ(write(b.in_fd, "go\n", 3), 3);
  std::string out_a, out_b;
  ASSERT_EQ(Finish(&a, &out_a), 0);
  ASSERT_EQ(Finish(&b, &out_b), 0);
  auto ka = KeyValueLines(out_a), kb = KeyValueLines(out_b);
  // Each process has 400 ms of full-device work on SMs they share: together they need at least
  // 800 ms, whatever the skew between them.
  const long long sa = std::stoll(ka["start_us"]), ea = std::stoll(ka["end_us"]);
  const long long sb = std::stoll(kb["start_us"]), eb = std::stoll(kb["end_us"]);
  EXPECT_GE((std::max(ea, eb) - std::min(sa, sb)) / 1000, 795);
  // Each one's NVML share is its busy time (400 ms of the whole device) over a window that
  // contains its own elapsed time, so it is at most 400 / elapsed.
  for (const auto* kv : {&ka, &kb}) {
    const double elapsed = std::stod(kv->at("elapsed_ms"));
    EXPECT_GE(elapsed, 400);
    EXPECT_GT(std::stoi(kv->at("smutil")), 0);
    EXPECT_LE(std::stoi(kv->at("smutil")), 100.0 * 400.0 / elapsed + 1.0) << elapsed << " ms";
  }
}

TEST_F(SimTest, CudaVisibleDevicesByIndex) {
  auto all = Run("visible");
  ASSERT_EQ(all["exit"], "0");
  ASSERT_EQ(all["cuda_count"], "2");
  EXPECT_NE(all["cuda_uuid_0"], all["cuda_uuid_1"]);
  EXPECT_EQ(all["cuda_uuid_1"], all["nvml_uuid_1"]);
  auto one = Run("visible", {}, {{"CUDA_VISIBLE_DEVICES", "1"}});
  EXPECT_EQ(one["cuda_count"], "1");
  EXPECT_EQ(one["cuda_uuid_0"], all["nvml_uuid_1"]);
  EXPECT_EQ(one["nvml_count"], "2");  // NVML ignores CUDA_VISIBLE_DEVICES
  auto swapped = Run("visible", {}, {{"CUDA_VISIBLE_DEVICES", "1,0"}});
  EXPECT_EQ(swapped["cuda_uuid_0"], all["nvml_uuid_1"]);
  EXPECT_EQ(swapped["cuda_uuid_1"], all["nvml_uuid_0"]);
  auto none = Run("visible", {}, {{"CUDA_VISIBLE_DEVICES", "-1"}});
  EXPECT_EQ(none["cuinit"], std::to_string(CUDA_ERROR_NO_DEVICE));
}

TEST_F(SimTest, CudaVisibleDevicesByUuid) {
  auto all = Run("visible");
  const std::string uuid1 = all["nvml_uuid_1"];
  auto full = Run("visible", {}, {{"CUDA_VISIBLE_DEVICES", uuid1}});
  EXPECT_EQ(full["cuda_count"], "1");
  EXPECT_EQ(full["cuda_uuid_0"], uuid1);
  auto prefix = Run("visible", {}, {{"CUDA_VISIBLE_DEVICES", uuid1.substr(0, 12)}});
  EXPECT_EQ(prefix["cuda_count"], "1");
  EXPECT_EQ(prefix["cuda_uuid_0"], uuid1);
}

TEST_F(SimTest, NvidiaVisibleDevicesRestrictsBoth) {
  auto all = Run("visible");
  auto one = Run("visible", {}, {{"NVIDIA_VISIBLE_DEVICES", all["nvml_uuid_1"]}});
  EXPECT_EQ(one["nvml_count"], "1");
  EXPECT_EQ(one["nvml_uuid_0"], all["nvml_uuid_1"]);
  EXPECT_EQ(one["nvml_minor_0"], "1");
  EXPECT_EQ(one["cuda_count"], "1");
  EXPECT_EQ(one["cuda_uuid_0"], all["nvml_uuid_1"]);
  // CUDA ordinals are relative to what the container sees.
  auto nested =
      Run("visible", {}, {{"NVIDIA_VISIBLE_DEVICES", "1"}, {"CUDA_VISIBLE_DEVICES", "0"}});
  EXPECT_EQ(nested["cuda_uuid_0"], all["nvml_uuid_1"]);
}

TEST_F(SimTest, GetProcAddressResolvesVersionsAndPerThreadVariants) {
  // Resolution needs no cuInit and no state, so it runs in this process.
  void* lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  ASSERT_NE(lib, nullptr) << dlerror();
  auto get = reinterpret_cast<decltype(&::cuGetProcAddress_v2)>(dlsym(lib, "cuGetProcAddress_v2"));
  auto get_v1 = reinterpret_cast<decltype(&::cuGetProcAddress)>(dlsym(lib, "cuGetProcAddress"));
  ASSERT_NE(get, nullptr);
  ASSERT_NE(get_v1, nullptr);
  auto resolve = [&](const char* name, int version, cuuint64_t flags, CUresult* rc,
                     CUdriverProcAddressQueryResult* status) {
    void* fn = nullptr;
    *rc = get(name, &fn, version, flags, status);
    return fn;
  };
  CUresult rc;
  CUdriverProcAddressQueryResult st;
  EXPECT_EQ(resolve("cuMemAlloc", 12000, 0, &rc, &st), dlsym(lib, "cuMemAlloc_v2"));
  EXPECT_EQ(st, CU_GET_PROC_ADDRESS_SUCCESS);
  EXPECT_EQ(
      resolve("cuLaunchKernel", 12000, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM, &rc, &st),
      dlsym(lib, "cuLaunchKernel_ptsz"));
  EXPECT_EQ(resolve("cuLaunchKernel", 12000, CU_GET_PROC_ADDRESS_LEGACY_STREAM, &rc, &st),
            dlsym(lib, "cuLaunchKernel"));
  EXPECT_EQ(
      resolve("cuGraphLaunch", 12000, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM, &rc, &st),
      dlsym(lib, "cuGraphLaunch_ptsz"));
  // No per-thread variant: the plain one.
  EXPECT_EQ(resolve("cuMemGetInfo", 12000, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM, &rc, &st),
            dlsym(lib, "cuMemGetInfo_v2"));
  EXPECT_EQ(resolve("cuGraphInstantiate", 10000, 0, &rc, &st), dlsym(lib, "cuGraphInstantiate"));
  EXPECT_EQ(resolve("cuGraphInstantiate", 11020, 0, &rc, &st), dlsym(lib, "cuGraphInstantiate_v2"));
  EXPECT_EQ(resolve("cuGraphInstantiate", 12040, 0, &rc, &st),
            dlsym(lib, "cuGraphInstantiateWithFlags"));
  EXPECT_EQ(resolve("cuCtxCreate", 11000, 0, &rc, &st), dlsym(lib, "cuCtxCreate_v2"));
  EXPECT_EQ(resolve("cuCtxCreate", 12000, 0, &rc, &st), dlsym(lib, "cuCtxCreate_v3"));
  EXPECT_EQ(resolve("cuCtxCreate", 12080, 0, &rc, &st), dlsym(lib, "cuCtxCreate_v4"));
  EXPECT_EQ(resolve("cuGetProcAddress", 12000, 0, &rc, &st), dlsym(lib, "cuGetProcAddress_v2"));
  EXPECT_EQ(resolve("cuMemAllocAsync", 11000, 0, &rc, &st), nullptr);
  EXPECT_EQ(rc, CUDA_ERROR_NOT_FOUND);
  EXPECT_EQ(st, CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT);
  EXPECT_EQ(resolve("cuNoSuchThing", 12000, 0, &rc, &st), nullptr);
  EXPECT_EQ(st, CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND);
  EXPECT_EQ(resolve("cuMemAlloc_v2", 12000, 0, &rc, &st), nullptr);
  void* fn = nullptr;
  EXPECT_EQ(get_v1("cuInit", &fn, 12000, 0), CUDA_SUCCESS);
  EXPECT_EQ(fn, dlsym(lib, "cuInit"));
  dlclose(lib);
}

TEST_F(SimTest, GraphLaunchRunsKernelNodesInOrder) {
  auto kv = Run("graph");
  ASSERT_EQ(kv["exit"], "0");
  EXPECT_EQ(kv["query_during"], std::to_string(CUDA_ERROR_NOT_READY));
  EXPECT_EQ(kv["query_after"], "0");
  // Two full-device 20 ms nodes back to back (the events bracket them on the stream).
  EXPECT_GE(std::stod(kv["elapsed_ms"]), 39.9);
}

TEST_F(SimTest, LaunchQueueSemantics) {
  auto kv = Run("launch");
  ASSERT_EQ(kv["exit"], "0");
  EXPECT_EQ(kv["fast_query"], "0");
  EXPECT_EQ(kv["busy_query"], std::to_string(CUDA_ERROR_NOT_READY));
  // 400 ms of work, at most ~200 ms queued: the launch loop was held back by >= 190 ms.
  EXPECT_GE(std::stoi(kv["launch_ms"]), 190);
  EXPECT_GE(std::stoi(kv["done_ms"]), 400);
  EXPECT_EQ(kv["idle_query"], "0");
  EXPECT_EQ(kv["coop_ok"], "0");
  EXPECT_EQ(kv["coop_big"], std::to_string(CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE));
  EXPECT_EQ(kv["bad_block"], std::to_string(CUDA_ERROR_INVALID_VALUE));
  EXPECT_EQ(kv["spin_no_params"], std::to_string(CUDA_ERROR_INVALID_VALUE));
  EXPECT_EQ(kv["sms"], "108");
  EXPECT_EQ(kv["cc_major"], "8");
  EXPECT_EQ(kv["threads_per_sm"], "2048");
}

TEST_F(SimTest, AllocationFamiliesAreCharged) {
  auto kv = Run("families");
  EXPECT_EQ(kv["exit"], "0");
  EXPECT_EQ(kv["ok"], "1");
}

TEST_F(SimTest, XidInjectionReachesNvmlEventSet) {
  Child w = Start("xid");
  std::string before;
  WaitReady(&w, &before);
  EXPECT_EQ(KeyValueLines(before)["first_wait"], std::to_string(NVML_ERROR_TIMEOUT));
  std::string out;
  ASSERT_EQ(Simctl({"inject-xid", "--device", "1", "--xid", "79"}, &out), 0);
  std::string rest;
  ASSERT_EQ(Finish(&w, &rest), 0);
  auto kv = KeyValueLines(rest);
  EXPECT_EQ(kv["rc"], "0");
  EXPECT_EQ(kv["type"], std::to_string(nvmlEventTypeXidCriticalError));
  EXPECT_EQ(kv["xid"], "79");
  EXPECT_EQ(kv["same_device"], "1");
}

TEST_F(SimTest, BadConfigIsReportedOnceWithItsLine) {
  std::string path = dir_ + "/bad.conf";
  FILE* f = fopen(path.c_str(), "w");
  ASSERT_NE(f, nullptr);
  fputs("[device]\nsm_count = many\n", f);
  fclose(f);
  std::string err;
  auto kv = Run("init", {}, {{"HAMI_SIM_CONFIG", path}}, &err);
  EXPECT_EQ(kv["exit"], "0");
  EXPECT_EQ(kv["cuinit"], std::to_string(CUDA_ERROR_NO_DEVICE));
  EXPECT_EQ(kv["cuinit_again"], std::to_string(CUDA_ERROR_NO_DEVICE));
  EXPECT_EQ(kv["nvmlinit"], std::to_string(NVML_ERROR_DRIVER_NOT_LOADED));
  EXPECT_NE(err.find("line 2: sm_count"), std::string::npos) << err;
}

TEST_F(SimTest, ConfigChangeAsksForReset) {
  ASSERT_EQ(Run("init")["cuinit"], "0");
  std::string path = dir_ + "/one.conf";
  FILE* f = fopen(path.c_str(), "w");
  ASSERT_NE(f, nullptr);
  fputs("[device]\nname = NVIDIA T4\nmemory = 16Gi\nsm_count = 40\n", f);
  fclose(f);
  std::string err;
  auto kv = Run("init", {}, {{"HAMI_SIM_CONFIG", path}}, &err);
  EXPECT_EQ(kv["cuinit"], std::to_string(CUDA_ERROR_NO_DEVICE));
  EXPECT_NE(err.find("hami-simctl reset"), std::string::npos) << err;
  std::string out;
  ASSERT_EQ(Simctl({"reset"}, &out), 0);
  kv = Run("init", {}, {{"HAMI_SIM_CONFIG", path}});
  EXPECT_EQ(kv["cuinit"], "0");
}

// hami-simctl names the state and config it uses, never creates a state nobody used, and
// refuses to show a state made from another config than the node's (it would show stale cards
// while the node's processes fail).
TEST_F(SimTest, SimctlRefusesAMissingOrMismatchedState) {
  auto simctl = [&](const std::vector<std::string>& args, const Env& extra, std::string* out,
                    std::string* err) {
    std::vector<std::string> argv = {HAMI_SIMCTL_PATH};
    argv.insert(argv.end(), args.begin(), args.end());
    Env env = env_;
    env.insert(env.end(), extra.begin(), extra.end());
    Child c = Spawn(argv, env);
    return Finish(&c, out, err);
  };
  std::string out, err;
  EXPECT_EQ(simctl({"status"}, {}, &out, &err), 1);
  EXPECT_NE(err.find("no state at " + dir_ + "/state: no process has used this simulated node"),
            std::string::npos)
      << err;
  EXPECT_NE(access((dir_ + "/state").c_str(), F_OK), 0) << "status created a state";

  ASSERT_EQ(Run("init")["cuinit"], "0");  // the built-in node
  out.clear();
  err.clear();
  ASSERT_EQ(simctl({"status"}, {}, &out, &err), 0) << err;
  EXPECT_NE(out.find("config: (built-in default)"), std::string::npos) << out;

  std::string path = dir_ + "/t4.conf";
  FILE* f = fopen(path.c_str(), "w");
  ASSERT_NE(f, nullptr);
  fputs("[device]\nname = Tesla T4\nmemory = 15360Mi\nsm_count = 40\n", f);
  fclose(f);
  err.clear();
  EXPECT_EQ(simctl({"--config", path, "status"}, {}, &out, &err), 1);
  EXPECT_NE(err.find("was initialised from a different device config"), std::string::npos) << err;
  EXPECT_NE(err.find("hami-simctl reset"), std::string::npos) << err;
  err.clear();
  EXPECT_EQ(simctl({"status"}, {{"HAMI_SIM_CONFIG", path}}, &out, &err), 1) << "env as --config";
  EXPECT_EQ(simctl({"inject-xid", "--device", "0", "--xid", "79"}, {{"HAMI_SIM_CONFIG", path}},
                   &out, &err),
            1);
}

// MIG instances live in the node's state, not in the process that made them: a second process
// lists them, resolves the MIG UUID and destroys them, as after a device plugin restart.
TEST_F(SimTest, MigInstancesOutliveTheCreatingProcess) {
  auto made = Run("mig-create", {"0"});
  ASSERT_EQ(made["exit"], "0");
  EXPECT_EQ(made["profile_id"], "9");
  EXPECT_EQ(made["profile_mib"], "40192");
  EXPECT_EQ(made["profile_sms"], "42");
  EXPECT_EQ(made["profile_name"], "MIG 3g.40gb");
  EXPECT_EQ(made["profile_6slice"], std::to_string(NVML_ERROR_NOT_SUPPORTED));
  EXPECT_EQ(made["profile_past_count"], std::to_string(NVML_ERROR_INVALID_ARGUMENT));
  EXPECT_EQ(made["placements"], "0:4,4:4,");
  EXPECT_EQ(made["create_bad_placement"], std::to_string(NVML_ERROR_INVALID_ARGUMENT));
  EXPECT_EQ(made["create_overlap"], std::to_string(NVML_ERROR_INSUFFICIENT_RESOURCES));
  EXPECT_EQ(made["remaining"], "1");
  EXPECT_EQ(made["gi_id"], "2");
  EXPECT_EQ(made["gi_profile"], "9");
  EXPECT_EQ(made["gi_placement"], "4:4");
  EXPECT_EQ(made["gi_parent_ok"], "1");
  EXPECT_EQ(made["ci_profile_name"], "MIG 3g.40gb");
  EXPECT_EQ(made["ci_id"], "0");
  EXPECT_EQ(made["ci_gi_ok"], "1");
  EXPECT_EQ(made["max_mig"], "7");
  EXPECT_EQ(made["mig_index_1"], std::to_string(NVML_ERROR_NOT_FOUND));
  EXPECT_EQ(made["uuid"].substr(0, 4), "MIG-");
  EXPECT_EQ(made["name"], "NVIDIA A100-SXM4-80GB MIG 3g.40gb");
  EXPECT_EQ(made["is_mig"], "1");
  EXPECT_EQ(made["is_mig_gpu"], "0");
  EXPECT_EQ(made["mig_gi"], "2");
  EXPECT_EQ(made["mig_ci"], "0");
  EXPECT_EQ(made["parent_ok"], "1");
  EXPECT_EQ(made["attr_sms"], "42");
  EXPECT_EQ(made["attr_gi_slices"], "3");
  EXPECT_EQ(made["attr_mib"], "40192");
  EXPECT_EQ(made["mem_total_mib"], "40192");
  EXPECT_EQ(made["by_uuid_ok"], "1");

  auto seen = Run("mig-list", {"0"});
  ASSERT_EQ(seen["exit"], "0");
  EXPECT_EQ(seen["current"], "1");
  EXPECT_EQ(seen["gis"], "1");
  EXPECT_EQ(seen["gi_0"], "2:4 cis=1");
  EXPECT_EQ(seen["uuid"], made["uuid"]);
  EXPECT_EQ(seen["mig_procs"], "0");
  // Device 1 was never touched.
  auto untouched = Run("mig-list", {"1"});
  EXPECT_EQ(untouched["current"], "0");
  EXPECT_EQ(untouched["list"], std::to_string(NVML_ERROR_NOT_SUPPORTED));
  EXPECT_EQ(untouched["mig_index_0"], std::to_string(NVML_ERROR_NOT_FOUND));
  std::string out;
  ASSERT_EQ(Simctl({"mig"}, &out), 0);
  EXPECT_NE(out.find("MIG enabled (pending enabled; A100-80GB tables)"), std::string::npos) << out;
  EXPECT_NE(out.find("GI 2   3g.40gb     (profile  9)  placement {4,4}"), std::string::npos)
      << out;
  EXPECT_NE(out.find(made["uuid"]), std::string::npos) << out;

  auto gone = Run("mig-destroy", {"0"});
  EXPECT_EQ(gone["gi_by_id"], "0");
  EXPECT_EQ(gone["gi_with_ci"], std::to_string(NVML_ERROR_IN_USE));
  EXPECT_EQ(gone["ci"], "0");
  EXPECT_EQ(gone["ci_again"], std::to_string(NVML_ERROR_NOT_FOUND));
  EXPECT_EQ(gone["gi"], "0");
  EXPECT_EQ(gone["gi_by_id_after"], std::to_string(NVML_ERROR_NOT_FOUND));
  EXPECT_EQ(gone["mig_index_0"], std::to_string(NVML_ERROR_NOT_FOUND));
  // A new instance gets a new UUID.
  auto again = Run("mig-create", {"0"});
  ASSERT_EQ(again["exit"], "0");
  EXPECT_NE(again["uuid"], made["uuid"]);
}

TEST_F(SimTest, MigModeChangeWaitsForAnIdleGpu) {
  Child holder = Start("hold", {"1", "1"});  // 1 GiB on device 1
  WaitReady(&holder);
  auto busy = Run("mig-mode", {"1", "1"});
  EXPECT_EQ(busy["set"], "0");
  EXPECT_EQ(busy["activation"], std::to_string(NVML_ERROR_IN_USE));
  EXPECT_EQ(busy["current"], "0");
  EXPECT_EQ(busy["pending"], "1");
  ASSERT_EQ(Finish(&holder), 0);
  auto idle = Run("mig-mode", {"1", "1"});
  EXPECT_EQ(idle["activation"], "0");
  EXPECT_EQ(idle["current"], "1");
  EXPECT_EQ(idle["pending"], "1");
  // The test hook: a passthrough VM would need a reset.
  auto vm = Run("mig-mode", {"0", "1"}, {{"HAMI_SIM_MIG_ACTIVATION", "reset_required"}});
  EXPECT_EQ(vm["activation"], std::to_string(NVML_ERROR_RESET_REQUIRED));
  EXPECT_EQ(vm["current"], "0");
  EXPECT_EQ(vm["pending"], "1");
}

TEST_F(SimTest, MigDeviceWithAProcessCannotBeDestroyed) {
  auto made = Run("mig-create", {"0"});
  ASSERT_EQ(made["exit"], "0");
  Child app = Start("idle");
  WaitReady(&app);
  std::string out;
  ASSERT_EQ(Simctl({"mig-attach", "--uuid", made["uuid"], "--pid", std::to_string(app.pid)}, &out),
            0)
      << out;
  auto seen = Run("mig-list", {"0"});
  EXPECT_EQ(seen["mig_procs"], "1");
  EXPECT_EQ(Run("mig-destroy", {"0"})["ci"], std::to_string(NVML_ERROR_IN_USE));
  // Disabling MIG waits too.
  EXPECT_EQ(Run("mig-mode", {"0", "0"})["activation"], std::to_string(NVML_ERROR_IN_USE));
  ASSERT_EQ(Finish(&app), 0);
  auto gone = Run("mig-destroy", {"0"});
  EXPECT_EQ(gone["ci"], "0");
  EXPECT_EQ(gone["gi"], "0");
  auto off = Run("mig-mode", {"0", "0"});
  EXPECT_EQ(off["activation"], "0");
  EXPECT_EQ(off["current"], "0");
}

TEST_F(SimTest, MigApiEdges) {
  auto kv = Run("mig-api");
  EXPECT_EQ(kv["exit"], "0");
  EXPECT_EQ(kv["ok"], "1");
}

TEST_F(SimTest, MigIsNotSupportedOnOtherModels) {
  std::string path = dir_ + "/t4.conf";
  FILE* f = fopen(path.c_str(), "w");
  ASSERT_NE(f, nullptr);
  fputs("[device]\nname = Tesla T4\nmemory = 15360Mi\nsm_count = 40\n", f);
  fclose(f);
  auto kv = Run("mig-mode", {"0", "1"}, {{"HAMI_SIM_CONFIG", path}});
  EXPECT_EQ(kv["set"], std::to_string(NVML_ERROR_NOT_SUPPORTED));
  EXPECT_EQ(kv["get"], std::to_string(NVML_ERROR_NOT_SUPPORTED));
}

}  // namespace
}  // namespace hami::simtest

int main(int argc, char** argv) {
  if (argc >= 3 && strcmp(argv[1], "--worker") == 0) {
    return hami::simtest::RunWorker(argc - 2, argv + 2);
  }
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
