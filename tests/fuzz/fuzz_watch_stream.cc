// Fuzzes the watch-stream parser with arbitrary bytes split into arbitrary chunks (the first byte
// picks the chunk size): it must return a Status, never crash, and deliver only events with an
// object. The same bytes check ScanResourceVersion against the full parser (differential).
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "k8s/object.h"
#include "k8s/watch_stream.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  {
    // The reply scanner agrees with the full parser on every input.
    std::string_view text(reinterpret_cast<const char*>(data), size);
    hami::Result<hami::k8s::Object> doc = hami::k8s::ParseObject(text);
    hami::Result<std::string> rv = hami::k8s::ScanResourceVersion(text);
    if (doc.ok() != rv.ok()) __builtin_trap();
    if (doc.ok() && hami::k8s::ResourceVersion(*doc) != *rv) __builtin_trap();
  }
  size_t chunk = static_cast<size_t>(data[0]) + 1;
  std::string_view rest(reinterpret_cast<const char*>(data) + 1, size - 1);
  hami::k8s::WatchStreamParser parser;
  while (!rest.empty()) {
    size_t n = std::min(chunk, rest.size());
    hami::Status s = parser.Feed(rest.substr(0, n), [](hami::k8s::WatchEvent ev) {
      if (ev.object == nullptr) __builtin_trap();
      return true;
    });
    if (!s.ok()) break;
    rest.remove_prefix(n);
  }
  return 0;
}
