#include "net/http_server.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <strings.h>
#include <sys/epoll.h>
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
#include <list>
#include <mutex>
#include <set>
#include <thread>
#include <unordered_map>
#include <utility>

#include "common/log.h"
#include "common/thread_annotations.h"
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
using wire::kMaxHeadBytes;
using wire::RequestScan;
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

  enum class Io { kOk, kWantRead, kWantWrite, kEof, kClosed };

  // One read on the worker's blocking socket, waiting at most its receive timeout: kOk when
  // bytes arrived, kWantRead when none did in time, kEof or kClosed when the connection ended.
  Io ReadOnce() {
    if (!healthy_) return Io::kClosed;
    char chunk[16384];
    for (;;) {
      ssize_t n;
      if (ssl_ != nullptr) {
        ERR_clear_error();
        int r = SSL_read(ssl_, chunk, sizeof chunk);
        if (r > 0) {
          buf_.append(chunk, static_cast<size_t>(r));
          return Io::kOk;
        }
        int err = SSL_get_error(ssl_, r);
        if (err == SSL_ERROR_WANT_READ || err == SSL_ERROR_WANT_WRITE) return Io::kWantRead;
        if (err == SSL_ERROR_ZERO_RETURN) return Io::kEof;
        clean_ = false;
        healthy_ = false;
        return Io::kClosed;
      }
      n = ::recv(fd_, chunk, sizeof chunk, 0);
      if (n > 0) {
        buf_.append(chunk, static_cast<size_t>(n));
        return Io::kOk;
      }
      if (n == 0) return Io::kEof;
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) return Io::kWantRead;
      healthy_ = false;
      return Io::kClosed;
    }
  }
  SSL* ssl() const { return ssl_; }
  int fd() const { return fd_; }
  // Bytes a read would return without waiting on the socket.
  bool Buffered() const { return !buf_.empty() || (ssl_ != nullptr && SSL_pending(ssl_) > 0); }
  // For a TLS connection whose TLS state is made when its first bytes arrive (an accepted
  // connection that never sends anything then costs no TLS state).
  void AttachSsl(SSL* ssl) { ssl_ = ssl; }

  // ---- The reactor's side: the socket is non-blocking, nothing here waits. ----

  // One step of the TLS handshake (kOk once it is complete).
  Io Handshake() {
    if (ssl_ == nullptr || SSL_is_init_finished(ssl_)) return Io::kOk;
    ERR_clear_error();
    int r = SSL_accept(ssl_);
    if (r == 1) return Io::kOk;
    int err = SSL_get_error(ssl_, r);
    if (err == SSL_ERROR_WANT_READ) return Io::kWantRead;
    if (err == SSL_ERROR_WANT_WRITE) return Io::kWantWrite;
    clean_ = false;
    healthy_ = false;
    return Io::kClosed;
  }

  // Appends what the socket (or TLS record layer) has ready, at most `max` bytes. *got says
  // whether anything arrived. kEof: the peer finished sending (it may still read our answer);
  // kClosed: the connection broke. Bytes read before either stay in the buffer.
  Io ReadNow(size_t max, bool* got) {
    *got = false;
    // Read into the stack and append what arrived: an idle connection's buffer stays empty
    // (no 16 KiB capacity per connection that only ever waits).
    char chunk[16384];
    while (max > 0) {
      size_t want = std::min<size_t>(max, sizeof chunk);
      ssize_t n;
      Io stop = Io::kWantRead;
      if (ssl_ != nullptr) {
        ERR_clear_error();
        int r = SSL_read(ssl_, chunk, static_cast<int>(want));
        n = r;
        if (r <= 0) {
          int err = SSL_get_error(ssl_, r);
          if (err == SSL_ERROR_WANT_WRITE) {
            stop = Io::kWantWrite;
          } else if (err == SSL_ERROR_ZERO_RETURN) {
            stop = Io::kEof;
          } else if (err != SSL_ERROR_WANT_READ) {
            clean_ = false;
            healthy_ = false;
            stop = Io::kClosed;
          }
        }
      } else {
        n = ::recv(fd_, chunk, want, 0);
        if (n < 0 && errno == EINTR) continue;
        if (n == 0) {
          stop = Io::kEof;
        } else if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK) {
          healthy_ = false;
          stop = Io::kClosed;
        }
      }
      if (n > 0) {
        buf_.append(chunk, static_cast<size_t>(n));
        *got = true;
        max -= static_cast<size_t>(n);
        // A plain socket that gave less than asked is drained for now (epoll is level-triggered:
        // more data wakes the reactor again), which saves a recv that would say EAGAIN.
        if (ssl_ == nullptr && static_cast<size_t>(n) < want) return Io::kWantRead;
        continue;
      }
      return stop;
    }
    return Io::kOk;
  }

 private:
  const int fd_;
  SSL* ssl_;  // set once: at construction, or by AttachSsl before any TLS I/O
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

