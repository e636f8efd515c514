#include "extender/extender_args.h"

#include <strings.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <utility>

namespace hami::extender {

namespace {

// A top-level member of ExtenderArgs. kube-scheduler writes the Go field names ("Pod", "Nodes",
// "NodeNames": its types carry no JSON tags) and Go's decoder matches names without regard to
// case, so HAMi accepts "pod" and "Pod" alike; so do we (ASCII case only).
enum class ArgsMember { kPod, kNodes, kNodeNames, kOther };

ArgsMember MemberOf(std::string_view key) {
  auto is = [&](std::string_view want) {
    return key.size() == want.size() && ::strncasecmp(key.data(), want.data(), key.size()) == 0;
  };
  if (is("pod")) return ArgsMember::kPod;
  if (is("nodes")) return ArgsMember::kNodes;
  if (is("nodenames")) return ArgsMember::kNodeNames;
  return ArgsMember::kOther;
}

}  // namespace
namespace {

using Json = nlohmann::json;

// Builds one JSON value from SAX events, the way the DOM parser does (duplicate keys: last wins).
class DomBuilder {
 public:
  explicit DomBuilder(Json* root) : root_(root) {}

  void Value(Json v) { Place(std::move(v)); }
  void Key(std::string k) { key_ = std::move(k); }
  void StartObject() { stack_.push_back(Place(Json::object())); }
  void StartArray() { stack_.push_back(Place(Json::array())); }
  void End() { stack_.pop_back(); }

 private:
  Json* Place(Json v) {
    if (stack_.empty()) {
      *root_ = std::move(v);
      return root_;
    }
    Json* top = stack_.back();
    if (top->is_array()) {
      top->push_back(std::move(v));
      return &top->back();
    }
    Json& slot = (*top)[key_];
    slot = std::move(v);
    return &slot;
  }

  Json* root_;
  std::vector<Json*> stack_;
  std::string key_;
};

class ArgsReader : public nlohmann::json_sax<Json> {
 public:
  explicit ArgsReader(ExtenderArgs* out) : out_(out) {}

  bool null() override { return Scalar(Json(nullptr)); }
  bool boolean(bool b) override { return Scalar(Json(b)); }
  bool number_integer(number_integer_t v) override { return Scalar(Json(v)); }
  bool number_unsigned(number_unsigned_t v) override { return Scalar(Json(v)); }
  bool number_float(number_float_t v, const string_t&) override { return Scalar(Json(v)); }
  bool binary(binary_t& b) override { return Scalar(Json(b)); }
  bool string(string_t& s) override {
    if (mode_ == Mode::kNames && depth_ == 2) {
      spans_.emplace_back(static_cast<uint32_t>(buffer_.size()), static_cast<uint32_t>(s.size()));
      buffer_.append(s);
      return true;
    }
    return Scalar(Json(s));
  }

  bool start_object(std::size_t) override {
    if (depth_ == 0) top_is_object_ = true;
    if (depth_ == 1) Begin(/*container=*/true, /*array=*/false);
    if (mode_ == Mode::kDom) builder_->StartObject();
    ++depth_;
    return true;
  }
  bool end_object() override { return EndContainer(); }
  bool start_array(std::size_t) override {
    if (depth_ == 1) Begin(/*container=*/true, /*array=*/true);
    if (mode_ == Mode::kDom) builder_->StartArray();
    ++depth_;
    return true;
  }
  bool end_array() override { return EndContainer(); }
  bool key(string_t& k) override {
    if (depth_ == 1) {
      key_ = k;
    } else if (mode_ == Mode::kDom) {
      builder_->Key(k);
    }
    return true;
  }
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception&) override {
    return false;
  }

  bool top_is_object() const { return top_is_object_; }
  std::vector<std::pair<uint32_t, uint32_t>>& spans() { return spans_; }
  std::string& buffer() { return buffer_; }

 private:
  enum class Mode { kSkip, kDom, kNames };

  // A top-level member's value starts: decide how to read it.
  void Begin(bool container, bool array) {
    mode_ = Mode::kSkip;
    ArgsMember member = MemberOf(key_);
    if (member == ArgsMember::kPod || member == ArgsMember::kNodes) {
      Json& target = member == ArgsMember::kPod ? out_->pod : out_->nodes;
      target = Json();
      builder_ = std::make_unique<DomBuilder>(&target);
      mode_ = Mode::kDom;
    } else if (member == ArgsMember::kNodeNames) {
      // A later "nodenames" replaces an earlier one.
      spans_.clear();
      buffer_.clear();
      out_->has_names = false;
      out_->names_not_list = false;
      if (array) {
        out_->has_names = true;
        mode_ = Mode::kNames;
      } else if (container) {
        out_->names_not_list = true;
      }
    }
  }

