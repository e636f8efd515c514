#include "k8s/informer.h"

#include <gtest/gtest.h>

#include <condition_variable>

#include "k8s/api_error.h"
#include "k8s/test_util.h"

namespace hami::k8s {
namespace {

using testing::FakeClient;

HttpResponse J(int status, std::string body) {
  return FakeTransport::Json(status, std::move(body));
}

std::string Pod(const std::string& name, const std::string& rv) {
  return R"({"metadata":{"name":")" + name + R"(","namespace":"ns","resourceVersion":")" + rv +
         R"("}})";
}
std::string PodList(const std::string& rv, const std::vector<std::string>& pods) {
  std::string items;
  for (const std::string& p : pods) items += (items.empty() ? "" : ",") + p;
  return R"({"metadata":{"resourceVersion":")" + rv + R"("},"items":[)" + items + "]}";
}
std::string Ev(const std::string& type, const std::string& obj) {
  return R"({"type":")" + type + R"(","object":)" + obj + "}\n";
}

// Records handler calls as "add:name@rv", "update:name@oldrv->newrv", "delete:name@rv".
class Recorder {
 public:
  InformerHandler Handler() {
    return {.on_add = [this](const ObjectPtr& o) { Add("add:" + Name(*o) + "@" + Rv(o)); },
            .on_update =
                [this](const ObjectPtr& o, const ObjectPtr& n) {
                  Add("update:" + Name(*n) + "@" + Rv(o) + "->" + Rv(n));
                },
            .on_delete = [this](const ObjectPtr& o) { Add("delete:" + Name(*o) + "@" + Rv(o)); }};
  }
  std::vector<std::string> Take() {
    std::lock_guard<std::mutex> lock(mu_);
    return std::exchange(events_, {});
  }
  // Blocks until `n` events have been recorded (real time; used by the threaded test only).
  std::vector<std::string> WaitFor(size_t n) {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [&] { return events_.size() >= n; });
    return events_;
  }

 private:
  static std::string Rv(const ObjectPtr& o) { return ResourceVersion(*o); }
  void Add(std::string s) {
    std::lock_guard<std::mutex> lock(mu_);
    events_.push_back(std::move(s));
    cv_.notify_all();
  }
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<std::string> events_;
};

TEST(InformerTest, RelistThenWatchResumesFromLastVersion) {
  FakeClient fc;
  Informer inf(*fc.client, kPods, {.ns = "ns", .label_selector = "app=x"});
  Recorder rec;
  inf.AddEventHandler(rec.Handler());
  fc.fake->Push("GET", "/pods?labelSelector",
                J(200, PodList("100", {Pod("a", "90"), Pod("b", "95")})));
  ASSERT_TRUE(inf.Relist().ok());
  EXPECT_TRUE(inf.HasSynced());
  EXPECT_EQ(inf.LastResourceVersion(), "100");
  EXPECT_EQ(rec.Take(), (std::vector<std::string>{"add:a@90", "add:b@95"}));

  fc.fake->Push("GET", "watch=true",
                J(200, Ev("MODIFIED", Pod("a", "101")) + Ev("ADDED", Pod("c", "102")) +
                           Ev("DELETED", Pod("b", "103")) +
                           Ev("BOOKMARK", R"({"metadata":{"resourceVersion":"110"}})")));
  ASSERT_TRUE(inf.WatchOnce(nullptr).ok());
  EXPECT_EQ(rec.Take(), (std::vector<std::string>{"update:a@90->101", "add:c@102", "delete:b@95"}));
  EXPECT_EQ(inf.LastResourceVersion(), "110");  // the bookmark moved the resume point
  EXPECT_EQ(inf.Size(), 2u);
  EXPECT_EQ(ResourceVersion(*inf.Get("ns/a")), "101");
  EXPECT_EQ(inf.Get("ns/b"), nullptr);

  // The stream ended normally; the next watch resumes after the bookmark.
  fc.fake->Push("GET", "watch=true", J(200, ""));
  ASSERT_TRUE(inf.WatchOnce(nullptr).ok());
  auto reqs = fc.fake->requests();
  EXPECT_NE(reqs[1].url.find("resourceVersion=100&allowWatchBookmarks=true"), std::string::npos)
      << reqs[1].url;
  EXPECT_NE(reqs[1].url.find("labelSelector=app%3Dx"), std::string::npos);
  EXPECT_NE(reqs[2].url.find("resourceVersion=110&"), std::string::npos) << reqs[2].url;
}

