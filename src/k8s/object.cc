#include "k8s/object.h"

#include <ctime>

namespace hami::k8s {

Result<Object> ParseJson(std::string_view text) {
  Object j = Object::parse(text.begin(), text.end(), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return DataLossError("malformed JSON");
  return j;
}

Result<Object> ParseObject(std::string_view text) {
  HAMI_ASSIGN_OR_RETURN(Object j, ParseJson(text));
  if (!j.is_object()) return DataLossError("expected a JSON object");
  return j;
}

namespace {

// SAX handler that remembers the string at top-level "metadata" -> "resourceVersion" and
// allocates nothing else. Duplicate keys resolve as in the DOM parser: the last one wins.
class ResourceVersionScan : public nlohmann::json_sax<Object> {
 public:
  bool null() override { return Value(nullptr); }
  bool boolean(bool) override { return Value(nullptr); }
  bool number_integer(number_integer_t) override { return Value(nullptr); }
  bool number_unsigned(number_unsigned_t) override { return Value(nullptr); }
  bool number_float(number_float_t, const string_t&) override { return Value(nullptr); }
  bool string(string_t& s) override { return Value(&s); }
  bool binary(binary_t&) override { return Value(nullptr); }
  bool start_object(std::size_t) override {
    if (depth_ == 0) top_is_object_ = true;
    if (depth_ == 1 && key_ == "metadata") {
      in_metadata_ = true;
      rv_.clear();  // a later "metadata" replaces an earlier one
    }
    Value(nullptr);
    ++depth_;
    return true;
  }
  bool key(string_t& k) override {
    if (depth_ <= 2) key_ = k;
    return true;
  }
  bool end_object() override {
    if (--depth_ == 1) in_metadata_ = false;
    key_.clear();
    return true;
  }
  bool start_array(std::size_t) override {
    Value(nullptr);
    ++depth_;
    return true;
  }
  bool end_array() override {
    --depth_;
    key_.clear();
    return true;
  }
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception&) override {
    return false;
  }

  bool top_is_object() const { return top_is_object_; }
  const std::string& rv() const { return rv_; }

 private:
  // A value (or the start of a container) for the current key.
  bool Value(const std::string* s) {
    if (depth_ == 2 && in_metadata_ && key_ == "resourceVersion") {
      rv_ = s != nullptr ? *s : std::string();
    }
    if (depth_ <= 2) key_.clear();
    return true;
  }
  int depth_ = 0;
  bool top_is_object_ = false;
  bool in_metadata_ = false;
  std::string key_, rv_;
};

}  // namespace

Result<std::string> ScanResourceVersion(std::string_view text) {
  ResourceVersionScan scan;
  bool ok = Object::sax_parse(text.begin(), text.end(), &scan, nlohmann::json::input_format_t::json,
                              /*strict=*/true, /*ignore_comments=*/false);
  if (!ok || !scan.top_is_object()) return DataLossError("expected a JSON object");
  return scan.rv();
}

namespace {
const Object* Find(const Object& obj, std::string_view pointer) {
  const Object* cur = &obj;
  size_t pos = 0;
  if (pointer.empty()) return cur;
  if (pointer[0] != '/') return nullptr;
  pos = 1;
  while (true) {
    size_t end = pointer.find('/', pos);
    std::string token(pointer.substr(pos, end == std::string_view::npos ? end : end - pos));
    // Unescape "~1" -> "/" and "~0" -> "~" (RFC 6901).
    std::string key;
    for (size_t i = 0; i < token.size(); ++i) {
      if (token[i] == '~' && i + 1 < token.size() && (token[i + 1] == '0' || token[i + 1] == '1')) {
        key.push_back(token[i + 1] == '1' ? '/' : '~');
        ++i;
      } else {
        key.push_back(token[i]);
      }
    }
    if (!cur->is_object()) return nullptr;
    auto it = cur->find(key);
    if (it == cur->end()) return nullptr;
    cur = &*it;
    if (end == std::string_view::npos) return cur;
    pos = end + 1;
  }
}
}  // namespace

std::string GetString(const Object& obj, std::string_view pointer) {
  const Object* v = Find(obj, pointer);
  return v != nullptr && v->is_string() ? v->get<std::string>() : std::string();
}

int64_t GetInt(const Object& obj, std::string_view pointer, int64_t fallback) {
  const Object* v = Find(obj, pointer);
  return v != nullptr && v->is_number_integer() ? v->get<int64_t>() : fallback;
}

namespace {
const Object* Annotations(const Object& obj) {
  const Object* a = Find(obj, "/metadata/annotations");
  return a != nullptr && a->is_object() ? a : nullptr;
}
}  // namespace

std::string GetAnnotation(const Object& obj, std::string_view key) {
  const Object* a = Annotations(obj);
  if (a == nullptr) return "";
  auto it = a->find(std::string(key));
  return it != a->end() && it->is_string() ? it->get<std::string>() : std::string();
}

bool HasAnnotation(const Object& obj, std::string_view key) {
  const Object* a = Annotations(obj);
  return a != nullptr && a->contains(std::string(key));
}

std::string ObjectKey(const Object& obj) {
  std::string ns = Namespace(obj);
  return ns.empty() ? Name(obj) : ns + "/" + Name(obj);
}

namespace {
std::string Format(WallTimePoint t, bool micro) {
  auto since = t.time_since_epoch();
  auto secs = std::chrono::floor<std::chrono::seconds>(since);
  auto us = std::chrono::duration_cast<std::chrono::microseconds>(since - secs).count();
  std::time_t tt = static_cast<std::time_t>(secs.count());
  std::tm tm{};
  gmtime_r(&tt, &tm);
  char buf[64];
  if (micro) {
    std::snprintf(buf, sizeof(buf), "%04d-%02d-%02dT%02d:%02d:%02d.%06lldZ", tm.tm_year + 1900,
                  tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec,
                  static_cast<long long>(us));
  } else {
    std::snprintf(buf, sizeof(buf), "%04d-%02d-%02dT%02d:%02d:%02dZ", tm.tm_year + 1900,
                  tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec);
  }
  return buf;
}
}  // namespace

std::string FormatTime(WallTimePoint t) { return Format(t, false); }
std::string FormatMicroTime(WallTimePoint t) { return Format(t, true); }

}  // namespace hami::k8s
