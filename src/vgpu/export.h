// Marks a function as part of the preload library's public ABI (everything else is hidden and
// the version script exports only these names).
#pragma once

#define VGPU_EXPORT extern "C" __attribute__((visibility("default")))
