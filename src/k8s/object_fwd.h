// Forward declarations of the object model (nlohmann::json) for headers that pass objects along
// without reading them. Include k8s/object.h to use them.
//
// Thread safety: declarations only.
#pragma once

#include <chrono>
#include <memory>
#include <nlohmann/json_fwd.hpp>

namespace hami::k8s {

using Object = nlohmann::json;
// Objects held by caches and delivered to handlers are shared and immutable.
using ObjectPtr = std::shared_ptr<const nlohmann::json>;
using WallTimePoint = std::chrono::system_clock::time_point;

}  // namespace hami::k8s
