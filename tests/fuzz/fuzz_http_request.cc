// Fuzzes the HTTP server's request side with whatever a client might send: the input is written
// into a socketpair whose far end then stops sending, and one server connection serves it on the
// calling thread (request heads, Content-Length and chunked bodies, Expect, pipelining, keep-alive
// and close). Every input must end with the connection served and closed, never a crash or a
// hang; a drain thread reads the answers so the server never blocks on a full socket. The head
// parser and the chunked decoder are also run directly on the same bytes.
#include <sys/socket.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>

#include "net/http_server.h"
#include "net/http_wire.h"

namespace {

hami::net::HttpServer& Server() {
  static std::unique_ptr<hami::net::HttpServer> server = [] {
    hami::net::HttpServerOptions opts;
    opts.max_body_bytes = 4096;
    opts.read_timeout = std::chrono::seconds(1);
    opts.keep_alive_timeout = std::chrono::seconds(1);
    auto s = hami::net::HttpServer::Create(opts).value();
    s->Handle("POST", "/echo", [](const hami::net::HttpRequest& req, hami::net::HttpResponse& res) {
      res.SetText(200, req.body + "|" + req.Param("q") + "|" + req.Header("x"));
    });
    s->Handle("GET", "/stream", [](const hami::net::HttpRequest&, hami::net::HttpResponse& res) {
      res.stream = [](hami::net::ChunkWriter& w) {
        (void)w.Write("a");
        (void)w.Write("");
        (void)w.Write("bc");
      };
    });
    s->Handle("GET", "/big", [](const hami::net::HttpRequest&, hami::net::HttpResponse& res) {
      res.SetJson(200, std::string(5000, 'x'));  // gzipped for clients that accept it
    });
    return s;
  }();
  return *server;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > 96 * 1024) return 0;  // stays within one socket buffer
  std::string_view bytes(reinterpret_cast<const char*>(data), size);
  {
    hami::net::wire::RequestHead head;
    (void)hami::net::wire::ParseRequestHead(bytes, &head);
    hami::net::wire::ChunkedDecoder decoder(4096);
    std::string body;
    size_t used = 0;
    auto state = decoder.Feed(bytes, &used, &body);
    if (used > size || body.size() > 4096) __builtin_trap();
    (void)state;
  }
  int sv[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM, 0, sv) != 0) return 0;
  int buf = 512 * 1024;
  ::setsockopt(sv[1], SOL_SOCKET, SO_SNDBUF, &buf, sizeof buf);
  ::setsockopt(sv[0], SOL_SOCKET, SO_RCVBUF, &buf, sizeof buf);
  size_t off = 0;
  while (off < size) {
    ssize_t n = ::send(sv[1], data + off, size - off, MSG_NOSIGNAL);
    if (n <= 0) break;
    off += static_cast<size_t>(n);
  }
  ::shutdown(sv[1], SHUT_WR);
  std::thread drain([fd = sv[1]] {
    char sink[16384];
    while (::recv(fd, sink, sizeof sink, 0) > 0) {
    }
  });
  Server().ServeConnectionForTesting(sv[0]);
  ::close(sv[0]);
  drain.join();
  ::close(sv[1]);
  return 0;
}
