// hamictl's --json outputs on nlohmann-json: documents are built as nlohmann::ordered_json (keys
// in the order the program sets them) and printed by DumpJson; JsonScalars pulls values back out
// (for the demo's checks and the tests).
//
// Bytes from a region file or a driver are not guaranteed to be UTF-8: DumpJson replaces an
// invalid sequence with U+FFFD, so the output is always valid JSON.
//
// Thread safety: pure functions.
#pragma once

#include <nlohmann/json_fwd.hpp>
#include <string>
#include <string_view>
#include <vector>

namespace hami::ctl {

// The document indented by two spaces, followed by a newline.
std::string DumpJson(const nlohmann::ordered_json& doc);

// `v` rounded to three decimals (a non-finite value prints as null).
double JsonRounded(double v);

// Every scalar value of `key` in `json`, in document order, as text: numbers, true, false and
// null as JSON writes them, strings as their value. Objects and arrays under `key` are skipped;
// text that is not JSON yields none.
std::vector<std::string> JsonScalars(std::string_view json, std::string_view key);

}  // namespace hami::ctl
