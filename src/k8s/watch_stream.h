// WatchStreamParser: splits a watch response body (one JSON event per line, arriving in arbitrary
// chunks) into WatchEvents. Partial lines are buffered until their newline arrives.
//
//   WatchStreamParser parser;
//   Status s = parser.Feed(chunk, [&](WatchEvent e) { ...; return true; });
//
// An ERROR event carries a metav1.Status; its code 410 is reported by the REST client as a Gone
// (OutOfRange) status. Lines that are not valid events are a DataLoss error: the stream is then
// unusable and the caller should re-watch.
//
// Thread safety: one parser per stream, used by one thread.
#pragma once

#include <functional>
#include <string>
#include <string_view>

#include "common/status.h"
#include "k8s/object_fwd.h"

namespace hami::k8s {

struct WatchEvent {
  enum class Type { kAdded, kModified, kDeleted, kBookmark, kError };
  Type type = Type::kAdded;
  ObjectPtr object;  // never null after a successful parse
};

std::string_view WatchEventTypeName(WatchEvent::Type type);

class WatchStreamParser {
 public:
  // A single event line larger than this is rejected (ResourceExhausted).
  static constexpr size_t kMaxLineBytes = 64 << 20;

  // Calls `sink` for each complete event in order; stops early (OK) when it returns false.
  Status Feed(std::string_view chunk, const std::function<bool(WatchEvent)>& sink);
  // Bytes of an incomplete trailing line.
  size_t buffered() const { return buffer_.size(); }

  // Parses one event line (no newline).
  static Result<WatchEvent> ParseLine(std::string_view line);

 private:
  std::string buffer_;
};

}  // namespace hami::k8s
