// HttpServer: the project's HTTP(S) server (scheduler extender, admission webhook, metrics, the
// simulated API server). Its own HTTP/1.1 implementation (request parsing in net/http_wire.h),
// keeping OpenSSL out of every other header:
//
//   net::HttpServerOptions opts;                // port 0 = pick a free port
//   opts.tls = net::TlsOptions{cert_file, key_file};
//   auto server = net::HttpServer::Create(opts).value();
//   server->Handle("POST", "/filter", [](const net::HttpRequest& req, net::HttpResponse& res) {
//     res.SetJson(200, Filter(req.body));
//   });
//   server->AddReadinessCheck("informers-synced", [&] { return synced.load(); });
//   server->SetMetricsHandler([&] { return registry.Serialize(); });   // GET /metrics
//   int port = server->Start().value();
//   ...
//   server->Stop();
//
// Model: one reactor thread (epoll) accepts, runs TLS handshakes and collects each request's
// head and body from non-blocking sockets; only a connection holding a whole request goes to a
// worker (started on demand up to `worker_threads`), which runs the handler, writes the answer
// and any pipelined ones, and gives the connection back to the reactor. So an idle, slow or
// half-open connection (plain or TLS, a stalled handshake included) costs its buffers, never a
// worker. Deadlines per connection: `handshake_timeout` for the TLS handshake,
// `keep_alive_timeout` between requests, `read_timeout` for a head from its first byte and for
// each gap in a body. Caps: `max_connections` open in all and `max_connections_per_address`
// from one remote address; at a cap the least recently active connection waiting in the reactor
// (idle, handshaking or sending a request; never one a worker is answering) is closed to admit
// the new one, and a rate-limited warning says so. An answer costs one write: the status line,
// headers and body leave in a single sendmsg, so the client wakes once per answer. A streaming
// answer keeps its worker. TCP_NODELAY, keep-alive (HTTP/1.1 default; `keep_alive_max_requests` per
// connection), SO_REUSEADDR rather than SO_REUSEPORT (a second server on a port fails instead of
// stealing half the connections), request bodies limited to `max_body_bytes` (413 beyond),
// Content-Length or chunked request bodies, `Expect: 100-continue`, pipelined requests. Plain
// answers of 4 KiB or more are gzipped for clients that accept it; streams never are. Malformed
// requests get 400 (431 for a header block over 64 KiB) and the connection is closed. TLS is 1.2 or
// newer and the certificate files are re-read when they change (no restart needed).
//
// Routing: exact (method, path) routes win over prefix routes; among prefix routes the longest
// prefix wins. "GET" routes also answer HEAD. Unmatched requests get 404 (405 when the path is
// known for another method). A handler that throws yields 500; the server keeps running.
//
// Time: every deadline is read from HttpServerOptions::clock (the real steady clock unless a test
// injects a FakeClock; SyncForTesting then lets it observe the reactor without waiting).
//
// Inside (all under src/net/): net/http_connection.h (one socket's I/O), net/http_exchange.h and
// net/http_response.h (reading requests, writing answers), net/http_reactor.h (the epoll thread),
// net/http_worker_pool.h (handlers and deferred answers), net/http_router.h (routes).
//
// Thread safety: Handle*/Set*/Add* must be called before Start(). Handlers run concurrently on the
// worker threads. Start and Stop are called from one owning thread; Stop is idempotent and also
// run by the destructor.
#pragma once

#include <chrono>
#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/status.h"
#include "common/thread_annotations.h"

namespace hami {
class Clock;
}  // namespace hami

namespace hami::net {

class CertificateSource;

struct HttpRequest {
  std::string method;  // "GET", "POST", ...
  std::string path;    // decoded path without the query string
  std::string body;
  std::string remote_addr;
  // Header names are matched case-insensitively by Header().
  std::multimap<std::string, std::string> headers;
  std::multimap<std::string, std::string> params;  // decoded query parameters

  // First value of the header, or "" when absent.
  std::string Header(std::string_view name) const;
  bool HasParam(std::string_view name) const { return params.count(std::string(name)) > 0; }
  // First value of the query parameter, or `fallback` when absent.
  std::string Param(std::string_view name, std::string fallback = "") const;
};

// Passed to a streaming response; Write() sends one HTTP chunk.
class ChunkWriter {
 public:
  virtual ~ChunkWriter() = default;
  // False once the peer is gone or the server is stopping; the stream should then return.
  virtual bool Write(std::string_view data) = 0;
  // True while the server is running and the stream's consumer still listens (a cheap check for
  // loops that wait between writes). Callable from any thread.
  virtual bool ServerRunning() const = 0;

