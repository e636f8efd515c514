// The simulated API server's object store: optimistic read-modify-write under concurrency,
// watch history order and resumption.
#include "sim/apiserver/store.h"

#include <atomic>
#include <nlohmann/json.hpp>
#include <set>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "sim/apiserver/resources.h"

namespace hami::sim {
namespace {

using nlohmann::json;

TEST(StoreTest, ConcurrentUpdatesAreNeverLostAndRetryOnTheNewerState) {
  ResourceRegistry registry;
  const ResourceInfo& pods = *registry.Find("", "v1", "pods");
  Store store(100000);
  ASSERT_TRUE(store.Create(pods, "default", json{{"metadata", {{"name", "p"}}}, {"n", 0}}).ok());
  constexpr int kThreads = 4, kEach = 500;
  std::atomic<int> calls{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < kEach; ++i) {
        auto r = store.Update(pods, "default", "p", [&](const json& current, json& next) {
          ++calls;
          next["n"] = current["n"].get<int>() + 1;
          return OkStatus();
        });
        ASSERT_TRUE(r.ok()) << r.status().ToString();
      }
    });
  }
  for (std::thread& t : threads) t.join();
  auto final_state = store.Get(pods, "default", "p");
  ASSERT_TRUE(final_state.ok());
  EXPECT_EQ((**final_state)["n"].get<int>(), kThreads * kEach);  // no increment lost
  EXPECT_GE(calls.load(), kThreads * kEach);                     // retries re-ran the mutation

  // Every update is one MODIFIED event, in revision order, each `previous` the event before's
  // object: the history is a single chain.
  std::vector<WatchEvent> events;
  int64_t now = 0;
  ASSERT_TRUE(store
                  .EventsSince(
                      0, [&](const ResourceInfo& r) { return &r == &pods; }, &events, &now)
                  .ok());
  ASSERT_EQ(events.size(), static_cast<size_t>(kThreads * kEach + 1));
  for (size_t i = 1; i < events.size(); ++i) {
    EXPECT_EQ(events[i].type, "MODIFIED");
    EXPECT_GT(events[i].revision, events[i - 1].revision);
    EXPECT_EQ(events[i].previous, events[i - 1].object) << i;
    EXPECT_EQ((*events[i].object)["n"].get<int>(), static_cast<int>(i));
    EXPECT_EQ((*events[i].object)["metadata"]["resourceVersion"].get<std::string>(),
              std::to_string(events[i].revision));
  }
}

TEST(StoreTest, UpdateErrorsAndMissingObjects) {
  ResourceRegistry registry;
  const ResourceInfo& pods = *registry.Find("", "v1", "pods");
  Store store(10);
  auto noop = [](const json&, json&) { return OkStatus(); };
  EXPECT_EQ(store.Update(pods, "default", "absent", noop).status().code(), StatusCode::kNotFound);
  ASSERT_TRUE(store.Create(pods, "default", json{{"metadata", {{"name", "p"}}}}).ok());
  int64_t before = store.revision();
  auto refused = store.Update(pods, "default", "p",
                              [](const json&, json&) { return AbortedError("precondition"); });
  EXPECT_EQ(refused.status().code(), StatusCode::kAborted);
  auto broken = store.Update(pods, "default", "p", [](const json&, json& next) {
    next = json::array();
    return OkStatus();
  });
  EXPECT_EQ(broken.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(store.revision(), before);  // failed updates write nothing
  // The name cannot be changed by a mutation.
  auto renamed = store.Update(pods, "default", "p", [](const json&, json& next) {
    next["metadata"]["name"] = "q";
    return OkStatus();
  });
  ASSERT_TRUE(renamed.ok());
  EXPECT_EQ((**renamed)["metadata"]["name"], "p");
}

}  // namespace
}  // namespace hami::sim
