// Fuzzes the pod device list codec (`hami.io/vgpu-devices-allocated`): never crash; a decoded
// list re-encodes to a value that decodes to the same list.
#include <stddef.h>
#include <stdint.h>

#include <string_view>

#include "device/pod_devices.h"

using namespace hami::device;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  hami::Result<PodSingleDevice> pod = DecodePodSingleDevice(text);
  if (!pod.ok()) return 0;
  std::string encoded = EncodePodSingleDevice(*pod);
  hami::Result<PodSingleDevice> again = DecodePodSingleDevice(encoded);
  if (!again.ok() || *again != *pod) __builtin_trap();
  if (EncodePodSingleDevice(*again) != encoded) __builtin_trap();
  for (const ContainerDevices& c : *pod) {
    for (const ContainerDevice& d : c) {
      if (d.mem_mib < 0 || d.cores < 0 || d.uuid.empty()) __builtin_trap();
    }
  }
  return 0;
}
