#include "net/http_connection.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <chrono>

namespace hami::net {
namespace {

// Answers held back for pipelined requests leave at once beyond this.
constexpr size_t kMaxQueuedBytes = 256u << 10;

}  // namespace

// An accepted socket's status flags are O_RDWR plus, in the reactor, O_NONBLOCK: set them
// without reading them first (one system call per switch).
bool SetNonBlocking(int fd, bool on) {
  return ::fcntl(fd, F_SETFL, O_RDWR | (on ? O_NONBLOCK : 0)) == 0;
}

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

Connection::~Connection() {
  if (ssl_ != nullptr) {
    if (clean_) SSL_shutdown(ssl_);  // best effort close_notify
    SSL_free(ssl_);
  }
}

bool Connection::Buffered() const {
  return !buf_.empty() || (ssl_ != nullptr && SSL_pending(ssl_) > 0);
}

ssize_t Connection::ReadTls(char* to, size_t want, Io* io) {
  ERR_clear_error();
  int r = SSL_read(ssl_, to, static_cast<int>(want));
  if (r > 0) return r;
  int err = SSL_get_error(ssl_, r);
  if (err == SSL_ERROR_WANT_READ) {
    *io = Io::kWantRead;
  } else if (err == SSL_ERROR_WANT_WRITE) {
    *io = Io::kWantWrite;
  } else if (err == SSL_ERROR_ZERO_RETURN) {
    *io = Io::kEof;
  } else {
    clean_ = false;  // no close_notify after a TLS or socket error
    healthy_ = false;
    *io = Io::kClosed;
  }
  return r;
}

bool Connection::Fill(MonoTime deadline, size_t want) {
  if (!healthy_) return false;
  if (!queued_.empty() && !Flush()) return false;  // never wait for input with answers held
  size_t old = buf_.size();
  buf_.resize(old + want);
  for (;;) {
    ssize_t n;
    bool retry = false;
    if (ssl_ != nullptr) {
      Io io = Io::kOk;
      n = ReadTls(buf_.data() + old, want, &io);
      retry = n <= 0 && (io == Io::kWantRead || io == Io::kWantWrite);
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
    // A receive timeout (SO_RCVTIMEO) ended the wait: look at the server and the deadline.
    if (retry && running() && clock_.Now() < deadline) continue;
    buf_.resize(old);
    healthy_ = false;
    return false;
  }
}

Connection::Io Connection::ReadOnce() {
  if (!healthy_) return Io::kClosed;
  char chunk[16384];
  for (;;) {
    if (ssl_ != nullptr) {
      Io io = Io::kOk;
      ssize_t r = ReadTls(chunk, sizeof chunk, &io);
      if (r <= 0) return io == Io::kWantWrite ? Io::kWantRead : io;
      buf_.append(chunk, static_cast<size_t>(r));
      return Io::kOk;
    }
    ssize_t n = ::recv(fd_, chunk, sizeof chunk, 0);
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

bool Connection::Queue(std::initializer_list<std::string_view> pieces) {
  if (!healthy_) return false;
  for (std::string_view p : pieces) queued_.append(p);
  return queued_.size() < kMaxQueuedBytes || Flush();
}

size_t Connection::ToIovecs(std::initializer_list<std::string_view> pieces, iovec (&iov)[4]) {
  size_t count = 0;
  for (std::string_view p : pieces) {
    if (p.empty() || count == 4) continue;
    iov[count].iov_base = const_cast<char*>(p.data());
    iov[count].iov_len = p.size();
    ++count;
  }
  return count;
}

ssize_t Connection::TrySend(std::initializer_list<std::string_view> pieces) {
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

bool Connection::Send(std::initializer_list<std::string_view> pieces) {
  if (!healthy_) return false;
  if (!queued_.empty()) {
    for (std::string_view p : pieces) queued_.append(p);
    std::string all = std::move(queued_);
    queued_.clear();
    return SendPieces({all});
  }
  return SendPieces(pieces);
}

bool Connection::SendTls(std::initializer_list<std::string_view> pieces) {
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

bool Connection::SendPieces(std::initializer_list<std::string_view> pieces) {
  if (ssl_ != nullptr) return SendTls(pieces);
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

void Connection::LingerBeforeClose() {
  if (ssl_ != nullptr || !healthy_) return;
  ::shutdown(fd_, SHUT_WR);
  const MonoTime until = clock_.Now() + std::chrono::seconds(1);
  char sink[16384];
  size_t total = 0;
  while (total < (1u << 20) && clock_.Now() < until) {
    ssize_t n = ::recv(fd_, sink, sizeof sink, 0);
    if (n == 0 || (n < 0 && errno != EINTR && errno != EAGAIN && errno != EWOULDBLOCK)) break;
    if (n > 0) total += static_cast<size_t>(n);
  }
}

Connection::Io Connection::Handshake() {
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

Connection::Io Connection::ReadNow(size_t max, bool* got) {
  *got = false;
  // Read into the stack and append what arrived: an idle connection's buffer stays empty
  // (no 16 KiB capacity per connection that only ever waits).
  char chunk[16384];
  while (max > 0) {
    size_t want = std::min<size_t>(max, sizeof chunk);
    ssize_t n;
    Io stop = Io::kWantRead;
    if (ssl_ != nullptr) {
      n = ReadTls(chunk, want, &stop);
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
    if (n <= 0) return stop;
    buf_.append(chunk, static_cast<size_t>(n));
    *got = true;
    max -= static_cast<size_t>(n);
    // A plain socket that gave less than asked is drained for now (epoll is level-triggered:
    // more data wakes the reactor again), which saves a recv that would say EAGAIN.
    if (ssl_ == nullptr && static_cast<size_t>(n) < want) return Io::kWantRead;
  }
  return Io::kOk;
}

}  // namespace hami::net
