#include "device/text_util.h"

namespace hami::device::text {

std::vector<std::string_view> Split(std::string_view s, char sep) {
  std::vector<std::string_view> parts;
  size_t start = 0;
  while (true) {
    size_t pos = s.find(sep, start);
    if (pos == std::string_view::npos) {
      parts.push_back(s.substr(start));
      return parts;
    }
    parts.push_back(s.substr(start, pos - start));
    start = pos + 1;
  }
}

const char* ParseInt(std::string_view s, int64_t min, int64_t max, int64_t* out) {
  size_t i = 0;
  bool negative = false;
  if (i < s.size() && (s[i] == '+' || s[i] == '-')) {
    negative = s[i] == '-';
    ++i;
  }
  if (i == s.size()) return "not an integer";
  // Accumulate as a negative number so INT64_MIN is representable.
  int64_t acc = 0;
  bool overflow = false;
  for (; i < s.size(); ++i) {
    char c = s[i];
    if (c < '0' || c > '9') return "not an integer";
    int d = c - '0';
    if (!overflow) {
      if (acc < (INT64_MIN + d) / 10) {
        overflow = true;
      } else {
        acc = acc * 10 - d;
      }
    }
  }
  if (overflow) return "out of range";
  if (!negative) {
    if (acc == INT64_MIN) return "out of range";
    acc = -acc;
  }
  if (acc < min || acc > max) return "out of range";
  *out = acc;
  return nullptr;
}

bool ParseBool(std::string_view s, bool* out) {
  if (s == "1" || s == "t" || s == "T" || s == "TRUE" || s == "true" || s == "True") {
    *out = true;
    return true;
  }
  if (s == "0" || s == "f" || s == "F" || s == "FALSE" || s == "false" || s == "False") {
    *out = false;
    return true;
  }
  return false;
}

std::string_view TrimSpace(std::string_view s) {
  auto space = [](char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n'; };
  while (!s.empty() && space(s.front())) s.remove_prefix(1);
  while (!s.empty() && space(s.back())) s.remove_suffix(1);
  return s;
}

std::string AsciiLower(std::string_view s) {
  std::string out(s);
  for (char& c : out) {
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  }
  return out;
}

std::string FoldTypeName(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (char c : s) {
    if (c == '-' || c == '_' || c == ' ') continue;
    out += (c >= 'A' && c <= 'Z') ? static_cast<char>(c - 'A' + 'a') : c;
  }
  return out;
}

bool IsValidUtf8(std::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    unsigned char c0 = static_cast<unsigned char>(s[i]);
    if (c0 < 0x80) {
      ++i;
      continue;
    }
    size_t n = 0;
    uint32_t min = 0;
    uint32_t r = 0;
    if (c0 >= 0xC2 && c0 <= 0xDF) {
      n = 2;
      min = 0x80;
      r = c0 & 0x1Fu;
    } else if (c0 >= 0xE0 && c0 <= 0xEF) {
      n = 3;
      min = 0x800;
      r = c0 & 0x0Fu;
    } else if (c0 >= 0xF0 && c0 <= 0xF4) {
      n = 4;
      min = 0x10000;
      r = c0 & 0x07u;
    } else {
      return false;
    }
    if (i + n > s.size()) return false;
    for (size_t k = 1; k < n; ++k) {
      unsigned char c = static_cast<unsigned char>(s[i + k]);
      if ((c & 0xC0) != 0x80) return false;
      r = (r << 6) | (c & 0x3Fu);
    }
    if (r < min || r > 0x10FFFF || (r >= 0xD800 && r <= 0xDFFF)) return false;
    i += n;
  }
  return true;
}

std::string Quote(std::string_view s) {
  constexpr size_t kMax = 64;
  std::string out = "\"";
  for (char c : s.substr(0, kMax)) {
    unsigned char u = static_cast<unsigned char>(c);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (u < 0x20 || u == 0x7f) {
      static constexpr char kHex[] = "0123456789abcdef";
      out += "\\x";
      out += kHex[u >> 4];
      out += kHex[u & 0xF];
    } else {
      out += c;
    }
  }
  out += '"';
  if (s.size() > kMax) out += "...";
  return out;
}

}  // namespace hami::device::text
