// Resource quantities as kube-apiserver stores them.
//
// The real server decodes every quantity field (container limits and requests, node capacity,
// quota hard and used, ...) into resource.Quantity and writes it back in canonical form, always
// as a JSON string: a client that sent `nvidia.com/gpu: 1` reads back "1", `gpumem: 3000` reads
// back "3k", `memory: 1.5Gi` reads back "1536Mi", `cpu: 0.5` reads back "500m". Typed clients
// reject a number there, and HAMi's own components must read what the real server gives them,
// so the simulated server does the same on every write path.
//
// Canonical form (the documented rules of resource.Quantity): the value keeps its format (binary
// suffix, decimal suffix or exponent); the suffix or exponent is the largest that loses no
// precision and needs no fractional digits; a binary value below 1024 in magnitude or with a
// fraction is written in decimal form; precision below one nano-unit is rounded up.
//
// Thread safety: pure functions.
#pragma once

#include <nlohmann/json_fwd.hpp>
#include <string>
#include <string_view>

#include "common/status.h"

namespace hami::sim {

// The canonical spelling of the quantity `text` ("3000" -> "3k", "1.5Gi" -> "1536Mi",
// "0.5" -> "500m", "1e3" -> "1e3"); InvalidArgument when it is not a quantity.
Result<std::string> CanonicalQuantity(std::string_view text);

// Rewrites in place every quantity field of `obj`, an object of `kind` in the core or apps
// group (Pod, Deployment, DaemonSet, Node, ResourceQuota; other kinds have none), to its
// canonical string: numbers become strings, strings are canonicalized, null is "0". An invalid
// quantity is an InvalidArgument naming the field, as the real server's decoding error does.
Status CanonicalizeQuantities(const std::string& kind, nlohmann::json& obj);

}  // namespace hami::sim
