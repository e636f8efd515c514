// Parsing of the limits written into environment variables and flags (CUDA_DEVICE_MEMORY_LIMIT_<i>,
// CUDA_DEVICE_SM_LIMIT and the like): memory sizes, percentages and booleans. Not Kubernetes
// quantities: those are device/resource_quantity.h.
//
// Freestanding on purpose (no allocation, no exceptions, no locale): the same code runs inside
// the preloaded enforcement library, in the device plugin and in hamictl, so a limit string means
// the same thing everywhere.
//
// Memory sizes: a non-negative decimal number, optionally with a fraction, followed by an
// optional unit. Units are binary whatever their spelling, because HAMi writes "<MiB>m" into
// CUDA_DEVICE_MEMORY_LIMIT_<i> and users write Kubernetes-style "Gi":
//   (none)=bytes  k K Ki KiB KB = 2^10   m M Mi MiB MB = 2^20   g G Gi GiB GB = 2^30
//   t T Ti TiB TB = 2^40   b B = bytes
// "4096m" == "4Gi" == "4G" == "4294967296". Unlike upstream, "1Gi" is one GiB (not one byte),
// "010g" is ten GiB (no octal), and garbage such as "12x", "-1", "1e9", "" or an overflow is
// rejected with a message instead of silently becoming some other number.
//
// Thread safety: all functions are pure.
#pragma once

#include <stdint.h>

namespace hami {

// Parses `text` as a memory size in bytes. On success stores the value and returns nullptr; on
// failure leaves `*bytes` unchanged and returns a static, human-readable reason.
const char* ParseByteSize(const char* text, uint64_t* bytes);

// Parses `text` as an integer percentage in [0, 100]. Same return convention.
const char* ParsePercent(const char* text, int* percent);

// Parses a boolean flag the way HAMi's env contract does: true/1/yes/on, false/0/no/off
// (case-insensitive). Same return convention.
const char* ParseBool(const char* text, bool* value);

}  // namespace hami