  bool Scalar(Json v) {
    if (depth_ == 1) {
      Begin(/*container=*/false, /*array=*/false);
      if (key_ == "nodenames" && !v.is_null()) out_->names_not_list = true;
    }
    if (mode_ == Mode::kDom) builder_->Value(std::move(v));
    if (depth_ == 1) mode_ = Mode::kSkip;
    return true;
  }

  bool EndContainer() {
    --depth_;
    if (mode_ == Mode::kDom) builder_->End();
    if (depth_ == 1) mode_ = Mode::kSkip;
    return true;
  }

  ExtenderArgs* out_;
  int depth_ = 0;
  bool top_is_object_ = false;
  std::string key_;
  Mode mode_ = Mode::kSkip;
  std::unique_ptr<DomBuilder> builder_;
  std::vector<std::pair<uint32_t, uint32_t>> spans_;
  std::string buffer_;
};

// ---- fast path --------------------------------------------------------------------------------
// kube-scheduler's bodies are plain: an object whose keys are plain ASCII and whose `nodenames`
// is an array of plain ASCII strings. For those, names are found with a byte scan (the general
// reader's lexer spent ~20 % of the scheduler's CPU on 5,000 names), `pod` and `nodes` are cut
// out and parsed on their own, other members are checked with the validating parser. Anything
// unusual (escapes, control or non-ASCII bytes in keys or names, non-string names, a body that is
// not an object, any error) returns false and the general reader decides, so both paths accept
// and reject exactly the same texts.

bool IsJsonSpace(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

size_t SkipSpace(std::string_view s, size_t i) {
  while (i < s.size() && IsJsonSpace(s[i])) ++i;
  return i;
}

// A string made of printable ASCII without escapes, starting at s[i] == '"'. Returns the index
// after the closing quote, or npos.
size_t ScanPlainString(std::string_view s, size_t i) {
  for (size_t j = i + 1; j < s.size(); ++j) {
    unsigned char c = static_cast<unsigned char>(s[j]);
    if (c == '"') return j + 1;
    if (c == '\\' || c < 0x20 || c >= 0x80) return std::string_view::npos;
  }
  return std::string_view::npos;
}

// The end of the JSON value starting at s[i] (structure only: strings, nesting, scalars up to a
// delimiter); npos when it does not end. The value is validated separately.
size_t ValueEnd(std::string_view s, size_t i) {
  if (i >= s.size()) return std::string_view::npos;
  char c = s[i];
  if (c != '{' && c != '[' && c != '"') {
    // A number or literal: only their own characters (anything else, a NUL byte above all, which
    // the JSON lexer reads as the end of its input, sends the body to the general reader).
    while (i < s.size() && s[i] != ',' && s[i] != '}' && s[i] != ']' && !IsJsonSpace(s[i])) {
      char d = s[i];
      bool ok = (d >= '0' && d <= '9') || (d >= 'a' && d <= 'z') || (d >= 'A' && d <= 'Z') ||
                d == '+' || d == '-' || d == '.';
      if (!ok) return std::string_view::npos;
      ++i;
    }
    return i;
  }
  int depth = 0;
  bool in_string = false;
  for (; i < s.size(); ++i) {
    char d = s[i];
    if (in_string) {
      if (d == '\\') {
        ++i;
      } else if (d == '"') {
        in_string = false;
        if (depth == 0) return i + 1;
      }
      continue;
    }
    if (d == '"') {
      in_string = true;
    } else if (d == '{' || d == '[') {
      ++depth;
    } else if (d == '}' || d == ']') {
      if (--depth == 0) return i + 1;
      if (depth < 0) return std::string_view::npos;
    }
  }
  return std::string_view::npos;
}

// The plain strings of the `nodenames` array `value` (value[0] == '['), as views into a copy of
// the array in out->name_buffer. False when an entry is not a plain string or the array does
// not end where `value` does.
bool ScanPlainNames(std::string_view value, ExtenderArgs* out) {
  // The array's bytes are kept whole (the buffer does not change afterwards); each name is a
  // view of its own characters. At most one name per comma, plus one.
  std::string& buffer = *out->name_buffer;
  buffer.assign(value);
  out->names.reserve(static_cast<size_t>(std::count(value.begin(), value.end(), ',')) + 1);
  const std::string_view kept(buffer);
  size_t j = SkipSpace(value, 1);
  if (j < value.size() && value[j] == ']') return SkipSpace(value, j + 1) == value.size();
  for (;;) {
    if (j >= value.size() || value[j] != '"') return false;
    size_t name_end = ScanPlainString(value, j);
    if (name_end == std::string_view::npos) return false;
    out->names.push_back(kept.substr(j + 1, name_end - j - 2));
    j = SkipSpace(value, name_end);
    if (j < value.size() && value[j] == ',') {
      j = SkipSpace(value, j + 1);
      continue;
    }
    if (j < value.size() && value[j] == ']') return SkipSpace(value, j + 1) == value.size();
    return false;
  }
}

// The value of a `nodenames` member; a later one replaces an earlier one.
bool ReadNodeNames(std::string_view value, ExtenderArgs* out) {
  out->has_names = false;
  out->names_not_list = false;
  out->name_buffer->clear();
  out->names.clear();
  if (value[0] == '[') {
    out->has_names = true;
    return ScanPlainNames(value, out);
  }
  if (!Json::accept(value)) return false;
  if (value != "null") out->names_not_list = true;
  return true;
}

// One top-level member `key` with its value's text: `pod` and `nodes` are parsed, `nodenames`
// scanned, the others only validated. False sends the body to the general reader.
bool ReadMember(std::string_view key, std::string_view value, ExtenderArgs* out) {
  ArgsMember member = MemberOf(key);
  if (member == ArgsMember::kPod || member == ArgsMember::kNodes) {
    Json parsed = Json::parse(value, nullptr, /*allow_exceptions=*/false);
    if (parsed.is_discarded()) return false;
    (member == ArgsMember::kPod ? out->pod : out->nodes) = std::move(parsed);
    return true;
  }
  if (member == ArgsMember::kNodeNames) return ReadNodeNames(value, out);
  return Json::accept(value);
}

bool FastParse(std::string_view body, ExtenderArgs* out) {
  // The JSON lexer takes a NUL byte for the end of its input: a slice parsed on its own could end
  // early where the whole body would not.
  if (std::memchr(body.data(), '\0', body.size()) != nullptr) return false;
  size_t i = SkipSpace(body, 0);
  if (i >= body.size() || body[i] != '{') return false;
  i = SkipSpace(body, i + 1);
  bool first = true;
  for (;;) {
    if (i >= body.size()) return false;
    if (body[i] == '}') {
      if (!first) return false;  // "{...,}" is malformed; "{}" is fine
      i = SkipSpace(body, i + 1);
      break;
    }
    if (body[i] != '"') return false;
    size_t key_end = ScanPlainString(body, i);
    if (key_end == std::string_view::npos) return false;
    std::string_view key = body.substr(i + 1, key_end - i - 2);
    i = SkipSpace(body, key_end);
    if (i >= body.size() || body[i] != ':') return false;
    i = SkipSpace(body, i + 1);
    size_t end = ValueEnd(body, i);
    if (end == std::string_view::npos) return false;
    if (!ReadMember(key, body.substr(i, end - i), out)) return false;
    first = false;
    i = SkipSpace(body, end);
    if (i < body.size() && body[i] == ',') {
      i = SkipSpace(body, i + 1);
      if (i < body.size() && body[i] == '}') return false;  // trailing comma
      continue;
    }
    if (i < body.size() && body[i] == '}') {
      i = SkipSpace(body, i + 1);
      break;
    }
    return false;
  }
  return i == body.size();
}

}  // namespace

Result<ExtenderArgs> ParseExtenderArgs(std::string_view body) {
  {
    ExtenderArgs fast;
    if (FastParse(body, &fast)) return fast;
  }
  ExtenderArgs args;
  ArgsReader reader(&args);
  bool ok = Json::sax_parse(body.begin(), body.end(), &reader, Json::input_format_t::json,
                            /*strict=*/true, /*ignore_comments=*/false);
  if (!ok) return DataLossError("malformed JSON");
  if (!reader.top_is_object()) return InvalidArgumentError("wrong type");
  *args.name_buffer = std::move(reader.buffer());
  const std::string& buf = *args.name_buffer;
  args.names.reserve(reader.spans().size());
  for (const auto& [offset, length] : reader.spans()) {
    args.names.emplace_back(buf.data() + offset, length);
  }
  return args;
}

}  // namespace hami::extender
