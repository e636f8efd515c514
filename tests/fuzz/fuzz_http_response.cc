// Fuzzes the socket transport's HTTP/1.1 response reader with whatever a server might send:
// the input (after one control byte) is written into a socketpair whose far end then closes,
// and one exchange reads it. The control byte picks the method (HEAD has no body) and whether a
// 2xx body is streamed to a callback (as for watches) that may stop early. Every input must end
// in a response or an error Status; a streamed body and a collected one must hold the same bytes.
#include <sys/socket.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <string>

#include "k8s/socket_transport.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0 || size > 96 * 1024) return 0;  // stays within one socket buffer
  const uint8_t control = data[0];
  int sv[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM, 0, sv) != 0) return 0;
  int buf = 512 * 1024;
  ::setsockopt(sv[1], SOL_SOCKET, SO_SNDBUF, &buf, sizeof buf);
  ::setsockopt(sv[0], SOL_SOCKET, SO_RCVBUF, &buf, sizeof buf);
  size_t off = 1;
  while (off < size) {
    ssize_t n = ::send(sv[1], data + off, size - off, MSG_NOSIGNAL);
    if (n <= 0) break;
    off += static_cast<size_t>(n);
  }
  ::shutdown(sv[1], SHUT_WR);

  hami::k8s::HttpRequest req;
  req.method = (control & 1) ? "HEAD" : "GET";
  req.url = "http://fuzz.invalid/api/v1/pods";
  req.timeout = std::chrono::milliseconds(2000);
  std::string streamed;
  const size_t stop_after = (control & 4) ? static_cast<size_t>(control >> 3) : SIZE_MAX;
  if (control & 2) {
    req.on_body = [&](std::string_view chunk) {
      streamed.append(chunk);
      return streamed.size() < stop_after;
    };
  }
  hami::Result<hami::k8s::HttpResponse> r =
      hami::k8s::SocketTransportExchangeForTesting(sv[0], req);
  if (r.ok()) {
    if (r->status < 100 || r->status > 999) __builtin_trap();
    if ((control & 2) && r->status >= 200 && r->status < 300 && !r->body.empty()) __builtin_trap();
  }
  ::close(sv[0]);
  ::close(sv[1]);
  return 0;
}
