// Integration tests of the simulated driver inside a "MIG container": processes whose
// NVIDIA_VISIBLE_DEVICES names MIG devices (MIG-<uuid>), as the NVIDIA container runtime hands a
// container one MIG instance. Like sim_integration_test, every scenario runs in worker processes
// (this binary re-executed with --worker NAME) that dlopen the simulated libraries, each test with
// its own HAMI_SIM_STATE; processes synchronise through pipes and waitpid, never sleeps.

#include <gtest/gtest.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <map>
#include <string>
#include <vector>

#include "common/subprocess.h"
#include "sim_test_support.h"

namespace hami::simtest {
namespace {

constexpr uint64_t kGiB = 1ull << 30;
constexpr uint64_t kMiB = 1ull << 20;
constexpr uint64_t kMs = 1000000;

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

uint64_t MonotonicNs() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
}

// A CUDA UUID written as a MIG device UUID.
std::string MigUuidString(const CUuuid& u) {
  const auto* b = reinterpret_cast<const unsigned char*>(u.bytes);
  char s[64];
  snprintf(s, sizeof(s), "MIG-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x",
           b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13],
           b[14], b[15]);
  return s;
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

// mig-setup DEV N: enables MIG on DEV and creates N 3g GPU instances, each with one full compute
// instance; prints uuid<i> (GI 2 at slice 4 first, then GI 1 at slice 0) and the GPU's uuid.
int WorkerMigSetup(int, char** argv) {
  Nvml nv;
  W_CHECK(nv.Load());
  NV(nv.nvmlInit_v2());
  nvmlDevice_t d;
  NV(nv.nvmlDeviceGetHandleByIndex_v2(static_cast<unsigned>(atoi(argv[0])), &d));
  nvmlReturn_t activation;
  NV(nv.nvmlDeviceSetMigMode(d, NVML_DEVICE_MIG_ENABLE, &activation));
  W_CHECK(activation == NVML_SUCCESS);
  nvmlGpuInstanceProfileInfo_t info{};
  NV(nv.nvmlDeviceGetGpuInstanceProfileInfo(d, NVML_GPU_INSTANCE_PROFILE_3_SLICE, &info));
  for (int i = 0; i < atoi(argv[1]); ++i) {
    nvmlGpuInstance_t gi;
    NV(nv.nvmlDeviceCreateGpuInstance(d, info.id, &gi));
    nvmlComputeInstance_t ci;
    NV(nv.nvmlGpuInstanceCreateComputeInstance(gi, NVML_COMPUTE_INSTANCE_PROFILE_3_SLICE, &ci));
    nvmlGpuInstanceInfo_t gii{};
    NV(nv.nvmlGpuInstanceGetInfo(gi, &gii));
    // The new MIG device: the one whose GPU instance is the new GI.
    nvmlDevice_t mig = nullptr;
    unsigned id = ~0u;
    for (unsigned k = 0; id != gii.id; ++k) {
      NV(nv.nvmlDeviceGetMigDeviceHandleByIndex(d, k, &mig));
      NV(nv.nvmlDeviceGetGpuInstanceId(mig, &id));
    }
    char uuid[NVML_DEVICE_UUID_V2_BUFFER_SIZE];
    NV(nv.nvmlDeviceGetUUID(mig, uuid, sizeof(uuid)));
    printf("uuid%d=%s\n", i, uuid);
  }
  char gpu[NVML_DEVICE_UUID_V2_BUFFER_SIZE];
  NV(nv.nvmlDeviceGetUUID(d, gpu, sizeof(gpu)));
  printf("gpu=%s\n", gpu);
  return 0;
}

// Prints what CUDA reports of every device it enumerates.
int PrintCudaDevices(Cuda& cu) {
  int n = 0;
  CU(cu.cuDeviceGetCount(&n));
  printf("cuda_count=%d\n", n);
  for (int i = 0; i < n; ++i) {
    CUdevice dev;
    CU(cu.cuDeviceGet(&dev, i));
    char name[128];
    CU(cu.cuDeviceGetName(name, sizeof(name), dev));
    size_t total = 0;
    CU(cu.cuDeviceTotalMem_v2(&total, dev));
    int sms = 0;
    CU(cu.cuDeviceGetAttribute(&sms, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, dev));
    CUuuid uuid;
    CU(cu.cuDeviceGetUuid(&uuid, dev));
    printf("dev%d_name=%s\ndev%d_total_mib=%zu\ndev%d_sms=%d\ndev%d_uuid=%s\n", i, name, i,
           total / kMiB, i, sms, i, MigUuidString(uuid).c_str());
  }
  return 0;
}

// Prints what NVML shows: the GPUs, their MIG mode, the MIG devices reachable through each, and
// the used memory of the first one.
int PrintNvmlView(Nvml& nv, const char* other_uuid) {
  NV(nv.nvmlInit_v2());
  unsigned n = 0;
  NV(nv.nvmlDeviceGetCount_v2(&n));
  printf("nvml_count=%u\n", n);
  nvmlDevice_t gpu;
  NV(nv.nvmlDeviceGetHandleByIndex_v2(0, &gpu));
  char uuid[NVML_DEVICE_UUID_V2_BUFFER_SIZE];
  NV(nv.nvmlDeviceGetUUID(gpu, uuid, sizeof(uuid)));
  unsigned cur = 9, pending = 9;
  NV(nv.nvmlDeviceGetMigMode(gpu, &cur, &pending));
  printf("nvml_gpu=%s\nnvml_mig_mode=%u\n", uuid, cur);
  nvmlDevice_t mig, none;
  nvmlReturn_t rc = nv.nvmlDeviceGetMigDeviceHandleByIndex(gpu, 0, &mig);
  printf("mig_index_0=%d\nmig_index_1=%d\n", rc,
         nv.nvmlDeviceGetMigDeviceHandleByIndex(gpu, 1, &none));
  if (rc != NVML_SUCCESS) return 0;
  NV(nv.nvmlDeviceGetUUID(mig, uuid, sizeof(uuid)));
  nvmlDevice_t by_uuid = nullptr;
  printf("mig0_uuid=%s\nby_uuid_self=%d\n", uuid, nv.nvmlDeviceGetHandleByUUID(uuid, &by_uuid));
  printf("by_uuid_other=%d\n", nv.nvmlDeviceGetHandleByUUID(other_uuid, &by_uuid));
  nvmlMemory_t mem{};
  NV(nv.nvmlDeviceGetMemoryInfo(mig, &mem));
  printf("mig0_total_mib=%llu\nmig0_used_mib=%llu\n", mem.total / kMiB, mem.used / kMiB);
  return 0;
}

// mig-app ORDINAL GIB_A GIB_B OTHER_UUID: CUDA's view of this "container", two allocations on
// ORDINAL (their results: alloc_a, alloc_b), cuMemGetInfo, NVML's view, and a hold until stdin
// closes. OTHER_UUID is a MIG device it should not reach.
int WorkerMigApp(int, char** argv) {
  Cuda cu;
  Nvml nv;
  W_CHECK(cu.Load() && nv.Load());
  CUresult init = cu.cuInit(0);
  printf("init=%d\n", init);
  if (init != CUDA_SUCCESS) return 0;
  if (PrintCudaDevices(cu) != 0) return 1;
  CUdevice dev;
  CU(cu.cuDeviceGet(&dev, atoi(argv[0])));
  CUcontext ctx;
  CU(cu.cuDevicePrimaryCtxRetain(&ctx, dev));
  CU(cu.cuCtxSetCurrent(ctx));
  CUdeviceptr a = 0, b = 0;
  printf("alloc_a=%d\n", cu.cuMemAlloc_v2(&a, strtoull(argv[1], nullptr, 10) * kGiB));
  printf("alloc_b=%d\n", cu.cuMemAlloc_v2(&b, strtoull(argv[2], nullptr, 10) * kGiB));
  size_t free = 0, total = 0;
  CU(cu.cuMemGetInfo_v2(&free, &total));
  printf("free_mib=%zu\ntotal_mib=%zu\n", free / kMiB, total / kMiB);
  if (PrintNvmlView(nv, argv[3]) != 0) return 1;
  Ready();
  WaitForParent();
  return 0;
}

// mig-observer DEV: a process that sees every device: the GPU's used memory and, for each of its
// MIG devices, the used memory and the processes (pid:MiB).
int WorkerMigObserver(int, char** argv) {
  Nvml nv;
  W_CHECK(nv.Load());
  NV(nv.nvmlInit_v2());
  nvmlDevice_t gpu;
  NV(nv.nvmlDeviceGetHandleByIndex_v2(static_cast<unsigned>(atoi(argv[0])), &gpu));
  nvmlMemory_t mem{};
  NV(nv.nvmlDeviceGetMemoryInfo(gpu, &mem));
  printf("gpu_used_mib=%llu\n", mem.used / kMiB);
  for (unsigned i = 0;; ++i) {
    nvmlDevice_t mig;
    if (nv.nvmlDeviceGetMigDeviceHandleByIndex(gpu, i, &mig) != NVML_SUCCESS) break;
    char uuid[NVML_DEVICE_UUID_V2_BUFFER_SIZE];
    NV(nv.nvmlDeviceGetUUID(mig, uuid, sizeof(uuid)));
    NV(nv.nvmlDeviceGetMemoryInfo(mig, &mem));
    nvmlProcessInfo_t procs[8];
    unsigned n = 8;
    NV(nv.nvmlDeviceGetComputeRunningProcesses_v3(mig, &n, procs));
    std::string list;
    for (unsigned k = 0; k < n; ++k) {
      list += std::to_string(procs[k].pid) + ":" + std::to_string(procs[k].usedGpuMemory / kMiB) +
              ",";
    }
    printf("%s_used_mib=%llu\n%s_procs=%s\n", uuid, mem.used / kMiB, uuid, list.c_str());
  }
  return 0;
}

// mig-spin BLOCKS MS: a busy kernel of BLOCKS blocks of MS each on CUDA device 0; prints the
// elapsed time and what a cooperative launch of as many blocks returns.
int WorkerMigSpin(int, char** argv) {
  Cuda cu;
  W_CHECK(cu.Load());
  CU(cu.cuInit(0));
  CUdevice dev;
  CU(cu.cuDeviceGet(&dev, 0));
  CUcontext ctx;
  CU(cu.cuDevicePrimaryCtxRetain(&ctx, dev));
  CU(cu.cuCtxSetCurrent(ctx));
  static const char kImage[] = "any image";
  CUmodule mod;
  CUfunction spin;
  CU(cu.cuModuleLoadData(&mod, kImage));
  CU(cu.cuModuleGetFunction(&spin, mod, "hami_sim_spin"));
  const unsigned blocks = static_cast<unsigned>(atoi(argv[0]));
  uint64_t busy = static_cast<uint64_t>(atoi(argv[1])) * kMs;
  void* params[] = {&busy};
  printf("cooperative=%d\n", cu.cuLaunchCooperativeKernel(spin, blocks, 1, 1, 32, 1, 1, 0,
                                                          nullptr, params));
  const uint64_t start = MonotonicNs();
  CU(cu.cuLaunchKernel(spin, blocks, 1, 1, 32, 1, 1, 0, nullptr, params, nullptr));
  CU(cu.cuCtxSynchronize());
  printf("elapsed_ms=%llu\n", static_cast<unsigned long long>((MonotonicNs() - start) / kMs));
  return 0;
}

// mig-teardown DEV: destroys every compute and GPU instance of 3g profile on DEV; prints the
// first failure (ci=, gi=) or ok=1.
int WorkerMigTeardown(int, char** argv) {
  Nvml nv;
  W_CHECK(nv.Load());
  NV(nv.nvmlInit_v2());
  nvmlDevice_t d;
  NV(nv.nvmlDeviceGetHandleByIndex_v2(static_cast<unsigned>(atoi(argv[0])), &d));
  nvmlGpuInstance_t gis[4];
  unsigned n = 4;
  NV(nv.nvmlDeviceGetGpuInstances(d, 9, gis, &n));
  for (unsigned i = 0; i < n; ++i) {
    nvmlComputeInstance_t cis[4];
    unsigned m = 4;
    NV(nv.nvmlGpuInstanceGetComputeInstances(gis[i], NVML_COMPUTE_INSTANCE_PROFILE_3_SLICE, cis,
                                             &m));
    for (unsigned k = 0; k < m; ++k) {
      if (nvmlReturn_t rc = nv.nvmlComputeInstanceDestroy(cis[k]); rc != NVML_SUCCESS) {
        printf("ci=%d\n", rc);
        return 0;
      }
    }
    if (nvmlReturn_t rc = nv.nvmlGpuInstanceDestroy(gis[i]); rc != NVML_SUCCESS) {
      printf("gi=%d\n", rc);
      return 0;
    }
  }
  printf("ok=1\n");
  return 0;
}

int RunWorker(int argc, char** argv) {
  struct {
    const char* name;
    int (*fn)(int, char**);
  } workers[] = {
      {"mig-setup", WorkerMigSetup}, {"mig-app", WorkerMigApp},
      {"mig-observer", WorkerMigObserver}, {"mig-spin", WorkerMigSpin},
      {"mig-teardown", WorkerMigTeardown},
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

using KeyValues = std::map<std::string, std::string>;

// The built-in node (two A100-SXM4-80GB, 108 SMs each): GPU 0 gets two 3g.40gb MIG devices
// (40192 MiB and 42 SMs each, A100-80GB tables) before each test.
class MigContainerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/hami-sim-mig-it-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    env_ = {{"HAMI_SIM_STATE", dir_ + "/state"},
            {"HAMI_SIM_CONFIG", "\x01"},
            {"CUDA_VISIBLE_DEVICES", "\x01"},
            {"NVIDIA_VISIBLE_DEVICES", "\x01"}};
    KeyValues made = Run("mig-setup", {"0", "2"});
    ASSERT_EQ(made["exit"], "0");
    uuid_a_ = made["uuid0"];
    uuid_b_ = made["uuid1"];
    gpu_ = made["gpu"];
    ASSERT_EQ(uuid_a_.rfind("MIG-", 0), 0u);
    ASSERT_NE(uuid_a_, uuid_b_);
  }
  void TearDown() override {
    std::string cmd = "rm -rf '" + dir_ + "'";
    ASSERT_EQ(system(cmd.c_str()), 0);
  }

  Child Start(const std::string& worker, const std::vector<std::string>& args,
              const std::string& visible = "\x01") {
    std::vector<std::string> argv = {SelfPath(), "--worker", worker};
    argv.insert(argv.end(), args.begin(), args.end());
    Env env = env_;
    env.emplace_back("NVIDIA_VISIBLE_DEVICES", visible);
    return Spawn(argv, env);
  }
  // Runs a worker to completion; its key=value output, "exit" = status, "stderr" = its stderr.
  KeyValues Run(const std::string& worker, const std::vector<std::string>& args,
                const std::string& visible = "\x01") {
    Child c = Start(worker, args, visible);
    std::string out, err;
    int status = Finish(&c, &out, &err);
    KeyValues kv = KeyValueLines(out);
    kv["exit"] = std::to_string(status);
    kv["stderr"] = err;
    return kv;
  }
  // Reads a held worker's output up to its "ready" line.
  KeyValues WaitReady(Child* c) {
    std::string line, out;
    while (ReadLine(c->out_fd, &line) && line != "ready") out += line + "\n";
    EXPECT_EQ(line, "ready") << out;
    return KeyValueLines(out);
  }

  std::string dir_;
  Env env_;
  std::string uuid_a_, uuid_b_, gpu_;
};

// What a container given one MIG device sees: one CUDA device with the instance's memory, SMs
// and UUID and the GPU's name; NVML's parent GPU in MIG mode with only that MIG device on it.
TEST_F(MigContainerTest, ContainerSeesItsMigDevice) {
  Child app = Start("mig-app", {"0", "39", "2", uuid_b_}, uuid_a_);
  KeyValues kv = WaitReady(&app);
  EXPECT_EQ(kv["init"], "0");
  EXPECT_EQ(kv["cuda_count"], "1");
  EXPECT_EQ(kv["dev0_name"], "NVIDIA A100-SXM4-80GB");
  EXPECT_EQ(kv["dev0_total_mib"], "40192");
  EXPECT_EQ(kv["dev0_sms"], "42");
  EXPECT_EQ(kv["dev0_uuid"], uuid_a_);
  EXPECT_EQ(kv["nvml_count"], "1");
  EXPECT_EQ(kv["nvml_gpu"], gpu_);
  EXPECT_EQ(kv["nvml_mig_mode"], "1");
  EXPECT_EQ(kv["mig_index_0"], "0");
  EXPECT_EQ(kv["mig_index_1"], std::to_string(NVML_ERROR_NOT_FOUND));  // B is not reachable
  EXPECT_EQ(kv["mig0_uuid"], uuid_a_);
  EXPECT_EQ(kv["by_uuid_self"], "0");
  EXPECT_EQ(kv["by_uuid_other"], std::to_string(NVML_ERROR_NOT_FOUND));
  EXPECT_EQ(kv["mig0_total_mib"], "40192");
  EXPECT_EQ(kv["mig0_used_mib"], std::to_string(39 * 1024));
  // 39 GiB fit in the 40192 MiB instance, 2 GiB more do not.
  EXPECT_EQ(kv["alloc_a"], "0");
  EXPECT_EQ(kv["alloc_b"], std::to_string(CUDA_ERROR_OUT_OF_MEMORY));
  EXPECT_EQ(kv["total_mib"], "40192");
  EXPECT_EQ(kv["free_mib"], std::to_string(40192 - 39 * 1024));
  KeyValues seen = Run("mig-observer", {"0"});
  EXPECT_EQ(seen[uuid_a_ + "_used_mib"], std::to_string(39 * 1024));
  EXPECT_EQ(seen[uuid_a_ + "_procs"], std::to_string(app.pid) + ":" + std::to_string(39 * 1024) +
                                          ",");
  EXPECT_EQ(seen[uuid_b_ + "_used_mib"], "0");
  EXPECT_EQ(seen["gpu_used_mib"], std::to_string(39 * 1024));
  ASSERT_EQ(Finish(&app), 0);
}

// Two processes on two instances of one GPU allocate from two pools: 30 + 30 GiB fit although
// one instance holds 40192 MiB; a second process on the first instance shares its pool.
TEST_F(MigContainerTest, TwoInstancesHaveTheirOwnMemory) {
  Child a = Start("mig-app", {"0", "30", "0", uuid_b_}, uuid_a_);
  KeyValues ka = WaitReady(&a);
  Child b = Start("mig-app", {"0", "30", "0", uuid_a_}, uuid_b_);
  KeyValues kb = WaitReady(&b);
  EXPECT_EQ(ka["alloc_a"], "0");
  EXPECT_EQ(kb["alloc_a"], "0");
  EXPECT_EQ(kb["free_mib"], std::to_string(40192 - 30 * 1024));
  EXPECT_EQ(kb["mig0_uuid"], uuid_b_);
  EXPECT_EQ(kb["mig0_used_mib"], std::to_string(30 * 1024));
  KeyValues third = Run("mig-app", {"0", "10", "9", uuid_b_}, uuid_a_);
  EXPECT_EQ(third["alloc_a"], std::to_string(CUDA_ERROR_OUT_OF_MEMORY));
  EXPECT_EQ(third["alloc_b"], "0");
  KeyValues seen = Run("mig-observer", {"0"});
  EXPECT_EQ(seen[uuid_a_ + "_used_mib"], std::to_string(30 * 1024));
  EXPECT_EQ(seen[uuid_b_ + "_used_mib"], std::to_string(30 * 1024));
  EXPECT_EQ(seen["gpu_used_mib"], std::to_string(60 * 1024));
  // A process with a context on an instance keeps it from being destroyed.
  EXPECT_EQ(Run("mig-teardown", {"0"})["ci"], std::to_string(NVML_ERROR_IN_USE));
  ASSERT_EQ(Finish(&a), 0);
  ASSERT_EQ(Finish(&b), 0);
  EXPECT_EQ(Run("mig-teardown", {"0"})["ok"], "1");
}

// A MIG device that no longer exists is skipped like an unknown index; whole GPUs and MIG
// devices mix, in the order given.
TEST_F(MigContainerTest, GoneMigDevicesAreSkippedAndGpusMix) {
  const std::string gone = "MIG-0badc0de-0000-4000-8000-000000000000";
  KeyValues none = Run("mig-app", {"0", "1", "1", uuid_b_}, gone);
  EXPECT_EQ(none["init"], std::to_string(CUDA_ERROR_NO_DEVICE));
  EXPECT_NE(none["stderr"].find("no MIG device '" + gone + "'"), std::string::npos)
      << none["stderr"];
  Child mixed = Start("mig-app", {"1", "1", "0", uuid_a_}, "1," + uuid_b_ + "," + gone);
  KeyValues kv = WaitReady(&mixed);
  EXPECT_EQ(kv["cuda_count"], "2");
  EXPECT_EQ(kv["dev0_total_mib"], std::to_string(80 * 1024));  // GPU 1, whole
  EXPECT_EQ(kv["dev0_sms"], "108");
  EXPECT_EQ(kv["dev1_total_mib"], "40192");
  EXPECT_EQ(kv["dev1_uuid"], uuid_b_);
  EXPECT_EQ(kv["nvml_count"], "2");
  EXPECT_EQ(kv["alloc_a"], "0");
  KeyValues seen = Run("mig-observer", {"0"});
  EXPECT_EQ(seen[uuid_b_ + "_used_mib"], "1024");
  ASSERT_EQ(Finish(&mixed), 0);
}

// Kernels on a MIG device book its compute instance's 42 SMs, not the GPU's 108: 43 blocks need
// two waves, and a cooperative launch of 43 blocks is too large.
TEST_F(MigContainerTest, KernelsRunOnTheInstanceSms) {
  KeyValues kv = Run("mig-spin", {"43", "150"}, uuid_a_);
  ASSERT_EQ(kv["exit"], "0") << kv["stderr"];
  EXPECT_EQ(kv["cooperative"], std::to_string(CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE));
  EXPECT_GE(std::stoi(kv["elapsed_ms"]), 295);
  KeyValues whole = Run("mig-spin", {"43", "1"}, "1");
  EXPECT_EQ(whole["cooperative"], "0");
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
