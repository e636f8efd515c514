// Pieces of SocketTransport shared by its source files; not part of its API.
//   socket_transport.cc           the Transport entry points (Do, DoBatch), URL parsing, proxies
//   socket_transport_connect.cc   TCP connect, TLS context and handshake, the idle pool
//   socket_transport_exchange.cc  socket I/O and one HTTP/1.1 request/response exchange
// Everything here runs on the calling thread of an exchange; only SocketTransport::Impl's pool
// is shared between threads (under Impl::mu).
#pragma once

#include <openssl/types.h>

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "common/thread_annotations.h"
#include "k8s/socket_transport.h"
#include "k8s/transport.h"

namespace hami::k8s {
namespace socket_internal {

using SteadyClock = std::chrono::steady_clock;

// A connection idle for longer than this is peeked at before reuse: servers close idle
// connections after seconds (httplib 5 s, Go's net/http 90 s by default), never sooner.
inline constexpr auto kIdleCheckAfter = std::chrono::seconds(1);
// How often a blocked connect, or a read without Cancellation::WakeFd, wakes up to look at
// HttpRequest::cancel.
inline constexpr std::chrono::milliseconds kCancelTick{1000};
inline constexpr size_t kMaxHeaderBytes = 1 << 20;
inline constexpr size_t kReadSize = 64 * 1024;

struct Url {
  bool https = false;
  std::string host;  // without IPv6 brackets
  std::string port;
  std::string host_header;
  std::string target;  // path and query, "/" at least
  std::string key;     // scheme://host:port, the pool key
};

// One TCP (and maybe TLS) connection, used by one exchange at a time. Owns fd and ssl.
struct Conn {
  int fd = -1;
  SSL* ssl = nullptr;
  std::string key;
  SteadyClock::time_point last_used;
  int64_t recv_timeout_ms = -1;  // what SO_RCVTIMEO is set to (0 = none)
  std::string buf;               // received and not yet consumed
  size_t pos = 0;                // consumed prefix of buf

  Conn() = default;
  Conn(const Conn&) = delete;
  Conn& operator=(const Conn&) = delete;
  ~Conn();  // in socket_transport_connect.cc, beside the rest of the OpenSSL lifecycle
  size_t available() const { return buf.size() - pos; }
  const char* data() const { return buf.data() + pos; }
  void Consume(size_t n) {
    pos += n;
    if (pos == buf.size()) {
      buf.clear();
      pos = 0;
    }
  }
};

enum class IoResult { kOk, kEof, kTimeout, kError };

// socket_transport_connect.cc

// Whether `host` is an IPv4 or IPv6 address rather than a name.
bool IsIpLiteral(const std::string& host);
// Drains OpenSSL's error queue into one "; "-separated line ("unknown TLS error" when empty).
std::string OpenSslErrors();

// socket_transport_exchange.cc

// Sets the socket's receive and send timeouts when they differ from the last ones set.
void SetIoTimeout(Conn& c, int64_t ms);
// Appends what one read returns to c.buf. *error gets the reason for kError.
IoResult ReadMore(Conn& c, std::string* error);
// Sends head then body; false with *error on failure (a timeout included).
bool SendAll(Conn& c, const std::string& head, const std::string& body, std::string* error);
// `s` in ASCII lower case.
std::string Lower(std::string_view s);
// The request line and headers of `request`, ending with the blank line.
std::string RequestHead(const Url& url, const HttpRequest& request);
// Whether `request` goes without a body (GET and HEAD).
bool Bodyless(const HttpRequest& request);
// One exchange on `c`: sends `request` (unless `sent`: a pipelined batch wrote it already) and
// reads its response. `more_follow`: answers to later pipelined requests may already be buffered
// behind this one, so leftover bytes do not make the connection unusable. *reusable: the
// connection may carry another exchange. *stale: it failed before the server answered anything
// (a connection the server had closed, when reused).
Result<HttpResponse> Exchange(Conn& c, const Url& url, const HttpRequest& request, bool* reusable,
                              bool* stale, bool sent = false, bool more_follow = false);

}  // namespace socket_internal

// The transport's shared state: options, the TLS context and the pool of idle connections.
// Connect, TakeIdle and Return may be called from any thread; the rest is set up by Create
// before the transport is shared.
struct SocketTransport::Impl {
  SocketOptions options;
  SSL_CTX* ctx = nullptr;
  Status tls_error;  // why the TLS material is unusable (HTTPS exchanges fail with it)
  std::atomic<uint64_t> opened{0};

  Mutex mu;
  std::map<std::string, std::vector<std::unique_ptr<socket_internal::Conn>>> idle GUARDED_BY(mu);

  ~Impl();  // in socket_transport_connect.cc

  // Creates ctx from options.tls; a non-OK Status says why the TLS material is unusable.
  Status BuildTlsContext();
  // A new connection to `url`, TLS handshake done for https, within options.connect_timeout.
  // Errors follow Transport's contract (Unavailable, Cancelled, FailedPrecondition).
  Result<std::unique_ptr<socket_internal::Conn>> Connect(const socket_internal::Url& url,
                                                         const Cancellation* cancel);
  // A pooled connection to the server `key` that still looks open, or null.
  std::unique_ptr<socket_internal::Conn> TakeIdle(const std::string& key);
  // Pools `c` for reuse; closes it instead when its server's pool is full.
  void Return(std::unique_ptr<socket_internal::Conn> c);
  // Runs the TLS handshake on the connected `conn` for `url`, verifying the server unless told
  // not to; the handshake must end by `deadline`.
  Status StartTls(socket_internal::Conn& conn, const socket_internal::Url& url,
                  socket_internal::SteadyClock::time_point deadline);
};

}  // namespace hami::k8s
