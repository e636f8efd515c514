// The real API client (hami_k8s on its socket transport) against the simulated API server
// (hami_sim_apiserver) in the same process: CRUD and resourceVersion conflicts, watch resumption,
// 410 Gone and informer relists, bearer-token/TLS variants, and pod binding. Hermetic: port 0,
// temp dirs, no sleeps.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "common/status.h"
#include "k8s/api_error.h"
#include "k8s/config.h"
#include "k8s/informer.h"
#include "k8s/object.h"
#include "k8s/rest_client.h"
#include "k8s/typed.h"
#include "sim/apiserver/api_server.h"

namespace hami::k8s {
namespace {

class TempDir {
 public:
  TempDir() {
    std::string tmpl = (std::filesystem::temp_directory_path() / "hami_k8s_api_XXXXXX").string();
    const char* made = ::mkdtemp(tmpl.data());
    path_ = made == nullptr ? std::string() : std::string(made);
  }
  ~TempDir() {
    if (!path_.empty()) {
      std::error_code ec;
      std::filesystem::remove_all(path_, ec);
    }
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

std::unique_ptr<sim::ApiServer> StartServer(sim::ApiServerOptions options = {}) {
  Result<std::unique_ptr<sim::ApiServer>> server = sim::ApiServer::Start(std::move(options));
  EXPECT_TRUE(server.ok()) << server.status().ToString();
  if (!server.ok()) return nullptr;
  return std::move(server).value();
}

// A client configured from the server's own kubeconfig.
std::unique_ptr<RestClient> ClientFor(const sim::ApiServer& server, const TempDir& dir) {
  Result<RestConfig> cfg = ParseKubeconfig(server.Kubeconfig(), dir.path());
  EXPECT_TRUE(cfg.ok()) << cfg.status().ToString();
  if (!cfg.ok()) return nullptr;
  cfg.value().timeout = std::chrono::milliseconds(10000);
  Result<std::unique_ptr<RestClient>> client = RestClient::Create(cfg.value());
  EXPECT_TRUE(client.ok()) << client.status().ToString();
  if (!client.ok()) return nullptr;
  return std::move(client).value();
}

Object MakePod(const std::string& name, const std::string& label = "v1") {
  return Object{
      {"apiVersion", "v1"},
      {"kind", "Pod"},
      {"metadata", {{"name", name}, {"namespace", "default"}, {"labels", {{"l", label}}}}},
      {"spec", {{"containers", Object::array({{{"name", "c"}, {"image", "busybox"}}})}}}};
}

std::set<std::string> Keys(const Object& list) {
  std::set<std::string> out;
  if (!list.contains("items") || !list["items"].is_array()) return out;
  for (const Object& item : list["items"]) out.insert(ObjectKey(item));
  return out;
}

// Keys of the informer's cache mapped to their resourceVersions, and the same for a server list.
std::set<std::pair<std::string, std::string>> Versions(const std::vector<ObjectPtr>& objs) {
  std::set<std::pair<std::string, std::string>> out;
  for (const ObjectPtr& o : objs) out.emplace(ObjectKey(*o), ResourceVersion(*o));
  return out;
}
std::set<std::pair<std::string, std::string>> Versions(const Object& list) {
  std::set<std::pair<std::string, std::string>> out;
  for (const Object& item : list["items"]) out.emplace(ObjectKey(item), ResourceVersion(item));
  return out;
}

TEST(ClientApiServerTest, PodCrudAndStaleUpdateConflict) {
  TempDir dir;
  auto server = StartServer();
  ASSERT_NE(server, nullptr);
  auto client = ClientFor(*server, dir);
  ASSERT_NE(client, nullptr);

  Result<Object> created = client->Create(kPods, "default", MakePod("p1"));
  ASSERT_TRUE(created.ok()) << created.status().ToString();
  EXPECT_EQ(Name(created.value()), "p1");
  EXPECT_FALSE(ResourceVersion(created.value()).empty());
  EXPECT_FALSE(Uid(created.value()).empty());

  Result<Object> again = client->Create(kPods, "default", MakePod("p1"));
  ASSERT_FALSE(again.ok());
  EXPECT_TRUE(IsAlreadyExists(again.status())) << again.status().ToString();

  Result<Object> got = client->Get(kPods, "default", "p1");
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ(Uid(got.value()), Uid(created.value()));
  EXPECT_EQ(GetString(got.value(), "/metadata/labels/l"), "v1");

  Result<Object> list = client->List(kPods, "default");
  ASSERT_TRUE(list.ok()) << list.status().ToString();
  EXPECT_EQ(Keys(list.value()), std::set<std::string>{"default/p1"});

  // Update from the fresh copy succeeds and bumps the resourceVersion.
  Object stale = got.value();
  Object fresh = got.value();
  fresh["metadata"]["labels"]["l"] = "v2";
  Result<Object> updated = client->Update(kPods, "default", fresh);
  ASSERT_TRUE(updated.ok()) << updated.status().ToString();
  EXPECT_NE(ResourceVersion(updated.value()), ResourceVersion(stale));
  EXPECT_EQ(GetString(updated.value(), "/metadata/labels/l"), "v2");

  // The stale copy's resourceVersion no longer matches: 409 -> IsConflict, nothing written.
  stale["metadata"]["labels"]["l"] = "v3";
  Result<Object> conflict = client->Update(kPods, "default", stale);
  ASSERT_FALSE(conflict.ok());
  EXPECT_TRUE(IsConflict(conflict.status())) << conflict.status().ToString();
  Result<Object> after = client->Get(kPods, "default", "p1");
  ASSERT_TRUE(after.ok()) << after.status().ToString();
  EXPECT_EQ(GetString(after.value(), "/metadata/labels/l"), "v2");

  // A merge patch applies on top of the current state.
  Result<Object> patched = client->Patch(kPods, "default", "p1", PatchType::kMerge,
                                         R"({"metadata":{"annotations":{"a":"b"}}})");
  ASSERT_TRUE(patched.ok()) << patched.status().ToString();
  EXPECT_EQ(GetString(patched.value(), "/metadata/annotations/a"), "b");
  EXPECT_EQ(GetString(patched.value(), "/metadata/labels/l"), "v2");

  // A delete with a stale precondition is a conflict too; the plain delete removes the pod.
  Status stale_delete =
      client->Delete(kPods, "default", "p1",
                     DeleteOptions{.precondition_resource_version = ResourceVersion(stale)});
  EXPECT_TRUE(IsConflict(stale_delete)) << stale_delete.ToString();
  Status deleted = client->Delete(kPods, "default", "p1");
  ASSERT_TRUE(deleted.ok()) << deleted.ToString();

  Result<Object> gone = client->Get(kPods, "default", "p1");
  ASSERT_FALSE(gone.ok());
  EXPECT_TRUE(IsNotFound(gone.status())) << gone.status().ToString();
  Status delete_again = client->Delete(kPods, "default", "p1");
  EXPECT_TRUE(IsNotFound(delete_again)) << delete_again.ToString();
}

TEST(ClientApiServerTest, WatchResumedFromResourceVersionGetsOnlyLaterEvents) {
  TempDir dir;
  auto server = StartServer();
  ASSERT_NE(server, nullptr);
  auto client = ClientFor(*server, dir);
  ASSERT_NE(client, nullptr);

  Result<Object> a = client->Create(kPods, "default", MakePod("a"));
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  Result<Object> early = client->Create(kPods, "default", MakePod("early"));
  ASSERT_TRUE(early.ok()) << early.status().ToString();
  const std::string resume_rv = ResourceVersion(early.value());

  Object a_changed = a.value();
  a_changed["metadata"]["labels"]["l"] = "changed";
  Result<Object> a_updated = client->Update(kPods, "default", a_changed);
  ASSERT_TRUE(a_updated.ok()) << a_updated.status().ToString();
  Result<Object> b = client->Create(kPods, "default", MakePod("b"));
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  ASSERT_TRUE(client->Delete(kPods, "default", "early").ok());

  struct Seen {
    WatchEvent::Type type;
    std::string name;
    std::string rv;
  };
  std::vector<Seen> seen;
  ListOptions lo;
  lo.resource_version = resume_rv;
  lo.allow_watch_bookmarks = false;
  lo.timeout_seconds = 30;  // safety net only: the handler ends the watch
  Status s = client->Watch(kPods, "default", lo, [&](const WatchEvent& ev) {
    seen.push_back({ev.type, Name(*ev.object), ResourceVersion(*ev.object)});
    return seen.size() < 3;
  });
  ASSERT_TRUE(s.ok()) << s.ToString();
  ASSERT_EQ(seen.size(), 3u);
  EXPECT_EQ(seen[0].type, WatchEvent::Type::kModified);
  EXPECT_EQ(seen[0].name, "a");
  EXPECT_EQ(seen[0].rv, ResourceVersion(a_updated.value()));
  EXPECT_EQ(seen[1].type, WatchEvent::Type::kAdded);
  EXPECT_EQ(seen[1].name, "b");
  EXPECT_EQ(seen[2].type, WatchEvent::Type::kDeleted);
  EXPECT_EQ(seen[2].name, "early");
  for (const Seen& e : seen) {
    EXPECT_GT(std::stoll(e.rv), std::stoll(resume_rv)) << e.name;
  }
}

// Both ways the server refuses a watch from a compacted resourceVersion: HTTP 410, or HTTP 200
// with a single ERROR event carrying code 410.
class ExpiredWatchTest : public ::testing::TestWithParam<bool> {};

TEST_P(ExpiredWatchTest, GoneThenInformerRelistConverges) {
  TempDir dir;
  sim::ApiServerOptions opts;
  opts.history_window = 4;
  opts.expired_watch_as_error_event = GetParam();
  auto server = StartServer(opts);
  ASSERT_NE(server, nullptr);
  auto client = ClientFor(*server, dir);
  ASSERT_NE(client, nullptr);

  for (const char* name : {"keep", "change", "remove"}) {
    ASSERT_TRUE(client->Create(kPods, "default", MakePod(name)).ok()) << name;
  }

  InformerOptions io;
  io.ns = "default";
  io.watch_timeout = std::chrono::seconds(30);  // safety net: the watch below must end at once
  Informer informer(*client, kPods, io);
  std::vector<std::string> added;
  std::vector<std::string> updated;
  std::vector<std::string> deleted;
  informer.AddEventHandler({
      .on_add = [&](const ObjectPtr& o) { added.push_back(Name(*o)); },
      .on_update = [&](const ObjectPtr&, const ObjectPtr& o) { updated.push_back(Name(*o)); },
      .on_delete = [&](const ObjectPtr& o) { deleted.push_back(Name(*o)); },
  });
  // Driven step by step on this thread (no background loop), so the ordering is deterministic.
  Status listed = informer.Relist();
  ASSERT_TRUE(listed.ok()) << listed.ToString();
  ASSERT_TRUE(informer.HasSynced());
  EXPECT_EQ(informer.Size(), 3u);
  const std::string stale_rv = informer.LastResourceVersion();
  ASSERT_FALSE(stale_rv.empty());
  added.clear();

  // More changes than the history window retains.
  Result<Object> change = client->Get(kPods, "default", "change");
  ASSERT_TRUE(change.ok()) << change.status().ToString();
  Object changed = change.value();
  changed["metadata"]["labels"]["l"] = "v2";
  ASSERT_TRUE(client->Update(kPods, "default", changed).ok());
  ASSERT_TRUE(client->Delete(kPods, "default", "remove").ok());
  for (int i = 0; i < 6; ++i) {
    ASSERT_TRUE(client->Create(kPods, "default", MakePod("new-" + std::to_string(i))).ok()) << i;
  }

  // The raw client reports Gone.
  ListOptions lo;
  lo.resource_version = stale_rv;
  lo.timeout_seconds = 30;
  int events = 0;
  Status raw = client->Watch(kPods, "default", lo, [&](const WatchEvent&) {
    ++events;
    return false;
  });
  EXPECT_TRUE(IsGone(raw)) << raw.ToString();
  EXPECT_EQ(events, 0);

  // So does the informer's watch from its (stale) resume point...
  Status watched = informer.WatchOnce(nullptr);
  EXPECT_TRUE(IsGone(watched)) << watched.ToString();
  EXPECT_EQ(informer.LastResourceVersion(), stale_rv);

  // ...and a relist converges on the server's state, delivering the differences.
  Status relisted = informer.Relist();
  ASSERT_TRUE(relisted.ok()) << relisted.ToString();
  Result<Object> truth = client->ListAll(kPods, "default");
  ASSERT_TRUE(truth.ok()) << truth.status().ToString();
  EXPECT_EQ(Versions(informer.List()), Versions(truth.value()));
  EXPECT_EQ(informer.Size(), 8u);
  EXPECT_EQ(informer.Get("default/remove"), nullptr);
  ASSERT_NE(informer.Get("default/change"), nullptr);
  EXPECT_EQ(GetString(*informer.Get("default/change"), "/metadata/labels/l"), "v2");
  EXPECT_EQ(deleted, std::vector<std::string>{"remove"});
  EXPECT_EQ(std::set<std::string>(added.begin(), added.end()),
            (std::set<std::string>{"new-0", "new-1", "new-2", "new-3", "new-4", "new-5"}));
  EXPECT_NE(std::find(updated.begin(), updated.end(), "change"), updated.end());
  EXPECT_NE(informer.LastResourceVersion(), stale_rv);
}

TEST_P(ExpiredWatchTest, RunningInformerSyncsAndTracksServer) {
  // The background loop: WaitForSync, then converge on later changes (polled with a deadline).
  TempDir dir;
  sim::ApiServerOptions opts;
  opts.history_window = 4;
  opts.expired_watch_as_error_event = GetParam();
  auto server = StartServer(opts);
  ASSERT_NE(server, nullptr);
  auto client = ClientFor(*server, dir);
  ASSERT_NE(client, nullptr);
  ASSERT_TRUE(client->Create(kPods, "default", MakePod("first")).ok());

  InformerOptions io;
  io.ns = "default";
  io.initial_backoff = std::chrono::milliseconds(20);
  io.max_backoff = std::chrono::milliseconds(200);
  Informer informer(*client, kPods, io);
  informer.Start();
  Cancellation never;
  ASSERT_TRUE(informer.WaitForSync(&never));
  ASSERT_NE(informer.Get("default/first"), nullptr);

  for (int i = 0; i < 10; ++i) {
    ASSERT_TRUE(client->Create(kPods, "default", MakePod("p-" + std::to_string(i))).ok()) << i;
  }
  ASSERT_TRUE(client->Delete(kPods, "default", "first").ok());
  Result<Object> truth = client->ListAll(kPods, "default");
  ASSERT_TRUE(truth.ok()) << truth.status().ToString();
  const auto want = Versions(truth.value());

  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  Cancellation poll;
  while (Versions(informer.List()) != want && std::chrono::steady_clock::now() < deadline) {
    poll.WaitFor(std::chrono::milliseconds(10));  // polling interval, not synchronisation
  }
  EXPECT_EQ(Versions(informer.List()), want);
  informer.Stop();
}

INSTANTIATE_TEST_SUITE_P(BothForms, ExpiredWatchTest, ::testing::Values(false, true),
                         [](const ::testing::TestParamInfo<bool>& param_info) {
                           return param_info.param ? std::string("ErrorEvent")
                                                   : std::string("Http410");
                         });

TEST(ClientApiServerTest, AuthAndTlsVariants) {
  TempDir dir;
  sim::ApiServerOptions opts;
  opts.self_signed = true;
  opts.token = "s3cret-token";
  auto server = StartServer(opts);
  ASSERT_NE(server, nullptr);
  ASSERT_TRUE(server->tls());
  ASSERT_FALSE(server->ca_pem().empty());
  ASSERT_EQ(server->url().rfind("https://", 0), 0u) << server->url();

  // The kubeconfig the server writes (CA data + token) works as is, loaded from a file.
  const std::string path = dir.path() + "/kubeconfig";
  Status written = server->WriteKubeconfig(path);
  ASSERT_TRUE(written.ok()) << written.ToString();
  Result<RestConfig> loaded = LoadKubeconfigFile(path);
  ASSERT_TRUE(loaded.ok()) << loaded.status().ToString();
  const RestConfig base = loaded.value();
  EXPECT_EQ(base.server, server->url());
  EXPECT_EQ(base.bearer_token, "s3cret-token");
  EXPECT_FALSE(base.tls.ca_pem.empty());

  auto try_list = [](RestConfig cfg) -> Status {
    cfg.timeout = std::chrono::milliseconds(10000);
    Result<std::unique_ptr<RestClient>> client = RestClient::Create(cfg);
    if (!client.ok()) return client.status();
    Result<Object> list = client.value()->List(kPods, "default");
    return list.ok() ? OkStatus() : list.status();
  };

  Status good = try_list(base);
  EXPECT_TRUE(good.ok()) << good.ToString();

  // Explicit config with the server's CA and the right token.
  RestConfig manual;
  manual.server = server->url();
  manual.tls.ca_pem = server->ca_pem();
  manual.bearer_token = "s3cret-token";
  Status manual_ok = try_list(manual);
  EXPECT_TRUE(manual_ok.ok()) << manual_ok.ToString();

  // The token from a file (re-read by the client) works as well.
  RestConfig token_file = manual;
  token_file.bearer_token.clear();
  token_file.bearer_token_file = dir.path() + "/token";
  {
    std::FILE* f = std::fopen(token_file.bearer_token_file.c_str(), "w");
    ASSERT_NE(f, nullptr);
    std::fputs("s3cret-token\n", f);
    std::fclose(f);
  }
  Status file_ok = try_list(token_file);
  EXPECT_TRUE(file_ok.ok()) << file_ok.ToString();

  // Wrong token: 401 -> PermissionDenied.
  RestConfig wrong = manual;
  wrong.bearer_token = "not-the-token";
  Status denied = try_list(wrong);
  EXPECT_EQ(denied.code(), StatusCode::kPermissionDenied) << denied.ToString();
  EXPECT_NE(denied.message().find("401"), std::string::npos) << denied.ToString();

  // No token at all: 401 as well.
  RestConfig anonymous = manual;
  anonymous.bearer_token.clear();
  Status anon = try_list(anonymous);
  EXPECT_EQ(anon.code(), StatusCode::kPermissionDenied) << anon.ToString();

  // TLS without the server's CA (system trust store only): verification fails, never retried.
  RestConfig no_ca = manual;
  no_ca.tls.ca_pem.clear();
  Status untrusted = try_list(no_ca);
  EXPECT_FALSE(untrusted.ok());
  EXPECT_EQ(untrusted.code(), StatusCode::kFailedPrecondition) << untrusted.ToString();

  // insecure-skip-tls-verify: works without the CA.
  RestConfig insecure = no_ca;
  insecure.tls.insecure_skip_verify = true;
  Status insecure_ok = try_list(insecure);
  EXPECT_TRUE(insecure_ok.ok()) << insecure_ok.ToString();

  // ... but the token is still required.
  insecure.bearer_token = "not-the-token";
  Status insecure_denied = try_list(insecure);
  EXPECT_EQ(insecure_denied.code(), StatusCode::kPermissionDenied) << insecure_denied.ToString();
}

TEST(ClientApiServerTest, BindPodSetsNodeName) {
  TempDir dir;
  auto server = StartServer();
  ASSERT_NE(server, nullptr);
  auto client = ClientFor(*server, dir);
  ASSERT_NE(client, nullptr);

  Result<Object> created = client->Create(kPods, "default", MakePod("to-bind"));
  ASSERT_TRUE(created.ok()) << created.status().ToString();
  EXPECT_EQ(GetString(created.value(), "/spec/nodeName"), "");

  Status bound = BindPod(*client, "default", "to-bind", Uid(created.value()), "node-1");
  ASSERT_TRUE(bound.ok()) << bound.ToString();

  Result<Object> pod = GetPod(*client, "default", "to-bind");
  ASSERT_TRUE(pod.ok()) << pod.status().ToString();
  EXPECT_EQ(GetString(pod.value(), "/spec/nodeName"), "node-1");
  EXPECT_NE(ResourceVersion(pod.value()), ResourceVersion(created.value()));

  // A second binding of an assigned pod is refused as a conflict; the node is unchanged.
  Status rebind = BindPod(*client, "default", "to-bind", Uid(created.value()), "node-2");
  EXPECT_TRUE(IsConflict(rebind)) << rebind.ToString();
  Result<Object> still = GetPod(*client, "default", "to-bind");
  ASSERT_TRUE(still.ok()) << still.status().ToString();
  EXPECT_EQ(GetString(still.value(), "/spec/nodeName"), "node-1");

  // Binding a pod that does not exist is NotFound.
  Status missing = BindPod(*client, "default", "no-such-pod", "", "node-1");
  EXPECT_TRUE(IsNotFound(missing)) << missing.ToString();
}

}  // namespace
}  // namespace hami::k8s
