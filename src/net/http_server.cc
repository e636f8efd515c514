#include "net/http_server.h"

#include <httplib.h>
#include <openssl/ssl.h>
#include <strings.h>
#include <sys/socket.h>

#include <atomic>
#include <exception>
#include <thread>

#include "net/tls.h"

namespace hami::net {
namespace {

// Exposes the protected listening socket so the backlog can be raised past the 5 compiled into
// Debian's .so: Linux accepts a second listen() on a listening socket and applies the new backlog.
template <class Base>
class TunedServer : public Base {
 public:
  using Base::Base;
  bool RaiseBacklog(int backlog) { return ::listen(this->svr_sock_, backlog) == 0; }
};

class SinkWriter : public ChunkWriter {
 public:
  SinkWriter(httplib::DataSink& sink, const std::atomic<bool>& running)
      : sink_(sink), running_(running) {}
  bool Write(std::string_view data) override {
    if (failed_ || !running_.load()) return false;
    if (!sink_.is_writable() || !sink_.write(data.data(), data.size())) failed_ = true;
    return !failed_;
  }
  bool ServerRunning() const override { return running_.load(); }

 private:
  httplib::DataSink& sink_;
  const std::atomic<bool>& running_;
  bool failed_ = false;
};

struct Route {
  std::string method;
  std::string path;
  bool prefix = false;
  HttpHandler handler;
};

void SetReuseAddr(socket_t sock) {
  int yes = 1;
  ::setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
}

}  // namespace

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

class HttpServer::Impl {
 public:
  HttpServerOptions options;
  std::shared_ptr<CertificateSource> cert;
  std::vector<Route> routes;
  std::vector<std::pair<std::string, std::function<bool()>>> readiness;
  std::function<std::string()> metrics;

  std::unique_ptr<httplib::Server> server;
  std::thread thread;
  std::atomic<bool> running{false};
  int port = 0;

  const Route* Find(const std::string& method, const std::string& path, bool* path_known) const {
    const Route* best = nullptr;
    *path_known = false;
    for (const Route& r : routes) {
      bool match = r.prefix ? path.compare(0, r.path.size(), r.path) == 0 : path == r.path;
      if (!match) continue;
      *path_known = true;
      bool method_ok = r.method == method || (method == "HEAD" && r.method == "GET");
      if (!method_ok) continue;
      if (!best || (best->prefix && !r.prefix) ||
          (best->prefix == r.prefix && r.path.size() > best->path.size())) {
        best = &r;
      }
    }
    return best;
  }

  void Serve(const HttpRequest& req, HttpResponse& res) const {
    bool path_known = false;
    const Route* route = Find(req.method, req.path, &path_known);
    if (!route) {
      res.SetText(path_known ? 405 : 404, path_known ? "method not allowed\n" : "not found\n");
      return;
    }
    try {
      route->handler(req, res);
    } catch (const std::exception& e) {
      res = HttpResponse();
      res.SetText(500, std::string("internal error: ") + e.what() + "\n");
    } catch (...) {
      res = HttpResponse();
      res.SetText(500, "internal error\n");
    }
  }

