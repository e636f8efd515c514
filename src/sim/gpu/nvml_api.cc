// Simulated libnvidia-ml.so.1: NVML over the shared state.
//
// NVML sees the devices NVIDIA_VISIBLE_DEVICES exposes (never CUDA_VISIBLE_DEVICES); indices are
// positions in that list, minor numbers are physical indices. Utilisation and per-process
// numbers come from the busy-time rings in the shared state (see README.md for the formulas).
//
// Thread safety: every entry point is thread-safe. Init state is guarded by g_mu; event sets
// by their own mutex; everything else reads the immutable runtime or the shared state.

#include <math.h>
#include <stdio.h>
#include <string.h>

#include <algorithm>
#include <mutex>
#include <vector>

#include "common/thread_annotations.h"
#include "nvml/abi.h"
#include "sim/gpu/clock.h"
#include "sim/gpu/log.h"
#include "sim/gpu/sim_runtime.h"

#define HAMI_SIM_EXPORT extern "C" __attribute__((visibility("default")))

struct nvmlDevice_st {
  uint32_t magic;
  int phys;
};

struct nvmlEventSet_st {
  uint32_t magic;
  hami::Mutex mu;
  struct Registration {
    nvmlDevice_t device;
    unsigned long long mask;
    uint64_t last_seq;  // XIDs up to this sequence number were already delivered (or predate)
  };
  std::vector<Registration> regs GUARDED_BY(mu);
};

