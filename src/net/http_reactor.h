// Reactor: the HTTP server's one epoll thread. It accepts, runs TLS handshakes and collects each
// request's head and body from non-blocking sockets, without a thread per connection; only a
// connection holding a whole request goes to the worker pool, which gives it back (GiveBack)
// between requests. It also enforces the per-connection deadlines (handshake_timeout,
// keep_alive_timeout, read_timeout, read from the injected Clock) and the connection caps
// (closing the least recently active connection it holds to admit a new one).
//
//   Reactor reactor(options, clock, running, counts, pool);
//   HAMI_RETURN_IF_ERROR(reactor.Open(listen_fd, port, ssl_ctx));
//   std::thread t([&] { reactor.Run(); });
//   ...
//   running = false;
//   reactor.Wake();
//   t.join();
//   pool.Stop();
//   reactor.Close();
//
// Deadlines are checked about every 100 ms of real time against the clock's time, so with a
// FakeClock a deadline passes when the test advances the clock (SyncForTesting makes that
// observable without waiting).
//
// Accepting and the caps live in http_reactor_accept.cc.
//
// Thread safety: Run's state (every connection it holds, its order, the caps' bookkeeping) is
// touched by the reactor thread only. Wake, GiveBack, waiting and SyncForTesting may be called
// from any thread. Open and Close belong to the thread that starts and stops the server, before
// Run starts and after it returned.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <list>
#include <memory>
#include <string>
#include <unordered_map>

#include "common/clock.h"
#include "common/status.h"
#include "common/thread_annotations.h"
#include "net/http_server.h"
#include "net/http_slot.h"
#include "net/http_worker_pool.h"

struct ssl_ctx_st;  // OpenSSL's SSL_CTX

namespace hami::net {

class Reactor {
 public:
  // Everything passed in outlives the reactor. `running` turns false when the server stops.
  Reactor(const HttpServerOptions& options, const Clock& clock, const std::atomic<bool>& running,
          ConnectionCounts& counts, WorkerPool& pool);
  ~Reactor();
  Reactor(const Reactor&) = delete;
  Reactor& operator=(const Reactor&) = delete;

  // Takes over the listening socket `listen_fd` (bound to `port`; closed by Run when it ends, or
  // here on failure) and sets up epoll. `ssl_ctx`: null for plain HTTP.
  Status Open(int listen_fd, int port, ssl_ctx_st* ssl_ctx);
  // The reactor thread's loop; returns after `running` turned false and a Wake, having closed
  // every connection it held and the listening socket.
  void Run();
  // Closes what Open made and drops connections given back too late. After Run returned and the
  // workers are joined.
  void Close();

  // Makes Run look at `running` and at given-back connections now.
  void Wake();
  // A connection a worker is done with, its socket non-blocking again.
  void GiveBack(std::unique_ptr<Slot> slot) EXCLUDES(park_mu_);
  // Connections held (idle, handshaking or sending a request).
  size_t waiting() const { return waiting_.load(std::memory_order_relaxed); }
  // Returns once Run finished a whole round begun after this call and holds at least
  // `min_waiting` connections; false when `limit` passes first or the reactor is not running.
  // Such a round has accepted every connection and read every byte that had reached the server
  // by the call, and closed every connection whose deadline had passed; bytes of a connection it
  // accepted are read in a later round.
  bool SyncForTesting(size_t min_waiting, std::chrono::milliseconds limit) EXCLUDES(round_mu_);

 private:
  void AcceptAll();
  // Out of descriptors with none to close: stops accepting for a moment (Sweep resumes it).
  void PauseAccepting();
  // Closes connections to keep a new one from `peer` within the caps; false: refuse it.
  bool MakeRoomFor(const std::string& peer);
  void Progress(int fd);
  // Steps slot's TLS handshake; false when Progress is done with it for now (or it closed).
  bool AdvanceHandshake(Slot& slot, MonoTime now);
  void HandOff(int fd);
  void Sweep(MonoTime now);
  void AdoptParked(bool progress = true) EXCLUDES(park_mu_);
  void Adopt(std::unique_ptr<Slot> slot);
  std::unique_ptr<Slot> Release(int fd);
  bool EvictOldest(const std::string& peer);
  void SetInterest(Slot& slot, uint32_t events);
  void Touch(Slot& slot, MonoTime now);
  void NoteLimit(const std::string& what);
  // A round of Run: BeginRound before polling returns the syncs requested so far, which the
  // round covers; EndRound says whether a sync requested since wants another round at once.
  uint64_t BeginRound() EXCLUDES(round_mu_);
  bool EndRound(uint64_t syncs) EXCLUDES(round_mu_);

  const HttpServerOptions& options_;
  const Clock& clock_;
  const std::atomic<bool>& running_;
  ConnectionCounts& counts_;  // every open connection (shared with the workers)
  WorkerPool& pool_;

  ssl_ctx_st* ssl_ctx_ = nullptr;
  int port_ = 0;
  int listen_fd_ = -1;
  int wake_fd_ = -1;   // eventfd: wakes Run (given-back connections, Stop, SyncForTesting)
  int epoll_fd_ = -1;

  // Run's own state: every connection not with a worker, by socket, in least-recently-active
  // order.
  std::unordered_map<int, std::unique_ptr<Slot>> slots_;
  std::list<int> lru_;
  std::atomic<size_t> waiting_{0};  // slots_.size(), readable from any thread
  bool accept_paused_ = false;
  MonoTime accept_resume_{};
  // Rate limit of the "limit reached" log line.
  MonoTime last_limit_log_{};
  uint64_t limit_events_ = 0;

  Mutex park_mu_;
  std::deque<std::unique_ptr<Slot>> parked_ GUARDED_BY(park_mu_);  // given back, not adopted yet

  // SyncForTesting's bookkeeping: calls numbered in order, and the last call whose number a
  // finished round had seen before it polled.
  Mutex round_mu_;
  std::condition_variable round_cv_;  // notified at the end of each round of Run
  uint64_t syncs_requested_ GUARDED_BY(round_mu_) = 0;
  uint64_t syncs_covered_ GUARDED_BY(round_mu_) = 0;
};

}  // namespace hami::net
