#include "sim/apiserver/kubelet_proxy.h"

#include <httplib.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdlib>

#include "net/http_wire.h"
#include "net/socket_bio.h"

namespace hami::sim {

Result<KubeletReply> KubeletGet(const std::string& host, int port, const std::string& path) {
  httplib::SSLClient kubelet(host, port);
  kubelet.enable_server_certificate_verification(false);
  kubelet.set_connection_timeout(5);
  kubelet.set_read_timeout(30);
  httplib::Result r = kubelet.Get(path);
  if (!r) {
    return Status(StatusCode::kUnavailable, "cannot reach the kubelet at " + host + ":" +
                                                std::to_string(port) + ": " +
                                                httplib::to_string(r.error()));
  }
  return KubeletReply{r->status, r->body};
}

namespace {

// A TLS client connection on a blocking socket whose reads wait at most a few milliseconds once
// the session is streaming (the caller polls fd() first).
class TlsStream : public KubeletStream {
 public:
  TlsStream(int fd, SSL_CTX* ctx, SSL* ssl) : fd_(fd), ctx_(ctx), ssl_(ssl) {}
  ~TlsStream() override {
    if (ssl_ != nullptr) {
      SSL_shutdown(ssl_);
      SSL_free(ssl_);
    }
    if (ctx_ != nullptr) SSL_CTX_free(ctx_);
    if (fd_ >= 0) ::close(fd_);
  }
  int fd() const override { return fd_; }
  bool HasBuffered() const override { return SSL_pending(ssl_) > 0; }
  bool Read(std::string* out) override {
    char chunk[16384];
    ERR_clear_error();
    int r = SSL_read(ssl_, chunk, sizeof chunk);
    if (r > 0) {
      out->append(chunk, static_cast<size_t>(r));
      return true;
    }
    int err = SSL_get_error(ssl_, r);
    return err == SSL_ERROR_WANT_READ || err == SSL_ERROR_WANT_WRITE;  // a timeout: nothing yet
  }
  bool Write(std::string_view data) override {
    size_t off = 0;
    while (off < data.size()) {
      ERR_clear_error();
      int w = SSL_write(ssl_, data.data() + off, static_cast<int>(data.size() - off));
      if (w <= 0) return false;
      off += static_cast<size_t>(w);
    }
    return true;
  }
  void SetReadTimeout(int ms) {
    timeval tv{ms / 1000, (ms % 1000) * 1000};
    ::setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  }

 private:
  int fd_;
  SSL_CTX* ctx_;
  SSL* ssl_;
};

Status Unreachable(const std::string& host, int port, const std::string& why) {
  return Status(StatusCode::kUnavailable, "cannot reach the kubelet at " + host + ":" +
                                              std::to_string(port) + ": " + why);
}

// A TCP connection to host:port, the first of its addresses that takes it (send, and with it
// connect, bounded to 5 s). Unavailable when none does.
Result<int> Dial(const std::string& host, int port) {
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* addrs = nullptr;
  if (int gai = ::getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &addrs);
      gai != 0) {
    return Unreachable(host, port, gai_strerror(gai));
  }
  int fd = -1;
  std::string why = "no address";
  for (addrinfo* a = addrs; a != nullptr && fd < 0; a = a->ai_next) {
    fd = ::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
    if (fd < 0) continue;
    timeval tv{5, 0};
    ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);  // also bounds connect
    if (::connect(fd, a->ai_addr, a->ai_addrlen) != 0) {
      why = std::strerror(errno);
      ::close(fd);
      fd = -1;
    }
  }
  ::freeaddrinfo(addrs);
  if (fd < 0) return Unreachable(host, port, why);
  return fd;
}

