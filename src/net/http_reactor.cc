#include "net/http_reactor.h"

#include <openssl/ssl.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <iterator>
#include <utility>
#include <vector>

#include "common/thread_name.h"
#include "net/socket_bio.h"

namespace hami::net {
namespace {

// How often deadlines are checked (real time), and so their resolution.
constexpr int kSweepTickMs = 100;

uint32_t InterestFor(Connection::Io io) {
  return (io == Connection::Io::kWantWrite ? EPOLLOUT : EPOLLIN) | EPOLLRDHUP;
}

}  // namespace

Reactor::Reactor(const HttpServerOptions& options, const Clock& clock,
                 const std::atomic<bool>& running, ConnectionCounts& counts, WorkerPool& pool)
    : options_(options), clock_(clock), running_(running), counts_(counts), pool_(pool) {}

Reactor::~Reactor() { Close(); }

Status Reactor::Open(int listen_fd, int port, ssl_ctx_st* ssl_ctx) {
  listen_fd_ = listen_fd;
  port_ = port;
  ssl_ctx_ = ssl_ctx;
  wake_fd_ = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  epoll_fd_ = ::epoll_create1(EPOLL_CLOEXEC);
  if (wake_fd_ < 0 || epoll_fd_ < 0) {
    std::string why = std::strerror(errno);
    for (int* f : {&listen_fd_, &wake_fd_, &epoll_fd_}) {
      if (*f >= 0) ::close(*f);
      *f = -1;
    }
    return InternalError("eventfd/epoll: " + why);
  }
  for (int f : {listen_fd_, wake_fd_}) {
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.fd = f;
    ::epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, f, &ev);
  }
  return OkStatus();
}

void Reactor::Close() {
  {
    MutexLock lock(park_mu_);
    parked_.clear();
  }
  for (int* f : {&listen_fd_, &wake_fd_, &epoll_fd_}) {
    if (*f >= 0) ::close(*f);
    *f = -1;
  }
}

void Reactor::Wake() {
  uint64_t one = 1;
  (void)!::write(wake_fd_, &one, sizeof one);
}

void Reactor::GiveBack(std::unique_ptr<Slot> slot) {
  {
    MutexLock lock(park_mu_);
    parked_.push_back(std::move(slot));
  }
  Wake();
}

void Reactor::Run() {
  SetCurrentThreadName("http-reactor");
  epoll_event events[256];
  MonoTime next_sweep = clock_.Now();
  int timeout_ms = kSweepTickMs;
  while (running_.load()) {
    uint64_t syncs = BeginRound();
    int n = ::epoll_wait(epoll_fd_, events, 256, timeout_ms);
    if (!running_.load()) break;
    for (int i = 0; i < n; ++i) {
      int fd = events[i].data.fd;
      if (fd == listen_fd_) {
        AcceptAll();
      } else if (fd == wake_fd_) {
        uint64_t v;
        (void)!::read(wake_fd_, &v, sizeof v);
        AdoptParked();
      } else {
        Progress(fd);
      }
    }
    MonoTime now = clock_.Now();
    if (now >= next_sweep) {
      Sweep(now);
      next_sweep = now + std::chrono::milliseconds(kSweepTickMs);
    }
    timeout_ms = EndRound(syncs) ? 0 : kSweepTickMs;
  }
  slots_.clear();  // closes every connection the reactor holds
  lru_.clear();
  waiting_.store(0, std::memory_order_relaxed);
  ::close(listen_fd_);
  listen_fd_ = -1;
  {
    // Taken so that a SyncForTesting between its check of `running_` and its wait still gets
    // the notification: it sees the reactor gone.
    MutexLock lock(round_mu_);
  }
  round_cv_.notify_all();
}

uint64_t Reactor::BeginRound() {
  MutexLock lock(round_mu_);
  return syncs_requested_;
}

bool Reactor::EndRound(uint64_t syncs) {
  bool more;
  {
    MutexLock lock(round_mu_);
    syncs_covered_ = syncs;
    more = syncs_requested_ > syncs_covered_;
  }
  round_cv_.notify_all();
  return more;
}

bool Reactor::SyncForTesting(size_t min_waiting, std::chrono::milliseconds limit) {
  UniqueLock lock(round_mu_);
  if (!running_.load()) return false;
  // The round under way may have polled before the caller's bytes arrived: this one counts once
  // a round that began after it has finished (Run then polls again without waiting).
  const uint64_t ticket = ++syncs_requested_;
  Wake();
  bool done = round_cv_.wait_for(lock.native(), limit, [&]() REQUIRES(round_mu_) {
    return !running_.load() || (syncs_covered_ >= ticket && waiting() >= min_waiting);
  });
  return done && running_.load();
}

// ---- Connections between requests. ----

// Whatever the connection's socket has for us: handshake progress, request bytes, or its end.
void Reactor::Progress(int fd) {
  auto it = slots_.find(fd);
  if (it == slots_.end()) return;
  Slot& slot = *it->second;
  Connection& conn = *slot.conn;
  MonoTime now = clock_.Now();
  if (slot.phase == Slot::Phase::kHandshake && !AdvanceHandshake(slot, now)) return;
  bool got = false;
  Connection::Io io = conn.ReadNow(1u << 20, &got);
  if (got) {
    Touch(slot, now);
    if (slot.phase == Slot::Phase::kIdle) {
      slot.phase = Slot::Phase::kReading;  // the head's deadline runs from its first byte
      slot.deadline = now + options_.read_timeout;
    } else if (slot.scan.HeadComplete()) {
      slot.deadline = now + options_.read_timeout;  // a body may take long while it moves
    }
  }
  if (!conn.buf().empty() && slot.scan.Ready(conn.buf(), options_.max_body_bytes)) {
    HandOff(fd);
    return;
  }
  if (io == Connection::Io::kClosed || io == Connection::Io::kEof) {
    Release(fd);  // gone, or finished sending without a whole request
    return;
  }
  SetInterest(slot, InterestFor(io));
}