  // For one thread that feeds many streams (the simulated API server's watch fan-out): sends
  // `data` as one chunk without waiting for the peer. What the socket does not take at once is
  // held by the writer and goes out first with the next Write, TryWrite or Drain; *pending says
  // whether anything is held. False once the stream is broken. The default (writers that never
  // block) is Write. Never call TryWrite or Drain concurrently with another call on one writer.
  virtual bool TryWrite(std::string_view data, bool* pending) {
    *pending = false;
    return Write(data);
  }
  // Sends everything TryWrite held, waiting as Write does; false once the stream is broken.
  virtual bool Drain() { return true; }
};

class Responder;

// A connection taken over by its handler after a 101 Switching Protocols answer
// (HttpResponse::upgrade), as a raw byte stream (TLS already removed). The handler owns it on
// its worker thread until it returns; then the server closes it. Not for concurrent use: one
// thread polls fd() beside its own descriptors, reads and writes.
class UpgradedConnection {
 public:
  virtual ~UpgradedConnection() = default;
  // The socket, to poll for POLLIN. Also readable (at end of stream) once the server stops.
  virtual int fd() const = 0;
  // True when Read has bytes to give without the socket being readable (bytes that came with
  // the request's head, or a TLS record already decrypted).
  virtual bool HasBuffered() const = 0;
  enum class ReadResult { kData, kNothing, kEnd };
  // Appends what is there to *out: kData when bytes came, kNothing when none did (it waits at
  // most a few milliseconds; call it after poll says readable or HasBuffered), kEnd when the
  // peer closed, the connection broke or the server is stopping.
  virtual ReadResult Read(std::string* out) = 0;
  // Sends all of `data`, waiting up to the server's write timeout; false once the connection is
  // broken.
  virtual bool Write(std::string_view data) = 0;
  virtual bool ServerRunning() const = 0;
};

struct HttpResponse {
  int status = 200;
  std::string body;
  std::string content_type = "text/plain; charset=utf-8";
  std::vector<std::pair<std::string, std::string>> headers;
  // When set, `body` is ignored and the response is sent with chunked transfer encoding: the
  // function runs on the worker thread after the headers and writes chunks until it returns.
  std::function<void(ChunkWriter&)> stream;
  // With status 101: the head goes out (status line, `Connection: Upgrade` and `headers`, which
  // should name the new protocol in `Upgrade`), then this runs on the worker thread with the
  // connection, which is closed when it returns. A long-lived session holds its worker.
  std::function<void(UpgradedConnection&)> upgrade;

  void SetJson(int code, std::string json) {
    status = code;
    body = std::move(json);
    content_type = "application/json";
  }
  void SetText(int code, std::string text) {
    status = code;
    body = std::move(text);
    content_type = "text/plain; charset=utf-8";
  }

  // Answer later: the handler keeps the returned Responder and returns at once, which frees its
  // worker thread; the answer goes out when Responder::Send is called, from any thread. Until
  // then the connection reads no further request (answers keep the order of requests). The rest
  // of this response is ignored. In-process callers (HttpServer::Serve) wait for the answer.
  std::shared_ptr<Responder> Defer();
  std::shared_ptr<Responder> deferred;  // set by Defer()
};

// The promise of a deferred answer (HttpResponse::Defer). Thread safety: every method may be
// called from any thread.
class Responder {
 public:
  // Hands the answer over; only the first call counts. A no-op for the client once the server
  // stopped or the connection is gone.
  void Send(HttpResponse res) EXCLUDES(mu_);

  // For the server: true when the answer was already sent; else false, and `on_answer` runs
  // once (on the sending thread) when it is.
  bool NotifyWhenSent(std::function<void()> on_answer) EXCLUDES(mu_);
  bool Sent() const EXCLUDES(mu_);
  // For the server: blocks until the answer is sent, then takes it.
  HttpResponse Wait() EXCLUDES(mu_);

