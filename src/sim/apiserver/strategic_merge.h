// Strategic merge patch (application/strategic-merge-patch+json), what `kubectl apply`, `edit`
// and `patch` send for built-in kinds.
//
// Unlike a JSON merge patch, a list may be merged element by element instead of replaced. Which
// lists merge, and by which key, is part of each API type (the patchStrategy / patchMergeKey of
// its fields); the kinds this server stores carry the published ones: containers, env, ports,
// volumeMounts, volumes, conditions, webhooks, finalizers, ownerReferences, ... Directives:
//   {"$patch": "replace"}                  in a map: the map is replaced by the rest of the patch;
//                                          as a list element: the list is replaced by the others
//   {"$patch": "delete"} / {"$patch": "delete", "<key>": v}
//                                          in a map: the map goes; in a merged list: the element
//                                          whose merge key is v goes
//   "$retainKeys": [...]                   keys of the map not listed are cleared first
//   "$setElementOrder/<field>": [...]      the order of the merged list; elements not listed
//                                          (added by others) keep their place relative to the
//                                          original's
//   "$deleteFromPrimitiveList/<field>": [...]  values removed from a merged list of scalars
// null deletes a key, maps merge recursively, lists without a merge strategy are replaced.
//
// Thread safety: pure functions over immutable tables.
#pragma once

#include <nlohmann/json_fwd.hpp>
#include <string>

#include "common/status.h"

namespace hami::sim {

// Applies `patch` (a JSON object) to `object`, of `kind` ("Pod", "Deployment",
// "MutatingWebhookConfiguration", ...), in place. A malformed patch (a directive of the wrong
// type, an unknown $patch, a merged list element without its merge key) is an InvalidArgument
// and leaves `object` in an unspecified state (callers patch a copy).
Status ApplyStrategicMergePatch(const std::string& kind, nlohmann::json& object,
                                const nlohmann::json& patch);

}  // namespace hami::sim
