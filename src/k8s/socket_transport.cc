// SocketTransport's entry points: Do and DoBatch over pooled connections, the URL parsing that
// picks the pool, and the choice between this transport and libcurl's behind a proxy.
// Connection setup lives in socket_transport_connect.cc, the exchange itself in
// socket_transport_exchange.cc.
#include "k8s/socket_transport.h"

#include <cstdlib>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "k8s/curl_transport.h"
#include "k8s/socket_transport_internal.h"

namespace hami::k8s {

using socket_internal::Bodyless;
using socket_internal::Conn;
using socket_internal::Exchange;
using socket_internal::Lower;
using socket_internal::RequestHead;
using socket_internal::SendAll;
using socket_internal::Url;

namespace {

// Splits an http:// or https:// URL into what a connection and a request line need;
// FailedPrecondition for other schemes, user information and malformed authorities.
Result<Url> ParseUrl(const std::string& url) {
  Url u;
  std::string_view rest(url);
  if (rest.rfind("https://", 0) == 0) {
    u.https = true;
    rest.remove_prefix(8);
  } else if (rest.rfind("http://", 0) == 0) {
    rest.remove_prefix(7);
  } else {
    return FailedPreconditionError("unsupported URL (want http:// or https://): " + url);
  }
  size_t slash = rest.find_first_of("/?");
  std::string_view authority = rest.substr(0, slash);
  u.target = slash == std::string_view::npos ? "/" : std::string(rest.substr(slash));
  if (u.target[0] == '?') u.target.insert(0, "/");
  if (authority.find('@') != std::string_view::npos) {
    return FailedPreconditionError("user information in the URL is not supported: " + url);
  }
  std::string_view port;
  if (!authority.empty() && authority.front() == '[') {
    size_t close = authority.find(']');
    if (close == std::string_view::npos) return FailedPreconditionError("malformed URL: " + url);
    u.host = std::string(authority.substr(1, close - 1));
    if (close + 1 < authority.size()) {
      if (authority[close + 1] != ':') return FailedPreconditionError("malformed URL: " + url);
      port = authority.substr(close + 2);
    }
  } else {
    size_t colon = authority.rfind(':');
    u.host = std::string(authority.substr(0, colon));
    if (colon != std::string_view::npos) port = authority.substr(colon + 1);
  }
  if (u.host.empty()) return FailedPreconditionError("URL without a host: " + url);
  u.port = port.empty() ? (u.https ? "443" : "80") : std::string(port);
  if (u.port.find_first_not_of("0123456789") != std::string::npos || u.port.size() > 5) {
    return FailedPreconditionError("malformed port in URL: " + url);
  }
  u.host_header = std::string(authority);
  u.key = (u.https ? "https://" : "http://") + u.host_header;
  return u;
}

}  // namespace

SocketTransport::SocketTransport(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
SocketTransport::~SocketTransport() = default;

Result<std::unique_ptr<SocketTransport>> SocketTransport::Create(SocketOptions options) {
  if (options.tls.client_cert_pem.empty() != options.tls.client_key_pem.empty()) {
    return InvalidArgumentError("client certificate and key must be given together");
  }
  auto impl = std::make_unique<Impl>();
  impl->options = std::move(options);
  impl->tls_error = impl->BuildTlsContext();
  return std::unique_ptr<SocketTransport>(new SocketTransport(std::move(impl)));
}

uint64_t SocketTransport::connections_opened() const {
  return impl_->opened.load(std::memory_order_relaxed);
}

Result<HttpResponse> SocketTransport::Do(const HttpRequest& request) {
  HAMI_ASSIGN_OR_RETURN(Url url, ParseUrl(request.url));
  if (request.cancel != nullptr && request.cancel->cancelled()) {
    return Status(StatusCode::kCancelled, "request cancelled");
  }
  for (int attempt = 0;; ++attempt) {
    std::unique_ptr<Conn> conn = impl_->TakeIdle(url.key);
    const bool reused = conn != nullptr;
    if (!reused) {
      HAMI_ASSIGN_OR_RETURN(conn, impl_->Connect(url, request.cancel));
    }
    bool reusable = false, stale = false;
    Result<HttpResponse> response = Exchange(*conn, url, request, &reusable, &stale);
    if (response.ok()) {
      if (reusable) impl_->Return(std::move(conn));
      return response;
    }
    // A pooled connection the server had already closed: nothing was answered, so an
    // idempotent request goes again on a new connection (others report Unknown, and the
    // caller's retry policy decides).
    const bool idempotent = request.method == "GET" || request.method == "HEAD";
    if (!(reused && stale && idempotent && attempt == 0)) return response.status();
  }
}

std::vector<Result<HttpResponse>> SocketTransport::DoBatch(
    const std::vector<HttpRequest>& requests) {
  std::vector<Result<HttpResponse>> out;
  out.reserve(requests.size());
  std::vector<Url> urls;
  bool pipelinable = requests.size() > 1;
  for (const HttpRequest& r : requests) {
    if (!pipelinable) break;
    Result<Url> u = ParseUrl(r.url);
    if (!u.ok() || r.on_body || (!urls.empty() && u->key != urls.front().key)) {
      pipelinable = false;
      break;
    }
    urls.push_back(std::move(*u));
  }
  if (!pipelinable) {
    for (const HttpRequest& r : requests) out.push_back(Do(r));
    return out;
  }
  const HttpRequest& first = requests.front();
  if (first.cancel != nullptr && first.cancel->cancelled()) {
    for (size_t i = 0; i < requests.size(); ++i) {
      out.push_back(Status(StatusCode::kCancelled, "request cancelled"));
    }
    return out;
  }
  std::unique_ptr<Conn> conn = impl_->TakeIdle(urls.front().key);
  if (conn == nullptr) {
    Result<std::unique_ptr<Conn>> fresh = impl_->Connect(urls.front(), first.cancel);
    if (!fresh.ok()) {
      for (size_t i = 0; i < requests.size(); ++i) out.push_back(fresh.status());
      return out;
    }
    conn = std::move(*fresh);
  }
  // Every request in one write, then the answers in order.
  std::string all;
  for (size_t i = 0; i < requests.size(); ++i) {
    all.append(RequestHead(urls[i], requests[i]));
    if (!Bodyless(requests[i])) all.append(requests[i].body);
  }
  std::string error;
  if (!SendAll(*conn, all, std::string(), &error)) {
    Status s(StatusCode::kUnknown, "sending to " + urls.front().host_header + ": " + error);
    for (size_t i = 0; i < requests.size(); ++i) out.push_back(s);
    return out;
  }
  bool usable = true;
  for (size_t i = 0; i < requests.size(); ++i) {
    if (!usable) {
      out.push_back(Status(StatusCode::kUnknown, "connection to " + urls[i].host_header +
                                                     " lost after " + std::to_string(i) + " of " +
                                                     std::to_string(requests.size()) +
                                                     " pipelined requests were answered"));
      continue;
    }
    bool reusable = false, stale = false;
    out.push_back(Exchange(*conn, urls[i], requests[i], &reusable, &stale, /*sent=*/true,
                           /*more_follow=*/i + 1 < requests.size()));
    usable = out.back().ok() && reusable;
  }
  if (usable) impl_->Return(std::move(conn));
  return out;
}

Result<HttpResponse> SocketTransportExchangeForTesting(int fd, const HttpRequest& request) {
  HAMI_ASSIGN_OR_RETURN(Url url, ParseUrl(request.url));
  Conn conn;
  conn.fd = fd;
  bool reusable = false, stale = false;
  Result<HttpResponse> r = Exchange(conn, url, request, &reusable, &stale);
  conn.fd = -1;  // the caller's
  return r;
}

Result<std::unique_ptr<Transport>> NewTransportFor(const std::string& url, const TlsConfig& tls,
                                                   std::chrono::milliseconds connect_timeout) {
  if (ProxyConfiguredFor(url)) {
    // libcurl reads the proxy variables (and their no_proxy exceptions) itself.
    if (!tls.server_name.empty()) {
      return UnimplementedError("tls-server-name is not supported through a proxy");
    }
    CurlOptions options;
    options.tls = tls;
    options.connect_timeout = connect_timeout;
    HAMI_ASSIGN_OR_RETURN(std::unique_ptr<CurlTransport> t, CurlTransport::Create(options));
    return std::unique_ptr<Transport>(std::move(t));
  }
  SocketOptions options;
  options.tls = tls;
  options.connect_timeout = connect_timeout;
  HAMI_ASSIGN_OR_RETURN(std::unique_ptr<SocketTransport> t, SocketTransport::Create(options));
  return std::unique_ptr<Transport>(std::move(t));
}

bool ProxyConfiguredFor(const std::string& url) {
  auto env = [](const char* name) -> std::string {
    const char* v = std::getenv(name);
    return v == nullptr ? std::string() : std::string(v);
  };
  Result<Url> u = ParseUrl(url);
  if (!u.ok()) return false;
  std::string proxy = u->https ? env("https_proxy") : env("http_proxy");
  if (proxy.empty() && u->https) proxy = env("HTTPS_PROXY");
  if (proxy.empty()) proxy = env("all_proxy");
  if (proxy.empty()) proxy = env("ALL_PROXY");
  if (proxy.empty()) return false;
  std::string no_proxy = env("no_proxy");
  if (no_proxy.empty()) no_proxy = env("NO_PROXY");
  std::string host = Lower(u->host);
  size_t start = 0;
  while (start <= no_proxy.size()) {
    size_t comma = no_proxy.find(',', start);
    std::string entry = Lower(
        no_proxy.substr(start, comma == std::string::npos ? std::string::npos : comma - start));
    entry.erase(0, entry.find_first_not_of(" \t"));
    entry.erase(entry.find_last_not_of(" \t") + 1);
    if (entry == "*") return false;
    if (!entry.empty() && entry.front() == '.') entry.erase(0, 1);
    if (!entry.empty() &&
        (host == entry || (host.size() > entry.size() &&
                           host.compare(host.size() - entry.size(), entry.size(), entry) == 0 &&
                           host[host.size() - entry.size() - 1] == '.'))) {
      return false;
    }
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return true;
}

}  // namespace hami::k8s
