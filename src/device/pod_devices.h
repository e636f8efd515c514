// Codec for the pod device lists HAMi writes on a scheduled pod
// (`hami.io/vgpu-devices-to-allocate` / `hami.io/vgpu-devices-allocated` for NVIDIA, and the
// other vendors' pairs), byte-compatible with upstream:
//
//   device    = UUID "," TYPE "," MEM "," CORES ":"      (MEM in MiB, CORES in percent)
//   container = device*  ";"
//   value     = container*                               (init containers first, spec order)
//
//   "GPU-a,NVIDIA,3000,30:GPU-b,NVIDIA,3000,30:;;GPU-a,NVIDIA,5000,0:;"  = 3 containers, the
//   second without devices.
//
// Deliberate difference from upstream (docs/compatibility.md): our scheduler always writes
// one entry per container for every vendor, so entry k is container k. The decoder keeps empty
// entries for the same reason; text after the last ';' is an unterminated final entry (ignored
// when empty, so a well-formed value of N containers decodes to exactly N entries).
//
// Thread safety: pure functions.
#pragma once

#include <string>
#include <string_view>

#include "common/status.h"
#include "device/device.h"

namespace hami::device {

// "uuid,type,mem,cores:" per device.
std::string EncodeContainerDevices(const ContainerDevices& devices);
// Concatenation of each container's devices followed by ';'.
std::string EncodePodSingleDevice(const PodSingleDevice& pod);

// One container's devices: segments without ',' are skipped (upstream), each other segment needs
// at least 4 fields (extra fields ignored), a non-empty UUID and TYPE, and MEM/CORES that are
// non-negative 32-bit integers.
Result<ContainerDevices> DecodeContainerDevices(std::string_view text);
Result<PodSingleDevice> DecodePodSingleDevice(std::string_view text);

// Grows `pod` with empty entries up to `container_count` (never shrinks).
void PadToContainers(PodSingleDevice* pod, size_t container_count);

// Checks the index alignment invariant: exactly `container_count` entries.
Status CheckAligned(const PodSingleDevice& pod, size_t container_count);

}  // namespace hami::device
