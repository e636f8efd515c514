#include "sim/kubescheduler/work_pool.h"

#include <algorithm>
#include <utility>

namespace hami::sim {

WorkPool::WorkPool(int threads) {
  for (int i = 0; i < std::max(threads, 1); ++i) threads_.emplace_back([this] { Run(); });
}

WorkPool::~WorkPool() { Stop(); }

void WorkPool::Submit(std::function<void()> task) {
  MutexLock lock(mu_);
  if (stopped_) return;
  tasks_.push_back(std::move(task));
  cv_.notify_one();
}

void WorkPool::Stop() {
  {
    MutexLock lock(mu_);
    if (stopped_) return;
    stopped_ = true;
    tasks_.clear();
    cv_.notify_all();
  }
  for (std::thread& t : threads_) t.join();
}

void WorkPool::Run() {
  while (true) {
    std::function<void()> task;
    {
      UniqueLock lock(mu_);
      cv_.wait(lock.native(), [this]() REQUIRES(mu_) { return stopped_ || !tasks_.empty(); });
      if (stopped_) return;
      task = std::move(tasks_.front());
      tasks_.pop_front();
    }
    task();
  }
}

}  // namespace hami::sim
