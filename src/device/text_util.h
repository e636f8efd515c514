// Internal text helpers for the colon/comma wire formats, matching the Go standard library
// functions upstream uses (strings.Split, strconv.ParseInt base 10, strconv.ParseBool).
//
// Thread safety: pure functions.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace hami::device::text {

// Like Go strings.Split: "" -> {""}; "a:" -> {"a", ""}. Views point into `s`.
std::vector<std::string_view> Split(std::string_view s, char sep);

// Optional '+'/'-', then one or more ASCII digits, nothing else; value within [min, max].
// On failure returns a reason ("not an integer", "out of range [a, b]"); nullptr on success.
const char* ParseInt(std::string_view s, int64_t min, int64_t max, int64_t* out);

// Go strconv.ParseBool: 1 t T TRUE true True / 0 f F FALSE false False.
bool ParseBool(std::string_view s, bool* out);

// Strips ASCII spaces and tabs (and CR/LF) at both ends.
std::string_view TrimSpace(std::string_view s);

// Lowercases ASCII letters.
std::string AsciiLower(std::string_view s);

// A device type name folded for matching: ASCII letters lowercased, '-', '_' and spaces dropped
// ("NVIDIA-GeForce-RTX-4090" and "NVIDIA GeForce RTX 4090" fold alike). Dropping the same
// characters from both sides keeps every substring match of the unfolded names.
std::string FoldTypeName(std::string_view s);

// Well-formed UTF-8 (no overlong forms, surrogates or code points above U+10FFFF).
bool IsValidUtf8(std::string_view s);

// Quoted, truncated rendering for error messages.
std::string Quote(std::string_view s);

}  // namespace hami::device::text
