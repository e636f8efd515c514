// NvmlStats: GpuStats over NVML, loaded at run time (libnvidia-ml.so.1 from the driver mounted
// into the container; the simulated driver's in tests). Initialised once, never unloaded.
//
// Thread safety: NVML is thread-safe; this class adds no state after Open.
#pragma once

#include <memory>
#include <string>

#include "monitor/gpu_stats.h"

namespace hami::monitor {

class NvmlStats : public GpuStats {
 public:
  static Result<std::unique_ptr<NvmlStats>> Open(const std::string& library = "libnvidia-ml.so.1");
  ~NvmlStats() override;

  Result<std::vector<HostGpu>> Gpus() override;
  Result<std::vector<GpuProcess>> Processes(const std::string& uuid) override;
  Result<std::vector<ProcessSample>> Samples(const std::string& uuid, uint64_t since_us) override;

  struct Api;

 private:
  explicit NvmlStats(std::unique_ptr<Api> api);
  std::unique_ptr<Api> api_;
};

}  // namespace hami::monitor
