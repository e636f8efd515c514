#include "ctl/json.h"

#include <math.h>
#include <stdio.h>

#include <algorithm>

namespace hami::ctl {

std::string JsonQuote(std::string_view s) {
  std::string out = "\"";
  for (char ch : s) {
    auto c = static_cast<unsigned char>(ch);
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      default:
        if (c < 0x20 || c >= 0x7f) {
          // Region files and driver strings are not guaranteed to be UTF-8: escape every
          // non-ASCII byte so the output is always valid JSON.
          char buf[8];
          snprintf(buf, sizeof(buf), "\\u%04x", c);
          out += buf;
        } else {
          out += ch;
        }
    }
  }
  out += '"';
  return out;
}

void JsonWriter::BeforeValue() {
  if (after_key_) {
    after_key_ = false;
    return;
  }
  if (has_items_.empty()) return;
  if (has_items_.back()) out_ += ',';
  has_items_.back() = true;
  out_ += '\n';
  out_.append(2 * has_items_.size(), ' ');
}

void JsonWriter::Open(char c) {
  BeforeValue();
  out_ += c;
  has_items_.push_back(false);
}

void JsonWriter::Close(char c) {
  bool had_items = !has_items_.empty() && has_items_.back();
  if (!has_items_.empty()) has_items_.pop_back();
  if (had_items) {
    out_ += '\n';
    out_.append(2 * has_items_.size(), ' ');
  }
  out_ += c;
}

JsonWriter& JsonWriter::BeginObject() {
  Open('{');
  return *this;
}
JsonWriter& JsonWriter::EndObject() {
  Close('}');
  return *this;
}
JsonWriter& JsonWriter::BeginArray() {
  Open('[');
  return *this;
}
JsonWriter& JsonWriter::EndArray() {
  Close(']');
  return *this;
}

JsonWriter& JsonWriter::Key(std::string_view key) {
  BeforeValue();
  out_ += JsonQuote(key);
  out_ += ": ";
  after_key_ = true;
  return *this;
}

JsonWriter& JsonWriter::String(std::string_view value) {
  BeforeValue();
  out_ += JsonQuote(value);
  return *this;
}

JsonWriter& JsonWriter::Int(int64_t value) {
  BeforeValue();
  out_ += std::to_string(value);
  return *this;
}

JsonWriter& JsonWriter::Uint(uint64_t value) {
  BeforeValue();
  out_ += std::to_string(value);
  return *this;
}

JsonWriter& JsonWriter::Double(double value) {
  BeforeValue();
  if (!isfinite(value)) {
    out_ += "null";
    return *this;
  }
  char buf[64];
  snprintf(buf, sizeof(buf), "%.3f", value);
  // Trim trailing zeros ("30.000" -> "30", "29.500" -> "29.5").
  std::string s = buf;
  while (s.size() > 1 && s.back() == '0') s.pop_back();
  if (s.back() == '.') s.pop_back();
  out_ += s;
  return *this;
}

JsonWriter& JsonWriter::Bool(bool value) {
  BeforeValue();
  out_ += value ? "true" : "false";
  return *this;
}

JsonWriter& JsonWriter::Null() {
  BeforeValue();
  out_ += "null";
  return *this;
}

std::string JsonWriter::str() const {
  if (has_items_.empty() && !out_.empty()) return out_ + "\n";
  return out_;
}

std::vector<std::string> JsonScalars(std::string_view json, std::string_view key) {
  std::vector<std::string> values;
  const std::string needle = JsonQuote(key) + ":";
  size_t pos = 0;
  while ((pos = json.find(needle, pos)) != std::string_view::npos) {
    pos += needle.size();
    while (pos < json.size() && json[pos] == ' ') ++pos;
    if (pos >= json.size()) break;
    if (json[pos] == '"') {
      size_t end = pos + 1;
      while (end < json.size() && json[end] != '"') end += json[end] == '\\' ? 2 : 1;
      values.emplace_back(json.substr(pos + 1, std::min(end, json.size()) - pos - 1));
      pos = end;
    } else if (json[pos] != '{' && json[pos] != '[') {
      size_t end = json.find_first_of(",\n}] ", pos);
      if (end == std::string_view::npos) end = json.size();
      values.emplace_back(json.substr(pos, end - pos));
      pos = end;
    }
  }
  return values;
}

}  // namespace hami::ctl
