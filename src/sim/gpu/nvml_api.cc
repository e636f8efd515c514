// Simulated libnvidia-ml.so.1: NVML over the shared state.
//
// NVML sees the devices NVIDIA_VISIBLE_DEVICES exposes (never CUDA_VISIBLE_DEVICES); indices are
// positions in that list, minor numbers are physical indices. A MIG device named there makes its
// GPU enumerable, and only the named MIG devices of that GPU reachable (SimRuntime::NvmlSeesMig),
// as in a container the NVIDIA runtime gave MIG devices. Utilisation and per-process
// numbers come from the busy-time rings in the shared state (see README.md for the formulas).
//
// This file holds init, errors, system queries, enumeration, identity (of GPUs and MIG devices)
// and topology; nvml_usage.cc the memory, utilisation and process queries; nvml_events.cc the
// event sets; nvml_mig_gpu_instances.cc and nvml_mig_compute_instances.cc MIG mode, the GPU and
// compute instances and MIG device handles (nvml_mig.cc their shared parts).
//
// Thread safety: every entry point is thread-safe. Init state is guarded by g_mu; event sets
// by their own mutex; everything else reads the immutable runtime or the shared state.

#include <stdio.h>
#include <string.h>

#include <algorithm>
#include <string>
#include <vector>

#include "common/thread_annotations.h"
#include "sim/gpu/nvml_internal.h"

namespace hami::sim {

SimRuntime* g_rt = nullptr;  // set on first successful init, never cleared

namespace {

constexpr uint32_t kDeviceMagic = 0x4e564431;     // NVD1
constexpr uint32_t kMigDeviceMagic = 0x4e564d31;  // NVM1

Mutex g_mu;
int g_init_count GUARDED_BY(g_mu) = 0;
nvmlDevice_st g_devices[kMaxDevices];
// One handle per possible (GPU, GI id, CI id): a MIG device's handle is stable while it lives,
// and names whatever CI holds those ids later, as the real driver's handles may be reused.
nvmlDevice_st g_mig_devices[kMaxDevices][kMigGiIdSpace][kMigCiIdSpace];

// True if `p` points at one of the `count` handles starting at `first`.
bool IsHandleIn(const nvmlDevice_st* p, const nvmlDevice_st* first, size_t count) {
  auto a = reinterpret_cast<uintptr_t>(first);
  auto q = reinterpret_cast<uintptr_t>(p);
  return q >= a && q < a + count * sizeof(nvmlDevice_st) && (q - a) % sizeof(nvmlDevice_st) == 0;
}

bool NvmlVisible(int phys) {
  const auto& vis = g_rt->nvml_visible();
  return std::find(vis.begin(), vis.end(), phys) != vis.end();
}

}  // namespace

bool Initialized() {
  hami::MutexLock lock(g_mu);
  return g_init_count > 0;
}

nvmlReturn_t CheckAnyDevice(nvmlDevice_t device, DeviceRef* ref) {
  if (!Initialized()) return NVML_ERROR_UNINITIALIZED;
  if (device == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  if (IsHandleIn(device, &g_devices[0], kMaxDevices) && device->magic == kDeviceMagic &&
      NvmlVisible(device->phys)) {
    *ref = DeviceRef{device->phys, false, 0, 0};
    return NVML_SUCCESS;
  }
  if (IsHandleIn(device, &g_mig_devices[0][0][0], sizeof(g_mig_devices) / sizeof(nvmlDevice_st)) &&
      device->magic == kMigDeviceMagic &&
      g_rt->NvmlSeesMig(device->phys, device->gi_id, device->ci_id)) {
    MigDeviceView view;
    if (!ViewMigDevice(device->phys, device->gi_id, device->ci_id, &view)) {
      return NVML_ERROR_NOT_FOUND;
    }
    *ref = DeviceRef{device->phys, true, device->gi_id, device->ci_id};
    return NVML_SUCCESS;
  }
  return NVML_ERROR_INVALID_ARGUMENT;
}

nvmlReturn_t CheckDevice(nvmlDevice_t device, int* phys) {
  DeviceRef ref;
  nvmlReturn_t rc = CheckAnyDevice(device, &ref);
  if (rc != NVML_SUCCESS) return rc;
  if (ref.mig) return NVML_ERROR_NOT_SUPPORTED;
  *phys = ref.phys;
  return NVML_SUCCESS;
}

nvmlDevice_t GpuHandle(int phys) { return &g_devices[phys]; }

nvmlDevice_t MigDeviceHandle(int phys, uint32_t gi_id, uint32_t ci_id) {
  return &g_mig_devices[phys][gi_id][ci_id];
}

namespace {

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
  for (int i = 0; i < kMaxDevices; ++i) {
    g_devices[i] = nvmlDevice_st{kDeviceMagic, i, 0, 0};
    for (int gi = 0; gi < kMigGiIdSpace; ++gi) {
      for (int ci = 0; ci < kMigCiIdSpace; ++ci) {
        g_mig_devices[i][gi][ci] =
            nvmlDevice_st{kMigDeviceMagic, i, static_cast<uint32_t>(gi), static_cast<uint32_t>(ci)};
      }
    }
  }
  InitMigHandles();
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
  if (strncmp(uuid, "MIG-", 4) == 0) {
    DeviceRef ref;
    if (!FindMigDeviceByUuid(uuid, &ref)) return NVML_ERROR_NOT_FOUND;
    *device = MigDeviceHandle(ref.phys, ref.gi_id, ref.ci_id);
    return NVML_SUCCESS;
  }
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

// A MIG device is named after its GPU and its profile: "NVIDIA A100-SXM4-80GB MIG 3g.40gb".
HAMI_SIM_EXPORT nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t device, char* name,
                                               unsigned int length) {
  DeviceRef ref;
  nvmlReturn_t rc = CheckAnyDevice(device, &ref);
  if (rc != NVML_SUCCESS) return rc;
  if (!ref.mig) return CopyOut(name, length, g_rt->device(ref.phys).name);
  MigDeviceView view;
  if (!ViewMigDevice(ref.phys, ref.gi_id, ref.ci_id, &view)) return NVML_ERROR_NOT_FOUND;
  std::string full = std::string(g_rt->device(ref.phys).name) + " MIG " + view.ci_profile.name;
  return CopyOut(name, length, full.c_str());
}

HAMI_SIM_EXPORT nvmlReturn_t nvmlDeviceGetUUID(nvmlDevice_t device, char* uuid,
                                               unsigned int length) {
  DeviceRef ref;
  nvmlReturn_t rc = CheckAnyDevice(device, &ref);
  if (rc != NVML_SUCCESS) return rc;
  if (!ref.mig) return CopyOut(uuid, length, g_rt->device(ref.phys).uuid);
  MigDeviceView view;
  if (!ViewMigDevice(ref.phys, ref.gi_id, ref.ci_id, &view)) return NVML_ERROR_NOT_FOUND;
  return CopyOut(uuid, length, view.ci.uuid);
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
