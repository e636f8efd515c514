#include "k8s/rest_client.h"

#include <gtest/gtest.h>

#include "k8s/api_error.h"
#include "k8s/test_util.h"

namespace hami::k8s {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;
using testing::FakeClient;
using testing::Header;

HttpResponse J(int status, std::string body,
               std::vector<std::pair<std::string, std::string>> headers = {}) {
  return FakeTransport::Json(status, std::move(body), std::move(headers));
}

Result<HttpResponse> UnknownStatusForTest() {
  return Status(StatusCode::kUnknown, "connection reset after send");
}

TEST(ResourcePathTest, CoreGroupAndSubresources) {
  EXPECT_EQ(ResourcePath(kPods, "ns1", "p", "binding"), "/api/v1/namespaces/ns1/pods/p/binding");
  EXPECT_EQ(ResourcePath(kPods, ""), "/api/v1/pods");
  EXPECT_EQ(ResourcePath(kNodes, "ignored", "n"), "/api/v1/nodes/n");
  EXPECT_EQ(ResourcePath(kLeases, "kube-system", "l"),
            "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/l");
  EXPECT_EQ(UrlEncode("app=a,b in (x)"), "app%3Da%2Cb%20in%20%28x%29");
}

TEST(RestClientTest, GetParsesObjectAndSendsHeaders) {
  FakeClient fc;
  fc.fake->Push("GET", "/api/v1/namespaces/default/pods/p1",
                J(200, R"({"metadata":{"name":"p1","resourceVersion":"7"}})"));
  Result<Object> pod = fc.client->Get(kPods, "default", "p1");
  ASSERT_TRUE(pod.ok()) << pod.status().ToString();
  EXPECT_EQ(ResourceVersion(*pod), "7");
  HttpRequest req = fc.fake->requests().at(0);
  EXPECT_EQ(req.url, "https://api.test:6443/api/v1/namespaces/default/pods/p1");
  EXPECT_EQ(Header(req, "Accept"), "application/json");
  EXPECT_EQ(req.timeout, milliseconds(30000));
}

TEST(RestClientTest, ErrorsMapToDistinguishableStatuses) {
  FakeClient fc;
  fc.fake->Push(
      "GET", "/pods/a",
      J(404, R"({"kind":"Status","reason":"NotFound","message":"pods \"a\" not found"})"));
  fc.fake->Push("POST", "/pods", J(409, R"({"reason":"AlreadyExists","message":"exists"})"));
  fc.fake->Push("PUT", "/pods/a", J(409, R"({"reason":"Conflict","message":"modified"})"));
  fc.fake->Push("GET", "/pods/b", J(200, "not json"));
  Result<Object> nf = fc.client->Get(kPods, "default", "a");
  EXPECT_TRUE(IsNotFound(nf.status()));
  EXPECT_EQ(nf.status().message(), "HTTP 404 NotFound: pods \"a\" not found");
  Object pod = {{"metadata", {{"name", "a"}, {"resourceVersion", "3"}}}};
  EXPECT_TRUE(IsAlreadyExists(fc.client->Create(kPods, "default", pod).status()));
  Status conflict = fc.client->Update(kPods, "default", pod).status();
  EXPECT_TRUE(IsConflict(conflict)) << conflict.ToString();
  EXPECT_FALSE(IsConflict(nf.status()));
  EXPECT_EQ(fc.client->Get(kPods, "default", "b").status().code(), StatusCode::kDataLoss);
  // The PUT carried the object (and so its resourceVersion precondition).
  HttpRequest put = fc.fake->requests().at(2);
  EXPECT_EQ(put.url, "https://api.test:6443/api/v1/namespaces/default/pods/a");
  EXPECT_EQ(ParseObject(put.body)->at("metadata").at("resourceVersion"), "3");
}

TEST(RestClientTest, ListQueryAndPagination) {
  FakeClient fc;
  fc.fake->Push(
      "GET", "continue=",
      J(200, R"({"metadata":{"resourceVersion":"11"},"items":[{"metadata":{"name":"c"}}]})"));
  fc.fake->Push("GET", "/api/v1/pods?",
                J(200, R"({"metadata":{"resourceVersion":"10","continue":"tok/1"},
                           "items":[{"metadata":{"name":"a"}},{"metadata":{"name":"b"}}]})"));
  ListOptions o;
  o.label_selector = "app=x";
  o.field_selector = "spec.nodeName=n1";
  o.limit = 2;
  Result<Object> list = fc.client->ListAll(kPods, "", o);
  ASSERT_TRUE(list.ok()) << list.status().ToString();
  EXPECT_EQ(list->at("items").size(), 3u);
  EXPECT_EQ(ResourceVersion(*list), "10");
  EXPECT_FALSE(list->at("metadata").contains("continue"));
  auto reqs = fc.fake->requests();
  ASSERT_EQ(reqs.size(), 2u);
  EXPECT_EQ(reqs[0].url,
            "https://api.test:6443/api/v1/pods?labelSelector=app%3Dx&fieldSelector=spec.nodeName%"
            "3Dn1&limit=2");
  EXPECT_NE(reqs[1].url.find("continue=tok%2F1"), std::string::npos) << reqs[1].url;
}

TEST(RestClientTest, PatchContentTypes) {
  FakeClient fc;
  for (int i = 0; i < 3; ++i) fc.fake->Push("PATCH", "/nodes/n", J(200, "{}"));
  ASSERT_TRUE(fc.client->Patch(kNodes, "", "n", PatchType::kMerge, "{}").ok());
  ASSERT_TRUE(fc.client->Patch(kNodes, "", "n", PatchType::kJsonPatch, "[]").ok());
  ASSERT_TRUE(fc.client->Patch(kNodes, "", "n", PatchType::kStrategicMerge, "{}").ok());
  auto reqs = fc.fake->requests();
  EXPECT_EQ(Header(reqs[0], "Content-Type"), "application/merge-patch+json");
  EXPECT_EQ(Header(reqs[1], "Content-Type"), "application/json-patch+json");
  EXPECT_EQ(Header(reqs[2], "Content-Type"), "application/strategic-merge-patch+json");
  EXPECT_EQ(reqs[1].body, "[]");
}

TEST(RestClientTest, DeleteWithPreconditions) {
  FakeClient fc;
  fc.fake->Push("DELETE", "/pods/p", J(200, R"({"kind":"Status","status":"Success"})"));
  fc.fake->Push("DELETE", "/pods/p", J(409, R"({"reason":"Conflict"})"));
  DeleteOptions d;
  d.precondition_resource_version = "5";
  d.precondition_uid = "u1";
  d.grace_period_seconds = 0;
  EXPECT_TRUE(fc.client->Delete(kPods, "ns", "p", d).ok());
  EXPECT_TRUE(IsConflict(fc.client->Delete(kPods, "ns", "p", d)));
  Object body = *ParseObject(fc.fake->requests().at(0).body);
  EXPECT_EQ(body["preconditions"]["resourceVersion"], "5");
  EXPECT_EQ(body["preconditions"]["uid"], "u1");
  EXPECT_EQ(body["gracePeriodSeconds"], 0);
}

// --- Retries ---

TEST(RetryTest, IdempotentGetRetriesServerErrorsWithExponentialBackoff) {
  FakeClient fc;
  fc.fake->Push("GET", "/nodes/n", J(503, "{}"));
  fc.fake->Push("GET", "/nodes/n", UnknownStatusForTest());
  fc.fake->Push("GET", "/nodes/n", J(500, "{}"));
  fc.fake->Push("GET", "/nodes/n", J(200, R"({"metadata":{"name":"n"}})"));
  ASSERT_TRUE(fc.client->Get(kNodes, "", "n").ok());
  std::vector<Duration> expected = {milliseconds(100), milliseconds(200), milliseconds(400)};
  EXPECT_EQ(fc.clock.sleeps(), expected);
}

TEST(RetryTest, GivesUpAfterMaxAttempts) {
  RetryPolicy p;
  p.max_attempts = 3;
  FakeClient fc(FakeClient::DefaultConfig(), p);
  for (int i = 0; i < 5; ++i) fc.fake->Push("GET", "/nodes/n", J(502, "{}"));
  Result<Object> r = fc.client->Get(kNodes, "", "n");
  EXPECT_EQ(r.status().code(), StatusCode::kUnavailable);
  EXPECT_EQ(fc.fake->requests().size(), 3u);
  EXPECT_EQ(fc.fake->pending(), 2u);
}

TEST(RetryTest, BackoffIsCapped) {
  RetryPolicy p;
  p.max_attempts = 6;
  p.initial_backoff = milliseconds(1000);
  p.max_backoff = milliseconds(3000);
  FakeClient fc(FakeClient::DefaultConfig(), p);
  for (int i = 0; i < 6; ++i) fc.fake->Push("GET", "/nodes/n", J(500, "{}"));
  (void)fc.client->Get(kNodes, "", "n");
  std::vector<Duration> expected = {seconds(1), seconds(2), seconds(3), seconds(3), seconds(3)};
  EXPECT_EQ(fc.clock.sleeps(), expected);
}

TEST(RetryTest, TooManyRequestsHonoursRetryAfterEvenForPost) {
  FakeClient fc;
  fc.fake->Push("POST", "/pods", J(429, "{}", {{"retry-after", "7"}}));
  fc.fake->Push("POST", "/pods", J(201, R"({"metadata":{"name":"p"}})"));
  ASSERT_TRUE(fc.client->Create(kPods, "ns", Object{{"metadata", {{"name", "p"}}}}).ok());
  std::vector<Duration> expected = {seconds(7)};
  EXPECT_EQ(fc.clock.sleeps(), expected);
}

TEST(RetryTest, RetryAfterIsCapped) {
  FakeClient fc;
  fc.fake->Push("GET", "/nodes/n", J(503, "{}", {{"retry-after", "100000"}}));
  fc.fake->Push("GET", "/nodes/n", J(200, "{}"));
  ASSERT_TRUE(fc.client->Get(kNodes, "", "n").ok());
  std::vector<Duration> expected = {seconds(60)};
  EXPECT_EQ(fc.clock.sleeps(), expected);
}

TEST(RetryTest, NonIdempotentRequestsAreNotRetriedUnsafely) {
  FakeClient fc;
  // A 500 without Retry-After: the POST may have been applied.
  fc.fake->Push("POST", "/binding", J(500, R"({"message":"boom"})"));
  Status s =
      fc.client->Create(kPods, "ns", Object{{"metadata", {{"name", "p"}}}}, "binding").status();
  EXPECT_EQ(s.code(), StatusCode::kUnavailable);
  // The connection dropped after sending: maybe applied.
  fc.fake->Push("PATCH", "/pods/p", UnknownStatusForTest());
  EXPECT_EQ(fc.client->Patch(kPods, "ns", "p", PatchType::kMerge, "{}").status().code(),
            StatusCode::kUnknown);
  EXPECT_EQ(fc.fake->requests().size(), 2u);
  EXPECT_TRUE(fc.clock.sleeps().empty());
}

TEST(RetryTest, NonIdempotentRetriedWhenNeverSentOrServerAsks) {
  FakeClient fc;
  fc.fake->Push("POST", "/pods", Result<HttpResponse>(UnavailableError("connection refused")));
  fc.fake->Push("POST", "/pods", J(503, "{}", {{"retry-after", "1"}}));
  fc.fake->Push("POST", "/pods", J(201, "{}"));
  EXPECT_TRUE(fc.client->Create(kPods, "ns", Object{{"metadata", {{"name", "p"}}}}).ok());
  EXPECT_EQ(fc.fake->requests().size(), 3u);
  std::vector<Duration> expected = {milliseconds(100), seconds(1)};
  EXPECT_EQ(fc.clock.sleeps(), expected);
}

TEST(RetryTest, ClientErrorsAreNotRetried) {
  FakeClient fc;
  fc.fake->Push("GET", "/nodes/n", J(403, R"({"reason":"Forbidden"})"));
  EXPECT_EQ(fc.client->Get(kNodes, "", "n").status().code(), StatusCode::kPermissionDenied);
  EXPECT_EQ(fc.fake->requests().size(), 1u);
}

TEST(QpsTest, RequestsBeyondBurstWaitForTokens) {
  RestConfig cfg = FakeClient::DefaultConfig();
  cfg.qps = 10;
  cfg.burst = 2;
  FakeClient fc(cfg);
  for (int i = 0; i < 4; ++i) fc.fake->Push("GET", "/nodes/n", J(200, "{}"));
  for (int i = 0; i < 4; ++i) ASSERT_TRUE(fc.client->Get(kNodes, "", "n").ok());
  // Two immediate (burst), then one every 100 ms.
  std::vector<Duration> expected = {milliseconds(100), milliseconds(100)};
  EXPECT_EQ(fc.clock.sleeps(), expected);
}

// --- Watch ---

constexpr char kAdded[] =
    R"({"type":"ADDED","object":{"metadata":{"name":"a","namespace":"ns","resourceVersion":"11"}}})";
constexpr char kBookmark[] =
    R"({"type":"BOOKMARK","object":{"metadata":{"resourceVersion":"15"}}})";

TEST(WatchTest, StreamsEventsSplitAcrossChunks) {
  FakeClient fc;
  std::string stream = std::string(kAdded) + "\n" + kBookmark + "\n";
  // Split mid-line and at odd places.
  std::vector<std::string> chunks = {stream.substr(0, 10), stream.substr(10, 70),
                                     stream.substr(80)};
  fc.fake->Push("GET", "watch=true", J(200, ""), chunks);
  std::vector<std::string> seen;
  ListOptions o;
  o.resource_version = "10";
  o.timeout_seconds = 30;
  Status s = fc.client->Watch(kPods, "ns", o, [&](const WatchEvent& ev) {
    seen.push_back(std::string(WatchEventTypeName(ev.type)) + ":" + ResourceVersion(*ev.object));
    return true;
  });
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(seen, (std::vector<std::string>{"ADDED:11", "BOOKMARK:15"}));
  HttpRequest req = fc.fake->requests().at(0);
  EXPECT_EQ(req.url,
            "https://api.test:6443/api/v1/namespaces/ns/pods?watch=true&resourceVersion=10&"
            "allowWatchBookmarks=true&timeoutSeconds=30");
  // The server ends it after 30 s; the client gives up on a silent one 15 s (half) later.
  EXPECT_EQ(req.timeout, milliseconds(45000));
}

TEST(WatchTest, GoneAsErrorEventOrHttpStatus) {
  FakeClient fc;
  fc.fake->Push("GET", "watch=true",
                J(200, std::string(kAdded) +
                           "\n{\"type\":\"ERROR\",\"object\":{\"kind\":\"Status\",\"code\":410,"
                           "\"reason\":\"Expired\",\"message\":\"too old resource version\"}}\n" +
                           kBookmark + "\n"));
  fc.fake->Push("GET", "watch=true", J(410, R"({"reason":"Gone"})"));
  int events = 0;
  auto count = [&](const WatchEvent&) {
    ++events;
    return true;
  };
  Status s1 = fc.client->Watch(kPods, "", {}, count);
  EXPECT_TRUE(IsGone(s1)) << s1.ToString();
  EXPECT_EQ(events, 1);  // nothing after the ERROR is delivered
  EXPECT_TRUE(IsGone(fc.client->Watch(kPods, "", {}, count)));
}

TEST(WatchTest, MalformedLineIsDataLoss) {
  FakeClient fc;
  fc.fake->Push("GET", "watch=true", J(200, "{\"type\":\"ADDED\"}\n"));
  Status s = fc.client->Watch(kPods, "", {}, [](const WatchEvent&) { return true; });
  EXPECT_EQ(s.code(), StatusCode::kDataLoss);
}

TEST(WatchTest, HandlerCanStopTheStream) {
  FakeClient fc;
  fc.fake->Push("GET", "watch=true", J(200, std::string(kAdded) + "\n" + kAdded + "\n"));
  int n = 0;
  Status s = fc.client->Watch(kPods, "", {}, [&](const WatchEvent&) {
    ++n;
    return false;
  });
  EXPECT_TRUE(s.ok());
  EXPECT_EQ(n, 1);
}

TEST(WatchTest, CancelledWatchReportsCancelled) {
  FakeClient fc;
  Cancellation cancel;
  cancel.Cancel();
  Status s = fc.client->Watch(
      kPods, "", {}, [](const WatchEvent&) { return true; }, &cancel);
  EXPECT_EQ(s.code(), StatusCode::kCancelled);
}

}  // namespace
}  // namespace hami::k8s
