// Kubernetes resource quantities ("1", "500m", "4Ki", "2G", "1e3") read as exact integers, for
// the extended resources HAMi uses (nvidia.com/gpu, gpumem, gpumem-percentage, gpucores,
// priority).
//
// Syntax is Kubernetes': optional sign, decimal number with optional fraction, then an optional
// suffix: binary Ki Mi Gi Ti Pi Ei (powers of 1024), decimal n u m k M G T P E (m = 1/1000), or
// an exponent e<n>/E<n>. The value must be a whole number: "1000m" is 1, "1500m" or "1.5" are
// rejected, "2k" is 2000, "1Ki" is 1024.
//
// How each resource reads the number (the unit is the resource's own, never bytes):
//   gpu                 devices              "2" = two GPUs; "2000m" = 2
//   gpumem              MiB per device       "4096" = 4 GiB, "4e3" = 4000 MiB, "3k" = 3000 MiB
//                                            (the API server's form of 3000); "4Gi" or "2G" is
//                                            refused with the conversion (ReadMemoryResource)
//   gpumem-percentage   percent 0..100       "50"
//   gpucores            percent 0..100       "30"
//   priority            0 high, 1 low        "1"
//
// Thread safety: pure functions.
#pragma once

#include <cstdint>
#include <string_view>

#include "common/status.h"

namespace hami::device {

// The exact integer value of `text`; InvalidArgument when it is not a quantity, not a whole
// number, or outside int64.
Result<int64_t> ParseIntegerQuantity(std::string_view text);

// The multiplier suffix of a quantity, binary (Ki Mi Gi Ti Pi Ei) or decimal (k M G T P E);
// empty for a plain number, an exponent ("1e3"), a dividing suffix (n u m) or garbage.
std::string_view QuantityMultiplier(std::string_view text);

}  // namespace hami::device
