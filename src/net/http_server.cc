// HttpServer: the public face (net/http_server.h). It owns the parts and wires them: the routes,
// the listening socket and TLS context, the reactor thread and the worker pool, and starts and
// stops them in order.
#include "net/http_server.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <openssl/ssl.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <utility>

#include "common/clock.h"
#include "net/http_connection.h"
#include "net/http_exchange.h"
#include "net/http_reactor.h"
#include "net/http_router.h"
#include "net/http_slot.h"
#include "net/http_worker_pool.h"
#include "net/tls.h"

namespace hami::net {
namespace {

// A TLS 1.2+ server context whose certificate pair comes from `cert` at every handshake.
Result<SSL_CTX*> MakeSslContext(CertificateSource* cert) {
  SSL_CTX* ctx = SSL_CTX_new(TLS_server_method());
  if (ctx == nullptr) return InternalError("cannot create the TLS context");
  SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
  SSL_CTX_set_options(ctx, SSL_OP_NO_COMPRESSION | SSL_OP_NO_RENEGOTIATION);
  // RELEASE_BUFFERS: a keep-alive connection between requests holds no 16 KiB record buffers.
  SSL_CTX_set_mode(ctx, SSL_MODE_AUTO_RETRY | SSL_MODE_RELEASE_BUFFERS);
  // Called for every handshake: hands the (possibly just rotated) pair to this connection.
  SSL_CTX_set_cert_cb(
      ctx,
      [](SSL* ssl, void* arg) -> int {
        return static_cast<CertificateSource*>(arg)->InstallOn(ssl) ? 1 : 0;
      },
      cert);
  return ctx;
}

// A non-blocking socket listening on host:port.
Result<int> Listen(const std::string& host, int port, int backlog) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  addrinfo* found = nullptr;
  const std::string where = host + ":" + std::to_string(port);
  int gai = ::getaddrinfo(host.empty() ? nullptr : host.c_str(), std::to_string(port).c_str(),
                          &hints, &found);
  if (gai != 0) return UnavailableError("cannot resolve " + where + ": " + gai_strerror(gai));
  int fd = -1;
  std::string last_error = "no address";
  for (addrinfo* ai = found; ai != nullptr; ai = ai->ai_next) {
    fd = ::socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, ai->ai_protocol);
    if (fd < 0) {
      last_error = std::strerror(errno);
      continue;
    }
    // SO_REUSEADDR, not SO_REUSEPORT: a second server on a port fails instead of stealing half
    // the connections.
    int yes = 1;
    ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
    if (::bind(fd, ai->ai_addr, ai->ai_addrlen) == 0 && ::listen(fd, backlog) == 0) break;
    last_error = std::strerror(errno);
    ::close(fd);
    fd = -1;
  }
  ::freeaddrinfo(found);
  if (fd < 0) return UnavailableError("cannot listen on " + where + ": " + last_error);
  return fd;
}

int BoundPort(int fd) {
  sockaddr_storage bound{};
  socklen_t len = sizeof bound;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&bound), &len);
  return ntohs(bound.ss_family == AF_INET6 ? reinterpret_cast<sockaddr_in6*>(&bound)->sin6_port
                                           : reinterpret_cast<sockaddr_in*>(&bound)->sin_port);
}

}  // namespace

// The parts, in construction order (each refers only to those above it). Owned by the thread
// that calls Start and Stop; the parts guard what their threads share.
class HttpServer::Impl {
 public:
  explicit Impl(HttpServerOptions o) : options(std::move(o)) {}
  ~Impl() {
    if (ssl_ctx != nullptr) SSL_CTX_free(ssl_ctx);
  }

  HttpServerOptions options;
  RealClock real_clock;
  const Clock& clock = options.clock != nullptr ? *options.clock : real_clock;
  std::shared_ptr<CertificateSource> cert;
  Router router;
  std::vector<std::pair<std::string, std::function<bool()>>> readiness;
  SSL_CTX* ssl_ctx = nullptr;
  std::atomic<bool> running{false};
  bool started = false;
  int port = 0;
  ConnectionCounts counts;  // before the slots that count themselves in it
  ExchangeContext exchange{options, clock, running, router};
  WorkerPool pool{exchange, [this](std::unique_ptr<Slot> s) { reactor.GiveBack(std::move(s)); }};
  Reactor reactor{options, clock, running, counts, pool};
  std::thread reactor_thread;
};

HttpServer::HttpServer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

HttpServer::~HttpServer() { Stop(); }

