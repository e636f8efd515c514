// Kubelet device IDs of the NVIDIA plugin: each physical GPU is advertised as `split count`
// replicas "<UUID>-<i>" (i = 0..n-1), so kubelet's `nvidia.com/gpu` capacity counts task slots
// and a pod's `nvidia.com/gpu: 2` takes two replicas (on the two GPUs the scheduler chose).
//
//   ReplicaId("GPU-a1b2...", 3)  -> "GPU-a1b2...-3"
//   PhysicalId("GPU-a1b2...-3")  -> "GPU-a1b2..."
//
// PhysicalId also understands the other replica spelling kubelet users meet ("<UUID>::<n>", as
// written by time-slicing plugins) and passes MIG device IDs ("MIG-...") through unchanged.
//
// Thread safety: pure functions.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace hami::deviceplugin {

std::string ReplicaId(std::string_view uuid, uint32_t replica);

// The physical device an ID stands for: "<UUID>::<n>" -> UUID; "<UUID>-<digits>" -> UUID when
// the part before the last '-' still looks like a GPU UUID (GPU-8-4-4-4-12 hex) or, for other
// spellings, when stripping leaves exactly six dashes' worth of UUID, as upstream decides;
// anything else is returned unchanged.
std::string PhysicalId(std::string_view id);

}  // namespace hami::deviceplugin