TEST(InformerTest, TransformAppliesToListedAndWatchedObjects) {
  FakeClient fc;
  InformerOptions opts;
  opts.transform = [](const Object& o) {
    Object kept = {{"metadata", o["metadata"]}};
    kept["metadata"]["labels"] = {{"seen", "yes"}};
    return kept;
  };
  Informer inf(*fc.client, kPods, opts);
  std::vector<std::string> seen;
  inf.AddEventHandler(
      {.on_add =
           [&](const ObjectPtr& o) { seen.push_back(GetString(*o, "/metadata/labels/seen")); },
       .on_update =
           [&](const ObjectPtr& old_obj, const ObjectPtr& o) {
             seen.push_back(GetString(*old_obj, "/metadata/labels/seen") + "->" +
                            GetString(*o, "/metadata/labels/seen"));
           },
       .on_delete =
           [&](const ObjectPtr& o) { seen.push_back(GetString(*o, "/metadata/labels/seen")); }});
  std::string big = R"({"metadata":{"name":"a","namespace":"ns","resourceVersion":"1"},)"
                    R"("spec":{"volumes":[1,2,3]}})";
  fc.fake->Push("GET", "/pods", J(200, PodList("1", {big})));
  ASSERT_TRUE(inf.Relist().ok());
  fc.fake->Push("GET", "watch=true",
                J(200, Ev("MODIFIED", Pod("a", "2")) + Ev("ADDED", Pod("b", "3")) +
                           Ev("DELETED", Pod("b", "4"))));
  ASSERT_TRUE(inf.WatchOnce(nullptr).ok());
  EXPECT_EQ(seen, (std::vector<std::string>{"yes", "yes->yes", "yes", "yes"}));
  ObjectPtr a = inf.Get("ns/a");
  ASSERT_NE(a, nullptr);
  EXPECT_FALSE(a->contains("spec"));  // the cache holds the transformed object
  EXPECT_EQ(ResourceVersion(*a), "2");
}

// HasSynced means the handlers have been given the whole first list, not just that it arrived:
// the scheduler's ledger must hold every listed pod before the service calls itself ready.
TEST(InformerTest, SyncedOnlyAfterHandlersSawTheList) {
  FakeClient fc;
  Informer inf(*fc.client, kPods, {.ns = "ns"});
  std::vector<bool> synced_during;
  inf.AddEventHandler(
      {.on_add = [&](const ObjectPtr&) { synced_during.push_back(inf.HasSynced()); }});
  fc.fake->Push("GET", "/pods", J(200, PodList("100", {Pod("a", "90"), Pod("b", "95")})));
  ASSERT_TRUE(inf.Relist().ok());
  EXPECT_EQ(synced_during, (std::vector<bool>{false, false}));
  EXPECT_TRUE(inf.HasSynced());
}

TEST(InformerTest, GoneTriggersRelistWithDiff) {
  FakeClient fc;
  Informer inf(*fc.client, kPods, {});
  Recorder rec;
  inf.AddEventHandler(rec.Handler());
  fc.fake->Push("GET", "/api/v1/pods?limit", J(200, PodList("10", {Pod("a", "1"), Pod("b", "2")})));
  ASSERT_TRUE(inf.Relist().ok());
  rec.Take();
  fc.fake->Push("GET", "watch=true",
                J(200, Ev("ERROR", R"({"kind":"Status","code":410,"reason":"Expired"})")));
  Status s = inf.WatchOnce(nullptr);
  ASSERT_TRUE(IsGone(s)) << s.ToString();
  // While we were away: a changed, b deleted, c created.
  fc.fake->Push("GET", "/api/v1/pods?limit",
                J(200, PodList("50", {Pod("a", "40"), Pod("c", "45")})));
  ASSERT_TRUE(inf.Relist().ok());
  EXPECT_EQ(rec.Take(), (std::vector<std::string>{"delete:b@2", "add:c@45", "update:a@1->40"}));
  EXPECT_EQ(inf.LastResourceVersion(), "50");
}

TEST(InformerTest, ResyncRedeliversEverything) {
  FakeClient fc;
  Informer inf(*fc.client, kPods, {.resync_period = std::chrono::seconds(1)});
  Recorder rec;
  inf.AddEventHandler(rec.Handler());
  fc.fake->Push("GET", "/api/v1/pods?limit", J(200, PodList("10", {Pod("a", "1")})));
  ASSERT_TRUE(inf.Relist().ok());
  inf.Resync();
  EXPECT_EQ(rec.Take(), (std::vector<std::string>{"add:a@1", "update:a@1->1"}));

  // Periodic resync is driven by the injected clock between watch events.
  fc.fake->Push("GET", "watch=true", J(200, Ev("ADDED", Pod("b", "11"))));
  ASSERT_TRUE(inf.WatchOnce(nullptr).ok());
  fc.clock.Advance(std::chrono::seconds(2));
  fc.fake->Push("GET", "watch=true", J(200, Ev("ADDED", Pod("c", "12"))));
  ASSERT_TRUE(inf.WatchOnce(nullptr).ok());
  EXPECT_EQ(rec.Take(), (std::vector<std::string>{"add:b@11", "add:c@12", "update:a@1->1",
                                                  "update:b@11->11", "update:c@12->12"}));
  // The watch's server timeout is bounded by the resync period.
  EXPECT_NE(fc.fake->requests().back().url.find("timeoutSeconds=1"), std::string::npos);
}

