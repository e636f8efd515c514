// The simulated API server's watch fan-out: one dispatcher, many watches, writers and
// registrations racing, streams that cannot take a batch at once, deadlines, bookmarks, stop.
#include "sim/apiserver/watch_hub.h"

#include <atomic>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "gtest/gtest.h"

namespace hami::sim {
namespace {

using nlohmann::json;
using SteadyClock = std::chrono::steady_clock;

// A stream that records what reaches the "peer". Every `hold_every`-th TryWrite leaves its data
// held, as a full socket buffer would (1 = always, like a TLS connection); `broken` fails writes.
class RecordingWriter : public net::ChunkWriter {
 public:
  explicit RecordingWriter(int hold_every = 0, bool broken = false)
      : hold_every_(hold_every), broken_(broken) {}

  bool Write(std::string_view data) override {
    std::lock_guard<std::mutex> l(mu_);
    if (broken_) return false;
    text_ += held_;
    held_.clear();
    text_ += data;
    cv_.notify_all();
    return true;
  }
  bool TryWrite(std::string_view data, bool* pending) override {
    std::lock_guard<std::mutex> l(mu_);
    if (broken_) return false;
    ++tries_;
    if (!held_.empty() || (hold_every_ > 0 && tries_ % hold_every_ == 0)) {
      held_ += data;  // order kept: nothing passes what is held
    } else {
      text_ += data;
      cv_.notify_all();
    }
    *pending = !held_.empty();
    return true;
  }
  bool Drain() override {
    std::lock_guard<std::mutex> l(mu_);
    if (broken_) return false;
    ++drains_;
    text_ += held_;
    held_.clear();
    cv_.notify_all();
    return true;
  }
  bool ServerRunning() const override { return true; }

  // Waits (up to 30 s) until the peer has received `want` exactly or more than its length.
  std::string WaitFor(const std::string& want) {
    std::unique_lock<std::mutex> l(mu_);
    cv_.wait_for(l, std::chrono::seconds(30), [&] { return text_.size() >= want.size(); });
    return text_;
  }
  // Waits (up to 30 s) until the received text contains `needle`.
  std::string WaitForSubstring(const std::string& needle) {
    std::unique_lock<std::mutex> l(mu_);
    cv_.wait_for(l, std::chrono::seconds(30),
                 [&] { return text_.find(needle) != std::string::npos; });
    return text_;
  }
  int drains() {
    std::lock_guard<std::mutex> l(mu_);
    return drains_;
  }
  std::string text() {
    std::lock_guard<std::mutex> l(mu_);
    return text_ + held_;
  }

 private:
  const int hold_every_;
  const bool broken_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::string text_, held_;
  int tries_ = 0, drains_ = 0;
};

class WatchHubTest : public ::testing::Test {
 protected:
  explicit WatchHubTest(size_t history = 100000) : store_(history) {}
  void SetUp() override { hub_.Start(); }
  void TearDown() override { StopAll(); }
  // Ends every watch and waits for their Serve calls (before writers they use go away).
  void StopAll() {
    hub_.Stop();
    for (std::thread& t : serving_) t.join();
    serving_.clear();
  }

  // Opens a watch from the current revision on its own thread (Serve blocks until it ends);
  // `*ended` (when given) turns true once Serve has returned. Returns the revision it starts
  // after.
  int64_t Open(WatchSpec spec, RecordingWriter* writer, int64_t start = -1,
               std::atomic<bool>* ended = nullptr) {
    if (start < 0) start = store_.revision();
    serving_.emplace_back([this, spec = std::move(spec), start, writer, ended]() mutable {
      hub_.Serve(std::move(spec), start, *writer);
      if (ended != nullptr) ended->store(true);
    });
    return start;
  }

  // What a watch must have received for the events after `start`, rendered as the hub renders.
  std::string Expected(const WatchSpec& spec, int64_t start) {
    std::vector<WatchEvent> events;
    int64_t now = 0;
    EXPECT_TRUE(
        store_
            .EventsSince(
                start, [&](const ResourceInfo& r) { return &r == spec.resource; }, &events, &now)
            .ok());
    std::string out;
    for (const WatchEvent& e : events) spec.AppendEvent(e, &out);
    return out;
  }

