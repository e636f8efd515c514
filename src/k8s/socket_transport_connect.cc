// SocketTransport's connection setup: resolving and dialling the server, the TLS context and
// handshake, and the pool of idle keep-alive connections.
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>

#include "k8s/socket_transport_internal.h"
#include "net/socket_bio.h"

namespace hami::k8s {
namespace socket_internal {

bool IsIpLiteral(const std::string& host) {
  unsigned char buf[sizeof(struct in6_addr)];
  return inet_pton(AF_INET, host.c_str(), buf) == 1 || inet_pton(AF_INET6, host.c_str(), buf) == 1;
}

std::string OpenSslErrors() {
  std::string out;
  for (unsigned long e = ERR_get_error(); e != 0; e = ERR_get_error()) {  // NOLINT(runtime/int)
    char buf[256];
    ERR_error_string_n(e, buf, sizeof buf);
    if (!out.empty()) out += "; ";
    out += buf;
  }
  return out.empty() ? "unknown TLS error" : out;
}

Conn::~Conn() {
  if (ssl != nullptr) SSL_free(ssl);
  if (fd >= 0) ::close(fd);
}

namespace {

enum class ConnectWait { kConnected, kFailed, kCancelled };

// Waits for the non-blocking connect() on `fd` to finish by `deadline`, looking at `cancel`
// every kCancelTick. kFailed leaves the reason in errno (ETIMEDOUT once the deadline passed).
ConnectWait AwaitConnect(int fd, SteadyClock::time_point deadline, const Cancellation* cancel) {
  pollfd p{fd, POLLOUT, 0};
  for (;;) {
    auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - SteadyClock::now());
    if (left.count() <= 0) {
      errno = ETIMEDOUT;
      return ConnectWait::kFailed;
    }
    int wait = static_cast<int>(std::min<int64_t>(left.count(), kCancelTick.count()));
    int pr = ::poll(&p, 1, wait);
    if (pr > 0) {
      int err = 0;
      socklen_t len = sizeof err;
      ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len);
      errno = err;
      return err == 0 ? ConnectWait::kConnected : ConnectWait::kFailed;
    }
    if (pr < 0 && errno != EINTR) return ConnectWait::kFailed;
    if (cancel != nullptr && cancel->cancelled()) return ConnectWait::kCancelled;
  }
}

// Opens a TCP connection to `a` by `deadline`: the descriptor, blocking, with TCP_NODELAY and
// keep-alive probes. -1 on failure, with *error set, or with *cancelled set when `cancel` fired
// during the wait.
int DialAddress(const addrinfo& a, SteadyClock::time_point deadline, const Cancellation* cancel,
                std::string* error, bool* cancelled) {
  int fd = ::socket(a.ai_family, a.ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, a.ai_protocol);
  if (fd < 0) {
    *error = std::strerror(errno);
    return -1;
  }
  int rc = ::connect(fd, a.ai_addr, a.ai_addrlen);
  if (rc != 0 && errno == EINPROGRESS) {
    const ConnectWait waited = AwaitConnect(fd, deadline, cancel);
    if (waited == ConnectWait::kCancelled) {
      ::close(fd);
      *cancelled = true;
      return -1;
    }
    rc = waited == ConnectWait::kConnected ? 0 : -1;
  }
  if (rc != 0) {
    *error = std::strerror(errno);
    ::close(fd);
    return -1;
  }
  ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) & ~O_NONBLOCK);
  int yes = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &yes, sizeof yes);
  ::setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &yes, sizeof yes);
  return fd;
}

}  // namespace
}  // namespace socket_internal

using socket_internal::Conn;
using socket_internal::IsIpLiteral;
using socket_internal::kIdleCheckAfter;
using socket_internal::OpenSslErrors;
using socket_internal::SteadyClock;
using socket_internal::Url;

SocketTransport::Impl::~Impl() {
  idle.clear();
  if (ctx != nullptr) SSL_CTX_free(ctx);
}

