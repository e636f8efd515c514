// NvmlDriver: GpuDriver and MigDriver over NVML, loaded at run time by nvml::Library
// ("libnvidia-ml.so.1") so the plugin needs no driver at build time and runs unchanged on a real
// driver and on the simulated one (build/sim). Entry points newer drivers added (NUMA node, NVLink
// peer type) are optional; the MIG management calls are needed only by MigDriver's methods, which
// answer Unimplemented without them.
//
// NUMA node: /sys/bus/pci/devices/<bus id>/numa_node when that PCI function is an NVIDIA device
// (vendor 0x10de), else NVML's nvmlDeviceGetNumaNodeId, else unknown. Pairs: NVML's common
// ancestor level and NVLinks counted from both ends by matching remote PCI bus ids.
//
// MIG profile ids (MigProfileSpec::profile_id, MigDeviceInfo::gi_profile_id) are the driver's
// ids (nvmlGpuInstanceProfileInfo_t.id: 19 for 1g.10gb on an A100), the ones NVML's create, list
// and placement calls take; not the NVML_GPU_INSTANCE_PROFILE_* enum the profile-info call takes.
// Every MIG call for a GPU is made on a handle freshly obtained by its UUID.
//
//   Result<std::unique_ptr<NvmlDriver>> d = NvmlDriver::Open({});
//
// Thread safety: Discover() may run concurrently with WatchXids()/WaitXid(); WatchXids and
// WaitXid serialise with each other (a wait holds the event set). The MigDriver methods keep no
// state of their own and may run on any thread, concurrently with all of these (NVML is
// thread-safe); calls that change one GPU's instances are serialised by the caller (MigDriver's
// contract).
#pragma once

#include <memory>
#include <mutex>
#include <string>

#include "common/thread_annotations.h"
#include "deviceplugin/gpu_driver.h"
#include "deviceplugin/mig_driver.h"

struct nvmlDevice_st;  // nvml/abi.h's device handle, kept out of this header

namespace hami::nvml {
struct Api;
class Library;
}  // namespace hami::nvml

namespace hami::deviceplugin {

struct NvmlDriverOptions {
  std::string library = "libnvidia-ml.so.1";
  std::string sysfs_root = "/sys";  // tests point this at a fake tree
};

class NvmlDriver final : public GpuDriver, public MigDriver {
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

  // MigDriver (nvml_mig_driver.cc).
  Result<MigModeState> GetMigMode(const std::string& gpu_uuid) override;
  Status EnableMig(const std::string& gpu_uuid) override;
  Result<std::vector<MigProfileSpec>> MigProfiles(const std::string& gpu_uuid) override;
  Result<CreatedMigDevice> CreateMigDevice(const std::string& gpu_uuid, uint32_t profile_id,
                                           device::MigPlacement placement) override;
  Status DestroyMigDevice(const std::string& gpu_uuid, uint32_t gi_id, uint32_t ci_id) override;

 private:
  NvmlDriver(NvmlDriverOptions options, const nvml::Library& nvml);

  // The UUID of GPU `dev`'s MIG device (GPU instance `gi_id`, compute instance `ci_id`), found
  // among its MIG device handles; empty when none has those ids (or the driver cannot list them).
  static std::string MigUuidOf(const nvml::Api& a, nvmlDevice_st* dev, unsigned gi_id,
                               unsigned ci_id);

  const NvmlDriverOptions options_;
  const nvml::Api& api_;  // the loaded library's, which lives until exit
  Mutex events_mu_;
  void* event_set_ GUARDED_BY(events_mu_) = nullptr;  // an nvmlEventSet_t
};

}  // namespace hami::deviceplugin