  // A writer that lives as long as the fixture (past TearDown's joins).
  RecordingWriter& Writer(int hold_every = 0, bool broken = false) {
    writers_.push_back(std::make_unique<RecordingWriter>(hold_every, broken));
    return *writers_.back();
  }

  WatchSpec Spec(const ResourceInfo& r, std::string ns = "", std::string labels = "") {
    WatchSpec s;
    s.resource = &r;
    s.ns = std::move(ns);
    s.labels = LabelSelector::Parse(labels).value();
    s.deadline = SteadyClock::now() + std::chrono::hours(1);
    return s;
  }

  ResourceRegistry registry_;
  const ResourceInfo& pods_ = *registry_.Find("", "v1", "pods");
  const ResourceInfo& nodes_ = *registry_.Find("", "v1", "nodes");
  Store store_;
  WatchHub hub_{store_, registry_, [](const std::string& m) {
                  return "{\"type\":\"ERROR\",\"message\":\"" + m + "\"}\n";
                }};
  std::vector<std::unique_ptr<RecordingWriter>> writers_;
  std::vector<std::thread> serving_;
};

json Obj(const std::string& name, const std::string& tier) {
  return {{"metadata", {{"name", name}, {"labels", {{"tier", tier}}}}}, {"n", 0}};
}

TEST_F(WatchHubTest, EveryWatchGetsExactlyItsEventsInOrderWhileWritesAndRegistrationsRace) {
  // Writers on three threads (pods in two namespaces, nodes; creates and updates that move pods
  // in and out of a label selection), while watches open one after another in the middle of it.
  constexpr int kEach = 400;
  std::atomic<int> progress{0};
  std::vector<std::thread> writers;
  for (int t = 0; t < 3; ++t) {
    writers.emplace_back([&, t] {
      for (int i = 0; i < kEach; ++i) {
        std::string name = "o" + std::to_string(t) + "-" + std::to_string(i % 50);
        const ResourceInfo& r = t == 2 ? nodes_ : pods_;
        std::string ns = t == 2 ? "" : (t == 0 ? "a" : "b");
        if (i < 50) {
          ASSERT_TRUE(store_.Create(r, ns, Obj(name, i % 2 ? "gpu" : "cpu")).ok());
        } else {
          ASSERT_TRUE(store_
                          .Update(r, ns, name,
                                  [&](const json& cur, json& next) {
                                    next["n"] = cur["n"].get<int>() + 1;
                                    next["metadata"]["labels"]["tier"] = i % 3 ? "gpu" : "cpu";
                                    return OkStatus();
                                  })
                          .ok());
        }
        ++progress;
      }
    });
  }
  struct Opened {
    WatchSpec spec;
    int64_t start;
    RecordingWriter* writer;
  };
  std::vector<Opened> opened;
  auto open = [&](WatchSpec spec, int hold_every) {
    RecordingWriter* writer = &Writer(hold_every);
    WatchSpec copy = spec;
    int64_t start = Open(std::move(copy), writer);
    opened.push_back({std::move(spec), start, writer});
  };
  open(Spec(pods_), 0);
  open(Spec(nodes_), 0);
  while (progress.load() < 300) std::this_thread::yield();
  open(Spec(pods_, "a"), 3);             // every third batch goes through the drain path
  open(Spec(pods_, "", "tier=gpu"), 1);  // every batch does, as on TLS
  while (progress.load() < 800) std::this_thread::yield();
  open(Spec(nodes_, "", "tier=cpu"), 0);
  open(Spec(pods_, "b"), 2);
  for (std::thread& t : writers) t.join();
  // Every watch has something to receive after it opened, however late that was.
  ASSERT_TRUE(store_.Create(pods_, "a", Obj("last-a", "gpu")).ok());
  ASSERT_TRUE(store_.Create(pods_, "b", Obj("last-b", "gpu")).ok());
  ASSERT_TRUE(store_.Create(nodes_, "", Obj("last-node", "cpu")).ok());

  for (Opened& o : opened) {
    std::string want = Expected(o.spec, o.start);
    EXPECT_EQ(o.writer->WaitFor(want), want)
        << o.spec.resource->resource << " ns=" << o.spec.ns << " from " << o.start;
  }
  // The held batches really went through the drain path.
  EXPECT_GT(opened[3].writer->drains(), 0);
}

TEST_F(WatchHubTest, ABrokenStreamEndsOnlyItsOwnWatch) {
  RecordingWriter& broken = Writer(0, /*broken=*/true);
  RecordingWriter& good = Writer();
  Open(Spec(pods_), &broken);
  int64_t start = Open(Spec(pods_), &good);
  ASSERT_TRUE(store_.Create(pods_, "a", Obj("p1", "gpu")).ok());
  serving_[0].join();  // the broken one's Serve returns on its own
  serving_.erase(serving_.begin());
  ASSERT_TRUE(store_.Create(pods_, "a", Obj("p2", "gpu")).ok());
  std::string want = Expected(Spec(pods_), start);
  EXPECT_EQ(good.WaitFor(want), want);
}

TEST_F(WatchHubTest, DeadlineEndsTheStreamAndStopEndsTheRest) {
  RecordingWriter& short_lived = Writer();
  RecordingWriter& long_lived = Writer();
  std::atomic<bool> long_ended{false};
  WatchSpec spec = Spec(pods_);
  const SteadyClock::time_point opened = SteadyClock::now();
  spec.deadline = opened + std::chrono::milliseconds(50);
  Open(std::move(spec), &short_lived);
  Open(Spec(pods_), &long_lived, -1, &long_ended);
  // The short watch returns at its deadline (not before), having written nothing; the other
  // goes on and still gets events.
  serving_[0].join();
  serving_.erase(serving_.begin());
  EXPECT_GE(SteadyClock::now() - opened, std::chrono::milliseconds(50));
  EXPECT_EQ(short_lived.text(), "");
  EXPECT_FALSE(long_ended.load());
  ASSERT_TRUE(store_.Create(pods_, "a", Obj("after-deadline", "gpu")).ok());
  EXPECT_NE(long_lived.WaitForSubstring("after-deadline").find("\"type\":\"ADDED\""),
            std::string::npos);
  EXPECT_FALSE(long_ended.load());
  EXPECT_EQ(short_lived.text(), "");
  // Stop ends the other one too.
  StopAll();
  EXPECT_TRUE(long_ended.load());
  // Serve after Stop returns at once (it does not block this thread), writing nothing.
  RecordingWriter& late = Writer();
  hub_.Serve(Spec(pods_), store_.revision(), late);
  EXPECT_EQ(late.text(), "");
}

TEST_F(WatchHubTest, BookmarksCarryTheRevisionEverythingWasSentUpTo) {
  ASSERT_TRUE(store_.Create(pods_, "a", Obj("p", "gpu")).ok());
  ASSERT_TRUE(store_.Create(nodes_, "", Obj("n", "gpu")).ok());  // moves the revision too
  RecordingWriter& w = Writer();
  WatchSpec spec = Spec(pods_);
  spec.bookmarks = true;
  spec.bookmark_every = std::chrono::milliseconds(10);
  Open(std::move(spec), &w, 0);
  std::string text = w.WaitForSubstring("BOOKMARK");
  // The pod's ADDED first, then a bookmark at the store's revision (2).
  size_t added = text.find("\"type\":\"ADDED\"");
  size_t bookmark = text.find("{\"type\":\"BOOKMARK\"");
  ASSERT_NE(added, std::string::npos) << text;
  ASSERT_NE(bookmark, std::string::npos) << text;
  EXPECT_LT(added, bookmark);
  json line = json::parse(text.substr(bookmark, text.find('\n', bookmark) - bookmark));
  EXPECT_EQ(line["object"]["kind"], "Pod");
  EXPECT_EQ(line["object"]["metadata"]["resourceVersion"], "2");
}

class SmallHistoryHubTest : public WatchHubTest {
 protected:
  SmallHistoryHubTest() : WatchHubTest(3) {}
};

TEST_F(SmallHistoryHubTest, AWatchFromBeforeTheHistoryWindowGetsTheExpiredEvent) {
  for (int i = 0; i < 6; ++i) {
    ASSERT_TRUE(store_.Create(pods_, "a", Obj("p" + std::to_string(i), "gpu")).ok());
  }
  RecordingWriter w;
  hub_.Serve(Spec(pods_), 1, w);  // returns after the error event
  EXPECT_NE(w.WaitFor("x").find("\"type\":\"ERROR\""), std::string::npos);
}

}  // namespace
}  // namespace hami::sim
