// InProcessTransport against a running simulated API server: the same answers as over HTTP
// (auth, CRUD, conflicts, selectors with encoded characters, binding, request counts); watches
// served in process see every write and end when cancelled.
#include "sim/cluster/in_process_transport.h"

#include <gtest/gtest.h>

#include <atomic>
#include <thread>

#include "k8s/api_error.h"
#include "k8s/object.h"
#include "k8s/rest_client.h"
#include "k8s/typed.h"

namespace hami::sim {
namespace {

k8s::Object Pod(const std::string& name, const std::string& app) {
  return k8s::Object{
      {"apiVersion", "v1"},
      {"kind", "Pod"},
      {"metadata", {{"name", name}, {"labels", {{"app", app}}}}},
      {"spec", {{"containers", k8s::Object::array({{{"name", "c"}, {"image", "x"}}})}}}};
}

std::unique_ptr<k8s::RestClient> InProcessClient(const ApiServer& server, std::string token) {
  static hami::RealClock clock;
  k8s::RestConfig cfg;
  cfg.server = server.url();
  cfg.bearer_token = std::move(token);
  cfg.qps = 0;
  return std::make_unique<k8s::RestClient>(cfg, std::make_unique<InProcessTransport>(server),
                                           clock);
}

TEST(InProcessTransportTest, ServesLikeTheNetwork) {
  ApiServerOptions opts;
  opts.token = "secret";
  auto server = ApiServer::Start(opts).value();
  auto client = InProcessClient(*server, "secret");

  auto created = client->Create(k8s::kPods, "default", Pod("a.b", "web"));
  ASSERT_TRUE(created.ok()) << created.status().ToString();
  ASSERT_TRUE(client->Create(k8s::kPods, "default", Pod("c", "db")).ok());
  auto got = client->Get(k8s::kPods, "default", "a.b");
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ(k8s::Uid(*got), k8s::Uid(*created));

  ASSERT_TRUE(k8s::PatchPodAnnotations(*client, "default", "a.b", {{"k", "v w"}}).ok());
  got = client->Get(k8s::kPods, "default", "a.b");
  EXPECT_EQ(k8s::GetString(*got, "/metadata/annotations/k"), "v w");

  k8s::Object stale = *created;  // the resourceVersion before the patch
  EXPECT_TRUE(k8s::IsConflict(client->Update(k8s::kPods, "default", stale).status()));

  k8s::ListOptions sel;
  sel.label_selector = "app in (web, x)";  // spaces, commas and parentheses in the query
  auto list = client->List(k8s::kPods, "default", sel);
  ASSERT_TRUE(list.ok()) << list.status().ToString();
  ASSERT_EQ((*list)["items"].size(), 1u);
  EXPECT_EQ(k8s::Name((*list)["items"][0]), "a.b");

  ASSERT_TRUE(k8s::BindPod(*client, "default", "c",
                           k8s::Uid(*client->Get(k8s::kPods, "default", "c")), "node-1")
                  .ok());
  sel = {};
  sel.field_selector = "spec.nodeName=node-1";
  list = client->List(k8s::kPods, "", sel);
  ASSERT_TRUE(list.ok());
  ASSERT_EQ((*list)["items"].size(), 1u);
  EXPECT_EQ(k8s::Name((*list)["items"][0]), "c");

  EXPECT_TRUE(k8s::IsNotFound(client->Get(k8s::kPods, "default", "missing").status()));
  auto denied = InProcessClient(*server, "wrong")->Get(k8s::kPods, "default", "c");
  EXPECT_EQ(denied.status().code(), StatusCode::kPermissionDenied) << denied.status().ToString();

  std::map<std::string, uint64_t> counts = server->RequestCounts();
  EXPECT_EQ(counts["PATCH pods"], 1u);
  EXPECT_EQ(counts["POST pods/binding"], 1u);
  server->Stop();
}

TEST(InProcessTransportTest, WatchesRunInProcessAndSeeEveryWrite) {
  auto server = ApiServer::Start({}).value();
  auto client = InProcessClient(*server, "");
  auto first = client->Create(k8s::kPods, "default", Pod("p", "web"));
  ASSERT_TRUE(first.ok());
  k8s::ListOptions from;
  from.resource_version = k8s::ResourceVersion(*first);
  hami::Cancellation cancel;
  std::string seen;
  std::thread writer([&] {
    (void)k8s::PatchPodAnnotations(*client, "default", "p", {{"phase", "two"}});
  });
  Status s = client->Watch(
      k8s::kPods, "default", from,
      [&](const k8s::WatchEvent& ev) {
        if (ev.type != k8s::WatchEvent::Type::kModified) return true;
        seen = k8s::GetString(*ev.object, "/metadata/annotations/phase");
        cancel.Cancel();
        return false;
      },
      &cancel);
  writer.join();
  EXPECT_TRUE(s.ok() || s.code() == StatusCode::kCancelled) << s.ToString();
  EXPECT_EQ(seen, "two");
  EXPECT_GE(server->RequestCounts()["WATCH pods"], 1u);
  server->Stop();
}

TEST(InProcessTransportTest, CancellingAQuietWatchEndsIt) {
  auto server = ApiServer::Start({}).value();
  auto client = InProcessClient(*server, "");
  hami::Cancellation cancel;
  std::atomic<bool> opened{false};
  std::thread canceller([&] {
    // Cancel once the watch is registered (its request counted), with no event ever coming.
    while (server->RequestCounts()["WATCH pods"] == 0) std::this_thread::yield();
    opened = true;
    cancel.Cancel();
  });
  k8s::ListOptions from;
  from.resource_version = std::to_string(server->revision());
  Status s = client->Watch(
      k8s::kPods, "default", from, [](const k8s::WatchEvent&) { return true; }, &cancel);
  canceller.join();
  EXPECT_TRUE(opened.load());
  EXPECT_EQ(s.code(), StatusCode::kCancelled) << s.ToString();
  server->Stop();
}

}  // namespace
}  // namespace hami::sim
