#include "ctl/json.h"

#include <math.h>

#include <nlohmann/json.hpp>

namespace hami::ctl {
namespace {

using Ordered = nlohmann::ordered_json;

void Collect(const Ordered& node, std::string_view key, std::vector<std::string>* out) {
  if (node.is_object()) {
    for (auto it = node.begin(); it != node.end(); ++it) {
      const Ordered& v = it.value();
      if (it.key() == key && !v.is_structured()) {
        out->push_back(v.is_string() ? v.get<std::string>() : v.dump());
      }
      Collect(v, key, out);
    }
  } else if (node.is_array()) {
    for (const Ordered& v : node) Collect(v, key, out);
  }
}

}  // namespace

std::string DumpJson(const nlohmann::ordered_json& doc) {
  return doc.dump(2, ' ', false, nlohmann::ordered_json::error_handler_t::replace) + "\n";
}

double JsonRounded(double v) {
  if (!isfinite(v)) return v;
  return round(v * 1000.0) / 1000.0;
}

std::vector<std::string> JsonScalars(std::string_view json, std::string_view key) {
  std::vector<std::string> out;
  Ordered doc = Ordered::parse(json, nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded()) return out;
  Collect(doc, key, &out);
  return out;
}

}  // namespace hami::ctl
