// NvmlStats: GpuStats over NVML, loaded at run time by nvml::Library (libnvidia-ml.so.1 from the
// driver mounted into the container; the simulated driver's in tests). Initialised once, never
// unloaded.
//
// Thread safety: NVML is thread-safe; this class adds no state after Open.
#pragma once

#include <memory>
#include <string>

#include "common/thread_annotations.h"
#include "monitor/gpu_stats.h"

namespace hami::nvml {
struct Api;
}  // namespace hami::nvml

namespace hami::monitor {

class NvmlStats : public GpuStats {
 public:
  static Result<std::unique_ptr<NvmlStats>> Open(const std::string& library = "libnvidia-ml.so.1");
  ~NvmlStats() override;

  Result<std::vector<HostGpu>> Gpus() override;
  Result<std::vector<GpuProcess>> Processes(const std::string& uuid) override;
  Result<std::vector<ProcessSample>> Samples(const std::string& uuid, uint64_t since_us) override;

 private:
  explicit NvmlStats(const nvml::Api& api);
  const nvml::Api& api_;  // the loaded library's, which lives until exit
};

// The GPU instance profile a MIG device's NVML name carries, for drivers that cannot name
// profiles otherwise: "NVIDIA A100-SXM4-40GB MIG 1g.5gb" -> "1g.5gb"; a compute instance
// smaller than its GPU instance ("... MIG 1c.3g.20gb") -> its GPU instance's "3g.20gb".
// "" when the name has no "MIG " part.
std::string ProfileFromMigName(const std::string& name);

// LateNvmlStats: NVML that may appear after start-up (a driver mounted after the monitor
// started). Until TryOpen succeeds every call answers empty lists, so the monitor still serves
// the regions' figures; each changed reason for failing is logged once, as a warning.
//
// Thread safety: every member may be called from any thread.
class LateNvmlStats : public GpuStats {
 public:
  explicit LateNvmlStats(std::string library) : library_(std::move(library)) {}

  // Loads NVML unless it is loaded; true once it is.
  bool TryOpen();

  Result<std::vector<HostGpu>> Gpus() override;
  Result<std::vector<GpuProcess>> Processes(const std::string& uuid) override;
  Result<std::vector<ProcessSample>> Samples(const std::string& uuid, uint64_t since_us) override;

 private:
  // NVML once loaded (never unloaded, so the pointer stays valid without the lock).
  NvmlStats* Loaded();

  const std::string library_;
  Mutex mu_;
  std::unique_ptr<NvmlStats> nvml_ GUARDED_BY(mu_);
  std::string last_error_ GUARDED_BY(mu_);
};

}  // namespace hami::monitor
