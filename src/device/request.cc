#include "device/request.h"

#include <algorithm>
#include <string>

#include "device/resource_quantity.h"
#include "device/text_util.h"

namespace hami::device {

std::optional<std::string_view> FindQuantity(const ContainerResources& c,
                                             std::string_view resource) {
  if (auto it = c.limits.find(resource); it != c.limits.end()) return it->second;
  if (auto it = c.requests.find(resource); it != c.requests.end()) return it->second;
  return std::nullopt;
}

Result<std::optional<int64_t>> ReadIntegerResource(const ContainerResources& c,
                                                   std::string_view resource, int64_t min,
                                                   int64_t max) {
  std::optional<std::string_view> q = FindQuantity(c, resource);
  if (!q) return std::optional<int64_t>();
  std::string where = "container " + text::Quote(c.name) + ": " + std::string(resource);
  Result<int64_t> v = ParseIntegerQuantity(*q);
  if (!v.ok()) return InvalidArgumentError(where + "=" + v.status().message());
  if (*v < min || *v > max) {
    std::string why = *v < 0 && min >= 0 ? "must not be negative"
                                         : "must be between " + std::to_string(min) + " and " +
                                               std::to_string(max);
    return InvalidArgumentError(where + "=" + text::Quote(*q) + ": " + why);
  }
  return std::optional<int64_t>(*v);
}

Result<std::optional<int64_t>> ReadMemoryResource(const ContainerResources& c,
                                                  std::string_view resource, int64_t max,
                                                  int64_t unit_mib) {
  std::optional<std::string_view> q = FindQuantity(c, resource);
  // "k" is the API server's canonical form of a plain multiple of 1000 ("3k" for 3000).
  if (q && !QuantityMultiplier(*q).empty() && QuantityMultiplier(*q) != "k") {
    Result<int64_t> bytes = ParseIntegerQuantity(*q);
    if (bytes.ok() && *bytes >= 0) {
      const int64_t unit = std::max<int64_t>(unit_mib, 1) << 20;
      const std::string counts =
          unit_mib <= 1 ? std::string("MiB") : "units of " + std::to_string(unit_mib) + " MiB";
      std::string in_units = *bytes < unit        ? " is less than 1"
                             : *bytes % unit == 0 ? " is " + std::to_string(*bytes / unit)
                                                  : " is about " + std::to_string(*bytes / unit);
      return InvalidArgumentError("container " + text::Quote(c.name) + ": " +
                                  std::string(resource) + "=" + text::Quote(*q) + ": counts " +
                                  counts + ", without a unit: " + std::string(*q) + in_units);
    }
  }
  return ReadIntegerResource(c, resource, 0, max);
}

}  // namespace hami::device