TEST(InformerTest, ListErrorsPropagate) {
  FakeClient fc;
  Informer inf(*fc.client, kPods, {});
  fc.fake->Push("GET", "/api/v1/pods", J(403, R"({"reason":"Forbidden"})"));
  EXPECT_EQ(inf.Relist().code(), StatusCode::kPermissionDenied);
  EXPECT_FALSE(inf.HasSynced());
}

TEST(InformerTest, BackgroundLoopResumesAndRelistsOnGone) {
  FakeClient fc;
  Informer inf(*fc.client, kPods, {.ns = "ns"});
  Recorder rec;
  inf.AddEventHandler(rec.Handler());
  // list -> watch (1 event, normal end) -> watch (410) -> relist -> watch (parks until Stop).
  fc.fake->Push("GET", "/pods?limit", J(200, PodList("5", {Pod("a", "5")})));
  fc.fake->Push("GET", "watch=true&resourceVersion=5&", J(200, Ev("ADDED", Pod("b", "6"))));
  fc.fake->Push("GET", "watch=true&resourceVersion=6&", J(410, R"({"reason":"Gone"})"));
  fc.fake->Push("GET", "/pods?limit", J(200, PodList("20", {Pod("b", "6"), Pod("c", "19")})));
  inf.Start();
  ASSERT_TRUE(inf.WaitForSync(nullptr));
  std::vector<std::string> got = rec.WaitFor(4);
  EXPECT_EQ(got, (std::vector<std::string>{"add:a@5", "add:b@6", "delete:a@5", "add:c@19"}));
  fc.fake->WaitForRequests(5);  // the watch from the relisted version is parked
  EXPECT_EQ(inf.Size(), 2u);
  inf.Stop();
  auto reqs = fc.fake->requests();
  ASSERT_GE(reqs.size(), 5u);
  EXPECT_NE(reqs[4].url.find("watch=true&resourceVersion=20&"), std::string::npos) << reqs[4].url;
  EXPECT_EQ(fc.fake->pending(), 0u);
  EXPECT_TRUE(fc.clock.sleeps().empty());  // no backoff: 410 relists at once
}

TEST(InformerTest, BackgroundLoopBacksOffOnErrors) {
  FakeClient fc(FakeClient::DefaultConfig(), RetryPolicy{.max_attempts = 1});
  Informer inf(*fc.client, kPods, {.initial_backoff = std::chrono::milliseconds(200)});
  fc.fake->Push("GET", "/api/v1/pods?limit", J(500, "{}"));
  fc.fake->Push("GET", "/api/v1/pods?limit", J(500, "{}"));
  fc.fake->Push("GET", "/api/v1/pods?limit", J(200, PodList("1", {})));
  inf.Start();
  ASSERT_TRUE(inf.WaitForSync(nullptr));
  inf.Stop();
  std::vector<Duration> expected = {std::chrono::milliseconds(200), std::chrono::milliseconds(400)};
  EXPECT_EQ(fc.clock.sleeps(), expected);
}

TEST(InformerTest, StopAndRestartRelistsAndDiffs) {
  FakeClient fc;
  Informer inf(*fc.client, kNodes, {});
  Recorder rec;
  inf.AddEventHandler(rec.Handler());
  fc.fake->Push("GET", "/api/v1/nodes?limit",
                J(200, R"({"metadata":{"resourceVersion":"3"},"items":[{"metadata":{"name":"n1",)"
                       R"("resourceVersion":"3"}}]})"));
  inf.Start();
  ASSERT_TRUE(inf.WaitForSync(nullptr));
  fc.fake->WaitForRequests(2);  // parked watch
  inf.Stop();
  EXPECT_EQ(rec.Take(), (std::vector<std::string>{"add:n1@3"}));
  ASSERT_NE(inf.Get("n1"), nullptr);  // the cache survives Stop

  fc.fake->Push("GET", "/api/v1/nodes?limit",
                J(200, R"({"metadata":{"resourceVersion":"9"},"items":[{"metadata":{"name":"n2",)"
                       R"("resourceVersion":"8"}}]})"));
  inf.Start();
  EXPECT_EQ(rec.WaitFor(2), (std::vector<std::string>{"delete:n1@3", "add:n2@8"}));
  fc.fake->WaitForRequests(4);
  inf.Stop();
  EXPECT_EQ(inf.LastResourceVersion(), "9");
  EXPECT_EQ(inf.Get("n1"), nullptr);
}

TEST(InformerTest, ImmediatelyClosedWatchesBackOff) {
  FakeClient fc;
  Informer inf(*fc.client, kPods, {.initial_backoff = std::chrono::milliseconds(100)});
  fc.fake->Push("GET", "/api/v1/pods?limit", J(200, PodList("1", {})));
  fc.fake->Push("GET", "watch=true", J(200, ""));
  fc.fake->Push("GET", "watch=true", J(200, ""));
  inf.Start();
  fc.fake->WaitForRequests(4);  // list, two empty watches, the parked third watch
  inf.Stop();
  std::vector<Duration> expected = {std::chrono::milliseconds(100), std::chrono::milliseconds(200)};
  EXPECT_EQ(fc.clock.sleeps(), expected);
}

}  // namespace
}  // namespace hami::k8s
