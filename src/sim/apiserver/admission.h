// Mutating admission for the simulated API server: on pod CREATE, every matching webhook of
// every MutatingWebhookConfiguration is called over HTTPS with an AdmissionReview (v1, or v1beta1
// when that is all the webhook accepts), the caBundle is used as the only trust anchor, the
// returned JSONPatch is applied, and failurePolicy (Fail, the default, or Ignore) and
// timeoutSeconds (default 10) are honoured. Webhooks run in configuration name order, then in
// their order inside a configuration.
//
// Simplifications: only clientConfig.url is reachable (a clientConfig.service reference counts
// as a failed call); reinvocationPolicy, matchPolicy and matchConditions are ignored.
//
// Thread safety: stateless functions; safe to call concurrently.
#pragma once

#include <nlohmann/json_fwd.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "sim/apiserver/resources.h"
#include "sim/apiserver/store.h"

namespace hami::sim {

// Returns the admitted object (possibly patched). A denial is PermissionDenied with the
// webhook's message; a failed call under failurePolicy Fail is Internal.
Result<nlohmann::json> AdmitCreate(const std::vector<ObjectPtr>& webhook_configurations,
                                   const ResourceInfo& resource,
                                   const nlohmann::json& namespace_object, nlohmann::json object,
                                   const std::string& user);

}  // namespace hami::sim
