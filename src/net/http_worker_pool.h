// WorkerPool: the HTTP server's threads that run handlers. The reactor submits a connection
// once a whole request is in its buffer; a worker (started on demand, up to
// options.worker_threads) serves it and any pipelined requests, then gives it back to the
// reactor (GiveBack) once no whole request is left. A handler that defers its answer
// (HttpResponse::Defer) frees its worker: the connection waits in the pool's table without a
// thread until the Responder sends, then queues for a worker again, which writes the answer.
//
//   WorkerPool pool(ctx, [&](std::unique_ptr<Slot> s) { reactor.GiveBack(std::move(s)); });
//   pool.Open();
//   size_t queued = 0;
//   if (!pool.Submit(slot, &queued)) { /* every worker busy and the queue full */ }
//   ...
//   pool.Detach();  // late Responder::Send calls reach nothing from here on
//   pool.Stop();
//
// Thread safety: Submit may be called from any thread (the reactor's, in practice). Open,
// Detach and Stop are the server's, from the thread that owns it (Start and Stop). The queue,
// the workers and the table of deferred answers are guarded by one mutex; a connection is only
// touched by whoever holds its Slot.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <memory>
#include <set>
#include <thread>
#include <unordered_map>
#include <vector>

#include "common/thread_annotations.h"
#include "net/http_exchange.h"
#include "net/http_slot.h"

namespace hami::net {

class WorkerPool {
 public:
  // Hands a connection with no whole request buffered back to the reactor (a thread-safe call).
  using GiveBack = std::function<void(std::unique_ptr<Slot>)>;

  WorkerPool(const ExchangeContext& ctx, GiveBack give_back);
  ~WorkerPool();
  WorkerPool(const WorkerPool&) = delete;
  WorkerPool& operator=(const WorkerPool&) = delete;

  // From now on a deferred answer's Responder reaches this pool (at Start).
  void Open();
  // A Responder's Send from now on reaches nothing (at Stop, before the reactor stops).
  void Detach();
  // Queues `slot` (a whole request buffered, socket blocking) for a worker. False, leaving
  // `slot` with the caller, when options.listen_backlog connections already wait; *queued then
  // says how many.
  bool Submit(std::unique_ptr<Slot>& slot, size_t* queued) EXCLUDES(mu_);
  // Closes the queued connections and those awaiting a deferred answer, wakes workers blocked
  // in a read (shutting their sockets' read side), lets the requests being handled finish and
  // joins every worker. The pool may be opened again afterwards.
  void Stop() EXCLUDES(mu_);

 private:
  struct Book;

  void WorkerLoop() EXCLUDES(mu_);
  // The next connection for this worker, counted as served; null when the pool stops.
  std::unique_ptr<Slot> TakeReady() EXCLUDES(mu_);
  // A worker's turn on `slot`: a deferred answer that came, then the requests it finds. kDefer
  // leaves the new deferred request in *deferred.
  Exchange::Outcome Serve(Slot& slot, std::unique_ptr<PendingAnswer>* deferred);
  // Where the connection goes after its turn: the deferred table, the reactor, or closed.
  void Release(std::unique_ptr<Slot> slot, Exchange::Outcome out,
               std::unique_ptr<PendingAnswer> deferred) EXCLUDES(mu_);
  // Keeps `slot` aside until its Responder sends the answer, then queues it for a worker.
  void AwaitAnswer(std::unique_ptr<Slot> slot, std::unique_ptr<PendingAnswer> pending)
      EXCLUDES(mu_);
  // The deferred answer of `key` was sent: its connection goes to a worker.
  void Answered(Slot* key) EXCLUDES(mu_);
  // Queues `slot` and starts a worker when none is idle for it.
  void Enqueue(std::unique_ptr<Slot> slot) REQUIRES(mu_);

  const ExchangeContext& ctx_;
  const GiveBack give_back_;

  Mutex mu_;
  std::condition_variable cv_;  // waited on by idle workers: a queued slot or stopping
  std::deque<std::unique_ptr<Slot>> ready_ GUARDED_BY(mu_);
  std::set<int> serving_ GUARDED_BY(mu_);  // sockets a worker is on
  int idle_workers_ GUARDED_BY(mu_) = 0;
  bool stopping_ GUARDED_BY(mu_) = false;
  std::vector<std::thread> workers_ GUARDED_BY(mu_);
  // Connections whose answer was deferred, until its Responder sends it (then to ready_).
  std::unordered_map<Slot*, std::unique_ptr<Slot>> awaiting_ GUARDED_BY(mu_);
  // What a Responder's notification reaches: this pool while it is open, so a late Send after
  // Stop or destruction touches nothing. Replaced by Open (the server's thread only).
  std::shared_ptr<Book> book_;
};

}  // namespace hami::net
