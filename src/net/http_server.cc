#include "net/http_server.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <poll.h>
#include <strings.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>
#include <zlib.h>

#include <atomic>
#include <cerrno>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <exception>
#include <mutex>
#include <set>
#include <thread>

#include "common/thread_name.h"
#include "net/http_wire.h"
#include "net/socket_bio.h"
#include "net/tls.h"

namespace hami::net {
namespace {

using SteadyClock = std::chrono::steady_clock;

// Blocking reads wake at least this often to look at the server's state and the request's
// deadline (SO_RCVTIMEO); Stop() does not wait for it: it shuts the sockets' read side down.
constexpr int kReadTickMs = 1000;
constexpr size_t kMaxHeadBytes = 64 * 1024;
// Plain bodies at least this large are gzipped for clients that accept it; below it the saving
// is not worth the CPU (the extender's answers are a few hundred bytes).
constexpr size_t kGzipMinBytes = 4096;

struct Route {
  std::string method;
  std::string path;
  bool prefix = false;
  HttpHandler handler;
};

std::string PeerAddress(int fd) {
  sockaddr_storage addr{};
  socklen_t len = sizeof addr;
  if (::getpeername(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) return "";
  char buf[INET6_ADDRSTRLEN] = {0};
  if (addr.ss_family == AF_INET) {
    ::inet_ntop(AF_INET, &reinterpret_cast<sockaddr_in*>(&addr)->sin_addr, buf, sizeof buf);
  } else if (addr.ss_family == AF_INET6) {
    ::inet_ntop(AF_INET6, &reinterpret_cast<sockaddr_in6*>(&addr)->sin6_addr, buf, sizeof buf);
  }
  return buf;
}

bool Compressible(const std::string& content_type) {
  return content_type.rfind("text/", 0) == 0 || content_type.find("json") != std::string::npos ||
         content_type.find("yaml") != std::string::npos;
}

// gzip of `in` at the fastest level; false (and `out` untouched) on any zlib failure.
bool Gzip(const std::string& in, std::string* out) {
  z_stream zs{};
  if (deflateInit2(&zs, Z_BEST_SPEED, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK) {
    return false;
  }
  std::string buf(deflateBound(&zs, static_cast<uLong>(in.size())), '\0');
  zs.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(in.data()));
  zs.avail_in = static_cast<uInt>(in.size());
  zs.next_out = reinterpret_cast<Bytef*>(buf.data());
  zs.avail_out = static_cast<uInt>(buf.size());
  int rc = deflate(&zs, Z_FINISH);
  size_t produced = buf.size() - zs.avail_out;
  deflateEnd(&zs);
  if (rc != Z_STREAM_END) return false;
  buf.resize(produced);
  *out = std::move(buf);
  return true;
}

// One accepted connection: its socket, its TLS state and the bytes read but not yet consumed.
class Connection {
 public:
  Connection(int fd, SSL* ssl, const std::atomic<bool>& running)
      : fd_(fd), ssl_(ssl), running_(running) {}
  ~Connection() {
    if (ssl_ != nullptr) {
      if (clean_) SSL_shutdown(ssl_);  // best effort close_notify
      SSL_free(ssl_);
    }
  }
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;

  // Reads more bytes into buf_. False on end of stream, error, the server stopping while idle, or
  // `deadline` passing.
  bool Fill(SteadyClock::time_point deadline, size_t want = 16384) {
    if (!healthy_) return false;
    if (!queued_.empty() && !Flush()) return false;  // never wait for input with answers held
    size_t old = buf_.size();
    buf_.resize(old + want);
    for (;;) {
      ssize_t n;
      bool retry = false;
      if (ssl_ != nullptr) {
        ERR_clear_error();
        int r = SSL_read(ssl_, buf_.data() + old, static_cast<int>(want));
        n = r;
        if (r <= 0) {
          int err = SSL_get_error(ssl_, r);
          retry = err == SSL_ERROR_WANT_READ || err == SSL_ERROR_WANT_WRITE;
          if (err == SSL_ERROR_SYSCALL || err == SSL_ERROR_SSL) clean_ = false;
        }
      } else {
        n = ::recv(fd_, buf_.data() + old, want, 0);
        if (n < 0) {
          if (errno == EINTR) continue;
          retry = errno == EAGAIN || errno == EWOULDBLOCK;
        }
      }
      if (n > 0) {
        buf_.resize(old + static_cast<size_t>(n));
        return true;
      }
      if (retry && running_.load(std::memory_order_relaxed) && SteadyClock::now() < deadline) {
        continue;
      }
      buf_.resize(old);
      healthy_ = false;
      return false;
    }
  }

  // Holds an answer back while more pipelined requests are already buffered, so that their
  // answers leave together (the next Send or Flush writes it first). Large backlogs go at once.
  bool Queue(std::initializer_list<std::string_view> pieces) {
    if (!healthy_) return false;
    for (std::string_view p : pieces) queued_.append(p);
    return queued_.size() < (256u << 10) || Flush();
  }
  bool Flush() { return queued_.empty() || Send({}); }

  // The non-empty pieces (at most 4) as an iovec array; returns how many.
  static size_t ToIovecs(std::initializer_list<std::string_view> pieces, iovec (&iov)[4]) {
    size_t count = 0;
    for (std::string_view p : pieces) {
      if (p.empty() || count == 4) continue;
      iov[count].iov_base = const_cast<char*>(p.data());
      iov[count].iov_len = p.size();
      ++count;
    }
    return count;
  }

  // Sends as much of the pieces as the socket takes without waiting and returns how many bytes
  // left, or -1 on failure. TLS connections send nothing here (a partial SSL_write would have to
  // be repeated with the same arguments): their caller falls back to Send.
  ssize_t TrySend(std::initializer_list<std::string_view> pieces) {
    if (!healthy_) return -1;
    if (ssl_ != nullptr || !queued_.empty()) return 0;
    iovec iov[4];
    size_t count = ToIovecs(pieces, iov);
    msghdr msg{};
    msg.msg_iov = iov;
    msg.msg_iovlen = count;
    for (;;) {
      ssize_t n = ::sendmsg(fd_, &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
      if (n >= 0) return n;
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) return 0;
      healthy_ = false;
      return -1;
    }
  }

  // Sends anything queued, then the pieces in order, as one write (one TCP segment when they
  // fit); false on failure.
  bool Send(std::initializer_list<std::string_view> pieces) {
    if (!healthy_) return false;
    if (!queued_.empty()) {
      for (std::string_view p : pieces) queued_.append(p);
      std::string all = std::move(queued_);
      queued_.clear();
      return SendPieces({all});
    }
    return SendPieces(pieces);
  }

 private:
  bool SendPieces(std::initializer_list<std::string_view> pieces) {
    if (ssl_ != nullptr) {
      std::string all;
      size_t total = 0;
      for (std::string_view p : pieces) total += p.size();
      all.reserve(total);
      for (std::string_view p : pieces) all.append(p);
      size_t off = 0;
      while (off < all.size()) {
        ERR_clear_error();
        int w = SSL_write(ssl_, all.data() + off, static_cast<int>(all.size() - off));
        if (w <= 0) {
          clean_ = false;
          healthy_ = false;
          return false;  // the send timeout (SO_SNDTIMEO) ends a stuck peer here too
        }
        off += static_cast<size_t>(w);
      }
      return true;
    }
    iovec iov[4];
    size_t count = ToIovecs(pieces, iov);
    size_t first = 0;
    while (first < count) {
      msghdr msg{};
      msg.msg_iov = iov + first;
      msg.msg_iovlen = count - first;
      ssize_t n = ::sendmsg(fd_, &msg, MSG_NOSIGNAL);
      if (n < 0) {
        if (errno == EINTR) continue;
        healthy_ = false;
        return false;
      }
      size_t left = static_cast<size_t>(n);
      while (first < count && left >= iov[first].iov_len) {
        left -= iov[first].iov_len;
        ++first;
      }
      if (first < count) {
        iov[first].iov_base = static_cast<char*>(iov[first].iov_base) + left;
        iov[first].iov_len -= left;
      }
    }
    return true;
  }

 public:
  // After a final answer to a request that was not read to its end: stops sending and discards
  // what the client is still sending (up to 1 MiB or a second), so that closing does not reset
  // the connection before the client has read the answer.
  void LingerBeforeClose() {
    if (ssl_ != nullptr || !healthy_) return;
    ::shutdown(fd_, SHUT_WR);
    auto until = SteadyClock::now() + std::chrono::seconds(1);
    char sink[16384];
    size_t total = 0;
    while (total < (1u << 20) && SteadyClock::now() < until) {
      ssize_t n = ::recv(fd_, sink, sizeof sink, 0);
      if (n == 0 || (n < 0 && errno != EINTR && errno != EAGAIN && errno != EWOULDBLOCK)) break;
      if (n > 0) total += static_cast<size_t>(n);
    }
  }

  std::string& buf() { return buf_; }
  bool running() const { return running_.load(std::memory_order_relaxed); }

 private:
  const int fd_;
  SSL* const ssl_;
  const std::atomic<bool>& running_;
  std::string buf_;
  std::string queued_;  // answers held back for pipelined requests
  bool healthy_ = true;
  bool clean_ = true;
};

class StreamWriter : public ChunkWriter {
 public:
  explicit StreamWriter(Connection& conn) : conn_(conn) {}
  bool Write(std::string_view data) override {
    if (failed_ || !conn_.running()) return false;
    if (data.empty()) return Drain();  // an empty chunk would end the stream
    char size[20];
    int n = std::snprintf(size, sizeof size, "%zx\r\n", data.size());
    if (!conn_.Send({held_, std::string_view(size, static_cast<size_t>(n)), data, "\r\n"})) {
      failed_ = true;
    }
    held_.clear();
    return !failed_;
  }
  bool TryWrite(std::string_view data, bool* pending) override {
    *pending = false;
    if (failed_ || !conn_.running()) return false;
    char size[20];
    int n = data.empty() ? 0 : std::snprintf(size, sizeof size, "%zx\r\n", data.size());
    std::string_view head(size, static_cast<size_t>(n)), tail = data.empty() ? "" : "\r\n";
    if (held_.empty()) {
      ssize_t sent = conn_.TrySend({head, data, tail});
      if (sent < 0) {
        failed_ = true;
        return false;
      }
      // Keep what did not leave, in order.
      size_t skip = static_cast<size_t>(sent);
      for (std::string_view piece : {head, data, tail}) {
        size_t k = std::min(skip, piece.size());
        held_.append(piece.substr(k));
        skip -= k;
      }
    } else {
      held_.append(head).append(data).append(tail);
    }
    *pending = !held_.empty();
    return true;
  }
  bool Drain() override {
    if (held_.empty()) return !failed_;
    if (failed_ || !conn_.running() || !conn_.Send({held_})) failed_ = true;
    held_.clear();
    return !failed_;
  }
  bool ServerRunning() const override { return conn_.running(); }

 private:
  Connection& conn_;
  std::string held_;  // framed bytes TryWrite could not send yet
  bool failed_ = false;
};

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

  SSL_CTX* ssl_ctx = nullptr;
  int listen_fd = -1;
  int wake_fd = -1;  // eventfd: wakes the acceptor for Stop()
  std::thread acceptor;
  std::atomic<bool> running{false};
  bool started = false;
  int port = 0;

  // Accepted connections wait here for a worker; workers are started on demand up to
  // options.worker_threads and each serves one connection at a time, to its end.
  std::mutex mu;
  std::condition_variable cv;
  std::deque<int> pending;           // guarded by mu
  std::set<int> serving;             // guarded by mu: sockets a worker is on
  int idle_workers = 0;              // guarded by mu
  bool stopping = false;             // guarded by mu
  std::vector<std::thread> workers;  // guarded by mu

  ~Impl() {
    if (ssl_ctx != nullptr) SSL_CTX_free(ssl_ctx);
  }

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

  // Answers an unreadable request and gives up on the connection.
  static void Reject(Connection& conn, int status, const std::string& why) {
    std::string body = why + "\n";
    std::string head = "HTTP/1.1 " + std::to_string(status) + " " + wire::ReasonPhrase(status) +
                       "\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: " +
                       std::to_string(body.size()) + "\r\nConnection: close\r\n\r\n";
    if (conn.Send({head, body})) conn.LingerBeforeClose();
  }

  // Serves requests on one connection until it closes, fails, times out or the server stops.
  void ServeConnection(int fd, SSL* ssl, const std::atomic<bool>& run) const {
    const HttpServerOptions& o = options;
    Connection conn(fd, ssl, run);
    const std::string peer = PeerAddress(fd);
    if (ssl != nullptr) {
      auto deadline = SteadyClock::now() + o.read_timeout;
      for (;;) {
        ERR_clear_error();
        int r = SSL_accept(ssl);
        if (r == 1) break;
        int err = SSL_get_error(ssl, r);
        bool again = err == SSL_ERROR_WANT_READ || err == SSL_ERROR_WANT_WRITE;
        if (!again || !run.load() || SteadyClock::now() >= deadline) return;
      }
    }
    std::string& buf = conn.buf();
    size_t served = 0;
    while (run.load(std::memory_order_relaxed)) {
      // The head: wait up to the keep-alive timeout for its first byte, then the read timeout.
      size_t end = std::string::npos, scanned = 0;
      SteadyClock::time_point deadline = SteadyClock::now() + o.keep_alive_timeout;
      bool begun = !buf.empty();
      if (begun) deadline = SteadyClock::now() + o.read_timeout;
      size_t sep = 4;
      for (;;) {
        size_t from = scanned > 3 ? scanned - 3 : 0;
        end = buf.find("\r\n\r\n", from);
        if (end == std::string::npos) {
          size_t lf = buf.find("\n\n", from);
          if (lf != std::string::npos) {
            end = lf;
            sep = 2;
          }
        }
        if (end != std::string::npos) break;
        scanned = buf.size();
        if (buf.size() > kMaxHeadBytes) {
          return Reject(conn, 431, "request header block larger than 64 KiB");
        }
        if (!conn.Fill(deadline)) return;  // closed, idle timeout, stop or a stalled head
        if (!begun) {
          begun = true;
          deadline = SteadyClock::now() + o.read_timeout;
        }
      }
      if (end > kMaxHeadBytes) return Reject(conn, 431, "request header block larger than 64 KiB");
      wire::RequestHead head;
      Status parsed = wire::ParseRequestHead(std::string_view(buf).substr(0, end), &head);
      if (!parsed.ok()) return Reject(conn, 400, "bad request: " + parsed.message());
      size_t consumed = end + sep;

      // The body.
      HttpRequest req;
      if (head.chunked || (head.has_length && head.content_length > 0)) {
        if (head.has_length && head.content_length > o.max_body_bytes) {
          return Reject(conn, 413,
                        "request body larger than " + std::to_string(o.max_body_bytes) + " bytes");
        }
        if (head.expect_continue && buf.size() == consumed) {
          if (!conn.Send({"HTTP/1.1 100 Continue\r\n\r\n"})) return;
        }
        if (head.chunked) {
          wire::ChunkedDecoder decoder(o.max_body_bytes);
          for (;;) {
            size_t used = 0;
            auto state = decoder.Feed(std::string_view(buf).substr(consumed), &used, &req.body);
            consumed += used;
            if (state == wire::ChunkedDecoder::State::kDone) break;
            if (state == wire::ChunkedDecoder::State::kError) {
              return Reject(conn, decoder.too_large() ? 413 : 400,
                            "bad request body: " + decoder.error());
            }
            buf.erase(0, consumed);
            consumed = 0;
            if (!conn.Fill(deadline)) return;
            deadline = SteadyClock::now() + o.read_timeout;  // a body may take long while it moves
          }
        } else {
          size_t need = static_cast<size_t>(head.content_length);
          while (buf.size() - consumed < need) {
            size_t missing = need - (buf.size() - consumed);
            if (!conn.Fill(deadline, std::min<size_t>(std::max<size_t>(missing, 16384), 1 << 20))) {
              return;
            }
            deadline = SteadyClock::now() + o.read_timeout;  // a body may take long while it moves
          }
          if (consumed == 0 && buf.size() == need) {
            req.body = std::move(buf);
            buf.clear();
          } else {
            req.body.assign(buf, consumed, need);
          }
          consumed += need;
        }
      }
      if (consumed >= buf.size()) {
        buf.clear();
      } else {
        buf.erase(0, consumed);  // a pipelined next request stays
      }

      req.method = std::move(head.method);
      req.path = std::move(head.path);
      req.params = std::move(head.params);
      req.headers = std::move(head.headers);
      req.remote_addr = peer;
      HttpResponse res;
      Serve(req, res);
      ++served;
      bool keep = head.keep_alive && served < o.keep_alive_max_requests &&
                  run.load(std::memory_order_relaxed);
      // Another request already buffered (pipelining): its answer will follow this one.
      const bool more = keep && !buf.empty();
      if (!WriteResponse(conn, req, head.accepts_gzip, res, more, &keep)) return;
      if (!keep) {
        // Closing on our side (request limit, shutting down) while pipelined requests may still
        // be arriving: let the client read the answers before the close resets the connection.
        if (head.keep_alive) conn.LingerBeforeClose();
        return;
      }
    }
  }

  // Sends `res`; false when the connection must be dropped. May clear *keep.
  static bool WriteResponse(Connection& conn, const HttpRequest& req, bool accepts_gzip,
                            HttpResponse& res, bool more, bool* keep) {
    const bool head_only = req.method == "HEAD";
    std::string head;
    head.reserve(256);
    head += "HTTP/1.1 ";
    head += std::to_string(res.status);
    head += ' ';
    head += wire::ReasonPhrase(res.status);
    head += "\r\nContent-Type: ";
    head += res.content_type;
    head += "\r\n";
    for (const auto& [k, v] : res.headers) {
      // Framing is the server's business.
      if (::strcasecmp(k.c_str(), "Content-Length") == 0 ||
          ::strcasecmp(k.c_str(), "Transfer-Encoding") == 0 ||
          ::strcasecmp(k.c_str(), "Connection") == 0) {
        continue;
      }
      head += k;
      head += ": ";
      head += v;
      head += "\r\n";
    }
    if (!*keep) head += "Connection: close\r\n";
    if (res.stream && !head_only) {
      head += "Transfer-Encoding: chunked\r\n\r\n";
      if (!conn.Send({head})) return false;
      StreamWriter writer(conn);
      try {
        res.stream(writer);
      } catch (...) {
        return false;  // drops the connection: the client sees a truncated stream
      }
      if (!writer.Drain()) return false;  // anything TryWrite still held goes first
      return conn.Send({"0\r\n\r\n"});
    }
    const bool no_body = res.status == 204 || res.status == 304 || res.status < 200;
    std::string gz;
    std::string_view body = res.body;
    if (!no_body && accepts_gzip && body.size() >= kGzipMinBytes &&
        Compressible(res.content_type) && Gzip(res.body, &gz)) {
      body = gz;
      head += "Content-Encoding: gzip\r\nVary: Accept-Encoding\r\n";
    }
    if (!no_body) {
      head += "Content-Length: ";
      head += std::to_string(body.size());
      head += "\r\n";
    }
    head += "\r\n";
    if (head_only || no_body) return more ? conn.Queue({head}) : conn.Send({head});
    return more ? conn.Queue({head, body}) : conn.Send({head, body});
  }

  void WorkerLoop() {
    SetCurrentThreadName("http-conn");
    for (;;) {
      int fd;
      {
        std::unique_lock<std::mutex> lock(mu);
        ++idle_workers;
        cv.wait(lock, [&] { return stopping || !pending.empty(); });
        --idle_workers;
        if (stopping) return;
        fd = pending.front();
        pending.pop_front();
        serving.insert(fd);
      }
      SSL* ssl = nullptr;
      if (ssl_ctx != nullptr) {
        ssl = SSL_new(ssl_ctx);
        BIO* bio = ssl != nullptr ? NewSocketBio(fd) : nullptr;
        if (bio != nullptr) {
          SSL_set_bio(ssl, bio, bio);
          SSL_set_accept_state(ssl);
        } else if (ssl != nullptr) {
          SSL_free(ssl);
          ssl = nullptr;
        }
      }
      if (ssl_ctx == nullptr || ssl != nullptr) ServeConnection(fd, ssl, running);
      {
        std::lock_guard<std::mutex> lock(mu);
        serving.erase(fd);  // before close: Stop never shuts down a reused descriptor
      }
      ::close(fd);
    }
  }

  void AcceptLoop() {
    SetCurrentThreadName("http-accept");
    pollfd fds[2] = {{listen_fd, POLLIN, 0}, {wake_fd, POLLIN, 0}};
    int backoff_ms = -1;
    while (running.load()) {
      int r = ::poll(fds, 2, backoff_ms);
      if (!running.load()) break;
      if (r < 0 && errno != EINTR) break;
      backoff_ms = -1;
      if (r <= 0 || !(fds[0].revents & POLLIN)) continue;
      for (;;) {
        int fd = ::accept4(listen_fd, nullptr, nullptr, SOCK_CLOEXEC);
        if (fd < 0) {
          // Out of descriptors: retry shortly instead of spinning on a readable socket.
          if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
            backoff_ms = 50;
          }
          break;
        }
        int yes = 1;
        ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &yes, sizeof yes);
        timeval tick{kReadTickMs / 1000, (kReadTickMs % 1000) * 1000};
        ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tick, sizeof tick);
        timeval wt{static_cast<time_t>(options.write_timeout.count()), 0};
        ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &wt, sizeof wt);
        std::lock_guard<std::mutex> lock(mu);
        if (pending.size() >= static_cast<size_t>(std::max(options.listen_backlog, 1))) {
          // Every worker busy and a full queue behind them: refuse rather than hoard sockets.
          ::close(fd);
          continue;
        }
        pending.push_back(fd);
        if (static_cast<size_t>(idle_workers) < pending.size() &&
            static_cast<int>(workers.size()) < options.worker_threads) {
          workers.emplace_back([this] { WorkerLoop(); });
        }
        cv.notify_one();
      }
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
  if (m.started) return FailedPreconditionError("server already started");
  const HttpServerOptions& o = m.options;
  if (m.cert && m.ssl_ctx == nullptr) {
    SSL_CTX* ctx = SSL_CTX_new(TLS_server_method());
    if (ctx == nullptr) return InternalError("cannot create the TLS context");
    SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
    SSL_CTX_set_options(ctx, SSL_OP_NO_COMPRESSION | SSL_OP_NO_RENEGOTIATION);
    SSL_CTX_set_mode(ctx, SSL_MODE_AUTO_RETRY);
    // Called for every handshake: hands the (possibly just rotated) pair to this connection.
    SSL_CTX_set_cert_cb(
        ctx,
        [](SSL* ssl, void* arg) -> int {
          return static_cast<CertificateSource*>(arg)->InstallOn(ssl) ? 1 : 0;
        },
        m.cert.get());
    m.ssl_ctx = ctx;
  }

  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  addrinfo* found = nullptr;
  const std::string where = o.host + ":" + std::to_string(o.port);
  int gai = ::getaddrinfo(o.host.empty() ? nullptr : o.host.c_str(), std::to_string(o.port).c_str(),
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
    if (::bind(fd, ai->ai_addr, ai->ai_addrlen) == 0 && ::listen(fd, o.listen_backlog) == 0) {
      break;
    }
    last_error = std::strerror(errno);
    ::close(fd);
    fd = -1;
  }
  ::freeaddrinfo(found);
  if (fd < 0) return UnavailableError("cannot listen on " + where + ": " + last_error);
  sockaddr_storage bound{};
  socklen_t len = sizeof bound;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&bound), &len);
  m.port = ntohs(bound.ss_family == AF_INET6 ? reinterpret_cast<sockaddr_in6*>(&bound)->sin6_port
                                             : reinterpret_cast<sockaddr_in*>(&bound)->sin_port);
  m.listen_fd = fd;
  m.wake_fd = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (m.wake_fd < 0) {
    ::close(fd);
    m.listen_fd = -1;
    return InternalError(std::string("eventfd: ") + std::strerror(errno));
  }
  m.started = true;
  m.running = true;
  m.acceptor = std::thread([&m] { m.AcceptLoop(); });
  return m.port;
}

