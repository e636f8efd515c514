// Fuzzes the MIG reservation codec (`hami.io/vgpu-mig-allocations`): what decodes is valid and
// round-trips.
#include <stddef.h>
#include <stdint.h>

#include <string_view>

#include "device/mig_allocation.h"

using namespace hami::device;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  hami::Result<std::vector<MigAllocation>> allocs = DecodeMigAllocations(text);
  if (!allocs.ok()) return 0;
  if (!ValidateMigAllocations(*allocs).ok()) __builtin_trap();
  std::string encoded = EncodeMigAllocations(*allocs);
  hami::Result<std::vector<MigAllocation>> again = DecodeMigAllocations(encoded);
  if (!again.ok() || EncodeMigAllocations(*again) != encoded) __builtin_trap();
  return 0;
}
