// Fuzzes the device-config.yaml parser: errors, never exceptions or crashes; accepted configs
// pass validation, every vendor section holds values in its documented ranges (split counts,
// default cores, memory factors; Ascend chips with sorted templates and capacity at least their
// allocatable memory; chips named once), and unknown sections kept as YAML parse again.
#include <stddef.h>
#include <stdint.h>

#include <set>
#include <string>
#include <string_view>

#include "device/config.h"

using namespace hami::device;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > 16384) return 0;  // configuration files are small; keeps the YAML parser fast
  std::string_view text(reinterpret_cast<const char*>(data), size);
  hami::Result<DeviceConfig> config = ParseDeviceConfigYaml(text);
  if (!config.ok()) return 0;
  if (config->nvidia && !ValidateNvidiaConfig(*config->nvidia).ok()) __builtin_trap();
  for (const auto& [section, r] : config->vendors) {
    if (r.device_split_count < 1 || r.default_cores < 0 || r.default_cores > 100 ||
        r.memory_factor < 1 || r.default_memory_mib < 0) {
      __builtin_trap();
    }
  }
  if (config->ascend) {
    std::set<std::string> words;
    for (const AscendChipConfig& c : config->ascend->chips) {
      if (c.common_word.empty() || !words.insert(c.common_word).second) __builtin_trap();
      if (c.memory_capacity < c.memory_allocatable) __builtin_trap();
      for (size_t i = 1; i < c.templates.size(); ++i) {
        if (c.templates[i - 1].memory_mib > c.templates[i].memory_mib) __builtin_trap();
      }
    }
  }
  if (config->iluvatars) {
    std::set<std::string> words;
    for (const IluvatarChipConfig& c : *config->iluvatars) {
      if (c.common_word.empty() || !words.insert(c.common_word).second) __builtin_trap();
    }
  }
  for (const auto& [key, yaml] : config->vendor_sections) {
    (void)ParseDeviceConfigYaml(std::string("section:\n") + yaml);
  }
  return 0;
}
