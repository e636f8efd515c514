// How API server failures appear as Status, and predicates to tell them apart.
//
// Mapping (HTTP status -> StatusCode): 400/422 InvalidArgument, 401/403 PermissionDenied,
// 404 NotFound, 409 with reason AlreadyExists -> AlreadyExists, any other 409 -> Aborted (a
// resourceVersion conflict: re-read and retry), 410 -> OutOfRange (the requested resourceVersion
// is compacted: relist), 429 ResourceExhausted, 504 DeadlineExceeded, other 5xx Unavailable.
// Messages read "HTTP <code> <reason>: <server message>".
//
// Thread safety: pure functions.
#pragma once

#include <string_view>

#include "common/status.h"

namespace hami::k8s {

// Builds the Status for a non-2xx response; `body` is the server's metav1.Status JSON if any.
Status StatusFromHttp(int http_status, std::string_view body);

inline bool IsConflict(const Status& s) { return s.code() == StatusCode::kAborted; }
inline bool IsNotFound(const Status& s) { return s.code() == StatusCode::kNotFound; }
inline bool IsAlreadyExists(const Status& s) { return s.code() == StatusCode::kAlreadyExists; }
// The resourceVersion asked for is too old (HTTP 410 or a watch ERROR event with code 410).
inline bool IsGone(const Status& s) { return s.code() == StatusCode::kOutOfRange; }

}  // namespace hami::k8s