namespace hami::sim {
namespace {

constexpr uint32_t kDeviceMagic = 0x4e564431;    // NVD1
constexpr uint32_t kEventSetMagic = 0x4e564531;  // NVE1
constexpr unsigned long long kSupportedEvents =
    nvmlEventTypeSingleBitEccError | nvmlEventTypeDoubleBitEccError | nvmlEventTypePState |
    nvmlEventTypeXidCriticalError | nvmlEventTypeClock;
// Window of nvmlDeviceGetUtilizationRates.
constexpr uint64_t kUtilWindowNs = 1000000000ull;

Mutex g_mu;
int g_init_count GUARDED_BY(g_mu) = 0;
SimRuntime* g_rt = nullptr;  // set on first successful init, never cleared
nvmlDevice_st g_devices[kMaxDevices];

bool Initialized() {
  hami::MutexLock lock(g_mu);
  return g_init_count > 0;
}

bool NvmlVisible(int phys) {
  const auto& vis = g_rt->nvml_visible();
  return std::find(vis.begin(), vis.end(), phys) != vis.end();
}

// Validates the library state and a device handle (one NVML can see); fills *phys.
nvmlReturn_t CheckDevice(nvmlDevice_t device, int* phys) {
  if (!Initialized()) return NVML_ERROR_UNINITIALIZED;
  if (device == nullptr || device < &g_devices[0] || device >= &g_devices[kMaxDevices] ||
      device->magic != kDeviceMagic || !NvmlVisible(device->phys)) {
    return NVML_ERROR_INVALID_ARGUMENT;
  }
  *phys = device->phys;
  return NVML_SUCCESS;
}

nvmlReturn_t CopyOut(char* dst, unsigned int length, const char* src) {
  if (dst == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  size_t n = strlen(src);
  if (length < n + 1) return NVML_ERROR_INSUFFICIENT_SIZE;
  memcpy(dst, src, n + 1);
  return NVML_SUCCESS;
}

void FillPci(const SharedDeviceInfo& d, nvmlPciInfo_t* pci) {
  memset(pci, 0, sizeof(*pci));
  snprintf(pci->busIdLegacy, sizeof(pci->busIdLegacy), "%04X:%02X:%02X.0", d.pci_domain & 0xFFFF,
           d.pci_bus, d.pci_device);
  snprintf(pci->busId, sizeof(pci->busId), "%08X:%02X:%02X.0", d.pci_domain, d.pci_bus,
           d.pci_device);
  pci->domain = d.pci_domain;
  pci->bus = d.pci_bus;
  pci->device = d.pci_device;
  pci->pciDeviceId = d.pci_device_id;
  pci->pciSubSystemId = 0x147E10DE;
}

nvmlReturn_t InitCommon() {
  hami::MutexLock lock(g_mu);
  if (g_init_count > 0) {
    ++g_init_count;
    return NVML_SUCCESS;
  }
  SimRuntime* rt = SimRuntime::Get();
  if (rt == nullptr) return NVML_ERROR_DRIVER_NOT_LOADED;
  g_rt = rt;
  for (int i = 0; i < kMaxDevices; ++i) g_devices[i] = nvmlDevice_st{kDeviceMagic, i};
  ++g_init_count;
  return NVML_SUCCESS;
}

nvmlReturn_t HandleByIndex(unsigned int index, nvmlDevice_t* device) {
  if (!Initialized()) return NVML_ERROR_UNINITIALIZED;
  if (device == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  const auto& vis = g_rt->nvml_visible();
  if (index >= vis.size()) return NVML_ERROR_INVALID_ARGUMENT;
  *device = &g_devices[vis[index]];
  return NVML_SUCCESS;
}

// Device occupancy in percent over the last second (for the utilisation-dependent sensors).
double RecentOccupancy(int phys) {
  uint64_t now = MonotonicNs();
  double busy = g_rt->state().DeviceBusyNs(phys, now - kUtilWindowNs, now);
  return 100.0 * busy / (static_cast<double>(g_rt->device(phys).sm_count) * kUtilWindowNs);
}

template <typename Info>
nvmlReturn_t RunningProcesses(nvmlDevice_t device, unsigned int* infoCount, Info* infos,
                              void (*fill)(Info*, const ProcessUsage&)) {
  int phys;
  nvmlReturn_t rc = CheckDevice(device, &phys);
  if (rc != NVML_SUCCESS) return rc;
  if (infoCount == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  uint64_t now = MonotonicNs();
  std::vector<ProcessUsage> procs = g_rt->state().Processes(phys, now, now);
  unsigned n = static_cast<unsigned>(procs.size());
  if (*infoCount < n || (infos == nullptr && n > 0)) {
    *infoCount = n;
    return NVML_ERROR_INSUFFICIENT_SIZE;
  }
  for (unsigned i = 0; i < n; ++i) fill(&infos[i], procs[i]);
  *infoCount = n;
  return NVML_SUCCESS;
}

}  // namespace
}  // namespace hami::sim

using namespace hami::sim;  // NOLINT: the C ABI entry points below implement this namespace's API

// ---------------------------------------------------------------- init, errors, system

HAMI_SIM_EXPORT nvmlReturn_t nvmlInit_v2(void) { return InitCommon(); }
HAMI_SIM_EXPORT nvmlReturn_t nvmlInit(void) { return InitCommon(); }
HAMI_SIM_EXPORT nvmlReturn_t nvmlInitWithFlags(unsigned int flags) {
  if (flags & ~static_cast<unsigned>(NVML_INIT_FLAG_NO_GPUS | NVML_INIT_FLAG_NO_ATTACH)) {
    return NVML_ERROR_INVALID_ARGUMENT;
  }
  return InitCommon();
}

HAMI_SIM_EXPORT nvmlReturn_t nvmlShutdown(void) {
  hami::MutexLock lock(g_mu);
  if (g_init_count == 0) return NVML_ERROR_UNINITIALIZED;
  --g_init_count;
  return NVML_SUCCESS;
}

HAMI_SIM_EXPORT const char* nvmlErrorString(nvmlReturn_t result) {
  switch (result) {
    case NVML_SUCCESS:
      return "Success";
    case NVML_ERROR_UNINITIALIZED:
      return "Uninitialized";
    case NVML_ERROR_INVALID_ARGUMENT:
      return "Invalid Argument";
    case NVML_ERROR_NOT_SUPPORTED:
      return "Not Supported";
    case NVML_ERROR_NO_PERMISSION:
      return "Insufficient Permissions";
    case NVML_ERROR_ALREADY_INITIALIZED:
      return "Already Initialized";
    case NVML_ERROR_NOT_FOUND:
      return "Not Found";
    case NVML_ERROR_INSUFFICIENT_SIZE:
      return "Insufficient Size";
    case NVML_ERROR_INSUFFICIENT_POWER:
      return "Insufficient External Power";
    case NVML_ERROR_DRIVER_NOT_LOADED:
      return "Driver Not Loaded";
    case NVML_ERROR_TIMEOUT:
      return "Timeout";
    case NVML_ERROR_IRQ_ISSUE:
      return "Interrupt Request Issue";
    case NVML_ERROR_LIBRARY_NOT_FOUND:
      return "NVML Shared Library Not Found";
    case NVML_ERROR_FUNCTION_NOT_FOUND:
      return "Function Not Found";
    case NVML_ERROR_CORRUPTED_INFOROM:
      return "Corrupted infoROM";
    case NVML_ERROR_GPU_IS_LOST:
      return "GPU is lost";
    case NVML_ERROR_RESET_REQUIRED:
      return "GPU requires restart";
    case NVML_ERROR_OPERATING_SYSTEM:
      return "The operating system has blocked the request";
    case NVML_ERROR_LIB_RM_VERSION_MISMATCH:
      return "RM has detected an NVML/RM version mismatch";
    case NVML_ERROR_IN_USE:
      return "In use by another client";
    case NVML_ERROR_MEMORY:
      return "Insufficient Memory";
    case NVML_ERROR_NO_DATA:
      return "No data";
    case NVML_ERROR_ARGUMENT_VERSION_MISMATCH:
      return "Argument version mismatch";
    case NVML_ERROR_NOT_READY:
      return "Not ready";
    case NVML_ERROR_GPU_NOT_FOUND:
      return "GPU not found";
    case NVML_ERROR_INVALID_STATE:
      return "Invalid state";
    default:
      return "Unknown Error";
  }
}

HAMI_SIM_EXPORT nvmlReturn_t nvmlSystemGetDriverVersion(char* version, unsigned int length) {
  if (!Initialized()) return NVML_ERROR_UNINITIALIZED;
  return CopyOut(version, length, g_rt->state().driver_version());
}

HAMI_SIM_EXPORT nvmlReturn_t nvmlSystemGetCudaDriverVersion(int* cudaDriverVersion) {
  if (!Initialized()) return NVML_ERROR_UNINITIALIZED;
  if (cudaDriverVersion == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  *cudaDriverVersion = g_rt->state().cuda_driver_version();
  return NVML_SUCCESS;
}

HAMI_SIM_EXPORT nvmlReturn_t nvmlSystemGetCudaDriverVersion_v2(int* cudaDriverVersion) {
  return nvmlSystemGetCudaDriverVersion(cudaDriverVersion);
}

// ---------------------------------------------------------------- enumeration and identity

HAMI_SIM_EXPORT nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int* deviceCount) {
  if (!Initialized()) return NVML_ERROR_UNINITIALIZED;
  if (deviceCount == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  *deviceCount = static_cast<unsigned>(g_rt->nvml_visible().size());
  return NVML_SUCCESS;
}

HAMI_SIM_EXPORT nvmlReturn_t nvmlDeviceGetCount(unsigned int* deviceCount) {
  return nvmlDeviceGetCount_v2(deviceCount);
}

HAMI_SIM_EXPORT nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int index,
                                                           nvmlDevice_t* device) {
  return HandleByIndex(index, device);
}

HAMI_SIM_EXPORT nvmlReturn_t nvmlDeviceGetHandleByIndex(unsigned int index, nvmlDevice_t* device) {
  return HandleByIndex(index, device);
}

HAMI_SIM_EXPORT nvmlReturn_t nvmlDeviceGetHandleByUUID(const char* uuid, nvmlDevice_t* device) {
  if (!Initialized()) return NVML_ERROR_UNINITIALIZED;
  if (uuid == nullptr || device == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  for (int phys : g_rt->nvml_visible()) {
    if (strcmp(g_rt->device(phys).uuid, uuid) == 0) {
      *device = &g_devices[phys];
      return NVML_SUCCESS;
    }
  }
  return NVML_ERROR_NOT_FOUND;
}

HAMI_SIM_EXPORT nvmlReturn_t nvmlDeviceGetHandleByPciBusId_v2(const char* pciBusId,
                                                              nvmlDevice_t* device) {
  if (!Initialized()) return NVML_ERROR_UNINITIALIZED;
  if (pciBusId == nullptr || device == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  uint32_t domain, bus, dev;
  if (!ParsePciBusId(pciBusId, &domain, &bus, &dev)) return NVML_ERROR_INVALID_ARGUMENT;
  for (int phys : g_rt->nvml_visible()) {
    const SharedDeviceInfo& d = g_rt->device(phys);
    if (d.pci_domain == domain && d.pci_bus == bus && d.pci_device == dev) {
      *device = &g_devices[phys];
      return NVML_SUCCESS;
    }
  }
  return NVML_ERROR_NOT_FOUND;
}

HAMI_SIM_EXPORT nvmlReturn_t nvmlDeviceGetIndex(nvmlDevice_t device, unsigned int* index) {
  int phys;
  nvmlReturn_t rc = CheckDevice(device, &phys);
  if (rc != NVML_SUCCESS) return rc;
  if (index == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  const auto& vis = g_rt->nvml_visible();
  auto it = std::find(vis.begin(), vis.end(), phys);
  if (it == vis.end()) return NVML_ERROR_INVALID_ARGUMENT;
  *index = static_cast<unsigned>(it - vis.begin());
  return NVML_SUCCESS;
}

HAMI_SIM_EXPORT nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t device, char* name,
                                               unsigned int length) {
  int phys;
  nvmlReturn_t rc = CheckDevice(device, &phys);
  if (rc != NVML_SUCCESS) return rc;
  return CopyOut(name, length, g_rt->device(phys).name);
}

HAMI_SIM_EXPORT nvmlReturn_t nvmlDeviceGetUUID(nvmlDevice_t device, char* uuid,
                                               unsigned int length) {
  int phys;
  nvmlReturn_t rc = CheckDevice(device, &phys);
  if (rc != NVML_SUCCESS) return rc;
  return CopyOut(uuid, length, g_rt->device(phys).uuid);
}

HAMI_SIM_EXPORT nvmlReturn_t nvmlDeviceGetMinorNumber(nvmlDevice_t device,
                                                      unsigned int* minorNumber) {
  int phys;
  nvmlReturn_t rc = CheckDevice(device, &phys);
  if (rc != NVML_SUCCESS) return rc;
  if (minorNumber == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  *minorNumber = static_cast<unsigned>(phys);
  return NVML_SUCCESS;
}

HAMI_SIM_EXPORT nvmlReturn_t nvmlDeviceGetPciInfo_v3(nvmlDevice_t device, nvmlPciInfo_t* pci) {
  int phys;
  nvmlReturn_t rc = CheckDevice(device, &phys);
  if (rc != NVML_SUCCESS) return rc;
  if (pci == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  FillPci(g_rt->device(phys), pci);
  return NVML_SUCCESS;
}

HAMI_SIM_EXPORT nvmlReturn_t nvmlDeviceGetPciInfo(nvmlDevice_t device, nvmlPciInfo_t* pci) {
  int phys;
  nvmlReturn_t rc = CheckDevice(device, &phys);
  if (rc != NVML_SUCCESS) return rc;
  if (pci == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  // The original entry point's struct is 52 bytes (no 32-byte busId, 16 reserved bytes
  // instead): write only that much.
  nvmlPciInfo_t full;
  FillPci(g_rt->device(phys), &full);
  memset(full.busId, 0, sizeof(full.busId));
  memcpy(pci, &full, offsetof(nvmlPciInfo_t, busId) + 16);
  return NVML_SUCCESS;
}

HAMI_SIM_EXPORT nvmlReturn_t nvmlDeviceGetCudaComputeCapability(nvmlDevice_t device, int* major,
                                                                int* minor) {
  int phys;
  nvmlReturn_t rc = CheckDevice(device, &phys);
  if (rc != NVML_SUCCESS) return rc;
  if (major == nullptr || minor == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  *major = g_rt->device(phys).cc_major;
  *minor = g_rt->device(phys).cc_minor;
  return NVML_SUCCESS;
}

HAMI_SIM_EXPORT nvmlReturn_t nvmlDeviceGetNumaNodeId(nvmlDevice_t device, unsigned int* node) {
  int phys;
  nvmlReturn_t rc = CheckDevice(device, &phys);
  if (rc != NVML_SUCCESS) return rc;
  if (node == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  *node = static_cast<unsigned>(g_rt->device(phys).numa_node);
  return NVML_SUCCESS;
}

HAMI_SIM_EXPORT nvmlReturn_t nvmlDeviceGetMigMode(nvmlDevice_t device, unsigned int* currentMode,
                                                  unsigned int* pendingMode) {
  int phys;
  nvmlReturn_t rc = CheckDevice(device, &phys);
  if (rc != NVML_SUCCESS) return rc;
  if (currentMode == nullptr || pendingMode == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  *currentMode = NVML_DEVICE_MIG_DISABLE;
  *pendingMode = NVML_DEVICE_MIG_DISABLE;
  return NVML_SUCCESS;
}

// ---------------------------------------------------------------- memory and utilisation

HAMI_SIM_EXPORT nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t device, nvmlMemory_t* memory) {
  int phys;
  nvmlReturn_t rc = CheckDevice(device, &phys);
  if (rc != NVML_SUCCESS) return rc;
  if (memory == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  uint64_t total = g_rt->device(phys).memory_bytes;
  uint64_t used = std::min(total, g_rt->state().UsedMemory(phys));
  memory->total = total;
  memory->used = used;
  memory->free = total - used;
  return NVML_SUCCESS;
}

HAMI_SIM_EXPORT nvmlReturn_t nvmlDeviceGetMemoryInfo_v2(nvmlDevice_t device,
                                                        nvmlMemory_v2_t* memory) {
  int phys;
  nvmlReturn_t rc = CheckDevice(device, &phys);
  if (rc != NVML_SUCCESS) return rc;
  if (memory == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  if (memory->version != nvmlMemory_v2) return NVML_ERROR_ARGUMENT_VERSION_MISMATCH;
  uint64_t total = g_rt->device(phys).memory_bytes;
  uint64_t used = std::min(total, g_rt->state().UsedMemory(phys));
  memory->total = total;
  memory->reserved = 0;
  memory->used = used;
  memory->free = total - used;
  return NVML_SUCCESS;
}

HAMI_SIM_EXPORT nvmlReturn_t nvmlDeviceGetUtilizationRates(nvmlDevice_t device,
                                                           nvmlUtilization_t* utilization) {
  int phys;
  nvmlReturn_t rc = CheckDevice(device, &phys);
  if (rc != NVML_SUCCESS) return rc;
  if (utilization == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  double pct = RecentOccupancy(phys);
  utilization->gpu = static_cast<unsigned>(std::min(100.0, std::max(0.0, std::round(pct))));
  utilization->memory = 0;
  return NVML_SUCCESS;
}

HAMI_SIM_EXPORT nvmlReturn_t nvmlDeviceGetProcessUtilization(
    nvmlDevice_t device, nvmlProcessUtilizationSample_t* utilization,
    unsigned int* processSamplesCount, unsigned long long lastSeenTimeStamp) {
  int phys;
  nvmlReturn_t rc = CheckDevice(device, &phys);
  if (rc != NVML_SUCCESS) return rc;
  if (processSamplesCount == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  // Convert the caller's wall-clock microseconds to the monotonic clock of the timeline.
  uint64_t now_mono = MonotonicNs();
  uint64_t now_real = RealtimeNs();
  const uint64_t span = static_cast<uint64_t>(kRingBuckets - 1) * kBucketNs;
  uint64_t from_mono = now_mono > span ? now_mono - span : 0;
  const unsigned __int128 last_real = static_cast<unsigned __int128>(lastSeenTimeStamp) * 1000;
  if (const uint64_t period = g_rt->nvml_sample_ns(); period != 0) {
    // Like a real driver: one sample per process per period, taken at the period's end (wall
    // clock multiples of the period) and covering that period alone.
    const uint64_t boundary = now_real / period * period;
    if (last_real >= boundary || now_mono < now_real - boundary + period) {
      *processSamplesCount = 0;
      return NVML_ERROR_NOT_FOUND;
    }
    now_mono -= now_real - boundary;
    now_real = boundary;
    from_mono = now_mono - period;
  } else {
    if (last_real >= now_real) {
      *processSamplesCount = 0;
      return NVML_ERROR_NOT_FOUND;
    }
    uint64_t back = static_cast<uint64_t>(now_real - last_real);
    if (back < now_mono - from_mono) from_mono = now_mono - back;
  }
  std::vector<ProcessUsage> procs = g_rt->state().Processes(phys, from_mono, now_mono);
  unsigned n = static_cast<unsigned>(procs.size());
  if (n == 0) {
    *processSamplesCount = 0;
    return NVML_ERROR_NOT_FOUND;
  }
  if (utilization == nullptr || *processSamplesCount < n) {
    *processSamplesCount = n;
    return NVML_ERROR_INSUFFICIENT_SIZE;
  }
  const double capacity =
      static_cast<double>(g_rt->device(phys).sm_count) * static_cast<double>(now_mono - from_mono);
  SimLogDebug("process utilisation of device %d over %.3f ms: %u processes", phys,
              static_cast<double>(now_mono - from_mono) / 1e6, n);
  for (unsigned i = 0; i < n; ++i) {
    SimLogDebug("  pid %d busy %.3f SM-ms", static_cast<int>(procs[i].pid),
                procs[i].busy_sm_ns / 1e6);
    double pct = capacity > 0 ? 100.0 * procs[i].busy_sm_ns / capacity : 0.0;
    nvmlProcessUtilizationSample_t& s = utilization[i];
    s.pid = static_cast<unsigned>(procs[i].pid);
    s.timeStamp = now_real / 1000;
    s.smUtil = static_cast<unsigned>(std::min(100.0, std::max(0.0, std::round(pct))));
    s.memUtil = 0;
    s.encUtil = 0;
    s.decUtil = 0;
  }
  *processSamplesCount = n;
  return NVML_SUCCESS;
}

namespace {
void FillV1(nvmlProcessInfo_v1_t* out, const ProcessUsage& p) {
  out->pid = static_cast<unsigned>(p.pid);
  out->usedGpuMemory = p.mem_bytes;
}
void FillV2(nvmlProcessInfo_v2_t* out, const ProcessUsage& p) {
  out->pid = static_cast<unsigned>(p.pid);
  out->usedGpuMemory = p.mem_bytes;
  out->gpuInstanceId = 0xFFFFFFFFu;
  out->computeInstanceId = 0xFFFFFFFFu;
}
void FillV3(nvmlProcessInfo_t* out, const ProcessUsage& p) {
  out->pid = static_cast<unsigned>(p.pid);
  out->usedGpuMemory = p.mem_bytes;
  out->gpuInstanceId = 0xFFFFFFFFu;
  out->computeInstanceId = 0xFFFFFFFFu;
}
}  // namespace

HAMI_SIM_EXPORT nvmlReturn_t nvmlDeviceGetComputeRunningProcesses(nvmlDevice_t device,
                                                                  unsigned int* infoCount,
                                                                  nvmlProcessInfo_v1_t* infos) {
  return RunningProcesses(device, infoCount, infos, &FillV1);
}

HAMI_SIM_EXPORT nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v2(nvmlDevice_t device,
                                                                     unsigned int* infoCount,
                                                                     nvmlProcessInfo_v2_t* infos) {
  return RunningProcesses(device, infoCount, infos, &FillV2);
}

HAMI_SIM_EXPORT nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v3(nvmlDevice_t device,
                                                                     unsigned int* infoCount,
                                                                     nvmlProcessInfo_t* infos) {
  return RunningProcesses(device, infoCount, infos, &FillV3);
}

HAMI_SIM_EXPORT nvmlReturn_t nvmlDeviceGetTemperature(nvmlDevice_t device,
                                                      nvmlTemperatureSensors_t sensorType,
                                                      unsigned int* temp) {
  int phys;
  nvmlReturn_t rc = CheckDevice(device, &phys);
  if (rc != NVML_SUCCESS) return rc;
  if (temp == nullptr || sensorType != NVML_TEMPERATURE_GPU) return NVML_ERROR_INVALID_ARGUMENT;
  *temp = 32 + static_cast<unsigned>(std::lround(RecentOccupancy(phys) * 0.4));
  return NVML_SUCCESS;
}

HAMI_SIM_EXPORT nvmlReturn_t nvmlDeviceGetPowerUsage(nvmlDevice_t device, unsigned int* power) {
  int phys;
  nvmlReturn_t rc = CheckDevice(device, &phys);
  if (rc != NVML_SUCCESS) return rc;
  if (power == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  *power = 60000 + static_cast<unsigned>(std::lround(RecentOccupancy(phys) * 3400.0));  // mW
  return NVML_SUCCESS;
}

// ---------------------------------------------------------------- topology and NVLink

HAMI_SIM_EXPORT nvmlReturn_t nvmlDeviceGetTopologyCommonAncestor(nvmlDevice_t device1,
                                                                 nvmlDevice_t device2,
                                                                 nvmlGpuTopologyLevel_t* pathInfo) {
  int a, b;
  nvmlReturn_t rc = CheckDevice(device1, &a);
  if (rc == NVML_SUCCESS) rc = CheckDevice(device2, &b);
  if (rc != NVML_SUCCESS) return rc;
  if (pathInfo == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  const SharedDeviceInfo& da = g_rt->device(a);
  const SharedDeviceInfo& db = g_rt->device(b);
  if (a == b) {
    *pathInfo = NVML_TOPOLOGY_INTERNAL;
  } else if (da.pcie_switch >= 0 && da.pcie_switch == db.pcie_switch) {
    *pathInfo = NVML_TOPOLOGY_SINGLE;
  } else if (da.numa_node == db.numa_node) {
    *pathInfo = NVML_TOPOLOGY_NODE;
  } else {
    *pathInfo = NVML_TOPOLOGY_SYSTEM;
  }
  return NVML_SUCCESS;
}

HAMI_SIM_EXPORT nvmlReturn_t nvmlDeviceGetNvLinkState(nvmlDevice_t device, unsigned int link,
                                                      nvmlEnableState_t* isActive) {
  int phys;
  nvmlReturn_t rc = CheckDevice(device, &phys);
  if (rc != NVML_SUCCESS) return rc;
  if (isActive == nullptr || link >= NVML_NVLINK_MAX_LINKS) return NVML_ERROR_INVALID_ARGUMENT;
  bool up = static_cast<int>(link) < g_rt->device(phys).nvlink_count;
  *isActive = up ? NVML_FEATURE_ENABLED : NVML_FEATURE_DISABLED;
  return NVML_SUCCESS;
}

HAMI_SIM_EXPORT nvmlReturn_t nvmlDeviceGetNvLinkRemotePciInfo_v2(nvmlDevice_t device,
                                                                 unsigned int link,
                                                                 nvmlPciInfo_t* pci) {
  int phys;
  nvmlReturn_t rc = CheckDevice(device, &phys);
  if (rc != NVML_SUCCESS) return rc;
  if (pci == nullptr || link >= NVML_NVLINK_MAX_LINKS) return NVML_ERROR_INVALID_ARGUMENT;
  const SharedDeviceInfo& d = g_rt->device(phys);
  if (static_cast<int>(link) >= d.nvlink_count) return NVML_ERROR_NOT_SUPPORTED;
  FillPci(g_rt->device(d.nvlink_peers[link]), pci);
  return NVML_SUCCESS;
}

HAMI_SIM_EXPORT nvmlReturn_t nvmlDeviceGetNvLinkRemoteDeviceType(
    nvmlDevice_t device, unsigned int link, nvmlIntNvLinkDeviceType_t* pNvLinkDeviceType) {
  int phys;
  nvmlReturn_t rc = CheckDevice(device, &phys);
  if (rc != NVML_SUCCESS) return rc;
  if (pNvLinkDeviceType == nullptr || link >= NVML_NVLINK_MAX_LINKS) {
    return NVML_ERROR_INVALID_ARGUMENT;
  }
  if (static_cast<int>(link) >= g_rt->device(phys).nvlink_count) return NVML_ERROR_NOT_SUPPORTED;
  *pNvLinkDeviceType = NVML_NVLINK_DEVICE_TYPE_GPU;
  return NVML_SUCCESS;
}

// ---------------------------------------------------------------- events

HAMI_SIM_EXPORT nvmlReturn_t nvmlEventSetCreate(nvmlEventSet_t* set) {
  if (!Initialized()) return NVML_ERROR_UNINITIALIZED;
  if (set == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  auto* s = new nvmlEventSet_st();
  s->magic = kEventSetMagic;
  *set = s;
  return NVML_SUCCESS;
}

HAMI_SIM_EXPORT nvmlReturn_t nvmlDeviceGetSupportedEventTypes(nvmlDevice_t device,
                                                              unsigned long long* eventTypes) {
  int phys;
  nvmlReturn_t rc = CheckDevice(device, &phys);
  if (rc != NVML_SUCCESS) return rc;
  if (eventTypes == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  *eventTypes = kSupportedEvents;
  return NVML_SUCCESS;
}

HAMI_SIM_EXPORT nvmlReturn_t nvmlDeviceRegisterEvents(nvmlDevice_t device,
                                                      unsigned long long eventTypes,
                                                      nvmlEventSet_t set) {
  int phys;
  nvmlReturn_t rc = CheckDevice(device, &phys);
  if (rc != NVML_SUCCESS) return rc;
  if (set == nullptr || set->magic != kEventSetMagic) return NVML_ERROR_INVALID_ARGUMENT;
  if (eventTypes & ~kSupportedEvents) return NVML_ERROR_NOT_SUPPORTED;
  // Only events that happen after registration are delivered.
  uint64_t seq = g_rt->state().LatestXidSeq(phys);
  hami::MutexLock lock(set->mu);
  for (auto& r : set->regs) {
    if (r.device == device) {
      r.mask |= eventTypes;
      return NVML_SUCCESS;
    }
  }
  set->regs.push_back({device, eventTypes, seq});
  return NVML_SUCCESS;
}

HAMI_SIM_EXPORT nvmlReturn_t nvmlEventSetWait_v2(nvmlEventSet_t set, nvmlEventData_t* data,
                                                 unsigned int timeoutms) {
  if (!Initialized()) return NVML_ERROR_UNINITIALIZED;
  if (set == nullptr || set->magic != kEventSetMagic || data == nullptr) {
    return NVML_ERROR_INVALID_ARGUMENT;
  }
  SharedState& state = g_rt->state();
  const uint64_t deadline = MonotonicNs() + static_cast<uint64_t>(timeoutms) * 1000000ull;
  for (;;) {
    // Read the generation before scanning so an injection racing the scan wakes the wait.
    uint32_t gen = state.XidGeneration();
    {
      hami::MutexLock lock(set->mu);
      for (auto& r : set->regs) {
        if (!(r.mask & nvmlEventTypeXidCriticalError)) continue;
        XidRecord rec;
        if (state.NextXid(r.device->phys, r.last_seq, &rec)) {
          r.last_seq = rec.seq;
          data->device = r.device;
          data->eventType = nvmlEventTypeXidCriticalError;
          data->eventData = rec.xid;
          data->gpuInstanceId = 0xFFFFFFFFu;
          data->computeInstanceId = 0xFFFFFFFFu;
          return NVML_SUCCESS;
        }
      }
    }
    if (MonotonicNs() >= deadline) return NVML_ERROR_TIMEOUT;
    state.WaitXidChange(gen, deadline);
  }
}

HAMI_SIM_EXPORT nvmlReturn_t nvmlEventSetFree(nvmlEventSet_t set) {
  if (!Initialized()) return NVML_ERROR_UNINITIALIZED;
  if (set == nullptr || set->magic != kEventSetMagic) return NVML_ERROR_INVALID_ARGUMENT;
  set->magic = 0;
  delete set;
  return NVML_SUCCESS;
}
