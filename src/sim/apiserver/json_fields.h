// Lenient reads of one member of a JSON object, shared by the simulated API server's handlers,
// its authorizer and its table printer: a stored object may lack any optional field, or hold one
// of the wrong type, and each caller treats that as "absent" rather than as an error.
//
// Thread safety: pure functions.
#pragma once

#include <nlohmann/json_fwd.hpp>
#include <string>

namespace hami::sim::json_fields {

// obj[key] when obj is an object that has it; otherwise a null that lives for the program.
const nlohmann::json& Member(const nlohmann::json& obj, const char* key);

// obj[key] when it is a string; "" otherwise (also when obj is not an object).
std::string Str(const nlohmann::json& obj, const char* key);

}  // namespace hami::sim::json_fields
