// Fuzzes wire::RequestScan, the check that decides when a connection's bytes hold a whole
// request (the server's reactor hands the connection to a worker then). The input is a request
// stream; its first two bytes pick where it is cut into arrival pieces. Properties:
//   - scanning as the pieces arrive answers, at every step, what a fresh scan of the same
//     prefix answers (the incremental head search and chunked decoding lose nothing);
//   - on the whole input, a scan that says "not ready" leaves nothing the server could act
//     on: a head parse and, where it succeeds, the body's framing also say "more to come".
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "net/http_wire.h"

using hami::net::wire::ChunkedDecoder;
using hami::net::wire::RequestHead;
using hami::net::wire::RequestScan;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 2 || size > 128 * 1024) return 0;
  const size_t step = 1 + (data[0] | (data[1] << 8)) % 997;  // piece size
  const uint64_t max_body = 2048;
  std::string_view input(reinterpret_cast<const char*>(data) + 2, size - 2);

  RequestScan incremental;
  std::string buf;
  for (size_t off = 0; off < input.size();) {
    size_t n = std::min(step, input.size() - off);
    buf.append(input.substr(off, n));
    off += n;
    bool ready = incremental.Ready(buf, max_body);
    bool fresh = RequestScan().Ready(buf, max_body);
    if (ready != fresh) __builtin_trap();
    if (ready) return 0;  // the server takes over from here
  }
  // Not ready on all of it: the head is incomplete, or its body is.
  size_t sep = 0;
  size_t end = hami::net::wire::FindHeadEnd(buf, 0, &sep);
  if (end == std::string::npos) {
    if (buf.size() > hami::net::wire::kMaxHeadBytes) __builtin_trap();
    return 0;
  }
  RequestHead head;
  if (!hami::net::wire::ParseRequestHead(std::string_view(buf).substr(0, end), &head).ok()) {
    __builtin_trap();  // a malformed head is "ready" (the server answers 400)
  }
  std::string_view body = std::string_view(buf).substr(end + sep);
  if (head.chunked) {
    ChunkedDecoder d(max_body);
    size_t used = 0;
    std::string out;
    if (d.Feed(body, &used, &out) != ChunkedDecoder::State::kMore) __builtin_trap();
  } else if (head.has_length && body.size() >= head.content_length) {
    __builtin_trap();
  } else if (!head.has_length) {
    __builtin_trap();  // no body expected: the head alone is a whole request
  }
  return 0;
}
