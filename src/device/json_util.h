// Internal helpers shared by the device module's JSON codecs (never included by public headers:
// it pulls in nlohmann/json).
//
// Writing: upstream emits JSON with Go's encoding/json, so our encoders write bytes by hand with
// Go's escaping rules (HTML-safe: <, >, & as \u003c...; \b \f \n \r \t; other controls as \u00XX;
// U+2028/U+2029 escaped; invalid UTF-8 replaced by \ufffd). Key order and omitempty are the
// encoder's business.
//
// Reading: nlohmann without exceptions, with Go's decoding semantics where they matter: member
// names match exactly or else ASCII-case-insensitively, `null` leaves a field at its zero value,
// unknown members are ignored, integers must be JSON integers within the target range.
//
// Thread safety: pure functions.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "common/status.h"

namespace hami::device::json_util {

using Json = nlohmann::json;

// Appends `s` as a quoted JSON string, escaped exactly as Go's json.Marshal does.
void AppendGoString(std::string* out, std::string_view s);

// Parses a complete JSON document. `what` names the input in error messages.
Result<Json> Parse(std::string_view text, std::string_view what);

// The member `key` of object `obj` (exact match first, then ASCII case-insensitive), or nullptr
// when absent or null. Precondition: obj.is_object().
const Json* Member(const Json& obj, std::string_view key);

// Typed readers: `v` must have the right JSON type and fit the target; `path` names the field in
// the error ("devices[2].count").
Status ReadInt64(const Json& v, std::string_view path, int64_t min, int64_t max, int64_t* out);
Status ReadInt32(const Json& v, std::string_view path, int32_t* out);
Status ReadUint32(const Json& v, std::string_view path, uint32_t* out);
Status ReadString(const Json& v, std::string_view path, std::string* out);
Status ReadBool(const Json& v, std::string_view path, bool* out);
Status ReadDouble(const Json& v, std::string_view path, double* out);

// Reads member `key` if present and not null; leaves *out untouched otherwise.
template <typename T>
Status ReadOptional(const Json& obj, std::string_view key, std::string_view path, T* out);

// Shortened, printable rendering of an input for error messages.
std::string Excerpt(std::string_view text);

// "<prefix>[<i>]".
std::string Indexed(std::string_view prefix, size_t i);
// "<prefix>.<key>" (or "<key>" when prefix is empty).
std::string Field(std::string_view prefix, std::string_view key);

template <typename T>
Status ReadOptional(const Json& obj, std::string_view key, std::string_view path, T* out) {
  const Json* v = Member(obj, key);
  if (v == nullptr) return OkStatus();
  std::string p = Field(path, key);
  if constexpr (std::is_same_v<T, int32_t>) {
    return ReadInt32(*v, p, out);
  } else if constexpr (std::is_same_v<T, uint32_t>) {
    return ReadUint32(*v, p, out);
  } else if constexpr (std::is_same_v<T, std::string>) {
    return ReadString(*v, p, out);
  } else if constexpr (std::is_same_v<T, bool>) {
    return ReadBool(*v, p, out);
  } else if constexpr (std::is_same_v<T, double>) {
    return ReadDouble(*v, p, out);
  } else {
    static_assert(sizeof(T) == 0, "unsupported field type");
  }
}

}  // namespace hami::device::json_util
