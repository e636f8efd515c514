#include "device/json_util.h"

#include <cmath>
#include <limits>

namespace hami::device::json_util {

namespace {

constexpr char kHex[] = "0123456789abcdef";

// Length of the valid UTF-8 sequence starting at s[i], or 0 if invalid (Go's rules: no overlong
// forms, no surrogates, at most U+10FFFF).
size_t Utf8SequenceLength(std::string_view s, size_t i, uint32_t* rune) {
  unsigned char c0 = static_cast<unsigned char>(s[i]);
  auto cont = [&](size_t k) -> int {
    if (i + k >= s.size()) return -1;
    unsigned char c = static_cast<unsigned char>(s[i + k]);
    return (c & 0xC0) == 0x80 ? (c & 0x3F) : -1;
  };
  if (c0 >= 0xC2 && c0 <= 0xDF) {
    int c1 = cont(1);
    if (c1 < 0) return 0;
    *rune = ((c0 & 0x1Fu) << 6) | static_cast<uint32_t>(c1);
    return 2;
  }
  if (c0 >= 0xE0 && c0 <= 0xEF) {
    int c1 = cont(1), c2 = cont(2);
    if (c1 < 0 || c2 < 0) return 0;
    uint32_t r =
        ((c0 & 0x0Fu) << 12) | (static_cast<uint32_t>(c1) << 6) | static_cast<uint32_t>(c2);
    if (r < 0x800 || (r >= 0xD800 && r <= 0xDFFF)) return 0;
    *rune = r;
    return 3;
  }
  if (c0 >= 0xF0 && c0 <= 0xF4) {
    int c1 = cont(1), c2 = cont(2), c3 = cont(3);
    if (c1 < 0 || c2 < 0 || c3 < 0) return 0;
    uint32_t r = ((c0 & 0x07u) << 18) | (static_cast<uint32_t>(c1) << 12) |
                 (static_cast<uint32_t>(c2) << 6) | static_cast<uint32_t>(c3);
    if (r < 0x10000 || r > 0x10FFFF) return 0;
    *rune = r;
    return 4;
  }
  return 0;
}

bool EqualsIgnoreAsciiCase(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    char x = a[i], y = b[i];
    if (x >= 'A' && x <= 'Z') x = static_cast<char>(x - 'A' + 'a');
    if (y >= 'A' && y <= 'Z') y = static_cast<char>(y - 'A' + 'a');
    if (x != y) return false;
  }
  return true;
}

const char* TypeName(const Json& v) { return v.type_name(); }

}  // namespace

void AppendGoString(std::string* out, std::string_view s) {
  out->push_back('"');
  for (size_t i = 0; i < s.size();) {
    unsigned char c = static_cast<unsigned char>(s[i]);
    if (c < 0x80) {
      switch (c) {
        case '"':
          out->append("\\\"");
          break;
        case '\\':
          out->append("\\\\");
          break;
        case '\b':
          out->append("\\b");
          break;
        case '\f':
          out->append("\\f");
          break;
        case '\n':
          out->append("\\n");
          break;
        case '\r':
          out->append("\\r");
          break;
        case '\t':
          out->append("\\t");
          break;
        case '<':
        case '>':
        case '&':
          out->append("\\u00");
          out->push_back(kHex[c >> 4]);
          out->push_back(kHex[c & 0xF]);
          break;
        default:
          if (c < 0x20) {
            out->append("\\u00");
            out->push_back(kHex[c >> 4]);
            out->push_back(kHex[c & 0xF]);
          } else {
            out->push_back(static_cast<char>(c));
          }
      }
      ++i;
      continue;
    }
    uint32_t rune = 0;
    size_t n = Utf8SequenceLength(s, i, &rune);
    if (n == 0) {
      out->append("\\ufffd");
      ++i;
      continue;
    }
    if (rune == 0x2028 || rune == 0x2029) {
      out->append(rune == 0x2028 ? "\\u2028" : "\\u2029");
    } else {
      out->append(s.substr(i, n));
    }
    i += n;
  }
  out->push_back('"');
}

