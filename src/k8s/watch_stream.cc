#include "k8s/watch_stream.h"

#include "k8s/object.h"

namespace hami::k8s {

std::string_view WatchEventTypeName(WatchEvent::Type type) {
  switch (type) {
    case WatchEvent::Type::kAdded:
      return "ADDED";
    case WatchEvent::Type::kModified:
      return "MODIFIED";
    case WatchEvent::Type::kDeleted:
      return "DELETED";
    case WatchEvent::Type::kBookmark:
      return "BOOKMARK";
    case WatchEvent::Type::kError:
      return "ERROR";
  }
  return "UNKNOWN";
}

Result<WatchEvent> WatchStreamParser::ParseLine(std::string_view line) {
  Result<Object> parsed = ParseObject(line);
  if (!parsed.ok()) return DataLossError("watch event: malformed JSON");
  Object& doc = *parsed;
  auto type_it = doc.find("type");
  auto obj_it = doc.find("object");
  if (type_it == doc.end() || !type_it->is_string()) {
    return DataLossError("watch event: missing \"type\"");
  }
  if (obj_it == doc.end() || !obj_it->is_object()) {
    return DataLossError("watch event: missing \"object\"");
  }
  const std::string& t = type_it->get_ref<const std::string&>();
  WatchEvent ev;
  if (t == "ADDED") {
    ev.type = WatchEvent::Type::kAdded;
  } else if (t == "MODIFIED") {
    ev.type = WatchEvent::Type::kModified;
  } else if (t == "DELETED") {
    ev.type = WatchEvent::Type::kDeleted;
  } else if (t == "BOOKMARK") {
    ev.type = WatchEvent::Type::kBookmark;
  } else if (t == "ERROR") {
    ev.type = WatchEvent::Type::kError;
  } else {
    return DataLossError("watch event: unknown type \"" + t.substr(0, 32) + "\"");
  }
  ev.object = std::make_shared<const Object>(std::move(*obj_it));
  return ev;
}

Status WatchStreamParser::Feed(std::string_view chunk,
                               const std::function<bool(WatchEvent)>& sink) {
  while (!chunk.empty()) {
    size_t nl = chunk.find('\n');
    if (nl == std::string_view::npos) {
      if (buffer_.size() + chunk.size() > kMaxLineBytes) {
        buffer_.clear();
        return ResourceExhaustedError("watch event line exceeds " + std::to_string(kMaxLineBytes) +
                                      " bytes");
      }
      buffer_.append(chunk);
      return OkStatus();
    }
    std::string_view piece = chunk.substr(0, nl);
    chunk.remove_prefix(nl + 1);
    std::string_view line = piece;
    if (!buffer_.empty()) {
      if (buffer_.size() + piece.size() > kMaxLineBytes) {
        buffer_.clear();
        return ResourceExhaustedError("watch event line too large");
      }
      buffer_.append(piece);
      line = buffer_;
    }
    while (!line.empty() && (line.back() == '\r' || line.back() == ' ')) line.remove_suffix(1);
    bool blank = line.find_first_not_of(" \t") == std::string_view::npos;
    if (!blank) {
      Result<WatchEvent> ev = ParseLine(line);
      buffer_.clear();
      if (!ev.ok()) return ev.status();
      if (!sink(std::move(*ev))) return OkStatus();
    } else {
      buffer_.clear();
    }
  }
  return OkStatus();
}

}  // namespace hami::k8s