// TLS over the connected `fd`, which it owns from here (closed on failure too), without
// verifying the kubelet's certificate; a read waits at most 10 s.
Result<std::unique_ptr<TlsStream>> OpenTls(int fd, const std::string& host, int port) {
  int yes = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &yes, sizeof yes);
  timeval rtv{10, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &rtv, sizeof rtv);
  SSL_CTX* ctx = SSL_CTX_new(TLS_client_method());
  SSL* ssl = ctx != nullptr ? SSL_new(ctx) : nullptr;
  BIO* bio = ssl != nullptr ? net::NewSocketBio(fd) : nullptr;
  if (bio == nullptr) {
    if (ssl != nullptr) SSL_free(ssl);
    if (ctx != nullptr) SSL_CTX_free(ctx);
    ::close(fd);
    return Status(StatusCode::kInternal, "cannot set up TLS towards the kubelet");
  }
  SSL_set_bio(ssl, bio, bio);
  auto stream = std::make_unique<TlsStream>(fd, ctx, ssl);  // owns fd, ctx and ssl from here
  ERR_clear_error();
  if (SSL_connect(ssl) != 1) return Unreachable(host, port, "TLS handshake failed");
  return stream;
}

// Reads the answer's head (at most 64 KiB) into `head`, and what came after it into `rest`.
// Unavailable when it does not come or cannot be parsed.
Status ReadResponseHead(TlsStream& stream, const std::string& host, int port,
                        net::wire::ResponseHead* head, std::string* rest) {
  std::string buf;
  size_t end = std::string::npos, sep = 0;
  while ((end = net::wire::FindHeadEnd(buf, 0, &sep)) == std::string::npos) {
    size_t before = buf.size();  // a read waits at most the 10 s receive timeout
    if (buf.size() > (64u << 10) || !stream.Read(&buf) || buf.size() == before) {
      return Unreachable(host, port, "no answer to the upgrade request");
    }
  }
  if (Status s = net::wire::ParseResponseHead(std::string_view(buf).substr(0, end), head);
      !s.ok()) {
    return Unreachable(host, port, s.message());
  }
  *rest = buf.substr(end + sep);
  return OkStatus();
}

// The body of an answer that did not switch protocols (the kubelet's refusal), `rest` being what
// came with its head: Content-Length bytes, or up to the close (at most about 1 MiB).
std::string ReadBody(TlsStream& stream,
                     const std::vector<std::pair<std::string, std::string>>& headers,
                     std::string rest) {
  size_t want = std::string::npos;
  for (const auto& [k, v] : headers) {
    if (k == "content-length") want = std::strtoul(v.c_str(), nullptr, 10);
  }
  while (rest.size() < want && rest.size() < (1u << 20)) {
    size_t before = rest.size();
    if (!stream.Read(&rest) || rest.size() == before) break;
  }
  if (want != std::string::npos && rest.size() > want) rest.resize(want);
  return rest;
}

}  // namespace

Result<KubeletUpgradeReply> KubeletUpgrade(
    const std::string& host, int port, const std::string& method,
    const std::string& path_and_query,
    const std::vector<std::pair<std::string, std::string>>& headers) {
  HAMI_ASSIGN_OR_RETURN(int fd, Dial(host, port));
  HAMI_ASSIGN_OR_RETURN(std::unique_ptr<TlsStream> stream, OpenTls(fd, host, port));

  std::string request = method + " " + path_and_query + " HTTP/1.1\r\nHost: " + host + ":" +
                        std::to_string(port) + "\r\n";
  for (const auto& [k, v] : headers) request += k + ": " + v + "\r\n";
  request += "\r\n";
  if (!stream->Write(request)) return Unreachable(host, port, "the request could not be sent");

  net::wire::ResponseHead head;
  std::string rest;
  HAMI_RETURN_IF_ERROR(ReadResponseHead(*stream, host, port, &head, &rest));
  KubeletUpgradeReply reply;
  reply.status = head.status;
  reply.headers = std::move(head.headers);
  if (reply.status == 101) {
    reply.early = std::move(rest);
    stream->SetReadTimeout(5);
    reply.stream = std::move(stream);
    return reply;
  }
  reply.body = ReadBody(*stream, reply.headers, std::move(rest));
  return reply;
}

}  // namespace hami::sim
