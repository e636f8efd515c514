#include "sim/apiserver/json_fields.h"

#include <nlohmann/json.hpp>

namespace hami::sim::json_fields {

const nlohmann::json& Member(const nlohmann::json& obj, const char* key) {
  static const nlohmann::json kNull;
  if (!obj.is_object()) return kNull;
  auto it = obj.find(key);
  return it == obj.end() ? kNull : *it;
}

std::string Str(const nlohmann::json& obj, const char* key) {
  const nlohmann::json& v = Member(obj, key);
  return v.is_string() ? v.get<std::string>() : std::string();
}

}  // namespace hami::sim::json_fields
