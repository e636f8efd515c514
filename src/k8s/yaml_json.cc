#include "k8s/yaml_json.h"

#include <yaml-cpp/yaml.h>

#include <charconv>
#include <cstdint>

namespace hami::k8s {
namespace {

using Json = nlohmann::json;

Json ConvertYaml(const YAML::Node& n) {
  switch (n.Type()) {
    case YAML::NodeType::Map: {
      Json o = Json::object();
      for (const auto& kv : n) o[kv.first.as<std::string>()] = ConvertYaml(kv.second);
      return o;
    }
    case YAML::NodeType::Sequence: {
      Json a = Json::array();
      for (const auto& v : n) a.push_back(ConvertYaml(v));
      return a;
    }
    case YAML::NodeType::Scalar: {
      std::string s = n.Scalar();
      if (n.Tag() == "!") return s;  // quoted
      int64_t v = 0;
      auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
      if (ec == std::errc() && p == s.data() + s.size() && !s.empty()) return v;
      if (s == "true") return true;
      if (s == "false") return false;
      if (s == "null" || s == "~") return nullptr;
      return s;
    }
    default:
      return nullptr;
  }
}

}  // namespace

Result<Object> YamlToJson(const std::string& doc) {
  try {
    YAML::Node n = YAML::Load(doc);
    return ConvertYaml(n);
  } catch (const std::exception& e) {
    return InvalidArgumentError(std::string("yaml: ") + e.what());
  }
}

}  // namespace hami::k8s