// A connection after a 101 answer, handed to HttpResponse::upgrade.
class Upgraded : public UpgradedConnection {
 public:
  explicit Upgraded(Connection& conn) : conn_(conn) {}
  int fd() const override { return conn_.fd(); }
  bool HasBuffered() const override { return conn_.Buffered(); }
  ReadResult Read(std::string* out) override {
    if (!conn_.running()) return ReadResult::kEnd;
    std::string& buf = conn_.buf();
    if (buf.empty()) {
      // The worker's socket is blocking with a receive timeout of a few milliseconds.
      Connection::Io io = conn_.ReadOnce();
      if (io == Connection::Io::kEof || io == Connection::Io::kClosed) return ReadResult::kEnd;
      if (buf.empty()) return ReadResult::kNothing;
    }
    out->append(buf);
    buf.clear();
    return ReadResult::kData;
  }
  bool Write(std::string_view data) override {
    return conn_.running() && (data.empty() || conn_.Send({data}));
  }
  bool ServerRunning() const override { return conn_.running(); }

 private:
  Connection& conn_;
};

// Open connections, in all and per remote address, wherever they are (reactor or worker): what
// the connection caps count. A slot counts itself in at accept and out when it closes.
class ConnectionCounts {
 public:
  void Add(const std::string& peer) {
    MutexLock lock(mu_);
    ++total_;
    ++per_address_[peer];
  }
  void Remove(const std::string& peer) {
    MutexLock lock(mu_);
    --total_;
    auto it = per_address_.find(peer);
    if (it != per_address_.end() && --it->second == 0) per_address_.erase(it);
  }
  size_t total() const {
    MutexLock lock(mu_);
    return total_;
  }
  size_t of(const std::string& peer) const {
    MutexLock lock(mu_);
    auto it = per_address_.find(peer);
    return it == per_address_.end() ? 0 : it->second;
  }

 private:
  mutable Mutex mu_;
  size_t total_ GUARDED_BY(mu_) = 0;
  std::unordered_map<std::string, size_t> per_address_ GUARDED_BY(mu_);
};

// A connection between requests, owned by the reactor (idle, in its TLS handshake, or collecting
// a request) or by a worker (a whole request arrived). Closing the socket is the slot's job.
// A request whose handler deferred its answer (HttpResponse::Defer): what writing the answer
// needs once it comes.
struct PendingAnswer {
  std::string method;  // HEAD answers carry no body
  bool accepts_gzip = false;
  bool keep = false;               // the connection stays open after the answer
  bool client_keep_alive = false;  // the client asked to keep it (linger before closing)
  std::shared_ptr<Responder> responder;
};

struct Slot {
  enum class Phase { kHandshake, kIdle, kReading };
  int fd = -1;
  std::unique_ptr<Connection> conn;
  std::string peer;
  Phase phase = Phase::kIdle;
  SteadyClock::time_point deadline{};
  RequestScan scan;
  size_t served = 0;  // requests answered on this connection
  uint32_t interest = 0;
  std::list<int>::iterator lru;  // its place in the reactor's least-recently-active order
  // When it was accepted or last sent bytes: the lru's order. A connection a worker gives back
  // is placed by this time, not by when it came back (another may have been accepted meanwhile,
  // after this one's client had its answer).
  SteadyClock::time_point last_active{};
  ConnectionCounts* counts = nullptr;      // counted in there while open
  std::unique_ptr<PendingAnswer> pending;  // a deferred answer to write before anything else

  ~Slot() {
    conn.reset();  // the TLS state goes before the socket
    if (fd >= 0) ::close(fd);
    if (counts != nullptr) counts->Remove(peer);
  }
};

// An accepted socket's status flags are O_RDWR plus, in the reactor, O_NONBLOCK: set them
// without reading them first (one system call per switch).
bool SetNonBlocking(int fd, bool on) {
  return ::fcntl(fd, F_SETFL, O_RDWR | (on ? O_NONBLOCK : 0)) == 0;
}

}  // namespace

std::shared_ptr<Responder> HttpResponse::Defer() {
  deferred = std::make_shared<Responder>();
  return deferred;
}

void Responder::Send(HttpResponse res) {
  std::function<void()> notify;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (sent_) return;
    sent_ = true;
    answer_ = std::move(res);
    notify = std::move(on_answer_);
  }
  cv_.notify_all();
  if (notify) notify();
}