Status SocketTransport::Impl::BuildTlsContext() {
  ctx = SSL_CTX_new(TLS_client_method());
  if (ctx == nullptr) return InternalError("cannot create a TLS context: " + OpenSslErrors());
  SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
  SSL_CTX_set_mode(ctx, SSL_MODE_AUTO_RETRY);
  // A server that closes without close_notify ends the stream instead of failing the read (a
  // read-to-close body ends that way with many servers).
  SSL_CTX_set_options(ctx, SSL_OP_IGNORE_UNEXPECTED_EOF);
  const TlsConfig& tls = options.tls;
  if (tls.insecure_skip_verify) {
    SSL_CTX_set_verify(ctx, SSL_VERIFY_NONE, nullptr);
  } else {
    SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, nullptr);
    if (tls.ca_pem.empty()) {
      SSL_CTX_set_default_verify_paths(ctx);
    } else {
      BIO* bio = BIO_new_mem_buf(tls.ca_pem.data(), static_cast<int>(tls.ca_pem.size()));
      X509_STORE* store = SSL_CTX_get_cert_store(ctx);
      int added = 0;
      while (X509* cert = PEM_read_bio_X509(bio, nullptr, nullptr, nullptr)) {
        if (X509_STORE_add_cert(store, cert) == 1) ++added;
        X509_free(cert);
      }
      BIO_free(bio);
      ERR_clear_error();  // the loop ends on a "no start line" error
      if (added == 0) {
        return FailedPreconditionError("certificate authority data holds no PEM certificate");
      }
    }
  }
  if (!tls.client_cert_pem.empty()) {
    BIO* bio =
        BIO_new_mem_buf(tls.client_cert_pem.data(), static_cast<int>(tls.client_cert_pem.size()));
    X509* leaf = PEM_read_bio_X509(bio, nullptr, nullptr, nullptr);
    bool ok = leaf != nullptr && SSL_CTX_use_certificate(ctx, leaf) == 1;
    X509_free(leaf);
    while (ok) {  // the rest of the chain, if any
      X509* extra = PEM_read_bio_X509(bio, nullptr, nullptr, nullptr);
      if (extra == nullptr) break;
      if (SSL_CTX_add_extra_chain_cert(ctx, extra) != 1) X509_free(extra);
    }
    BIO_free(bio);
    if (!ok) return FailedPreconditionError("unusable client certificate: " + OpenSslErrors());
    ERR_clear_error();
    bio = BIO_new_mem_buf(tls.client_key_pem.data(), static_cast<int>(tls.client_key_pem.size()));
    EVP_PKEY* key = PEM_read_bio_PrivateKey(bio, nullptr, nullptr, nullptr);
    BIO_free(bio);
    ok = key != nullptr && SSL_CTX_use_PrivateKey(ctx, key) == 1 &&
         SSL_CTX_check_private_key(ctx) == 1;
    EVP_PKEY_free(key);
    if (!ok) return FailedPreconditionError("unusable client key: " + OpenSslErrors());
  }
  return OkStatus();
}

std::unique_ptr<Conn> SocketTransport::Impl::TakeIdle(const std::string& key) {
  for (;;) {
    std::unique_ptr<Conn> c;
    {
      MutexLock lock(mu);
      auto it = idle.find(key);
      if (it == idle.end() || it->second.empty()) return nullptr;
      c = std::move(it->second.back());
      it->second.pop_back();
    }
    if (SteadyClock::now() - c->last_used < kIdleCheckAfter) return c;
    // Idle for a while: the server may have closed it. Anything readable on an idle connection
    // (end of stream, a TLS alert, stray bytes) means it cannot carry another exchange.
    char probe;
    ssize_t n = ::recv(c->fd, &probe, 1, MSG_PEEK | MSG_DONTWAIT);
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return c;
  }
}

