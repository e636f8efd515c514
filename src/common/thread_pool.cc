#include "common/thread_pool.h"

#include <pthread.h>

namespace hami {

ThreadPool::ThreadPool(std::string name, int max_threads)
    : name_(std::move(name)), max_threads_(max_threads > 0 ? max_threads : 1) {}

ThreadPool::~ThreadPool() { Stop(); }

void ThreadPool::Submit(std::function<void()> task) {
  {
    MutexLock lock(mu_);
    if (!stopping_) {
      tasks_.push_back(std::move(task));
      if (static_cast<size_t>(idle_) < tasks_.size() &&
          static_cast<int>(threads_.size()) < max_threads_) {
        threads_.emplace_back([this] { Loop(); });
      }
      cv_.notify_one();
      return;
    }
  }
  task();  // stopped: run it here rather than lose it
}

void ThreadPool::Loop() {
  pthread_setname_np(pthread_self(), name_.substr(0, 15).c_str());
  for (;;) {
    std::function<void()> task;
    {
      UniqueLock lock(mu_);
      ++idle_;
      cv_.wait(lock.native(), [&]() REQUIRES(mu_) { return stopping_ || !tasks_.empty(); });
      --idle_;
      if (tasks_.empty()) return;  // stopping, nothing left
      task = std::move(tasks_.front());
      tasks_.pop_front();
    }
    task();
  }
}

void ThreadPool::Stop() {
  std::vector<std::thread> threads;
  {
    MutexLock lock(mu_);
    stopping_ = true;
    threads.swap(threads_);
  }
  cv_.notify_all();
  for (std::thread& t : threads) t.join();
  // Tasks queued after the threads were taken (none can be: Submit runs inline once stopping).
}

size_t ThreadPool::threads() const {
  MutexLock lock(mu_);
  return threads_.size();
}

}  // namespace hami