  void Dispatch(const httplib::Request& hreq, httplib::Response& hres) {
    HttpRequest req;
    req.method = hreq.method;
    req.path = hreq.path;
    // The request is httplib's own mutable local and its body is not read after dispatch:
    // moved, not copied (a filter with 5,000 node names is 75 KB).
    req.body = std::move(const_cast<httplib::Request&>(hreq).body);
    req.remote_addr = hreq.remote_addr;
    req.headers.insert(hreq.headers.begin(), hreq.headers.end());
    req.params.insert(hreq.params.begin(), hreq.params.end());
    HttpResponse res;
    Serve(req, res);
    hres.status = res.status;
    for (auto& [k, v] : res.headers) hres.set_header(k, v);
    if (res.stream) {
      // httplib would gzip a JSON/text stream for a client that accepts it, and its deflate
      // buffers chunks until the stream ends, which would stall watch-style streams. The request
      // object is httplib's own mutable local, so dropping the header here is well-defined.
      const_cast<httplib::Request&>(hreq).headers.erase("Accept-Encoding");
      auto stream = std::move(res.stream);
      const std::atomic<bool>& run = running;
      hres.set_chunked_content_provider(
          res.content_type, [stream, &run](size_t, httplib::DataSink& sink) {
            SinkWriter writer(sink, run);
            try {
              stream(writer);
            } catch (...) {
              return false;  // drops the connection; the client sees a truncated stream
            }
            sink.done();
            return true;
          });
    } else {
      hres.set_content(res.body, res.content_type);
    }
  }
};

HttpServer::HttpServer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

HttpServer::~HttpServer() { Stop(); }

Result<std::unique_ptr<HttpServer>> HttpServer::Create(HttpServerOptions options) {
  auto impl = std::make_unique<Impl>();
  if (options.worker_threads < 1) return InvalidArgumentError("worker_threads must be >= 1");
  if (options.tls) {
    HAMI_ASSIGN_OR_RETURN(
        impl->cert, CertificateSource::FromFiles(options.tls->cert_file, options.tls->key_file));
  } else if (options.certificate) {
    impl->cert = options.certificate;
  }
  impl->options = std::move(options);
  std::unique_ptr<HttpServer> server(new HttpServer(std::move(impl)));
  Impl* self = server->impl_.get();
  server->Handle("GET", "/healthz",
                 [](const HttpRequest&, HttpResponse& res) { res.SetText(200, "ok"); });
  server->Handle("GET", "/livez",
                 [](const HttpRequest&, HttpResponse& res) { res.SetText(200, "ok"); });
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
  impl_->routes.push_back({std::move(method), std::move(path), false, std::move(handler)});
}

void HttpServer::HandlePrefix(std::string method, std::string prefix, HttpHandler handler) {
  impl_->routes.push_back({std::move(method), std::move(prefix), true, std::move(handler)});
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
  if (m.server) return FailedPreconditionError("server already started");
  const HttpServerOptions& o = m.options;
  if (m.cert) {
    std::shared_ptr<CertificateSource> cert = m.cert;
    auto tls = std::make_unique<TunedServer<httplib::SSLServer>>([cert](SSL_CTX& ctx) {
      SSL_CTX_set_min_proto_version(&ctx, TLS1_2_VERSION);
      SSL_CTX_set_options(&ctx, SSL_OP_NO_COMPRESSION | SSL_OP_NO_RENEGOTIATION);
      // Called for every handshake: hands the (possibly just rotated) pair to this connection.
      SSL_CTX_set_cert_cb(
          &ctx,
          [](SSL* ssl, void* arg) -> int {
            return static_cast<CertificateSource*>(arg)->InstallOn(ssl) ? 1 : 0;
          },
          cert.get());
      return true;
    });
    if (!tls->is_valid()) return InternalError("cannot create the TLS context");
    m.server = std::move(tls);
  } else {
    m.server = std::make_unique<TunedServer<httplib::Server>>();
  }
  httplib::Server& s = *m.server;
  int threads = o.worker_threads;
  s.new_task_queue = [threads] { return new httplib::ThreadPool(static_cast<size_t>(threads)); };
  s.set_tcp_nodelay(true);
  s.set_socket_options(SetReuseAddr);
  s.set_keep_alive_max_count(o.keep_alive_max_requests);
  s.set_keep_alive_timeout(o.keep_alive_timeout.count());
  s.set_read_timeout(o.read_timeout.count());
  s.set_write_timeout(o.write_timeout.count());
  s.set_payload_max_length(o.max_body_bytes);
  auto dispatch = [this](const httplib::Request& req, httplib::Response& res) {
    impl_->Dispatch(req, res);
  };
  // A single catch-all pattern per method; routing is done by Impl::Find.
  const std::string all = "/.*";
  s.Get(all, dispatch);
  s.Post(all, dispatch);
  s.Put(all, dispatch);
  s.Patch(all, dispatch);
  s.Delete(all, dispatch);
  s.Options(all, dispatch);

  int port = o.port;
  if (port == 0) {
    port = s.bind_to_any_port(o.host);
    if (port < 0) return UnavailableError("cannot bind " + o.host + ":0");
  } else if (!s.bind_to_port(o.host, port)) {
    return UnavailableError("cannot bind " + o.host + ":" + std::to_string(port));
  }
  auto raise = [&](auto* tuned) { return tuned->RaiseBacklog(o.listen_backlog); };
  bool raised = m.cert ? raise(static_cast<TunedServer<httplib::SSLServer>*>(m.server.get()))
                       : raise(static_cast<TunedServer<httplib::Server>*>(m.server.get()));
  if (!raised) return UnavailableError("cannot raise the listen backlog");
  m.port = port;
  m.running = true;
  m.thread = std::thread([&s] { s.listen_after_bind(); });
  // httplib's stop() is a no-op until listen_after_bind() has flipped is_running(), so wait for
  // that (microseconds) to make an immediate Stop() safe.
  while (!s.is_running()) std::this_thread::yield();
  return port;
}

void HttpServer::Stop() {
  Impl& m = *impl_;
  if (!m.server) return;
  m.running = false;
  m.server->stop();
  if (m.thread.joinable()) m.thread.join();
  m.server.reset();
}

void HttpServer::Serve(const HttpRequest& req, HttpResponse& res) const { impl_->Serve(req, res); }

bool HttpServer::tls() const { return impl_->cert != nullptr; }
int HttpServer::port() const { return impl_->port; }
std::shared_ptr<CertificateSource> HttpServer::certificate() const { return impl_->cert; }

}  // namespace hami::net
