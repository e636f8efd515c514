// Fuzzes the KubeSchedulerConfiguration reader of the simulated kube-scheduler.
#include <stddef.h>
#include <stdint.h>

#include <string_view>

#include "sim/kubescheduler/config.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  hami::Result<hami::sim::KubeSchedulerConfig> c = hami::sim::ParseKubeSchedulerConfig(
      std::string_view(reinterpret_cast<const char*>(data), size));
  if (!c.ok() && c.status().message().empty()) __builtin_trap();
  return 0;
}
