// Simulated libcuda.so.1: device enumeration and device queries.
//
// A CUDA device is a whole GPU or, in a process whose NVIDIA_VISIBLE_DEVICES names MIG devices,
// one MIG device (sim_runtime.h, CudaDevice): it reports its GPU instance's memory, its compute
// instance's SMs and its own UUID, and keeps its GPU's name, PCI identity and other attributes.

#include <stdio.h>
#include <string.h>

#include <string>

#include "sim/gpu/cuda_internal.h"

namespace hami::sim {
namespace {

// `info` is the GPU's; `dev` what CUDA enumerates (the GPU, or a MIG device of it).
int DeviceAttribute(const SharedDeviceInfo& info, const CudaDevice& dev,
                    CUdevice_attribute attrib, bool* known) {
  *known = true;
  switch (attrib) {
    case CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK:
      return 1024;
    case CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X:
      return 1024;
    case CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Y:
      return 1024;
    case CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Z:
      return 64;
    case CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X:
      return 2147483647;
    case CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y:
      return 65535;
    case CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z:
      return 65535;
    case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK:
      return 49152;
    case CU_DEVICE_ATTRIBUTE_TOTAL_CONSTANT_MEMORY:
      return 65536;
    case CU_DEVICE_ATTRIBUTE_WARP_SIZE:
      return 32;
    case CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_BLOCK:
      return 65536;
    case CU_DEVICE_ATTRIBUTE_CLOCK_RATE:
      return 1410000;
    case CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT:
      return dev.sm_count;
    case CU_DEVICE_ATTRIBUTE_INTEGRATED:
      return 0;
    case CU_DEVICE_ATTRIBUTE_PCI_BUS_ID:
      return static_cast<int>(info.pci_bus);
    case CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID:
      return static_cast<int>(info.pci_device);
    case CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE:
      return 1593000;
    case CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH:
      return 5120;
    case CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE:
      return 40 << 20;
    case CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR:
      return info.max_threads_per_sm;
    case CU_DEVICE_ATTRIBUTE_ASYNC_ENGINE_COUNT:
      return 3;
    case CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING:
      return 1;
    case CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID:
      return static_cast<int>(info.pci_domain);
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR:
      return info.cc_major;
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR:
      return info.cc_minor;
    case CU_DEVICE_ATTRIBUTE_MANAGED_MEMORY:
      return 1;
    case CU_DEVICE_ATTRIBUTE_CONCURRENT_MANAGED_ACCESS:
      return 1;
    case CU_DEVICE_ATTRIBUTE_COOPERATIVE_LAUNCH:
      return 1;
    case CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED:
      return 1;
    case CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED:
      return 1;
    default:
      // Attributes the sim does not model read as 0, as "unsupported feature" does on hardware.
      *known = attrib > 0 && attrib < 200;
      return 0;
  }
}

// The 16 bytes of a "GPU-..." or "MIG-..." UUID (both are 32 hex digits after the prefix).
bool UuidBytes(const std::string& uuid, unsigned char out[16]) {
  if (uuid.rfind("MIG-", 0) == 0) return ParseUuidBytes("GPU-" + uuid.substr(4), out);
  return ParseUuidBytes(uuid, out);
}

}  // namespace

const CudaDevice* DeviceOf(CUdevice dev) {
  const auto& devices = Drv().rt->cuda_devices();
  if (dev < 0 || static_cast<size_t>(dev) >= devices.size()) return nullptr;
  return &devices[static_cast<size_t>(dev)];
}

int PhysOf(CUdevice dev) {
  const CudaDevice* d = DeviceOf(dev);
  return d != nullptr ? d->phys : -1;
}

CUresult CheckCudaDevice(CUdevice dev) {
  CUresult rc = CheckInit();
  if (rc != CUDA_SUCCESS) return rc;
  return DeviceOf(dev) == nullptr ? CUDA_ERROR_INVALID_DEVICE : CUDA_SUCCESS;
}

}  // namespace hami::sim

using namespace hami::sim;  // NOLINT: the C ABI entry points below implement this namespace's API

// ---------------------------------------------------------------- devices