void HttpServer::Stop() {
  Impl& m = *impl_;
  if (!m.started) return;
  m.started = false;
  m.running = false;
  uint64_t one = 1;
  (void)!::write(m.wake_fd, &one, sizeof one);
  if (m.acceptor.joinable()) m.acceptor.join();
  ::close(m.listen_fd);
  ::close(m.wake_fd);
  m.listen_fd = m.wake_fd = -1;
  std::vector<std::thread> workers;
  {
    std::lock_guard<std::mutex> lock(m.mu);
    m.stopping = true;
    for (int fd : m.pending) ::close(fd);
    m.pending.clear();
    // Idle connections wake at once (their read sees end of stream); a request being handled
    // finishes and its answer is still sent.
    for (int fd : m.serving) ::shutdown(fd, SHUT_RD);
    workers.swap(m.workers);
  }
  m.cv.notify_all();
  for (std::thread& t : workers) t.join();
  std::lock_guard<std::mutex> lock(m.mu);
  m.stopping = false;  // a later Start() may serve again
}

void HttpServer::Serve(const HttpRequest& req, HttpResponse& res) const { impl_->Serve(req, res); }

void HttpServer::ServeConnectionForTesting(int fd) const {
  const std::atomic<bool> run{true};
  impl_->ServeConnection(fd, nullptr, run);
}

bool HttpServer::tls() const { return impl_->cert != nullptr; }
int HttpServer::port() const { return impl_->port; }
std::shared_ptr<CertificateSource> HttpServer::certificate() const { return impl_->cert; }

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
