// Test helpers shared by the extender's unit tests: the Lease hami-scheduler follows, as the API
// server answers it. Test-only.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "k8s/fake_transport.h"

namespace hami::extender::testing {

inline constexpr char kLeasePath[] =
    "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/hami-scheduler";

// kube-system/hami-scheduler held by `holder`, last renewed at `renew`, for 15 s.
inline k8s::HttpResponse Lease(const std::string& holder, const std::string& renew) {
  nlohmann::json l = {
      {"apiVersion", "coordination.k8s.io/v1"},
      {"kind", "Lease"},
      {"metadata",
       {{"name", "hami-scheduler"}, {"namespace", "kube-system"}, {"resourceVersion", "3"}}},
      {"spec", {{"holderIdentity", holder}, {"leaseDurationSeconds", 15}, {"renewTime", renew}}}};
  return k8s::FakeTransport::Json(200, l.dump());
}

}  // namespace hami::extender::testing
