// Kubernetes objects as nlohmann::json, plus the non-throwing accessors every caller needs.
//
// The client passes objects through untouched (unknown fields survive a read-modify-write). This is
// the one header that pulls in the full nlohmann parser; headers that only pass objects along use
// k8s/object_fwd.h.
//
//   HAMI_ASSIGN_OR_RETURN(Object pod, ParseObject(body));
//   std::string node = GetString(pod, "/spec/nodeName");
//
// Thread safety: free functions on values; an Object is not synchronised.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "common/status.h"
#include "k8s/object_fwd.h"

namespace hami::k8s {

// Parses untrusted JSON without exceptions; a non-object or malformed text is a DataLoss error.
Result<Object> ParseObject(std::string_view text);
// Any JSON value (arrays, scalars) without exceptions.
Result<Object> ParseJson(std::string_view text);

// An object's metadata.resourceVersion read straight from its text, without building the
// document (write replies whose body is otherwise unused). DataLoss when the text is not a JSON
// object; "" when the object has no resourceVersion.
Result<std::string> ScanResourceVersion(std::string_view text);

// The string at a JSON pointer such as "/metadata/name"; "" when missing or not a string.
std::string GetString(const Object& obj, std::string_view pointer);
// The integer at a JSON pointer; `fallback` when missing or not an integer.
int64_t GetInt(const Object& obj, std::string_view pointer, int64_t fallback = 0);

// metadata.annotations[key]; "" when missing or not a string.
std::string GetAnnotation(const Object& obj, std::string_view key);
// Whether metadata.annotations has `key` (with any value).
bool HasAnnotation(const Object& obj, std::string_view key);

inline std::string Name(const Object& obj) { return GetString(obj, "/metadata/name"); }
inline std::string Namespace(const Object& obj) { return GetString(obj, "/metadata/namespace"); }
inline std::string ResourceVersion(const Object& obj) {
  return GetString(obj, "/metadata/resourceVersion");
}
inline std::string Uid(const Object& obj) { return GetString(obj, "/metadata/uid"); }
// "namespace/name", or "name" for cluster-scoped objects: the informer cache key.
std::string ObjectKey(const Object& obj);

// Kubernetes time formats: RFC 3339 in UTC with seconds ("2024-01-01T00:00:00Z") and MicroTime
// ("2024-01-01T00:00:00.000000Z").
std::string FormatTime(WallTimePoint t);
std::string FormatMicroTime(WallTimePoint t);

}  // namespace hami::k8s
