// WorkPool: a fixed set of threads running submitted tasks in FIFO order; the simulated
// kube-scheduler binds pods and records events on these, as kube-scheduler does on goroutines.
//
//   WorkPool pool(4);
//   pool.Submit([] { ... });
//   pool.Stop();  // or let the destructor do it
//
// Thread safety: Submit from any thread; Stop from the owner.
#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <thread>
#include <vector>

#include "common/thread_annotations.h"

namespace hami::sim {

class WorkPool {
 public:
  // Starts max(threads, 1) threads.
  explicit WorkPool(int threads);
  ~WorkPool();  // Stop()s
  WorkPool(const WorkPool&) = delete;
  WorkPool& operator=(const WorkPool&) = delete;

  // Queues `task`; ignored once Stop() has begun.
  void Submit(std::function<void()> task);
  // Discards tasks that have not started, waits for running ones and joins the threads.
  // Idempotent.
  void Stop();

 private:
  void Run();

  Mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> tasks_ GUARDED_BY(mu_);
  bool stopped_ GUARDED_BY(mu_) = false;
  std::vector<std::thread> threads_;
};

}  // namespace hami::sim