bool Reactor::AdvanceHandshake(Slot& slot, MonoTime now) {
  Connection& conn = *slot.conn;
  if (conn.ssl() == nullptr) {
    SSL* ssl = SSL_new(ssl_ctx_);
    BIO* bio = ssl != nullptr ? NewSocketBio(slot.fd) : nullptr;
    if (bio == nullptr) {
      if (ssl != nullptr) SSL_free(ssl);
      Release(slot.fd);
      return false;
    }
    SSL_set_bio(ssl, bio, bio);
    SSL_set_accept_state(ssl);
    conn.AttachSsl(ssl);
  }
  Connection::Io io = conn.Handshake();
  if (io == Connection::Io::kClosed) {
    Release(slot.fd);
    return false;
  }
  if (io != Connection::Io::kOk) {
    SetInterest(slot, InterestFor(io));
    return false;
  }
  slot.phase = Slot::Phase::kIdle;
  slot.deadline = now + options_.keep_alive_timeout;
  Touch(slot, now);
  return true;
}

// Moves a connection with a whole request to the workers.
void Reactor::HandOff(int fd) {
  std::unique_ptr<Slot> slot = Release(fd);
  if (!slot || !SetNonBlocking(fd, false)) return;
  slot->scan = wire::RequestScan();
  size_t queued = 0;
  if (!pool_.Submit(slot, &queued)) {
    NoteLimit("every worker busy and " + std::to_string(queued) +
              " requests waiting: connection closed");
  }
}

// Closes the connections whose phase ran out of time: a TLS handshake, a request head or a gap
// in a body that took too long, or an idle keep-alive connection.
void Reactor::Sweep(MonoTime now) {
  std::vector<int> expired;
  for (const auto& [fd, slot] : slots_) {
    if (now >= slot->deadline) expired.push_back(fd);
  }
  for (int fd : expired) Release(fd);
  if (accept_paused_ && now >= accept_resume_) {
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.fd = listen_fd_;
    ::epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, listen_fd_, &ev);
    accept_paused_ = false;
  }
}

void Reactor::AdoptParked(bool progress) {
  std::deque<std::unique_ptr<Slot>> back;
  {
    MutexLock lock(park_mu_);
    back.swap(parked_);
  }
  MonoTime now = clock_.Now();
  for (std::unique_ptr<Slot>& slot : back) {
    int fd = slot->fd;
    bool partial = !slot->conn->buf().empty();
    slot->phase = partial ? Slot::Phase::kReading : Slot::Phase::kIdle;
    slot->deadline = now + (partial ? options_.read_timeout : options_.keep_alive_timeout);
    bool pending = slot->conn->ssl() != nullptr && SSL_pending(slot->conn->ssl()) > 0;
    Adopt(std::move(slot));
    // Bytes the TLS layer already holds never wake epoll; socket bytes do.
    if (progress && pending) Progress(fd);
  }
}

// Registers a connection with the reactor (a new one or one a worker gave back).
void Reactor::Adopt(std::unique_ptr<Slot> slot) {
  int fd = slot->fd;
  epoll_event ev{};
  ev.events = EPOLLIN | EPOLLRDHUP;
  ev.data.fd = fd;
  if (::epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, fd, &ev) != 0) return;  // `slot` closes it
  slot->interest = ev.events;
  auto at = lru_.end();  // usually the most recent; otherwise after the last one older than it
  while (at != lru_.begin()) {
    auto before = std::prev(at);
    auto other = slots_.find(*before);
    if (other == slots_.end() || other->second->last_active <= slot->last_active) break;
    at = before;
  }
  slot->lru = lru_.insert(at, fd);
  slots_.emplace(fd, std::move(slot));
  waiting_.store(slots_.size(), std::memory_order_relaxed);
}

// Takes a connection out of the reactor's books (to close it or hand it to a worker).
std::unique_ptr<Slot> Reactor::Release(int fd) {
  auto it = slots_.find(fd);
  if (it == slots_.end()) return nullptr;
  std::unique_ptr<Slot> slot = std::move(it->second);
  slots_.erase(it);
  waiting_.store(slots_.size(), std::memory_order_relaxed);
  ::epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, fd, nullptr);
  lru_.erase(slot->lru);
  return slot;
}

void Reactor::SetInterest(Slot& slot, uint32_t events) {
  if (slot.interest == events) return;
  epoll_event ev{};
  ev.events = events;
  ev.data.fd = slot.fd;
  ::epoll_ctl(epoll_fd_, EPOLL_CTL_MOD, slot.fd, &ev);
  slot.interest = events;
}

void Reactor::Touch(Slot& slot, MonoTime now) {
  slot.last_active = now;
  lru_.splice(lru_.end(), lru_, slot.lru);
}

}  // namespace hami::net