Result<Json> Parse(std::string_view text, std::string_view what) {
  Json j = Json::parse(text.begin(), text.end(), /*cb=*/nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) {
    return InvalidArgumentError(std::string(what) + " is not valid JSON: " + Excerpt(text));
  }
  return j;
}

const Json* Member(const Json& obj, std::string_view key) {
  auto it = obj.find(key);
  const Json* found = nullptr;
  if (it != obj.end()) {
    found = &*it;
  } else {
    for (auto m = obj.begin(); m != obj.end(); ++m) {
      if (EqualsIgnoreAsciiCase(m.key(), key)) {
        found = &m.value();
        break;
      }
    }
  }
  if (found == nullptr || found->is_null()) return nullptr;
  return found;
}

Status ReadInt64(const Json& v, std::string_view path, int64_t min, int64_t max, int64_t* out) {
  int64_t value = 0;
  if (v.is_number_unsigned()) {
    uint64_t u = v.get<uint64_t>();
    if (u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()) ||
        static_cast<int64_t>(u) > max) {
      return InvalidArgumentError(std::string(path) + ": " + std::to_string(u) +
                                  " is out of range [" + std::to_string(min) + ", " +
                                  std::to_string(max) + "]");
    }
    value = static_cast<int64_t>(u);
  } else if (v.is_number_integer()) {
    value = v.get<int64_t>();
  } else {
    return InvalidArgumentError(
        std::string(path) + ": expected an integer, got " +
        (v.is_number_float() ? std::string("a fraction or exponent") : std::string(TypeName(v))));
  }
  if (value < min || value > max) {
    return InvalidArgumentError(std::string(path) + ": " + std::to_string(value) +
                                " is out of range [" + std::to_string(min) + ", " +
                                std::to_string(max) + "]");
  }
  *out = value;
  return OkStatus();
}

Status ReadInt32(const Json& v, std::string_view path, int32_t* out) {
  int64_t x = 0;
  HAMI_RETURN_IF_ERROR(ReadInt64(v, path, std::numeric_limits<int32_t>::min(),
                                 std::numeric_limits<int32_t>::max(), &x));
  *out = static_cast<int32_t>(x);
  return OkStatus();
}

Status ReadUint32(const Json& v, std::string_view path, uint32_t* out) {
  int64_t x = 0;
  HAMI_RETURN_IF_ERROR(ReadInt64(v, path, 0, std::numeric_limits<uint32_t>::max(), &x));
  *out = static_cast<uint32_t>(x);
  return OkStatus();
}

Status ReadString(const Json& v, std::string_view path, std::string* out) {
  if (!v.is_string()) {
    return InvalidArgumentError(std::string(path) + ": expected a string, got " + TypeName(v));
  }
  *out = v.get_ref<const std::string&>();
  return OkStatus();
}

Status ReadBool(const Json& v, std::string_view path, bool* out) {
  if (!v.is_boolean()) {
    return InvalidArgumentError(std::string(path) + ": expected true or false, got " + TypeName(v));
  }
  *out = v.get<bool>();
  return OkStatus();
}

Status ReadDouble(const Json& v, std::string_view path, double* out) {
  if (!v.is_number()) {
    return InvalidArgumentError(std::string(path) + ": expected a number, got " + TypeName(v));
  }
  double d = v.get<double>();
  if (!std::isfinite(d)) return InvalidArgumentError(std::string(path) + ": not a finite number");
  *out = d;
  return OkStatus();
}

std::string Excerpt(std::string_view text) {
  constexpr size_t kMax = 64;
  std::string out;
  AppendGoString(&out, text.substr(0, kMax));
  if (text.size() > kMax) out += "...";
  return out;
}

std::string Indexed(std::string_view prefix, size_t i) {
  return std::string(prefix) + "[" + std::to_string(i) + "]";
}

std::string Field(std::string_view prefix, std::string_view key) {
  if (prefix.empty()) return std::string(key);
  return std::string(prefix) + "." + std::string(key);
}

}  // namespace hami::device::json_util
