// Reactor (net/http_reactor.h): accepting connections within the caps, and the rate-limited
// log line that reports connections closed or refused for a limit.
#include "net/http_reactor.h"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <memory>
#include <string>
#include <utility>

#include "common/log.h"

namespace hami::net {
namespace {

// Blocking reads on a worker wake at least this often to look at the server's state and the
// request's deadline (SO_RCVTIMEO); Stop() does not wait for it: it shuts the sockets' read
// side down.
constexpr int kReadTickMs = 1000;

// Socket options of an accepted connection, for the worker's blocking reads (waits of at most
// the keep-alive linger, so that the wait for a next request is one recv; longer reads loop
// until their deadline) and writes.
void ConfigureAccepted(int fd, const HttpServerOptions& options) {
  int yes = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &yes, sizeof yes);
  int64_t tick_ms = options.keep_alive_linger.count() > 0
                        ? std::min<int64_t>(options.keep_alive_linger.count(), kReadTickMs)
                        : kReadTickMs;
  timeval tick{static_cast<time_t>(tick_ms / 1000),
               static_cast<suseconds_t>((tick_ms % 1000) * 1000)};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tick, sizeof tick);
  timeval wt{static_cast<time_t>(options.write_timeout.count()), 0};
  ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &wt, sizeof wt);
}

}  // namespace

void Reactor::AcceptAll() {
  for (;;) {
    sockaddr_storage addr{};
    socklen_t len = sizeof addr;
    int fd = ::accept4(listen_fd_, reinterpret_cast<sockaddr*>(&addr), &len,
                       SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (fd < 0) {
      if (errno == EINTR) continue;
      if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
        // Out of descriptors: make room by closing the least recently active connection.
        if (EvictOldest("")) {
          NoteLimit("out of file descriptors: closed the least recently active connection");
          continue;
        }
        PauseAccepting();
      }
      return;
    }
    ConfigureAccepted(fd, options_);
    auto slot = std::make_unique<Slot>();
    slot->fd = fd;
    slot->peer = PeerAddress(fd);
    if (!MakeRoomFor(slot->peer)) continue;  // `slot` closes it
    counts_.Add(slot->peer);
    slot->counts = &counts_;
    // A TLS connection's state is made when its first bytes arrive (Progress).
    slot->conn = std::make_unique<Connection>(fd, nullptr, running_, clock_);
    MonoTime now = clock_.Now();
    if (ssl_ctx_ != nullptr) {
      slot->phase = Slot::Phase::kHandshake;
      slot->deadline = now + options_.handshake_timeout;
    } else {
      slot->phase = Slot::Phase::kIdle;
      slot->deadline = now + options_.keep_alive_timeout;
    }
    slot->last_active = now;
    Adopt(std::move(slot));
  }
}

// Out of descriptors with no idle connection to close: stop accepting for a moment instead of
// spinning on a readable socket (Sweep resumes it).
void Reactor::PauseAccepting() {
  NoteLimit("out of file descriptors: accepting paused for 50 ms");
  ::epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, listen_fd_, nullptr);
  accept_paused_ = true;
  accept_resume_ = clock_.Now() + std::chrono::milliseconds(50);
}

bool Reactor::MakeRoomFor(const std::string& peer) {
  if (options_.max_connections_per_address > 0 &&
      counts_.of(peer) >= options_.max_connections_per_address) {
    if (!EvictOldest(peer)) {
      NoteLimit("per-address connection limit reached for " + peer + ": new connection refused");
      return false;
    }
    NoteLimit("per-address connection limit (" +
              std::to_string(options_.max_connections_per_address) + ") reached for " + peer +
              ": closed its least recently active connection");
  }
  if (options_.max_connections > 0 && counts_.total() >= options_.max_connections) {
    if (!EvictOldest("")) {
      NoteLimit("connection limit reached: new connection refused");
      return false;
    }
    NoteLimit("connection limit (" + std::to_string(options_.max_connections) +
              ") reached: closed the least recently active connection");
  }
  return true;
}

// Closes the least recently active connection the reactor holds (of `peer` when non-empty);
// false when there is none to close.
bool Reactor::EvictOldest(const std::string& peer) {
  AdoptParked(/*progress=*/false);  // connections on their way back count as waiting
  for (int fd : lru_) {
    auto it = slots_.find(fd);
    if (it == slots_.end() || (!peer.empty() && it->second->peer != peer)) continue;
    Release(fd);  // closes
    return true;
  }
  return false;
}

// One log line per 10 s at most when connections are refused or closed for a limit.
void Reactor::NoteLimit(const std::string& what) {
  ++limit_events_;
  MonoTime now = clock_.Now();
  if (now - last_limit_log_ < std::chrono::seconds(10)) return;
  HAMI_LOG(Warning) << "http server :" << port_ << ": " << what << " (" << limit_events_
                    << " connection(s) closed or refused for a limit since the last report)";
  last_limit_log_ = now;
  limit_events_ = 0;
}

}  // namespace hami::net
