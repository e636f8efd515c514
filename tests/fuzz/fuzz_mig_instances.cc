// Fuzzes the device plugin's record of the MIG devices it made (<HOOK_PATH>/vgpu/
// mig-instances.json, read at every start, so a damaged file must never crash the plugin): what
// decodes round-trips.
#include <stddef.h>
#include <stdint.h>

#include <string>

#include "deviceplugin/mig_instances.h"

using namespace hami::deviceplugin;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string text(reinterpret_cast<const char*>(data), size);
  hami::Result<std::vector<MigInstance>> list = DecodeMigInstances(text);
  if (!list.ok()) return 0;
  std::string encoded = EncodeMigInstances(*list);
  hami::Result<std::vector<MigInstance>> again = DecodeMigInstances(encoded);
  if (!again.ok() || *again != *list) __builtin_trap();
  return 0;
}
