// NvmlDriver: GpuDriver over NVML, loaded at run time by nvml::Library ("libnvidia-ml.so.1") so
// the plugin needs no driver at build time and runs unchanged on a real driver and on the simulated
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

#include "common/thread_annotations.h"
#include "deviceplugin/gpu_driver.h"

namespace hami::nvml {
struct Api;
class Library;
}  // namespace hami::nvml

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

 private:
  NvmlDriver(NvmlDriverOptions options, const nvml::Library& nvml);

  const NvmlDriverOptions options_;
  const nvml::Api& api_;  // the loaded library's, which lives until exit
  Mutex events_mu_;
  void* event_set_ GUARDED_BY(events_mu_) = nullptr;  // an nvmlEventSet_t
};

}  // namespace hami::deviceplugin
