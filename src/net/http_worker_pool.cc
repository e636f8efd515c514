#include "net/http_worker_pool.h"

#include <sys/socket.h>

#include <algorithm>
#include <mutex>
#include <utility>

#include "common/thread_name.h"

namespace hami::net {

// ---- Deferred answers: the promise a handler keeps (public, net/http_server.h). ----

std::shared_ptr<Responder> HttpResponse::Defer() {
  deferred = std::make_shared<Responder>();
  return deferred;
}

void Responder::Send(HttpResponse res) {
  std::function<void()> notify;
  {
    MutexLock lock(mu_);
    if (sent_) return;
    sent_ = true;
    answer_ = std::move(res);
    notify = std::move(on_answer_);
  }
  cv_.notify_all();
  if (notify) notify();
}

bool Responder::NotifyWhenSent(std::function<void()> on_answer) {
  MutexLock lock(mu_);
  if (sent_) return true;
  on_answer_ = std::move(on_answer);
  return false;
}

bool Responder::Sent() const {
  MutexLock lock(mu_);
  return sent_;
}

HttpResponse Responder::Wait() {
  UniqueLock lock(mu_);
  cv_.wait(lock.native(), [&]() REQUIRES(mu_) { return sent_; });
  HttpResponse out = answer_ ? std::move(*answer_) : HttpResponse();
  answer_.reset();
  return out;
}

// ---- The pool. ----

struct WorkerPool::Book {
  Mutex mu;
  WorkerPool* pool GUARDED_BY(mu) = nullptr;
};

WorkerPool::WorkerPool(const ExchangeContext& ctx, GiveBack give_back)
    : ctx_(ctx), give_back_(std::move(give_back)) {}

WorkerPool::~WorkerPool() {
  Detach();
  Stop();
}

void WorkerPool::Open() {
  book_ = std::make_shared<Book>();
  MutexLock lock(book_->mu);
  book_->pool = this;
}

void WorkerPool::Detach() {
  if (!book_) return;
  MutexLock lock(book_->mu);  // waits for a notification under way
  book_->pool = nullptr;
}

bool WorkerPool::Submit(std::unique_ptr<Slot>& slot, size_t* queued) {
  MutexLock lock(mu_);
  if (ready_.size() >= static_cast<size_t>(std::max(ctx_.options.listen_backlog, 1))) {
    *queued = ready_.size();
    return false;
  }
  Enqueue(std::move(slot));
  return true;
}

void WorkerPool::Enqueue(std::unique_ptr<Slot> slot) {
  ready_.push_back(std::move(slot));
  if (static_cast<size_t>(idle_workers_) < ready_.size() &&
      static_cast<int>(workers_.size()) < ctx_.options.worker_threads) {
    workers_.emplace_back([this] { WorkerLoop(); });
  }
  cv_.notify_one();
}

void WorkerPool::Stop() {
  std::vector<std::thread> workers;
  {
    MutexLock lock(mu_);
    stopping_ = true;
    ready_.clear();
    awaiting_.clear();  // connections whose deferred answer never came: closed
    // A worker blocked reading wakes at once (its read sees end of stream); a request being
    // handled finishes and its answer is still sent.
    for (int fd : serving_) ::shutdown(fd, SHUT_RD);
    workers.swap(workers_);
  }
  cv_.notify_all();
  for (std::thread& t : workers) t.join();
  MutexLock lock(mu_);
  stopping_ = false;  // a later Open may serve again
}

void WorkerPool::WorkerLoop() {
  SetCurrentThreadName("http-conn");
  while (std::unique_ptr<Slot> slot = TakeReady()) {
    std::unique_ptr<PendingAnswer> deferred;
    Exchange::Outcome out = Serve(*slot, &deferred);
    Release(std::move(slot), out, std::move(deferred));
  }
}

std::unique_ptr<Slot> WorkerPool::TakeReady() {
  UniqueLock lock(mu_);
  ++idle_workers_;
  cv_.wait(lock.native(), [&]() REQUIRES(mu_) { return stopping_ || !ready_.empty(); });
  --idle_workers_;
  if (stopping_) return nullptr;
  std::unique_ptr<Slot> slot = std::move(ready_.front());
  ready_.pop_front();
  serving_.insert(slot->fd);
  return slot;
}

Exchange::Outcome WorkerPool::Serve(Slot& slot, std::unique_ptr<PendingAnswer>* deferred) {
  using Outcome = Exchange::Outcome;
  Exchange exchange(ctx_, *slot.conn, slot.peer, &slot.served);
  // A deferred answer that came goes out first; then the connection carries on (the buffer may
  // or may not hold another whole request).
  const bool answered = slot.pending != nullptr;
  if (answered) {
    std::unique_ptr<PendingAnswer> pending = std::move(slot.pending);
    if (!WriteDeferredAnswer(*slot.conn, *pending, ctx_.running)) return Outcome::kClose;
  }
  Outcome out = exchange.ServeWhileReady(/*whole_request=*/!answered, deferred);
  // Answered before the handler returned (the usual case): written now, on this worker.
  while (out == Outcome::kDefer && (*deferred)->responder->Sent()) {
    std::unique_ptr<PendingAnswer> pending = std::move(*deferred);
    out = WriteDeferredAnswer(*slot.conn, *pending, ctx_.running)
              ? exchange.ServeWhileReady(/*whole_request=*/false, deferred)
              : Outcome::kClose;
  }
  return out;
}

void WorkerPool::Release(std::unique_ptr<Slot> slot, Exchange::Outcome out,
                         std::unique_ptr<PendingAnswer> deferred) {
  {
    MutexLock lock(mu_);
    serving_.erase(slot->fd);  // before close: Stop never shuts down a reused descriptor
  }
  if (out == Exchange::Outcome::kDefer) {
    AwaitAnswer(std::move(slot), std::move(deferred));
  } else if (out == Exchange::Outcome::kPark && ctx_.running.load() &&
             SetNonBlocking(slot->fd, true)) {
    give_back_(std::move(slot));
  }
  // Otherwise `slot` closes the connection here.
}

void WorkerPool::AwaitAnswer(std::unique_ptr<Slot> slot, std::unique_ptr<PendingAnswer> pending) {
  std::shared_ptr<Responder> responder = pending->responder;
  Slot* key = slot.get();
  slot->pending = std::move(pending);
  {
    MutexLock lock(mu_);
    if (stopping_) return;  // `slot` closes
    awaiting_.emplace(key, std::move(slot));
  }
  std::weak_ptr<Book> weak = book_;
  const bool sent = responder->NotifyWhenSent([weak, key] {
    if (std::shared_ptr<Book> b = weak.lock()) {
      MutexLock lock(b->mu);
      if (b->pool != nullptr) b->pool->Answered(key);
    }
  });
  if (sent) Answered(key);  // sent while the handler still ran
}

void WorkerPool::Answered(Slot* key) {
  MutexLock lock(mu_);
  auto it = awaiting_.find(key);
  if (stopping_ || it == awaiting_.end()) return;
  std::unique_ptr<Slot> slot = std::move(it->second);
  awaiting_.erase(it);
  Enqueue(std::move(slot));
}

}  // namespace hami::net
