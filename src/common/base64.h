// Standard base64 (RFC 4648 alphabet), as Kubernetes uses it for *-data kubeconfig fields,
// webhook caBundles and AdmissionReview patches.
//
// Thread safety: pure functions.
#pragma once

#include <string>
#include <string_view>

#include "common/status.h"

namespace hami {

// With '=' padding.
std::string Base64Encode(std::string_view data);
// Padding optional, whitespace ignored; InvalidArgument on any other character, data after
// padding or an impossible length.
Result<std::string> Base64Decode(std::string_view in);

}  // namespace hami
