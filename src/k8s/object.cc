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