 private:
  mutable Mutex mu_;
  std::condition_variable cv_;  // notified when the answer is sent
  std::optional<HttpResponse> answer_ GUARDED_BY(mu_);
  bool sent_ GUARDED_BY(mu_) = false;
  std::function<void()> on_answer_ GUARDED_BY(mu_);
};

using HttpHandler = std::function<void(const HttpRequest&, HttpResponse&)>;

struct TlsOptions {
  std::string cert_file;  // PEM chain; re-read when it changes
  std::string key_file;   // PEM private key
};

struct HttpServerOptions {
  std::string host = "127.0.0.1";
  int port = 0;             // 0 = any free port; Start() returns the bound one
  int worker_threads = 64;  // requests handled at once (streaming answers hold one each)
  size_t keep_alive_max_requests = 100000;
  // How long an idle keep-alive connection waits for its next request.
  std::chrono::seconds keep_alive_timeout{5};
  // A request head must arrive within this from its first byte; a body may take longer as long
  // as no gap between two reads of it does.
  std::chrono::seconds read_timeout{10};
  std::chrono::seconds write_timeout{10};  // per send
  // After an answer, how long a worker waits for the connection's next request before handing
  // the connection back to the reactor (a busy client's next request costs no reactor trip).
  std::chrono::milliseconds keep_alive_linger{2};
  // A TLS handshake must complete within this from the connection's accept.
  std::chrono::seconds handshake_timeout{10};
  // Open connections (0 = no cap), in all and per remote address.
  size_t max_connections = 20000;
  size_t max_connections_per_address = 0;
  size_t max_body_bytes = 64u << 20;
  // The kernel's accept queue, and also how many whole requests may wait for a worker; beyond
  // that their connections are closed.
  int listen_backlog = 4096;
  std::optional<TlsOptions> tls;
  // Alternative to `tls`: an already built certificate source (e.g. a generated pair).
  std::shared_ptr<CertificateSource> certificate;
  // Where every deadline's time comes from; null = the real steady clock. Outlives the server.
  const Clock* clock = nullptr;
};

// A listen address as the Go binaries take it: "host:port" or ":port" (everywhere; host
// "0.0.0.0" too). Port 0 picks a free port.
Status SplitHostPort(const std::string& addr, std::string* host, int* port);

class HttpServer {
 public:
  // Validates the options and loads the TLS material; nothing listens until Start().
  static Result<std::unique_ptr<HttpServer>> Create(HttpServerOptions options);
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // Exact path route.
  void Handle(std::string method, std::string path, HttpHandler handler);
  // Every path starting with `prefix` (e.g. "/api/").
  void HandlePrefix(std::string method, std::string prefix, HttpHandler handler);

  // GET /healthz and /livez answer 200 "ok" while running. GET /readyz answers 200 "ok" when
  // every readiness check passes, else 503 naming the failing checks.
  void AddReadinessCheck(std::string name, std::function<bool()> check);
  // GET /metrics answers with the returned Prometheus text exposition.
  void SetMetricsHandler(std::function<std::string()> render);

  // Routes one request to its handler on the calling thread, exactly as a request arriving over
  // the network would be (404/405, a handler's exception as 500), without any socket. For
  // in-process clients of a server (the simulated API server's, in benchmarks). A streaming
  // response is left in `res.stream` for the caller to run.
  void Serve(const HttpRequest& req, HttpResponse& res) const;

  // Serves one already connected plain socket on the calling thread, as a worker would, until
  // the peer closes it or sends something unreadable (for the fuzz target and tests; the server
  // need not be started). The caller closes `fd`.
  void ServeConnectionForTesting(int fd) const;

  // Binds, starts serving on background threads and returns the bound port.
  Result<int> Start();
  // Stops accepting, waits for in-flight requests and joins. Open streams see Write() and
  // ServerRunning() turn false; a stream that blocks between writes must also be woken by its
  // owner (as ApiServer does by closing its store first), or Stop waits for it.
  void Stop();

  bool tls() const;
  int port() const;
  // Connections the server holds between requests (idle, in their TLS handshake, or collecting
  // a request), not counting those a worker is serving. A client has its answer slightly before
  // its connection is back among these (the worker hands it back after sending).
  size_t WaitingConnections() const;
  // For tests (a FakeClock in HttpServerOptions::clock makes the deadlines theirs to advance):
  // returns once the reactor has finished a whole round begun after this call, and so has
  // accepted every connection and read every byte that had reached the server by then and
  // closed every connection whose deadline had passed, and WaitingConnections() is at least
  // `min_waiting`. A connection accepted in that round has its bytes read in a later one: sync
  // after connecting and again after sending. False when the server is not running, or after
  // 10 s of real time (a failure, not a way to wait).
  bool SyncForTesting(size_t min_waiting = 0) const;
  // For TLS servers: the certificate source (to force a reload check or read its generation).
  std::shared_ptr<CertificateSource> certificate() const;

  class Impl;

 private:
  explicit HttpServer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace hami::net
