#include "common/thread_pool.h"

#include <gtest/gtest.h>

#include <atomic>
#include <future>
#include <set>
#include <thread>
#include <vector>

namespace hami {
namespace {

TEST(ThreadPoolTest, TasksRunOffTheCallersThreadUpToTheCap) {
  ThreadPool pool("test-pool", 2);
  const std::thread::id caller = std::this_thread::get_id();
  // Two tasks that block until both run: they need two threads at once.
  std::promise<void> release;
  std::shared_future<void> go = release.get_future().share();
  std::atomic<int> started{0};
  std::vector<std::future<std::thread::id>> ran;
  for (int i = 0; i < 2; ++i) {
    auto p = std::make_shared<std::promise<std::thread::id>>();
    ran.push_back(p->get_future());
    pool.Submit([p, go, &started] {
      ++started;
      go.wait();
      p->set_value(std::this_thread::get_id());
    });
  }
  // Both block at once: two threads run them.
  while (started.load() < 2) std::this_thread::yield();
  // A third waits for a free thread (the cap is two) and runs once one is.
  auto third = std::make_shared<std::promise<int>>();
  std::future<int> third_done = third->get_future();
  pool.Submit([third, &started] { third->set_value(started.load()); });
  EXPECT_EQ(third_done.wait_for(std::chrono::milliseconds(20)), std::future_status::timeout);
  release.set_value();
  std::set<std::thread::id> ids;
  for (auto& f : ran) ids.insert(f.get());
  EXPECT_EQ(ids.size(), 2u);
  EXPECT_EQ(ids.count(caller), 0u);
  EXPECT_EQ(third_done.get(), 2);
  EXPECT_EQ(pool.threads(), 2u);
}

TEST(ThreadPoolTest, StopRunsWhatWasQueuedAndLaterTasksRunInline) {
  ThreadPool pool("test-pool", 1);
  std::atomic<int> done{0};
  for (int i = 0; i < 50; ++i) pool.Submit([&done] { ++done; });
  pool.Stop();
  EXPECT_EQ(done.load(), 50);
  const std::thread::id caller = std::this_thread::get_id();
  std::thread::id ran_on;
  pool.Submit([&] { ran_on = std::this_thread::get_id(); });
  EXPECT_EQ(ran_on, caller);
}

}  // namespace
}  // namespace hami
