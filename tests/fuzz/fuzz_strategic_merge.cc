// Fuzzes the simulated API server's strategic merge patch and quantity canonicalization, which
// read request bodies of any client: the input is three lines, a kind, the stored object and the
// patch (JSON). Applying must succeed or fail with a reason, never crash or throw; a successful
// patch leaves no directive ("$..." key) in the object; canonical quantities are fixed points.
#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "sim/apiserver/quantities.h"
#include "sim/apiserver/strategic_merge.h"

using nlohmann::json;

namespace {

bool HasDirective(const json& j) {
  if (j.is_object()) {
    for (auto it = j.begin(); it != j.end(); ++it) {
      if (!it.key().empty() && it.key()[0] == '$') return true;
      if (HasDirective(it.value())) return true;
    }
  } else if (j.is_array()) {
    for (const json& e : j) {
      if (HasDirective(e)) return true;
    }
  }
  return false;
}

void CheckQuantity(const std::string& text) {
  hami::Result<std::string> once = hami::sim::CanonicalQuantity(text);
  if (!once.ok()) {
    if (once.status().message().empty()) __builtin_trap();
    return;
  }
  hami::Result<std::string> twice = hami::sim::CanonicalQuantity(*once);
  if (!twice.ok() || *twice != *once) __builtin_trap();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string text(reinterpret_cast<const char*>(data), size);
  CheckQuantity(text.substr(0, text.find('\n')));
  std::istringstream in(text);
  std::string kind, original_line, patch_line;
  std::getline(in, kind);
  std::getline(in, original_line);
  std::getline(in, patch_line);
  json original = json::parse(original_line, nullptr, /*allow_exceptions=*/false);
  json patch = json::parse(patch_line, nullptr, /*allow_exceptions=*/false);
  if (original.is_discarded() || !original.is_object() || patch.is_discarded()) return 0;
  if (HasDirective(original)) return 0;  // stored objects never hold directives
  hami::Status s = hami::sim::ApplyStrategicMergePatch(kind, original, patch);
  if (!s.ok()) {
    if (s.message().empty()) __builtin_trap();
    return 0;
  }
  if (!original.is_object() || HasDirective(original)) __builtin_trap();
  hami::Status q = hami::sim::CanonicalizeQuantities(kind, original);
  if (!q.ok() && q.message().empty()) __builtin_trap();
  return 0;
}
