// The Table rendering of `kubectl get` (Accept: application/json;as=Table;v=v1;g=meta.k8s.io):
// the columns kube-apiserver's printers give per kind, so the simulated cluster reads like a
// real one.
//   pods        NAME READY STATUS RESTARTS AGE, and with -o wide IP NODE NOMINATED NODE
//               READINESS GATES
//   nodes       NAME STATUS ROLES AGE VERSION, and with -o wide INTERNAL-IP EXTERNAL-IP
//               OS-IMAGE KERNEL-VERSION CONTAINER-RUNTIME
//   events      LAST SEEN TYPE REASON OBJECT MESSAGE, and with -o wide SUBOBJECT SOURCE
//               FIRST SEEN COUNT NAME
//   leases      NAME HOLDER AGE
//   namespaces  NAME STATUS AGE;   anything else: NAME AGE
// Columns shown only with -o wide have priority 1, as the real server marks them.
//
// Thread safety: pure functions.
#pragma once

#include <cstdint>
#include <ctime>
#include <memory>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <vector>

#include "sim/apiserver/resources.h"

namespace hami::sim {

// A duration as kubectl prints ages: "45s", "3m20s", "2h15m", "5d", "2y30d".
std::string HumanDuration(long long seconds);

// The Table of `objects` of resource `r`, ages measured at `now`.
nlohmann::json TableOf(const ResourceInfo& r,
                       const std::vector<std::shared_ptr<const nlohmann::json>>& objects,
                       int64_t revision, std::time_t now);

}  // namespace hami::sim