HAMI_SIM_EXPORT CUresult cuDeviceGet(CUdevice* device, int ordinal) {
  CUresult rc = CheckInit();
  if (rc != CUDA_SUCCESS) return rc;
  if (device == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (PhysOf(ordinal) < 0) return CUDA_ERROR_INVALID_DEVICE;
  *device = ordinal;
  return CUDA_SUCCESS;
}

HAMI_SIM_EXPORT CUresult cuDeviceGetCount(int* count) {
  CUresult rc = CheckInit();
  if (rc != CUDA_SUCCESS) return rc;
  if (count == nullptr) return CUDA_ERROR_INVALID_VALUE;
  *count = static_cast<int>(Drv().rt->cuda_devices().size());
  return CUDA_SUCCESS;
}

HAMI_SIM_EXPORT CUresult cuDeviceGetName(char* name, int len, CUdevice dev) {
  CUresult rc = CheckCudaDevice(dev);
  if (rc != CUDA_SUCCESS) return rc;
  if (name == nullptr || len <= 0) return CUDA_ERROR_INVALID_VALUE;
  snprintf(name, static_cast<size_t>(len), "%s", Drv().rt->device(PhysOf(dev)).name);
  return CUDA_SUCCESS;
}

HAMI_SIM_EXPORT CUresult cuDeviceGetUuid(CUuuid* uuid, CUdevice dev) {
  CUresult rc = CheckCudaDevice(dev);
  if (rc != CUDA_SUCCESS) return rc;
  if (uuid == nullptr) return CUDA_ERROR_INVALID_VALUE;
  unsigned char bytes[16];
  if (!UuidBytes(DeviceOf(dev)->uuid, bytes)) return CUDA_ERROR_UNKNOWN;
  memcpy(uuid->bytes, bytes, 16);
  return CUDA_SUCCESS;
}

HAMI_SIM_EXPORT CUresult cuDeviceGetUuid_v2(CUuuid* uuid, CUdevice dev) {
  return cuDeviceGetUuid(uuid, dev);
}

HAMI_SIM_EXPORT CUresult cuDeviceTotalMem_v2(size_t* bytes, CUdevice dev) {
  CUresult rc = CheckCudaDevice(dev);
  if (rc != CUDA_SUCCESS) return rc;
  if (bytes == nullptr) return CUDA_ERROR_INVALID_VALUE;
  *bytes = DeviceOf(dev)->memory_bytes;
  return CUDA_SUCCESS;
}

HAMI_SIM_EXPORT CUresult cuDeviceGetAttribute(int* pi, CUdevice_attribute attrib, CUdevice dev) {
  CUresult rc = CheckCudaDevice(dev);
  if (rc != CUDA_SUCCESS) return rc;
  if (pi == nullptr) return CUDA_ERROR_INVALID_VALUE;
  bool known = false;
  int v = DeviceAttribute(Drv().rt->device(PhysOf(dev)), *DeviceOf(dev), attrib, &known);
  if (!known) return CUDA_ERROR_INVALID_VALUE;
  *pi = v;
  return CUDA_SUCCESS;
}

HAMI_SIM_EXPORT CUresult cuDeviceGetPCIBusId(char* pciBusId, int len, CUdevice dev) {
  CUresult rc = CheckCudaDevice(dev);
  if (rc != CUDA_SUCCESS) return rc;
  if (pciBusId == nullptr || len <= 0) return CUDA_ERROR_INVALID_VALUE;
  const SharedDeviceInfo& info = Drv().rt->device(PhysOf(dev));
  snprintf(pciBusId, static_cast<size_t>(len), "%04X:%02X:%02X.0", info.pci_domain, info.pci_bus,
           info.pci_device);
  return CUDA_SUCCESS;
}

HAMI_SIM_EXPORT CUresult cuDeviceGetByPCIBusId(CUdevice* dev, const char* pciBusId) {
  CUresult rc = CheckInit();
  if (rc != CUDA_SUCCESS) return rc;
  if (dev == nullptr || pciBusId == nullptr) return CUDA_ERROR_INVALID_VALUE;
  uint32_t domain, bus, device;
  if (!ParsePciBusId(pciBusId, &domain, &bus, &device)) return CUDA_ERROR_INVALID_VALUE;
  const auto& devices = Drv().rt->cuda_devices();
  for (size_t i = 0; i < devices.size(); ++i) {
    const SharedDeviceInfo& info = Drv().rt->device(devices[i].phys);
    if (info.pci_domain == domain && info.pci_bus == bus && info.pci_device == device) {
      *dev = static_cast<CUdevice>(i);
      return CUDA_SUCCESS;
    }
  }
  return CUDA_ERROR_INVALID_DEVICE;
}

HAMI_SIM_EXPORT CUresult cuDeviceCanAccessPeer(int* canAccessPeer, CUdevice dev, CUdevice peerDev) {
  CUresult rc = CheckCudaDevice(dev);
  if (rc == CUDA_SUCCESS) rc = CheckCudaDevice(peerDev);
  if (rc != CUDA_SUCCESS) return rc;
  if (canAccessPeer == nullptr) return CUDA_ERROR_INVALID_VALUE;
  const SharedDeviceInfo& a = Drv().rt->device(PhysOf(dev));
  const SharedDeviceInfo& b = Drv().rt->device(PhysOf(peerDev));
  int peer_phys = PhysOf(peerDev);
  bool linked = false;
  for (int k = 0; k < a.nvlink_count; ++k) linked |= a.nvlink_peers[k] == peer_phys;
  bool same_switch = a.pcie_switch >= 0 && a.pcie_switch == b.pcie_switch;
  // MIG devices have no peer access, to each other or to whole GPUs.
  bool mig = DeviceOf(dev)->mig || DeviceOf(peerDev)->mig;
  *canAccessPeer = dev != peerDev && !mig && (linked || same_switch) ? 1 : 0;
  return CUDA_SUCCESS;
}