bool Responder::NotifyWhenSent(std::function<void()> on_answer) {
  std::lock_guard<std::mutex> lock(mu_);
  if (sent_) return true;
  on_answer_ = std::move(on_answer);
  return false;
}

bool Responder::Sent() const {
  std::lock_guard<std::mutex> lock(mu_);
  return sent_;
}

HttpResponse Responder::Wait() {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [&] { return sent_; });
  HttpResponse out = answer_ ? std::move(*answer_) : HttpResponse();
  answer_.reset();
  return out;
}

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
  int wake_fd = -1;   // eventfd: wakes the reactor (parked connections, Stop())
  int epoll_fd = -1;  // the reactor's
  std::thread reactor;
  std::atomic<bool> running{false};
  bool started = false;
  int port = 0;

  // The reactor's own state (touched by the reactor thread only): every connection that is not
  // with a worker, by socket, in least-recently-active order, and counted per remote address.
  std::unordered_map<int, std::unique_ptr<Slot>> slots;
  std::list<int> lru;
  std::atomic<size_t> waiting{0};  // slots.size(), readable from any thread
  ConnectionCounts counts;         // every open connection (shared with the workers)
  bool accept_paused = false;
  SteadyClock::time_point accept_resume{};
  // Rate limit of the "limit reached" log line.
  SteadyClock::time_point last_limit_log{};
  uint64_t limit_events = 0;

  // Connections with a whole request wait here for a worker; workers are started on demand up
  // to options.worker_threads and give the connection back (parked) once no whole request is
  // left in its buffer.
  Mutex mu;
  std::condition_variable cv;
  std::deque<std::unique_ptr<Slot>> ready GUARDED_BY(mu);
  std::set<int> serving GUARDED_BY(mu);  // sockets a worker is on
  int idle_workers GUARDED_BY(mu) = 0;
  bool stopping GUARDED_BY(mu) = false;
  std::vector<std::thread> workers GUARDED_BY(mu);
  Mutex park_mu;
  std::deque<std::unique_ptr<Slot>> parked GUARDED_BY(park_mu);  // back to the reactor
  // Connections whose answer was deferred, until its Responder sends it (then to `ready`).
  std::unordered_map<Slot*, std::unique_ptr<Slot>> awaiting GUARDED_BY(mu);
  // What a Responder's notification reaches: this server while it runs (null after Stop), so a
  // late Send after Stop or destruction touches nothing.
  struct Book {
    Mutex mu;
    Impl* impl GUARDED_BY(mu) = nullptr;
  };
  std::shared_ptr<Book> book;

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

  // kDefer: the handler deferred its answer; the connection waits in `awaiting` without a worker.
  enum class Outcome { kClose, kPark, kDefer };

  // Answers an unreadable request and gives up on the connection.
  static void Reject(Connection& conn, int status, const std::string& why) {
    std::string body = why + "\n";
    std::string head = "HTTP/1.1 " + std::to_string(status) + " " + wire::ReasonPhrase(status) +
                       "\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: " +
                       std::to_string(body.size()) + "\r\nConnection: close\r\n\r\n";
    if (conn.Send({head, body})) conn.LingerBeforeClose();
  }

  // Serves the requests on one connection (blocking socket). With `may_park`, returns kPark as
  // soon as the buffer holds no whole request (the reactor waits for the next one without a
  // thread); without, it reads the next request itself, until the connection closes, fails,
  // times out or the server stops. `served` counts the connection's requests across both.
  // `whole_request`: the buffer is known to hold a whole request (the reactor's hand-off). A
  // deferred answer returns kDefer with *deferred set; with `deferred` null it is waited for.
  Outcome ServeConnection(Connection& conn, const std::string& peer, const std::atomic<bool>& run,
                          bool may_park, size_t* served_total, bool whole_request = false,
                          std::unique_ptr<PendingAnswer>* deferred = nullptr) const {
    const HttpServerOptions& o = options;
    std::string& buf = conn.buf();
    size_t& served = *served_total;
    // The reactor hands a connection over with a whole request in it (its RequestScan said so):
    // the first round needs no second look.
    bool handed_whole = may_park && whole_request;
    while (run.load(std::memory_order_relaxed)) {
      if (may_park && !std::exchange(handed_whole, false) &&
          !RequestScan().Ready(buf, o.max_body_bytes)) {
        // Answers held back for pipelining leave before the connection waits for more.
        if (!conn.Flush()) return Outcome::kClose;
        // A busy client's next request usually follows within a moment (kube-scheduler's bind
        // after its filter): wait that moment here rather than pay the trip through the reactor
        // (an epoll round, two thread wake-ups) for it. Then the reactor takes over.
        if (o.keep_alive_linger.count() <= 0) return Outcome::kPark;
        Connection::Io io = conn.ReadOnce();  // waits up to the linger (SO_RCVTIMEO)
        if (io == Connection::Io::kClosed || io == Connection::Io::kEof) return Outcome::kClose;
        if (!RequestScan().Ready(buf, o.max_body_bytes))
          return Outcome::kPark;  // none or part of one
      }
      // The head: wait up to the keep-alive timeout for its first byte, then the read timeout.
      size_t end = std::string::npos, scanned = 0;
      SteadyClock::time_point deadline = SteadyClock::now() + o.keep_alive_timeout;
      bool begun = !buf.empty();
      if (begun) deadline = SteadyClock::now() + o.read_timeout;
      size_t sep = 0;
      for (;;) {
        end = wire::FindHeadEnd(buf, scanned > 3 ? scanned - 3 : 0, &sep);
        if (end != std::string::npos) break;
        scanned = buf.size();
        if (buf.size() > kMaxHeadBytes) {
          {
            Reject(conn, 431, "request header block larger than 64 KiB");
            return Outcome::kClose;
          }
        }
        if (!conn.Fill(deadline))
          return Outcome::kClose;  // closed, idle timeout, stop or a stalled head
        if (!begun) {
          begun = true;
          deadline = SteadyClock::now() + o.read_timeout;
        }
      }
      if (end > kMaxHeadBytes) {
        Reject(conn, 431, "request header block larger than 64 KiB");
        return Outcome::kClose;
      }
      wire::RequestHead head;
      Status parsed = wire::ParseRequestHead(std::string_view(buf).substr(0, end), &head);
      if (!parsed.ok()) {
        Reject(conn, 400, "bad request: " + parsed.message());
        return Outcome::kClose;
      }
      size_t consumed = end + sep;

      // The body.
      HttpRequest req;
      if (head.chunked || (head.has_length && head.content_length > 0)) {
        if (head.has_length && head.content_length > o.max_body_bytes) {
          return Reject(conn, 413,
                        "request body larger than " + std::to_string(o.max_body_bytes) + " bytes"),
                 Outcome::kClose;
        }
        if (head.expect_continue && buf.size() == consumed) {
          if (!conn.Send({"HTTP/1.1 100 Continue\r\n\r\n"})) return Outcome::kClose;
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
                            "bad request body: " + decoder.error()),
                     Outcome::kClose;
            }
            buf.erase(0, consumed);
            consumed = 0;
            if (!conn.Fill(deadline)) return Outcome::kClose;
            deadline = SteadyClock::now() + o.read_timeout;  // a body may take long while it moves
          }
        } else {
          size_t need = static_cast<size_t>(head.content_length);
          while (buf.size() - consumed < need) {
            size_t missing = need - (buf.size() - consumed);
            if (!conn.Fill(deadline, std::min<size_t>(std::max<size_t>(missing, 16384), 1 << 20))) {
              return Outcome::kClose;
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
      if (res.deferred && deferred != nullptr) {
        auto p = std::make_unique<PendingAnswer>();
        p->method = std::move(req.method);
        p->accepts_gzip = head.accepts_gzip;
        p->keep = keep;
        p->client_keep_alive = head.keep_alive;
        p->responder = std::move(res.deferred);
        *deferred = std::move(p);
        // Answers held back for pipelining leave now, not after the deferred one.
        return conn.Flush() ? Outcome::kDefer : Outcome::kClose;
      }
      if (res.deferred) res = res.deferred->Wait();  // no worker to free on this path
      // Another request already buffered (pipelining): its answer will follow this one.
      const bool more = keep && !buf.empty();
      if (!WriteResponse(conn, req, head.accepts_gzip, res, more, &keep)) return Outcome::kClose;
      if (!keep) {
        // Closing on our side (request limit, shutting down) while pipelined requests may still
        // be arriving: let the client read the answers before the close resets the connection.
        if (head.keep_alive) conn.LingerBeforeClose();
        return Outcome::kClose;
      }
    }
    return Outcome::kClose;
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
    head += "\r\n";
    if (res.status != 101) {
      head += "Content-Type: ";
      head += res.content_type;
      head += "\r\n";
    }
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
    if (res.status == 101) {
      // Switching protocols: the connection is the handler's from here on, then it closes.
      *keep = false;
      head += "Connection: Upgrade\r\n\r\n";
      if (!res.upgrade || !conn.Send({head})) return false;
      Upgraded up(conn);
      try {
        res.upgrade(up);
      } catch (...) {
      }
      return false;
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

  // ---- Workers: one whole request (and any pipelined after it) at a time. ----

  void WorkerLoop() {
    SetCurrentThreadName("http-conn");
    for (;;) {
      std::unique_ptr<Slot> slot;
      {
        UniqueLock lock(mu);
        ++idle_workers;
        cv.wait(lock.native(), [&]() REQUIRES(mu) { return stopping || !ready.empty(); });
        --idle_workers;
        if (stopping) return;
        slot = std::move(ready.front());
        ready.pop_front();
        serving.insert(slot->fd);
      }
      // A deferred answer that came: it goes out first, then the connection carries on (the
      // buffer may or may not hold another whole request).
      const bool answered = slot->pending != nullptr;
      Outcome out = answered && !WriteDeferred(*slot) ? Outcome::kClose : Outcome::kPark;
      std::unique_ptr<PendingAnswer> deferred;
      if (out != Outcome::kClose) {
        out = ServeConnection(*slot->conn, slot->peer, running, true, &slot->served, !answered,
                              &deferred);
      }
      // Answered before the handler returned (the usual case): written now, on this worker.
      while (out == Outcome::kDefer && deferred->responder->Sent()) {
        slot->pending = std::move(deferred);
        out = WriteDeferred(*slot) ? ServeConnection(*slot->conn, slot->peer, running, true,
                                                     &slot->served, false, &deferred)
                                   : Outcome::kClose;
      }
      {
        MutexLock lock(mu);
        serving.erase(slot->fd);  // before close: Stop never shuts down a reused descriptor
      }
      if (out == Outcome::kDefer) {
        AwaitAnswer(std::move(slot), std::move(deferred));
      } else if (out == Outcome::kPark && running.load() && SetNonBlocking(slot->fd, true)) {
        {
          MutexLock lock(park_mu);
          parked.push_back(std::move(slot));
        }
        uint64_t one = 1;
        (void)!::write(wake_fd, &one, sizeof one);
      }
      // Otherwise `slot` closes the connection here.
    }
  }

  // Writes the deferred answer `slot` waited for; false when the connection is to be closed.
  bool WriteDeferred(Slot& slot) {
    std::unique_ptr<PendingAnswer> p = std::move(slot.pending);
    HttpResponse res = p->responder->Wait();  // already sent: AwaitAnswer queued it then
    res.deferred.reset();
    HttpRequest req;
    req.method = std::move(p->method);
    bool keep = p->keep && running.load(std::memory_order_relaxed);
    const bool more = keep && !slot.conn->buf().empty();
    if (!WriteResponse(*slot.conn, req, p->accepts_gzip, res, more, &keep)) return false;
    if (keep) return true;
    if (p->client_keep_alive) slot.conn->LingerBeforeClose();
    return false;
  }

  // Keeps `slot` aside until its Responder sends the answer, then queues it for a worker.
  void AwaitAnswer(std::unique_ptr<Slot> slot, std::unique_ptr<PendingAnswer> pending) {
    std::shared_ptr<Responder> responder = pending->responder;
    Slot* key = slot.get();
    slot->pending = std::move(pending);
    {
      MutexLock lock(mu);
      if (stopping) return;  // `slot` closes
      awaiting.emplace(key, std::move(slot));
    }
    std::weak_ptr<Book> weak = book;
    const bool sent = responder->NotifyWhenSent([weak, key] {
      if (std::shared_ptr<Book> b = weak.lock()) {
        MutexLock lock(b->mu);
        if (b->impl != nullptr) b->impl->Answered(key);
      }
    });
    if (sent) Answered(key);  // sent while the handler still ran
  }

  // The deferred answer of `key` was sent: its connection goes to a worker.
  void Answered(Slot* key) {
    MutexLock lock(mu);
    auto it = awaiting.find(key);
    if (stopping || it == awaiting.end()) return;
    ready.push_back(std::move(it->second));
    awaiting.erase(it);
    if (static_cast<size_t>(idle_workers) < ready.size() &&
        static_cast<int>(workers.size()) < options.worker_threads) {
      workers.emplace_back([this] { WorkerLoop(); });
    }
    cv.notify_one();
  }

  // ---- The reactor: accepts, runs TLS handshakes and collects requests without a thread per
  // connection; a connection reaches a worker only with a whole request in its buffer. ----

  void SetInterest(Slot& slot, uint32_t events) {
    if (slot.interest == events) return;
    epoll_event ev{};
    ev.events = events;
    ev.data.fd = slot.fd;
    ::epoll_ctl(epoll_fd, EPOLL_CTL_MOD, slot.fd, &ev);
    slot.interest = events;
  }

  // Registers a connection with the reactor (a new one or one a worker gave back).
  void Adopt(std::unique_ptr<Slot> slot) {
    int fd = slot->fd;
    epoll_event ev{};
    ev.events = EPOLLIN | EPOLLRDHUP;
    ev.data.fd = fd;
    if (::epoll_ctl(epoll_fd, EPOLL_CTL_ADD, fd, &ev) != 0) return;  // `slot` closes it
    slot->interest = ev.events;
    auto at = lru.end();  // usually the most recent; otherwise after the last one older than it
    while (at != lru.begin()) {
      auto before = std::prev(at);
      auto other = slots.find(*before);
      if (other == slots.end() || other->second->last_active <= slot->last_active) break;
      at = before;
    }
    slot->lru = lru.insert(at, fd);
    slots.emplace(fd, std::move(slot));
    waiting.store(slots.size(), std::memory_order_relaxed);
  }

  // Takes a connection out of the reactor's books (to close it or hand it to a worker).
  std::unique_ptr<Slot> Release(int fd) {
    auto it = slots.find(fd);
    if (it == slots.end()) return nullptr;
    std::unique_ptr<Slot> slot = std::move(it->second);
    slots.erase(it);
    waiting.store(slots.size(), std::memory_order_relaxed);
    ::epoll_ctl(epoll_fd, EPOLL_CTL_DEL, fd, nullptr);
    lru.erase(slot->lru);
    return slot;
  }

  void Touch(Slot& slot, SteadyClock::time_point now) {
    slot.last_active = now;
    lru.splice(lru.end(), lru, slot.lru);
  }

  // One log line per 10 s at most when connections are refused or closed for a limit.
  void NoteLimit(const std::string& what) {
    ++limit_events;
    auto now = SteadyClock::now();
    if (now - last_limit_log < std::chrono::seconds(10)) return;
    HAMI_LOG(Warning) << "http server :" << port << ": " << what << " (" << limit_events
                      << " connection(s) closed or refused for a limit since the last report)";
    last_limit_log = now;
    limit_events = 0;
  }

  // Closes the least recently active connection the reactor holds (of `peer` when non-empty);
  // false when there is none to close.
  bool EvictOldest(const std::string& peer) {
    AdoptParked(/*progress=*/false);  // connections on their way back count as waiting
    for (int fd : lru) {
      auto it = slots.find(fd);
      if (it == slots.end() || (!peer.empty() && it->second->peer != peer)) continue;
      Release(fd);  // closes
      return true;
    }
    return false;
  }

  void AcceptAll() {
    for (;;) {
      sockaddr_storage addr{};
      socklen_t len = sizeof addr;
      int fd = ::accept4(listen_fd, reinterpret_cast<sockaddr*>(&addr), &len,
                         SOCK_CLOEXEC | SOCK_NONBLOCK);
      if (fd < 0) {
        if (errno == EINTR) continue;
        if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
          // Out of descriptors: make room by closing the oldest idle connection; with none,
          // stop accepting for a moment instead of spinning on a readable socket.
          if (EvictOldest("")) {
            NoteLimit("out of file descriptors: closed the least recently active connection");
            continue;
          }
          NoteLimit("out of file descriptors: accepting paused for 50 ms");
          ::epoll_ctl(epoll_fd, EPOLL_CTL_DEL, listen_fd, nullptr);
          accept_paused = true;
          accept_resume = SteadyClock::now() + std::chrono::milliseconds(50);
        }
        return;
      }
      int yes = 1;
      ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &yes, sizeof yes);
      // For the worker's blocking reads (waits of at most the keep-alive linger, so that the
      // wait for a next request is one recv; longer reads loop until their deadline) and writes.
      int64_t tick_ms = options.keep_alive_linger.count() > 0
                            ? std::min<int64_t>(options.keep_alive_linger.count(), kReadTickMs)
                            : kReadTickMs;
      timeval tick{static_cast<time_t>(tick_ms / 1000),
                   static_cast<suseconds_t>((tick_ms % 1000) * 1000)};
      ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tick, sizeof tick);
      timeval wt{static_cast<time_t>(options.write_timeout.count()), 0};
      ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &wt, sizeof wt);
      auto slot = std::make_unique<Slot>();
      slot->fd = fd;
      slot->peer = PeerAddress(fd);
      if (options.max_connections_per_address > 0) {
        if (counts.of(slot->peer) >= options.max_connections_per_address) {
          if (!EvictOldest(slot->peer)) {
            NoteLimit("per-address connection limit reached for " + slot->peer +
                      ": new connection refused");
            continue;  // `slot` closes it
          }
          NoteLimit("per-address connection limit (" +
                    std::to_string(options.max_connections_per_address) + ") reached for " +
                    slot->peer + ": closed its least recently active connection");
        }
      }
      if (options.max_connections > 0 && counts.total() >= options.max_connections) {
        if (!EvictOldest("")) {
          NoteLimit("connection limit reached: new connection refused");
          continue;
        }
        NoteLimit("connection limit (" + std::to_string(options.max_connections) +
                  ") reached: closed the least recently active connection");
      }
      counts.Add(slot->peer);
      slot->counts = &counts;
      // A TLS connection's state is made when its first bytes arrive (Progress).
      slot->conn = std::make_unique<Connection>(fd, nullptr, running);
      auto now = SteadyClock::now();
      if (ssl_ctx != nullptr) {
        slot->phase = Slot::Phase::kHandshake;
        slot->deadline = now + options.handshake_timeout;
      } else {
        slot->phase = Slot::Phase::kIdle;
        slot->deadline = now + options.keep_alive_timeout;
      }
      slot->last_active = now;
      Adopt(std::move(slot));
    }
  }

  // Moves a connection with a whole request to the workers.
  void HandOff(int fd) {
    std::unique_ptr<Slot> slot = Release(fd);
    if (!slot || !SetNonBlocking(fd, false)) return;
    slot->scan = RequestScan();
    MutexLock lock(mu);
    if (ready.size() >= static_cast<size_t>(std::max(options.listen_backlog, 1))) {
      NoteLimit("every worker busy and " + std::to_string(ready.size()) +
                " requests waiting: connection closed");
      return;
    }
    ready.push_back(std::move(slot));
    if (static_cast<size_t>(idle_workers) < ready.size() &&
        static_cast<int>(workers.size()) < options.worker_threads) {
      workers.emplace_back([this] { WorkerLoop(); });
    }
    cv.notify_one();
  }

  // Whatever the connection's socket has for us: handshake progress, request bytes, or its end.
  void Progress(int fd) {
    auto it = slots.find(fd);
    if (it == slots.end()) return;
    Slot& slot = *it->second;
    Connection& conn = *slot.conn;
    auto now = SteadyClock::now();
    if (slot.phase == Slot::Phase::kHandshake) {
      if (conn.ssl() == nullptr) {
        SSL* ssl = SSL_new(ssl_ctx);
        BIO* bio = ssl != nullptr ? NewSocketBio(fd) : nullptr;
        if (bio == nullptr) {
          if (ssl != nullptr) SSL_free(ssl);
          Release(fd);
          return;
        }
        SSL_set_bio(ssl, bio, bio);
        SSL_set_accept_state(ssl);
        conn.AttachSsl(ssl);
      }
      Connection::Io io = conn.Handshake();
      if (io == Connection::Io::kClosed) {
        Release(fd);
        return;
      }
      if (io != Connection::Io::kOk) {
        SetInterest(slot, (io == Connection::Io::kWantWrite ? EPOLLOUT : EPOLLIN) | EPOLLRDHUP);
        return;
      }
      slot.phase = Slot::Phase::kIdle;
      slot.deadline = now + options.keep_alive_timeout;
      Touch(slot, now);
    }
    bool got = false;
    Connection::Io io = conn.ReadNow(1u << 20, &got);
    if (got) {
      Touch(slot, now);
      if (slot.phase == Slot::Phase::kIdle) {
        slot.phase = Slot::Phase::kReading;  // the head's deadline runs from its first byte
        slot.deadline = now + options.read_timeout;
      } else if (slot.scan.HeadComplete()) {
        slot.deadline = now + options.read_timeout;  // a body may take long while it moves
      }
    }
    if (!conn.buf().empty() && slot.scan.Ready(conn.buf(), options.max_body_bytes)) {
      HandOff(fd);
      return;
    }
    if (io == Connection::Io::kClosed || io == Connection::Io::kEof) {
      Release(fd);  // gone, or finished sending without a whole request
      return;
    }
    SetInterest(slot, (io == Connection::Io::kWantWrite ? EPOLLOUT : EPOLLIN) | EPOLLRDHUP);
  }

  // Closes the connections whose phase ran out of time: a TLS handshake, a request head or a gap
  // in a body that took too long, or an idle keep-alive connection.
  void Sweep(SteadyClock::time_point now) {
    std::vector<int> expired;
    for (const auto& [fd, slot] : slots) {
      if (now >= slot->deadline) expired.push_back(fd);
    }
    for (int fd : expired) Release(fd);
    if (accept_paused && now >= accept_resume) {
      epoll_event ev{};
      ev.events = EPOLLIN;
      ev.data.fd = listen_fd;
      ::epoll_ctl(epoll_fd, EPOLL_CTL_ADD, listen_fd, &ev);
      accept_paused = false;
    }
  }

  void AdoptParked(bool progress = true) {
    std::deque<std::unique_ptr<Slot>> back;
    {
      MutexLock lock(park_mu);
      back.swap(parked);
    }
    auto now = SteadyClock::now();
    for (std::unique_ptr<Slot>& slot : back) {
      int fd = slot->fd;
      bool partial = !slot->conn->buf().empty();
      slot->phase = partial ? Slot::Phase::kReading : Slot::Phase::kIdle;
      slot->deadline = now + (partial ? options.read_timeout : options.keep_alive_timeout);
      bool pending = slot->conn->ssl() != nullptr && SSL_pending(slot->conn->ssl()) > 0;
      Adopt(std::move(slot));
      // Bytes the TLS layer already holds never wake epoll; socket bytes do.
      if (progress && pending) Progress(fd);
    }
  }

  void ReactorLoop() {
    SetCurrentThreadName("http-reactor");
    constexpr int kTickMs = 100;  // deadline resolution
    epoll_event events[256];
    auto next_sweep = SteadyClock::now();
    while (running.load()) {
      int n = ::epoll_wait(epoll_fd, events, 256, kTickMs);
      if (!running.load()) break;
      for (int i = 0; i < n; ++i) {
        int fd = events[i].data.fd;
        if (fd == listen_fd) {
          AcceptAll();
        } else if (fd == wake_fd) {
          uint64_t v;
          (void)!::read(wake_fd, &v, sizeof v);
          AdoptParked();
        } else {
          Progress(fd);
        }
      }
      auto now = SteadyClock::now();
      if (now >= next_sweep) {
        Sweep(now);
        next_sweep = now + std::chrono::milliseconds(kTickMs);
      }
    }
    slots.clear();  // closes every connection the reactor holds
    lru.clear();
    waiting.store(0, std::memory_order_relaxed);
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
  m.book = std::make_shared<Impl::Book>();
  {
    MutexLock lock(m.book->mu);
    m.book->impl = &m;
  }
  const HttpServerOptions& o = m.options;
  if (m.cert && m.ssl_ctx == nullptr) {
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
  m.epoll_fd = ::epoll_create1(EPOLL_CLOEXEC);
  if (m.wake_fd < 0 || m.epoll_fd < 0) {
    std::string why = std::strerror(errno);
    for (int* f : {&m.listen_fd, &m.wake_fd, &m.epoll_fd}) {
      if (*f >= 0) ::close(*f);
      *f = -1;
    }
    return InternalError("eventfd/epoll: " + why);
  }
  for (int f : {m.listen_fd, m.wake_fd}) {
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.fd = f;
    ::epoll_ctl(m.epoll_fd, EPOLL_CTL_ADD, f, &ev);
  }
  m.started = true;
  m.running = true;
  m.reactor = std::thread([&m] { m.ReactorLoop(); });
  return m.port;
}

void HttpServer::Stop() {
  Impl& m = *impl_;
  if (!m.started) return;
  m.started = false;
  m.running = false;
  if (m.book) {
    MutexLock lock(m.book->mu);  // a Send from now on reaches nothing
    m.book->impl = nullptr;
  }
  uint64_t one = 1;
  (void)!::write(m.wake_fd, &one, sizeof one);
  if (m.reactor.joinable()) m.reactor.join();  // it closes the connections it holds
  ::close(m.listen_fd);
  std::vector<std::thread> workers;
  {
    MutexLock lock(m.mu);
    m.stopping = true;
    m.ready.clear();
    m.awaiting.clear();  // connections whose deferred answer never came: closed
    // A worker blocked reading wakes at once (its read sees end of stream); a request being
    // handled finishes and its answer is still sent.
    for (int fd : m.serving) ::shutdown(fd, SHUT_RD);
    workers.swap(m.workers);
  }
  m.cv.notify_all();
  for (std::thread& t : workers) t.join();
  {
    MutexLock lock(m.park_mu);
    m.parked.clear();
  }
  ::close(m.wake_fd);
  ::close(m.epoll_fd);
  m.listen_fd = m.wake_fd = m.epoll_fd = -1;
  MutexLock lock(m.mu);
  m.stopping = false;  // a later Start() may serve again
}

void HttpServer::Serve(const HttpRequest& req, HttpResponse& res) const {
  impl_->Serve(req, res);
  if (res.deferred) res = res.deferred->Wait();
}

void HttpServer::ServeConnectionForTesting(int fd) const {
  const std::atomic<bool> run{true};
  Connection conn(fd, nullptr, run);
  size_t served = 0;
  impl_->ServeConnection(conn, PeerAddress(fd), run, /*may_park=*/false, &served);
}

bool HttpServer::tls() const { return impl_->cert != nullptr; }
int HttpServer::port() const { return impl_->port; }
size_t HttpServer::WaitingConnections() const {
  return impl_->waiting.load(std::memory_order_relaxed);
}
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
