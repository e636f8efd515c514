#include "k8s/socket_transport.h"

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
#include <strings.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <vector>

#include "common/thread_annotations.h"
#include "k8s/curl_transport.h"
#include "net/http_wire.h"
#include "net/socket_bio.h"

namespace hami::k8s {
namespace {

using SteadyClock = std::chrono::steady_clock;

// A connection idle for longer than this is peeked at before reuse: servers close idle
// connections after seconds (httplib 5 s, Go's net/http 90 s by default), never sooner.
constexpr auto kIdleCheckAfter = std::chrono::seconds(1);
// How often a blocked read wakes up to look at HttpRequest::cancel.
constexpr std::chrono::milliseconds kCancelTick{1000};
constexpr size_t kMaxHeaderBytes = 1 << 20;
constexpr size_t kReadSize = 64 * 1024;

struct Url {
  bool https = false;
  std::string host;  // without IPv6 brackets
  std::string port;
  std::string host_header;
  std::string target;  // path and query, "/" at least
  std::string key;     // scheme://host:port, the pool key
};

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

// One TCP (and maybe TLS) connection, used by one exchange at a time.
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
  ~Conn() {
    if (ssl != nullptr) SSL_free(ssl);
    if (fd >= 0) ::close(fd);
  }
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

// Sets the socket's receive and send timeouts when they differ from the last ones set.
void SetIoTimeout(Conn& c, int64_t ms) {
  if (c.recv_timeout_ms == ms) return;
  timeval tv{};
  tv.tv_sec = static_cast<time_t>(ms / 1000);
  tv.tv_usec = static_cast<suseconds_t>((ms % 1000) * 1000);
  ::setsockopt(c.fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  ::setsockopt(c.fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
  c.recv_timeout_ms = ms;
}

// Appends what one read returns to c.buf. *error gets the reason for kError.
IoResult ReadMore(Conn& c, std::string* error) {
  if (c.pos > 0 && c.pos == c.buf.size()) {
    c.buf.clear();
    c.pos = 0;
  }
  size_t old = c.buf.size();
  c.buf.resize(old + kReadSize);
  if (c.ssl != nullptr) {
    ERR_clear_error();
    int n = SSL_read(c.ssl, c.buf.data() + old, static_cast<int>(kReadSize));
    if (n > 0) {
      c.buf.resize(old + static_cast<size_t>(n));
      return IoResult::kOk;
    }
    c.buf.resize(old);
    int err = SSL_get_error(c.ssl, n);
    if (err == SSL_ERROR_ZERO_RETURN) return IoResult::kEof;
    if (err == SSL_ERROR_WANT_READ || err == SSL_ERROR_WANT_WRITE) return IoResult::kTimeout;
    if (err == SSL_ERROR_SYSCALL && ERR_peek_error() == 0) {
      if (errno == EAGAIN || errno == EWOULDBLOCK) return IoResult::kTimeout;
      if (n == 0 || errno == 0) return IoResult::kEof;  // closed without close_notify
      *error = std::strerror(errno);
      return errno == ECONNRESET ? IoResult::kEof : IoResult::kError;
    }
    *error = OpenSslErrors();
    return IoResult::kError;
  }
  for (;;) {
    ssize_t n = ::recv(c.fd, c.buf.data() + old, kReadSize, 0);
    if (n > 0) {
      c.buf.resize(old + static_cast<size_t>(n));
      return IoResult::kOk;
    }
    c.buf.resize(old);
    if (n == 0) return IoResult::kEof;
    if (errno == EINTR) {
      c.buf.resize(old + kReadSize);
      continue;
    }
    if (errno == EAGAIN || errno == EWOULDBLOCK) return IoResult::kTimeout;
    if (errno == ECONNRESET) return IoResult::kEof;
    *error = std::strerror(errno);
    return IoResult::kError;
  }
}

// Sends head then body; false with *error on failure (a timeout included).
bool SendAll(Conn& c, const std::string& head, const std::string& body, std::string* error) {
  if (c.ssl != nullptr) {
    // One record for small requests: the head and the body together.
    std::string all;
    const std::string* out = &head;
    if (!body.empty()) {
      all.reserve(head.size() + body.size());
      all.append(head).append(body);
      out = &all;
    }
    size_t off = 0;
    while (off < out->size()) {
      ERR_clear_error();
      int n = SSL_write(c.ssl, out->data() + off, static_cast<int>(out->size() - off));
      if (n <= 0) {
        int err = SSL_get_error(c.ssl, n);
        *error = err == SSL_ERROR_WANT_WRITE || err == SSL_ERROR_WANT_READ ? "send timed out"
                 : err == SSL_ERROR_SYSCALL && ERR_peek_error() == 0
                     ? std::string(std::strerror(errno))
                     : OpenSslErrors();
        return false;
      }
      off += static_cast<size_t>(n);
    }
    return true;
  }
  iovec iov[2] = {{const_cast<char*>(head.data()), head.size()},
                  {const_cast<char*>(body.data()), body.size()}};
  size_t total = head.size() + body.size(), sent = 0;
  while (sent < total) {
    msghdr msg{};
    iovec part[2];
    int count = 0;
    size_t skip = sent;
    for (const iovec& v : iov) {
      if (skip >= v.iov_len) {
        skip -= v.iov_len;
        continue;
      }
      part[count++] = {static_cast<char*>(v.iov_base) + skip, v.iov_len - skip};
      skip = 0;
    }
    msg.msg_iov = part;
    msg.msg_iovlen = static_cast<size_t>(count);
    ssize_t n = ::sendmsg(c.fd, &msg, MSG_NOSIGNAL);
    if (n < 0) {
      if (errno == EINTR) continue;
      *error = errno == EAGAIN || errno == EWOULDBLOCK ? "send timed out" : std::strerror(errno);
      return false;
    }
    sent += static_cast<size_t>(n);
  }
  return true;
}

std::string Lower(std::string_view s) {
  std::string out(s);
  for (char& ch : out) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  return out;
}

bool HeaderHasToken(std::string_view value, std::string_view token) {
  std::string v = Lower(value);
  size_t start = 0;
  while (start <= v.size()) {
    size_t comma = v.find(',', start);
    std::string_view part =
        std::string_view(v).substr(start, comma == std::string::npos ? v.npos : comma - start);
    while (!part.empty() && (part.front() == ' ' || part.front() == '\t')) part.remove_prefix(1);
    while (!part.empty() && (part.back() == ' ' || part.back() == '\t')) part.remove_suffix(1);
    if (part == token) return true;
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return false;
}

}  // namespace

struct SocketTransport::Impl {
  SocketOptions options;
  SSL_CTX* ctx = nullptr;
  Status tls_error;  // why the TLS material is unusable (HTTPS exchanges fail with it)
  std::atomic<uint64_t> opened{0};

  Mutex mu;
  std::map<std::string, std::vector<std::unique_ptr<Conn>>> idle GUARDED_BY(mu);

  ~Impl() {
    idle.clear();
    if (ctx != nullptr) SSL_CTX_free(ctx);
  }

  Status BuildTlsContext();
  Result<std::unique_ptr<Conn>> Connect(const Url& url, const Cancellation* cancel);
  std::unique_ptr<Conn> TakeIdle(const std::string& key);
  void Return(std::unique_ptr<Conn> c);
};

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
    int fd = ::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, a->ai_protocol);
    if (fd < 0) {
      last_error = std::strerror(errno);
      continue;
    }
    int rc = ::connect(fd, a->ai_addr, a->ai_addrlen);
    if (rc != 0 && errno == EINPROGRESS) {
      pollfd p{fd, POLLOUT, 0};
      for (;;) {
        auto left =
            std::chrono::duration_cast<std::chrono::milliseconds>(deadline - SteadyClock::now());
        if (left.count() <= 0) {
          errno = ETIMEDOUT;
          rc = -1;
          break;
        }
        int wait = static_cast<int>(std::min<int64_t>(left.count(), kCancelTick.count()));
        int pr = ::poll(&p, 1, wait);
        if (pr > 0) {
          int err = 0;
          socklen_t len = sizeof err;
          ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len);
          errno = err;
          rc = err == 0 ? 0 : -1;
          break;
        }
        if (pr < 0 && errno != EINTR) {
          rc = -1;
          break;
        }
        if (cancel != nullptr && cancel->cancelled()) {
          ::close(fd);
          ::freeaddrinfo(addrs);
          return Status(StatusCode::kCancelled, "cancelled while connecting to " + where);
        }
      }
    }
    if (rc != 0) {
      last_error = std::strerror(errno);
      ::close(fd);
      continue;
    }
    ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) & ~O_NONBLOCK);
    int yes = 1;
    ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &yes, sizeof yes);
    ::setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &yes, sizeof yes);
    conn->fd = fd;
  }
  ::freeaddrinfo(addrs);
  if (conn->fd < 0) return UnavailableError("cannot connect to " + where + ": " + last_error);
  conn->key = url.key;
  opened.fetch_add(1, std::memory_order_relaxed);
  if (!url.https) return conn;

  if (!tls_error.ok()) return tls_error;
  auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - SteadyClock::now());
  SetIoTimeout(*conn, std::max<int64_t>(1, left.count()));
  conn->ssl = SSL_new(ctx);
  if (conn->ssl == nullptr) return InternalError("cannot create a TLS session: " + OpenSslErrors());
  BIO* bio = net::NewSocketBio(conn->fd);
  if (bio == nullptr) return InternalError("cannot create a TLS socket BIO: " + OpenSslErrors());
  SSL_set_bio(conn->ssl, bio, bio);
  const std::string& name = options.tls.server_name.empty() ? url.host : options.tls.server_name;
  if (!IsIpLiteral(name)) SSL_set_tlsext_host_name(conn->ssl, name.c_str());
  if (!options.tls.insecure_skip_verify) {
    X509_VERIFY_PARAM* param = SSL_get0_param(conn->ssl);
    if (IsIpLiteral(name)) {
      X509_VERIFY_PARAM_set1_ip_asc(param, name.c_str());
    } else {
      X509_VERIFY_PARAM_set_hostflags(param, X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS);
      X509_VERIFY_PARAM_set1_host(param, name.c_str(), 0);
    }
  }
  ERR_clear_error();
  if (SSL_connect(conn->ssl) != 1) {
    long verify = SSL_get_verify_result(conn->ssl);  // NOLINT(runtime/int)
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
  return conn;
}

