// Fuzzes the watch-stream parser with arbitrary bytes split into arbitrary chunks (the first byte
// picks the chunk size): it must return a Status, never crash, and deliver only events with an
// object.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "k8s/watch_stream.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
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
