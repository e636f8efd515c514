#include "sim/apiserver/quantities.h"

#include <nlohmann/json.hpp>
#include <vector>

namespace hami::sim {
namespace {

using json = nlohmann::json;
using i128 = __int128;

// |value| must stay below this many nano-units (10^36, far above any real quantity), so that
// every product below fits in 128 bits.
const i128 kLimitNano = [] {
  i128 v = 1;
  for (int i = 0; i < 36; ++i) v *= 10;
  return v;
}();

i128 Pow10(int e) {
  i128 v = 1;
  for (int i = 0; i < e; ++i) v *= 10;
  return v;
}

enum class Format { kDecimalSi, kBinarySi, kDecimalExponent };

struct Parsed {
  bool negative = false;
  i128 nano = 0;  // magnitude in units of 10^-9, rounded up
  Format format = Format::kDecimalSi;
};

constexpr char kSyntax[] =
    "quantities must match the regular expression "
    "'^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'";

Result<Parsed> Parse(std::string_view s) {
  Parsed p;
  size_t i = 0;
  if (i < s.size() && (s[i] == '+' || s[i] == '-')) p.negative = s[i++] == '-';
  // Mantissa: digits with at most one '.', at least one digit.
  i128 mantissa = 0;
  int frac_digits = 0, digits = 0;
  bool dot = false;
  for (; i < s.size() && ((s[i] >= '0' && s[i] <= '9') || s[i] == '.'); ++i) {
    if (s[i] == '.') {
      if (dot) return InvalidArgumentError(kSyntax);
      dot = true;
      continue;
    }
    if (mantissa == 0 && s[i] == '0') {  // leading zeros carry no precision
      if (dot) ++frac_digits;
      ++digits;
      continue;
    }
    // 37 significant digits: every canonical spelling (below 10^36 nano-units) reads back.
    if (++digits > 37) return InvalidArgumentError("quantity too large or too precise");
    mantissa = mantissa * 10 + (s[i] - '0');
    if (dot) ++frac_digits;
  }
  if (digits == 0) return InvalidArgumentError(kSyntax);
  std::string_view suffix = s.substr(i);
  int exp10 = 0;  // value = mantissa * 10^(exp10 - frac_digits) * 2^exp2
  int exp2 = 0;
  static const std::pair<std::string_view, int> kDecimal[] = {
      {"", 0},  {"n", -9}, {"u", -6}, {"m", -3}, {"k", 3},
      {"M", 6}, {"G", 9},  {"T", 12}, {"P", 15}, {"E", 18}};
  static const std::pair<std::string_view, int> kBinary[] = {{"Ki", 10}, {"Mi", 20}, {"Gi", 30},
                                                             {"Ti", 40}, {"Pi", 50}, {"Ei", 60}};
  bool known = false;
  for (const auto& [name, e] : kDecimal) {
    if (suffix == name) exp10 = e, known = true;
  }
  for (const auto& [name, e] : kBinary) {
    if (suffix == name) exp2 = e, known = true, p.format = Format::kBinarySi;
  }
  if (!known) {
    // An exponent: e or E, an optional sign, digits.
    if (suffix.size() < 2 || (suffix[0] != 'e' && suffix[0] != 'E')) {
      return InvalidArgumentError(kSyntax);
    }
    size_t j = 1;
    bool neg_exp = false;
    if (suffix[j] == '+' || suffix[j] == '-') neg_exp = suffix[j++] == '-';
    if (j >= suffix.size()) return InvalidArgumentError(kSyntax);
    int e = 0;
    for (; j < suffix.size(); ++j) {
      if (suffix[j] < '0' || suffix[j] > '9') return InvalidArgumentError(kSyntax);
      e = e * 10 + (suffix[j] - '0');
      if (e > 60) return InvalidArgumentError("quantity exponent out of range");
    }
    exp10 = neg_exp ? -e : e;
    p.format = Format::kDecimalExponent;
  }
  // nano = mantissa * 2^exp2 * 10^(exp10 - frac_digits + 9), rounded up.
  i128 v = mantissa;
  for (int k = 0; k < exp2; ++k) {
    v *= 2;
    if (v >= kLimitNano) return InvalidArgumentError("quantity too large");
  }
  int shift = exp10 - frac_digits + 9;
  if (shift >= 0) {
    for (int k = 0; k < shift; ++k) {
      v *= 10;
      if (v >= kLimitNano) return InvalidArgumentError("quantity too large");
    }
  } else if (v != 0) {
    i128 d = -shift > 36 ? kLimitNano * 10 : Pow10(-shift);
    v = (v + d - 1) / d;  // rounds up, as the real server does below nano precision
  }
  p.nano = v;
  return p;
}

std::string ToString(i128 v) {
  if (v == 0) return "0";
  std::string out;
  while (v > 0) {
    out.insert(out.begin(), static_cast<char>('0' + static_cast<int>(v % 10)));
    v /= 10;
  }
  return out;
}

std::string Spell(const Parsed& p) {
  if (p.nano == 0) return "0";
  const std::string sign = p.negative ? "-" : "";
  const i128 billion = Pow10(9);
  Format format = p.format;
  if (format == Format::kBinarySi && (p.nano % billion != 0 || p.nano / billion < 1024)) {
    format = Format::kDecimalSi;  // fractions and small values have no binary spelling
  }
  if (format == Format::kBinarySi) {
    static const char* kSuffix[] = {"", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei"};
    i128 v = p.nano / billion;
    int k = 0;
    while (k < 6 && v % 1024 == 0) v /= 1024, ++k;
    return sign + ToString(v) + kSuffix[k];
  }
  // Decimal: the largest exponent, a multiple of 3, that leaves a whole mantissa.
  i128 v = p.nano;
  int e = -9;
  const int max_e = format == Format::kDecimalSi ? 18 : 1 << 20;
  while (e + 3 <= max_e && v % 1000 == 0) v /= 1000, e += 3;
  if (format == Format::kDecimalExponent) {
    return sign + ToString(v) + (e == 0 ? "" : "e" + std::to_string(e));
  }
  static const std::pair<int, const char*> kSuffix[] = {{-9, "n"}, {-6, "u"}, {-3, "m"}, {0, ""},
                                                        {3, "k"},  {6, "M"},  {9, "G"},  {12, "T"},
                                                        {15, "P"}, {18, "E"}};
  for (const auto& [exp, name] : kSuffix) {
    if (exp == e) return sign + ToString(v) + name;
  }
  return sign + ToString(v);  // unreachable: e is a multiple of 3 in [-9, 18]
}

// ---- where quantities live -------------------------------------------------------------------

// A field path: names, "[]" for every element of an array, "*" for every value of an object.
using Path = std::vector<std::string>;

void AddPodSpec(const Path& prefix, std::vector<Path>* out) {
  for (const char* list : {"containers", "initContainers", "ephemeralContainers"}) {
    for (const char* part : {"limits", "requests"}) {
      Path p = prefix;
      p.insert(p.end(), {list, "[]", "resources", part, "*"});
      out->push_back(p);
    }
  }
  for (const Path& tail : std::vector<Path>{{"overhead", "*"},
                                            {"resources", "limits", "*"},
                                            {"resources", "requests", "*"},
                                            {"volumes", "[]", "emptyDir", "sizeLimit"}}) {
    Path p = prefix;
    p.insert(p.end(), tail.begin(), tail.end());
    out->push_back(p);
  }
}

const std::vector<Path>& PathsOf(const std::string& kind) {
  static const std::vector<Path> kNone;
  static const std::vector<Path> kPod = [] {
    std::vector<Path> out;
    AddPodSpec({"spec"}, &out);
    for (const char* list :
         {"containerStatuses", "initContainerStatuses", "ephemeralContainerStatuses"}) {
      out.push_back({"status", list, "[]", "allocatedResources", "*"});
      out.push_back({"status", list, "[]", "resources", "limits", "*"});
      out.push_back({"status", list, "[]", "resources", "requests", "*"});
    }
    return out;
  }();
  static const std::vector<Path> kTemplate = [] {
    std::vector<Path> out;
    AddPodSpec({"spec", "template", "spec"}, &out);
    return out;
  }();
  static const std::vector<Path> kNode = {{"status", "capacity", "*"},
                                          {"status", "allocatable", "*"}};
  static const std::vector<Path> kQuota = {
      {"spec", "hard", "*"}, {"status", "hard", "*"}, {"status", "used", "*"}};
  if (kind == "Pod") return kPod;
  if (kind == "Deployment" || kind == "DaemonSet") return kTemplate;
  if (kind == "Node") return kNode;
  if (kind == "ResourceQuota") return kQuota;
  return kNone;
}

Status Rewrite(json& value, const std::string& where) {
  std::string text;
  if (value.is_string()) {
    text = value.get<std::string>();
  } else if (value.is_number()) {
    text = value.dump();
  } else if (value.is_null()) {
    value = "0";
    return OkStatus();
  } else {
    return InvalidArgumentError(where + ": a quantity must be a string or a number");
  }
  Result<std::string> canonical = CanonicalQuantity(text);
  if (!canonical.ok()) {
    return InvalidArgumentError(where + ": " + canonical.status().message());
  }
  value = *canonical;
  return OkStatus();
}

Status Walk(json& node, const Path& path, size_t at, const std::string& where) {
  if (at == path.size()) return Rewrite(node, where);
  const std::string& step = path[at];
  if (step == "[]") {
    if (!node.is_array()) return OkStatus();
    for (size_t i = 0; i < node.size(); ++i) {
      HAMI_RETURN_IF_ERROR(Walk(node[i], path, at + 1, where + "[" + std::to_string(i) + "]"));
    }
    return OkStatus();
  }
  if (!node.is_object()) return OkStatus();
  if (step == "*") {
    for (auto it = node.begin(); it != node.end(); ++it) {
      HAMI_RETURN_IF_ERROR(Walk(it.value(), path, at + 1, where + "[" + it.key() + "]"));
    }
    return OkStatus();
  }
  auto it = node.find(step);
  if (it == node.end()) return OkStatus();
  return Walk(*it, path, at + 1, where.empty() ? step : where + "." + step);
}

}  // namespace

Result<std::string> CanonicalQuantity(std::string_view text) {
  HAMI_ASSIGN_OR_RETURN(Parsed p, Parse(text));
  return Spell(p);
}

Status CanonicalizeQuantities(const std::string& kind, json& obj) {
  for (const Path& path : PathsOf(kind)) HAMI_RETURN_IF_ERROR(Walk(obj, path, 0, ""));
  return OkStatus();
}

}  // namespace hami::sim
