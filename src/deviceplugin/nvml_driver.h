// NvmlDriver: GpuDriver over NVML, loaded at run time with dlopen("libnvidia-ml.so.1") so the
// plugin needs no driver at build time and runs unchanged on a real driver and on the simulated
// one (build/sim). Entry points newer drivers added (NUMA node, NVLink peer type) are optional.
//
// NUMA node: /sys/bus/pci/devices/<bus id>/numa_node when that PCI function is an NVIDIA device
// (vendor 0x10de), else NVML's nvmlDeviceGetNumaNodeId, else unknown. Pairs: NVML's common
// ancestor level and NVLinks counted from both ends by matching remote PCI bus ids.
//
//   Result<std::unique_ptr<NvmlDriver>> d = NvmlDriver::Open({});
//
// Thread safety: Discover() may run concurrently with WatchXids()/WaitXid(); WatchXids and
// WaitXid serialise with each other (a wait holds the event set).
#pragma once

#include <memory>
#include <mutex>
#include <string>

#include "deviceplugin/gpu_driver.h"

namespace hami::deviceplugin {

struct NvmlDriverOptions {
  std::string library = "libnvidia-ml.so.1";
  std::string sysfs_root = "/sys";  // tests point this at a fake tree
};

class NvmlDriver final : public GpuDriver {
 public:
  // Loads and initialises NVML. Unavailable with the loader's or NVML's reason when it cannot.
  static Result<std::unique_ptr<NvmlDriver>> Open(const NvmlDriverOptions& options);
  ~NvmlDriver() override;
  NvmlDriver(const NvmlDriver&) = delete;
  NvmlDriver& operator=(const NvmlDriver&) = delete;

  Result<Inventory> Discover() override;
  Status WatchXids(const std::vector<std::string>& uuids,
                   std::vector<std::string>* unsupported) override;
  Result<std::optional<XidEvent>> WaitXid(std::chrono::milliseconds timeout) override;

  struct Api;

 private:
  NvmlDriver(NvmlDriverOptions options, void* handle, std::unique_ptr<Api> api);

  const NvmlDriverOptions options_;
  void* handle_;  // never dlclose()d (see the destructor)
  std::unique_ptr<Api> api_;
  std::mutex events_mu_;
  void* event_set_ = nullptr;  // guarded by events_mu_ (an nvmlEventSet_t)
};

}  // namespace hami::deviceplugin