void SocketTransport::Impl::Return(std::unique_ptr<Conn> c) {
  c->last_used = SteadyClock::now();
  MutexLock lock(mu);
  std::vector<std::unique_ptr<Conn>>& list = idle[c->key];
  if (list.size() < options.max_idle_connections) list.push_back(std::move(c));
}

Result<std::unique_ptr<Conn>> SocketTransport::Impl::Connect(const Url& url,
                                                             const Cancellation* cancel) {
  const std::string where = url.host_header;
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_NUMERICSERV | (IsIpLiteral(url.host) ? AI_NUMERICHOST : 0);
  addrinfo* addrs = nullptr;
  int gai = ::getaddrinfo(url.host.c_str(), url.port.c_str(), &hints, &addrs);
  if (gai != 0) return UnavailableError("cannot resolve " + url.host + ": " + gai_strerror(gai));
  const auto deadline = SteadyClock::now() + options.connect_timeout;
  std::string last_error = "no address";
  auto conn = std::make_unique<Conn>();
  for (addrinfo* a = addrs; a != nullptr && conn->fd < 0; a = a->ai_next) {
    bool cancelled = false;
    conn->fd = socket_internal::DialAddress(*a, deadline, cancel, &last_error, &cancelled);
    if (cancelled) {
      ::freeaddrinfo(addrs);
      return Status(StatusCode::kCancelled, "cancelled while connecting to " + where);
    }
  }
  ::freeaddrinfo(addrs);
  if (conn->fd < 0) return UnavailableError("cannot connect to " + where + ": " + last_error);
  conn->key = url.key;
  opened.fetch_add(1, std::memory_order_relaxed);
  if (!url.https) return conn;
  HAMI_RETURN_IF_ERROR(StartTls(*conn, url, deadline));
  return conn;
}

Status SocketTransport::Impl::StartTls(Conn& conn, const Url& url,
                                       SteadyClock::time_point deadline) {
  const std::string& where = url.host_header;
  if (!tls_error.ok()) return tls_error;
  auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - SteadyClock::now());
  socket_internal::SetIoTimeout(conn, std::max<int64_t>(1, left.count()));
  conn.ssl = SSL_new(ctx);
  if (conn.ssl == nullptr) return InternalError("cannot create a TLS session: " + OpenSslErrors());
  BIO* bio = net::NewSocketBio(conn.fd);
  if (bio == nullptr) return InternalError("cannot create a TLS socket BIO: " + OpenSslErrors());
  SSL_set_bio(conn.ssl, bio, bio);
  const std::string& name = options.tls.server_name.empty() ? url.host : options.tls.server_name;
  if (!IsIpLiteral(name)) SSL_set_tlsext_host_name(conn.ssl, name.c_str());
  if (!options.tls.insecure_skip_verify) {
    X509_VERIFY_PARAM* param = SSL_get0_param(conn.ssl);
    if (IsIpLiteral(name)) {
      X509_VERIFY_PARAM_set1_ip_asc(param, name.c_str());
    } else {
      X509_VERIFY_PARAM_set_hostflags(param, X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS);
      X509_VERIFY_PARAM_set1_host(param, name.c_str(), 0);
    }
  }
  ERR_clear_error();
  if (SSL_connect(conn.ssl) != 1) {
    long verify = SSL_get_verify_result(conn.ssl);  // NOLINT(runtime/int)
    if (verify != X509_V_OK) {
      ERR_clear_error();
      return FailedPreconditionError("TLS verification of " + where +
                                     " failed: " + X509_verify_cert_error_string(verify));
    }
    std::string why = ERR_peek_error() != 0 ? OpenSslErrors()
                      : errno == EAGAIN     ? "handshake timed out"
                                            : "connection closed during the handshake";
    return UnavailableError("TLS handshake with " + where + " failed: " + why);
  }
  return OkStatus();
}

}  // namespace hami::k8s