namespace {

// One exchange on `c`. *reusable: the connection may carry another one. *stale: it failed before
// the server answered anything (a connection the server had closed, when reused).
// The request line and headers of `request`, ending with the blank line.
std::string RequestHead(const Url& url, const HttpRequest& request) {
  std::string head;
  head.reserve(256 + request.url.size());
  head.append(request.method).append(" ").append(url.target).append(" HTTP/1.1\r\nHost: ");
  head.append(url.host_header).append("\r\n");
  for (const auto& [k, v] : request.headers) {
    if (strcasecmp(k.c_str(), "host") == 0 || strcasecmp(k.c_str(), "content-length") == 0 ||
        strcasecmp(k.c_str(), "connection") == 0 ||
        strcasecmp(k.c_str(), "transfer-encoding") == 0) {
      continue;
    }
    head.append(k).append(": ").append(v).append("\r\n");
  }
  bool bodyless = request.method == "GET" || request.method == "HEAD";
  if (!bodyless && (!request.body.empty() || request.method != "DELETE")) {
    head.append("Content-Length: ").append(std::to_string(request.body.size())).append("\r\n");
  }
  head.append("\r\n");
  return head;
}

bool Bodyless(const HttpRequest& request) {
  return request.method == "GET" || request.method == "HEAD";
}

// One exchange on `c`: sends `request` (unless `sent`: a pipelined batch wrote it already) and
// reads its response. `more_follow`: answers to later pipelined requests may already be buffered
// behind this one, so leftover bytes do not make the connection unusable.
Result<HttpResponse> Exchange(Conn& c, const Url& url, const HttpRequest& request, bool* reusable,
                              bool* stale, bool sent = false, bool more_follow = false) {
  *reusable = false;
  *stale = false;
  const bool has_deadline = request.timeout.count() > 0;
  const auto deadline = SteadyClock::now() + request.timeout;
  int64_t wait = has_deadline ? request.timeout.count() : 0;
  if (request.cancel != nullptr && (wait == 0 || wait > kCancelTick.count())) {
    wait = kCancelTick.count();
  }
  SetIoTimeout(c, wait);

  std::string error;
  if (!sent) {
    std::string head = RequestHead(url, request);
    if (!SendAll(c, head, Bodyless(request) ? std::string() : request.body, &error)) {
      *stale = true;  // nothing can have been processed from a request that did not arrive whole
      return Status(StatusCode::kUnknown, "sending to " + url.host_header + ": " + error);
    }
  }

  // Reads until `ready` holds, honouring the deadline and the cancellation.
  bool any_byte = false;
  auto fill = [&](auto ready) -> Status {
    while (!ready()) {
      // Checked before each read, so data that completes the response is never discarded for
      // a deadline that passed while it arrived.
      if (any_byte && has_deadline && SteadyClock::now() >= deadline) {
        return DeadlineExceededError("response from " + url.host_header + " took longer than " +
                                     std::to_string(request.timeout.count()) + " ms");
      }
      IoResult r = ReadMore(c, &error);
      if (r == IoResult::kOk) {
        any_byte = true;
      } else if (r == IoResult::kTimeout) {
        if (request.cancel != nullptr && request.cancel->cancelled()) {
          return Status(StatusCode::kCancelled, "request cancelled");
        }
        if (has_deadline && SteadyClock::now() >= deadline) {
          return DeadlineExceededError("no response from " + url.host_header + " within " +
                                       std::to_string(request.timeout.count()) + " ms");
        }
      } else if (r == IoResult::kEof) {
        if (!any_byte) *stale = true;
        return Status(StatusCode::kUnknown,
                      "connection to " + url.host_header + " closed before the response ended");
      } else {
        return Status(StatusCode::kUnknown, "reading from " + url.host_header + ": " + error);
      }
    }
    return OkStatus();
  };

  HttpResponse response;
  size_t header_end = 0;
  bool keep_alive = true;
  for (int interim = 0;; ++interim) {  // skips 1xx interim responses (a few at most)
    if (interim > 8) {
      return Status(StatusCode::kUnknown, "too many interim responses from " + url.host_header);
    }
    HAMI_RETURN_IF_ERROR(fill([&] {
      std::string_view have(c.data(), c.available());
      header_end = have.find("\r\n\r\n");
      return header_end != std::string_view::npos || have.size() > kMaxHeaderBytes;
    }));
    if (header_end == std::string_view::npos) {
      return Status(StatusCode::kUnknown, "response headers from " + url.host_header + " exceed " +
                                              std::to_string(kMaxHeaderBytes));
    }
    net::wire::ResponseHead head;
    if (Status parsed = net::wire::ParseResponseHead(std::string_view(c.data(), header_end), &head);
        !parsed.ok()) {
      return Status(StatusCode::kUnknown,
                    "from " + url.host_header + ": " + std::string(parsed.message()));
    }
    response.status = head.status;
    keep_alive = head.http11;  // HTTP/1.1 keeps the connection by default
    response.headers = std::move(head.headers);
    c.Consume(header_end + 4);
    if (response.status >= 100 && response.status < 200) continue;
    break;
  }
  std::string connection = response.Header("connection");
  if (HeaderHasToken(connection, "close")) keep_alive = false;
  if (HeaderHasToken(connection, "keep-alive")) keep_alive = true;

  const bool streaming =
      request.on_body != nullptr && response.status >= 200 && response.status < 300;
  bool stopped = false;
  auto deliver = [&](const char* p, size_t n) {
    if (n == 0 || stopped) return;
    if (!streaming) {
      response.body.append(p, n);
    } else if (!request.on_body(std::string_view(p, n))) {
      stopped = true;
    }
  };
  auto check_cancel = [&]() -> Status {
    if (request.cancel != nullptr && request.cancel->cancelled()) {
      return Status(StatusCode::kCancelled, "request cancelled");
    }
    return OkStatus();
  };

  // Hands the next `n` body bytes to deliver(), reading as needed; ends early once the caller's
  // callback declined more.
  auto pass = [&](uint64_t n) -> Status {
    while (n > 0 && !stopped) {
      if (c.available() == 0) HAMI_RETURN_IF_ERROR(fill([&] { return c.available() > 0; }));
      size_t take = static_cast<size_t>(std::min<uint64_t>(n, c.available()));
      deliver(c.data(), take);
      c.Consume(take);
      n -= take;
      HAMI_RETURN_IF_ERROR(check_cancel());
    }
    return OkStatus();
  };

  const bool no_body = request.method == "HEAD" || response.status == 204 || response.status == 304;
  std::string te = response.Header("transfer-encoding");
  std::string cl = response.Header("content-length");
  if (no_body) {
    // nothing to read
  } else if (HeaderHasToken(te, "chunked")) {
    // The server's decoder (net/http_wire): one definition of the chunked framing for both
    // directions. A response is as long as the server makes it (a watch never ends).
    net::wire::ChunkedDecoder decoder(UINT64_MAX);
    std::string piece;  // decoded bytes of a stream, handed on as they come
    for (;;) {
      if (c.available() == 0) HAMI_RETURN_IF_ERROR(fill([&] { return c.available() > 0; }));
      size_t used = 0;
      piece.clear();
      const net::wire::ChunkedDecoder::State state = decoder.Feed(
          std::string_view(c.data(), c.available()), &used, streaming ? &piece : &response.body);
      c.Consume(used);
      if (streaming) deliver(piece.data(), piece.size());
      if (state == net::wire::ChunkedDecoder::State::kError) {
        return Status(StatusCode::kUnknown,
                      "malformed chunked body from " + url.host_header + ": " + decoder.error());
      }
      if (state == net::wire::ChunkedDecoder::State::kDone) break;
      if (stopped) return response;  // the connection is mid-body: not reused
      HAMI_RETURN_IF_ERROR(check_cancel());
    }
  } else if (!cl.empty()) {
    uint64_t length = 0;
    if (!net::wire::ParseContentLength(cl, &length)) {
      return Status(StatusCode::kUnknown, "malformed Content-Length from " + url.host_header);
    }
    // The length is the server's word: reserve only what a sane response needs up front.
    if (!streaming) response.body.reserve(static_cast<size_t>(std::min<uint64_t>(length, 1 << 24)));
    HAMI_RETURN_IF_ERROR(pass(length));
    if (stopped) return response;
  } else {
    // No framing: the body runs to the end of the connection.
    keep_alive = false;
    for (;;) {
      deliver(c.data(), c.available());
      c.Consume(c.available());
      if (stopped) return response;
      HAMI_RETURN_IF_ERROR(check_cancel());
      IoResult r = ReadMore(c, &error);
      if (r == IoResult::kEof) break;
      if (r == IoResult::kError) {
        return Status(StatusCode::kUnknown, "reading from " + url.host_header + ": " + error);
      }
      if (r == IoResult::kTimeout && has_deadline && SteadyClock::now() >= deadline) {
        return DeadlineExceededError("response from " + url.host_header + " took longer than " +
                                     std::to_string(request.timeout.count()) + " ms");
      }
    }
  }
  *reusable = keep_alive && (more_follow || c.available() == 0);
  return response;
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
