// Fuzzes the per-node config.json parser and the override resolution.
#include <stddef.h>
#include <stdint.h>

#include <string_view>

#include "device/node_config.h"

using namespace hami::device;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  hami::Result<NodeConfigFile> file = ParseNodeConfigJson(text);
  if (!file.ok()) return 0;
  NvidiaConfig global;
  for (const NodeConfigEntry& n : file->nodes) {
    NodeDeviceSettings s = ResolveNodeSettings(global, *file, n.name);
    if (s.device_split_count < 1 || !(s.device_memory_scaling > 0)) __builtin_trap();
    if (s.lib_cuda_log_level < 0 || s.lib_cuda_log_level > 4) __builtin_trap();
  }
  return 0;
}
