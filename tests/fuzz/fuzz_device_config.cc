// Fuzzes the device-config.yaml parser: errors, never exceptions or crashes; accepted configs
// pass validation and their kept vendor sections parse again.
#include <stddef.h>
#include <stdint.h>

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
  for (const auto& [key, yaml] : config->vendor_sections) {
    (void)ParseDeviceConfigYaml(std::string("section:\n") + yaml);
  }
  return 0;
}
