// Slot: the HTTP server's record of one open connection between its owners, and
// ConnectionCounts, the tally of open connections that the connection caps read.
//
// A slot is owned by exactly one place at a time: the reactor (idle, in its TLS handshake, or
// collecting a request), the worker pool's queue or one of its workers (a whole request
// arrived), or the pool's table of connections awaiting a deferred answer. The owner may touch
// every field without a lock; hand-overs go through the pool's and the reactor's locked queues.
// Destroying the slot closes the connection and counts it out.
//
// Thread safety: Slot as above. ConnectionCounts may be called from any thread.
#pragma once

#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <list>
#include <memory>
#include <string>
#include <unordered_map>

#include "common/clock.h"
#include "common/thread_annotations.h"
#include "net/http_connection.h"
#include "net/http_exchange.h"
#include "net/http_wire.h"

namespace hami::net {

// Open connections, in all and per remote address, wherever they are (reactor or worker): what
// the connection caps count. A slot counts itself in at accept and out when it closes.
class ConnectionCounts {
 public:
  void Add(const std::string& peer) EXCLUDES(mu_) {
    MutexLock lock(mu_);
    ++total_;
    ++per_address_[peer];
  }
  void Remove(const std::string& peer) EXCLUDES(mu_) {
    MutexLock lock(mu_);
    --total_;
    auto it = per_address_.find(peer);
    if (it != per_address_.end() && --it->second == 0) per_address_.erase(it);
  }
  size_t total() const EXCLUDES(mu_) {
    MutexLock lock(mu_);
    return total_;
  }
  size_t of(const std::string& peer) const EXCLUDES(mu_) {
    MutexLock lock(mu_);
    auto it = per_address_.find(peer);
    return it == per_address_.end() ? 0 : it->second;
  }

 private:
  mutable Mutex mu_;
  size_t total_ GUARDED_BY(mu_) = 0;
  std::unordered_map<std::string, size_t> per_address_ GUARDED_BY(mu_);
};

struct Slot {
  enum class Phase { kHandshake, kIdle, kReading };

  Slot() = default;
  Slot(const Slot&) = delete;
  Slot& operator=(const Slot&) = delete;
  ~Slot() {
    conn.reset();  // the TLS state goes before the socket
    if (fd >= 0) ::close(fd);
    if (counts != nullptr) counts->Remove(peer);
  }

  int fd = -1;
  std::unique_ptr<Connection> conn;
  std::string peer;
  size_t served = 0;                  // requests answered on this connection
  ConnectionCounts* counts = nullptr;  // counted in there while open

  // The reactor's: what it waits for, until when, and how far the request has arrived.
  Phase phase = Phase::kIdle;
  MonoTime deadline{};
  wire::RequestScan scan;
  uint32_t interest = 0;         // the epoll events registered
  std::list<int>::iterator lru;  // its place in the reactor's least-recently-active order
  // When it was accepted or last sent bytes: the lru's order. A connection a worker gives back
  // is placed by this time, not by when it came back (another may have been accepted meanwhile,
  // after this one's client had its answer).
  MonoTime last_active{};

  // The worker pool's: a deferred answer to write before anything else.
  std::unique_ptr<PendingAnswer> pending;
};

}  // namespace hami::net
