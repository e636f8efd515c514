// Fuzzes node registration decoding (JSON and legacy text): never crash, and whatever decodes
// must survive a JSON round trip and (when representable) a legacy round trip unchanged.
#include <stddef.h>
#include <stdint.h>

#include <string_view>

#include "device/node_registration.h"

using namespace hami::device;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  hami::Result<std::vector<DeviceInfo>> devices = DecodeNodeDevices(text);
  if (!devices.ok()) return 0;
  hami::Result<std::vector<DeviceInfo>> again =
      DecodeNodeDevicesJson(EncodeNodeDevicesJson(*devices));
  if (!again.ok() || *again != *devices) __builtin_trap();
  hami::Result<std::string> legacy = EncodeNodeDevicesLegacy(*devices);
  if (legacy.ok() && !devices->empty()) {
    hami::Result<std::vector<DeviceInfo>> back = DecodeNodeDevicesLegacy(*legacy);
    if (!back.ok() || *back != *devices) __builtin_trap();
  }
  return 0;
}
