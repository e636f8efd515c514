// Fuzzes request parsing from container resources and the Kubernetes quantity reader. The input
// is split on newlines into quantities for gpu, gpumem, gpumem-percentage, gpucores, priority
// (limits) and then gpu, gpumem (requests). Accepted requests must satisfy the documented ranges.
#include <stddef.h>
#include <stdint.h>

#include <string>
#include <string_view>

#include "device/nvidia/nvidia_vendor.h"
#include "device/resource_quantity.h"

using namespace hami::device;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  (void)ParseIntegerQuantity(text);

  static const char* kNames[] = {
      "nvidia.com/gpu",      "nvidia.com/gpumem",   "nvidia.com/gpumem-percentage",
      "nvidia.com/gpucores", "nvidia.com/priority", "nvidia.com/gpu",
      "nvidia.com/gpumem"};
  ContainerResources c;
  c.name = "fuzz";
  size_t field = 0;
  size_t start = 0;
  while (start <= text.size() && field < 7) {
    size_t nl = text.find('\n', start);
    std::string_view value =
        text.substr(start, nl == std::string_view::npos ? text.npos : nl - start);
    if (!value.empty() && value != "-") {
      (field < 5 ? c.limits : c.requests)[kNames[field]] = std::string(value);
    }
    ++field;
    if (nl == std::string_view::npos) break;
    start = nl + 1;
  }
  NvidiaConfig cfg;
  cfg.memory_factor = 3;
  cfg.default_cores = 10;
  NvidiaVendor vendor(cfg);
  hami::Result<std::optional<ContainerRequest>> r = vendor.ParseRequest(c);
  if (r.ok() && r->has_value()) {
    const ContainerRequest& q = **r;
    if (q.count <= 0 || q.mem_mib < 0 || q.cores < 0 || q.cores > 100) __builtin_trap();
    if (q.mem_percent != kMemPercentUnset && (q.mem_percent < 1 || q.mem_percent > 100)) {
      __builtin_trap();
    }
    if (q.mem_mib == 0 && q.mem_percent == kMemPercentUnset) __builtin_trap();
  }
  return 0;
}
