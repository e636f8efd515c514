// ThreadPool: runs submitted tasks on threads started on demand, up to a cap. For work that may
// block for long (a bind waiting for another allocation's node lock) and must not hold the
// thread that accepted it (an HTTP worker).
//
//   ThreadPool pool("binder", 64);
//   pool.Submit([] { ... });
//   pool.Stop();  // runs what was queued, then joins
//
// Thread safety: Submit from any thread; Stop from the owner (also run by the destructor).
#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "common/thread_annotations.h"

namespace hami {

class ThreadPool {
 public:
  ThreadPool(std::string name, int max_threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  // Queues `task`; a thread is started when none is idle and the cap allows. After Stop the
  // task runs on the calling thread (nothing is dropped).
  void Submit(std::function<void()> task);
  // Runs every queued task, then joins the threads. Submit afterwards runs inline.
  void Stop();
  // Threads started so far.
  size_t threads() const;

 private:
  void Loop();

  const std::string name_;
  const int max_threads_;
  mutable Mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> tasks_ GUARDED_BY(mu_);
  std::vector<std::thread> threads_ GUARDED_BY(mu_);
  int idle_ GUARDED_BY(mu_) = 0;
  bool stopping_ GUARDED_BY(mu_) = false;
};

}  // namespace hami
