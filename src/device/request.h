// Reading device requests out of a container's resources: the vendor-independent part.
//
// A resource's value is taken from limits when the name is there, else from requests (HAMi's
// rule). Values are Kubernetes quantities read as exact integers (see resource_quantity.h);
// anything else is an InvalidArgument error that names the resource and the reason, so the
// webhook and scheduler can refuse the pod with a clear message instead of silently ignoring the
// request as upstream does.
//
// Thread safety: pure functions.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

#include "common/status.h"
#include "device/device.h"

namespace hami::device {

// The quantity text for `resource` from limits, else requests; nullopt when in neither.
std::optional<std::string_view> FindQuantity(const ContainerResources& c,
                                             std::string_view resource);

// The integer value of `resource`, required to lie in [min, max]; nullopt when absent.
// Errors read like: `nvidia.com/gpucores="150": must be between 0 and 100`.
Result<std::optional<int64_t>> ReadIntegerResource(const ContainerResources& c,
                                                   std::string_view resource, int64_t min,
                                                   int64_t max);

// A memory amount counted in units of `unit_mib` MiB (1 for gpumem), read as ReadIntegerResource
// does. A binary unit ("4Gi", "512Mi") is refused with a hint, since Kubernetes reads a unit as a
// multiplier of the count (4Gi MiB), e.g. `nvidia.com/gpumem="4Gi": counts MiB, without a unit:
// 4Gi is 4096`. Decimal multipliers are how the API server writes plain numbers (its canonical
// form of 3000 is "3k", of 1000000 "1M"), so "3k" is 3000 MiB; from "M" up ("1M" = 10^6 units,
// more memory than any accelerator has) the value can only be a size in bytes ("2G") and is
// refused with the same hint.
Result<std::optional<int64_t>> ReadMemoryResource(const ContainerResources& c,
                                                  std::string_view resource, int64_t max,
                                                  int64_t unit_mib);

}  // namespace hami::device
