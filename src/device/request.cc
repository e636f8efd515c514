#include "device/request.h"

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

}  // namespace hami::device