Result<std::unique_ptr<HttpServer>> HttpServer::Create(HttpServerOptions options) {
  if (options.worker_threads < 1) return InvalidArgumentError("worker_threads must be >= 1");
  std::shared_ptr<CertificateSource> cert;
  if (options.tls) {
    HAMI_ASSIGN_OR_RETURN(
        cert, CertificateSource::FromFiles(options.tls->cert_file, options.tls->key_file));
  } else if (options.certificate) {
    cert = options.certificate;
  }
  auto impl = std::make_unique<Impl>(std::move(options));
  impl->cert = std::move(cert);
  std::unique_ptr<HttpServer> server(new HttpServer(std::move(impl)));
  Impl* self = server->impl_.get();
  auto ok = [](const HttpRequest&, HttpResponse& res) { res.SetText(200, "ok"); };
  server->Handle("GET", "/healthz", ok);
  server->Handle("GET", "/livez", ok);
  server->Handle("GET", "/readyz", [self](const HttpRequest&, HttpResponse& res) {
    std::string failed;
    for (const auto& [name, check] : self->readiness) {
      if (!check()) failed += "[-]" + name + " failed\n";
    }
    if (failed.empty()) {
      res.SetText(200, "ok");
    } else {
      res.SetText(503, failed + "readyz check failed\n");
    }
  });
  return server;
}

void HttpServer::Handle(std::string method, std::string path, HttpHandler handler) {
  impl_->router.Add(std::move(method), std::move(path), /*prefix=*/false, std::move(handler));
}

void HttpServer::HandlePrefix(std::string method, std::string prefix, HttpHandler handler) {
  impl_->router.Add(std::move(method), std::move(prefix), /*prefix=*/true, std::move(handler));
}

void HttpServer::AddReadinessCheck(std::string name, std::function<bool()> check) {
  impl_->readiness.emplace_back(std::move(name), std::move(check));
}

void HttpServer::SetMetricsHandler(std::function<std::string()> render) {
  Handle("GET", "/metrics", [render = std::move(render)](const HttpRequest&, HttpResponse& res) {
    res.status = 200;
    res.body = render();
    res.content_type = "text/plain; version=0.0.4; charset=utf-8";
  });
}

Result<int> HttpServer::Start() {
  Impl& m = *impl_;
  if (m.started) return FailedPreconditionError("server already started");
  if (m.cert && m.ssl_ctx == nullptr) {
    HAMI_ASSIGN_OR_RETURN(m.ssl_ctx, MakeSslContext(m.cert.get()));
  }
  const HttpServerOptions& o = m.options;
  HAMI_ASSIGN_OR_RETURN(int fd, Listen(o.host, o.port, o.listen_backlog));
  m.port = BoundPort(fd);
  HAMI_RETURN_IF_ERROR(m.reactor.Open(fd, m.port, m.ssl_ctx));
  m.pool.Open();
  m.started = true;
  m.running = true;
  m.reactor_thread = std::thread([&m] { m.reactor.Run(); });
  return m.port;
}

void HttpServer::Stop() {
  Impl& m = *impl_;
  if (!m.started) return;
  m.started = false;
  m.running = false;
  m.pool.Detach();  // a Send from now on reaches nothing
  m.reactor.Wake();
  // The reactor closes the connections it holds and the listening socket.
  if (m.reactor_thread.joinable()) m.reactor_thread.join();
  m.pool.Stop();
  m.reactor.Close();  // drops connections given back meanwhile
}

void HttpServer::Serve(const HttpRequest& req, HttpResponse& res) const {
  impl_->router.Serve(req, res);
  if (res.deferred) res = res.deferred->Wait();
}

void HttpServer::ServeConnectionForTesting(int fd) const {
  const std::atomic<bool> run{true};
  Connection conn(fd, nullptr, run, impl_->clock);
  ExchangeContext context{impl_->options, impl_->clock, run, impl_->router};
  const std::string peer = PeerAddress(fd);
  size_t served = 0;
  Exchange(context, conn, peer, &served).ServeUntilClosed();
}

bool HttpServer::tls() const { return impl_->cert != nullptr; }
int HttpServer::port() const { return impl_->port; }
size_t HttpServer::WaitingConnections() const { return impl_->reactor.waiting(); }
bool HttpServer::SyncForTesting(size_t min_waiting) const {
  return impl_->reactor.SyncForTesting(min_waiting, std::chrono::seconds(10));
}
std::shared_ptr<CertificateSource> HttpServer::certificate() const { return impl_->cert; }

std::string HttpRequest::Header(std::string_view name) const {
  for (const auto& [k, v] : headers) {
    if (k.size() == name.size() && ::strncasecmp(k.data(), name.data(), k.size()) == 0) return v;
  }
  return "";
}

std::string HttpRequest::Param(std::string_view name, std::string fallback) const {
  auto it = params.find(std::string(name));
  return it == params.end() ? fallback : it->second;
}

Status SplitHostPort(const std::string& addr, std::string* host, int* port) {
  size_t colon = addr.rfind(':');
  if (colon == std::string::npos) return InvalidArgumentError("\"" + addr + "\": no port");
  *host = addr.substr(0, colon);
  if (host->empty()) *host = "0.0.0.0";
  const char* digits = addr.c_str() + colon + 1;
  char* end = nullptr;
  long p = std::strtol(digits, &end, 10);  // NOLINT(runtime/int)
  if (end == digits || *end != '\0' || p < 0 || p > 65535) {
    return InvalidArgumentError("\"" + addr + "\": bad port");
  }
  *port = static_cast<int>(p);
  return OkStatus();
}

}  // namespace hami::net
