// REST semantics of the simulated API server, exercised over real HTTP(S).
#include <signal.h>

#include <atomic>
#include <set>
#include <thread>

#include "common/subprocess.h"
#include "gtest/gtest.h"
#include "sim/apiserver/quantities.h"
#include "test_support.h"

namespace hami::sim {
namespace {

using nlohmann::json;
using testing::Client;
using testing::PodJson;
using testing::Reply;

constexpr char kPods[] = "/api/v1/namespaces/default/pods";

class ApiServerTest : public ::testing::Test {
 protected:
  void StartServer(ApiServerOptions opts = {}) {
    client_.reset();  // close keep-alive connections before the old server stops
    server_.reset();
    opts.worker_threads = 32;
    auto server = ApiServer::Start(opts);
    ASSERT_TRUE(server.ok()) << server.status().ToString();
    server_ = std::move(server).value();
    client_ = std::make_unique<Client>(*server_, opts.token);
  }
  void SetUp() override { StartServer(); }

  std::string Rv(const Reply& r) {
    return r.body["metadata"]["resourceVersion"].get<std::string>();
  }
  json MustCreate(const std::string& path, const json& obj) {
    Reply r = client_->Post(path, obj);
    EXPECT_EQ(r.status, 201) << r.raw;
    return r.body;
  }
  void ExpectStatus(const Reply& r, int code, const std::string& reason) {
    EXPECT_EQ(r.status, code) << r.raw;
    ASSERT_TRUE(r.body.is_object()) << r.raw;
    EXPECT_EQ(r.body["kind"], "Status");
    EXPECT_EQ(r.body["apiVersion"], "v1");
    EXPECT_EQ(r.body["status"], "Failure");
    EXPECT_EQ(r.body["reason"], reason) << r.raw;
    EXPECT_EQ(r.body["code"], code);
    EXPECT_TRUE(r.body["message"].is_string());
  }

  std::unique_ptr<ApiServer> server_;
  std::unique_ptr<Client> client_;
};

TEST_F(ApiServerTest, Discovery) {
  Reply api = client_->Get("/api");
  EXPECT_EQ(api.body["kind"], "APIVersions");
  EXPECT_EQ(api.body["versions"][0], "v1");
  Reply v1 = client_->Get("/api/v1");
  EXPECT_EQ(v1.body["kind"], "APIResourceList");
  std::set<std::string> names;
  for (const json& r : v1.body["resources"]) names.insert(r["name"].get<std::string>());
  for (const char* want : {"pods", "pods/status", "pods/binding", "nodes", "namespaces", "events",
                           "configmaps", "resourcequotas"}) {
    EXPECT_TRUE(names.count(want)) << want;
  }
  Reply groups = client_->Get("/apis");
  EXPECT_EQ(groups.body["kind"], "APIGroupList");
  EXPECT_NE(groups.raw.find("coordination.k8s.io"), std::string::npos);
  EXPECT_NE(groups.raw.find("admissionregistration.k8s.io"), std::string::npos);
  Reply leases = client_->Get("/apis/coordination.k8s.io/v1");
  EXPECT_EQ(leases.body["groupVersion"], "coordination.k8s.io/v1");
  EXPECT_EQ(leases.body["resources"][0]["kind"], "Lease");
  EXPECT_EQ(client_->Get("/apis/coordination.k8s.io").body["kind"], "APIGroup");
  EXPECT_EQ(client_->Get("/version").body["major"], "1");
  ExpectStatus(client_->Get("/apis/nope.example.com/v1"), 404, "NotFound");
  EXPECT_EQ(client_->Get("/readyz").status, 200);
}

TEST_F(ApiServerTest, PodCrudAndConflicts) {
  int64_t before = server_->revision();
  json pod = MustCreate(kPods, PodJson("p1", {{"app", "web"}}));
  EXPECT_EQ(pod["metadata"]["namespace"], "default");
  EXPECT_FALSE(pod["metadata"]["uid"].get<std::string>().empty());
  EXPECT_TRUE(pod["metadata"]["creationTimestamp"].is_string());
  EXPECT_EQ(pod["metadata"]["generation"], 1);
  EXPECT_EQ(std::stoll(pod["metadata"]["resourceVersion"].get<std::string>()), before + 1);
  EXPECT_EQ(pod["status"]["phase"], "Pending");
  EXPECT_EQ(pod["spec"]["schedulerName"], "default-scheduler");

  Reply got = client_->Get(std::string(kPods) + "/p1");
  EXPECT_EQ(got.status, 200);
  EXPECT_EQ(got.body["metadata"]["uid"], pod["metadata"]["uid"]);

  ExpectStatus(client_->Post(kPods, PodJson("p1")), 409, "AlreadyExists");

  // Update with the current resourceVersion succeeds, a stale one gets 409 Conflict.
  json update = got.body;
  update["metadata"]["labels"]["tier"] = "front";
  update["spec"]["priority"] = 5;
  Reply put = client_->Put(std::string(kPods) + "/p1", update);
  ASSERT_EQ(put.status, 200) << put.raw;
  EXPECT_EQ(put.body["metadata"]["labels"]["tier"], "front");
  EXPECT_EQ(put.body["metadata"]["generation"], 2);
  EXPECT_NE(Rv(put), Rv(got));
  Reply stale = client_->Put(std::string(kPods) + "/p1", update);
  ExpectStatus(stale, 409, "Conflict");
  EXPECT_NE(stale.body["message"].get<std::string>().find("the object has been modified"),
            std::string::npos);
  // No resourceVersion: unconditional update.
  update["metadata"].erase("resourceVersion");
  EXPECT_EQ(client_->Put(std::string(kPods) + "/p1", update).status, 200);

  Reply list = client_->Get(kPods);
  EXPECT_EQ(list.body["kind"], "PodList");
  EXPECT_EQ(list.body["items"].size(), 1u);
  EXPECT_EQ(Rv(list), std::to_string(server_->revision()));

  // Delete with a wrong uid precondition is refused, then succeeds.
  json opts = {{"kind", "DeleteOptions"}, {"preconditions", {{"uid", "nope"}}}};
  ExpectStatus(client_->Do("DELETE", std::string(kPods) + "/p1", opts.dump()), 409, "Conflict");
  Reply del = client_->Delete(std::string(kPods) + "/p1");
  EXPECT_EQ(del.status, 200);
  EXPECT_EQ(del.body["kind"], "Pod");
  Reply missing = client_->Get(std::string(kPods) + "/p1");
  ExpectStatus(missing, 404, "NotFound");
  EXPECT_EQ(missing.body["message"], "pods \"p1\" not found");
  EXPECT_EQ(missing.body["details"]["name"], "p1");
  EXPECT_EQ(missing.body["details"]["kind"], "pods");
  ExpectStatus(client_->Delete(std::string(kPods) + "/p1"), 404, "NotFound");
}

TEST_F(ApiServerTest, NamespacesAndNames) {
  ExpectStatus(client_->Post("/api/v1/namespaces/ghost/pods", PodJson("x")), 404, "NotFound");
  json pod = PodJson("x");
  pod["metadata"]["namespace"] = "other";
  ExpectStatus(client_->Post(kPods, pod), 400, "BadRequest");
  json gen = PodJson("");
  gen["metadata"].erase("name");
  gen["metadata"]["generateName"] = "worker-";
  json created = MustCreate(kPods, gen);
  EXPECT_EQ(created["metadata"]["name"].get<std::string>().rfind("worker-", 0), 0u);
  gen["metadata"].erase("generateName");
  ExpectStatus(client_->Post(kPods, gen), 422, "Invalid");

  MustCreate("/api/v1/namespaces", {{"metadata", {{"name", "team-a"}}}});
  MustCreate("/api/v1/namespaces/team-a/configmaps",
             {{"metadata", {{"name", "cfg"}}}, {"data", {{"k", "v"}}}});
  EXPECT_EQ(client_->Get("/api/v1/namespaces/team-a").body["status"]["phase"], "Active");
  EXPECT_EQ(client_->Delete("/api/v1/namespaces/team-a").status, 200);
  EXPECT_EQ(client_->Get("/api/v1/namespaces/team-a/configmaps/cfg").status, 404);
}

TEST_F(ApiServerTest, EveryResourceTypeRoundTrips) {
  struct Case {
    std::string path;
    json body;
  };
  std::vector<Case> cases = {
      {"/api/v1/nodes", {{"metadata", {{"name", "n1"}}}}},
      {"/api/v1/namespaces/default/events",
       {{"metadata", {{"name", "e1"}}}, {"reason", "FilteringFailed"}, {"type", "Warning"}}},
      {"/apis/events.k8s.io/v1/namespaces/default/events",
       {{"metadata", {{"name", "e2"}}}, {"reason", "BindingSucceed"}}},
      {"/api/v1/namespaces/default/configmaps", {{"metadata", {{"name", "c1"}}}, {"data", {}}}},
      {"/api/v1/namespaces/default/resourcequotas",
       {{"metadata", {{"name", "q1"}}},
        {"spec", {{"hard", {{"limits.nvidia.com/gpumem", "10"}}}}}}},
      {"/apis/coordination.k8s.io/v1/namespaces/kube-system/leases",
       {{"metadata", {{"name", "hami-scheduler"}}}, {"spec", {{"holderIdentity", "a"}}}}},
      {"/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations",
       {{"metadata", {{"name", "w1"}}}, {"webhooks", json::array()}}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.path);
    json created = MustCreate(c.path, c.body);
    std::string name = created["metadata"]["name"];
    Reply got = client_->Get(c.path + "/" + name);
    EXPECT_EQ(got.status, 200);
    EXPECT_EQ(got.body["kind"], created["kind"]);
    Reply list = client_->Get(c.path);
    EXPECT_EQ(list.body["kind"], created["kind"].get<std::string>() + "List");
    EXPECT_EQ(list.body["items"].size(), 1u);
    Reply patched = client_->Patch(c.path + "/" + name, R"({"metadata":{"labels":{"x":"y"}}})",
                                   "application/merge-patch+json");
    EXPECT_EQ(patched.body["metadata"]["labels"]["x"], "y");
    EXPECT_EQ(client_->Delete(c.path + "/" + name).status, 200);
  }
  // Namespaced resources listed across namespaces.
  MustCreate("/api/v1/namespaces/kube-system/configmaps", {{"metadata", {{"name", "a"}}}});
  MustCreate("/api/v1/namespaces/default/configmaps", {{"metadata", {{"name", "b"}}}});
  EXPECT_EQ(client_->Get("/api/v1/configmaps").body["items"].size(), 2u);
}

TEST_F(ApiServerTest, LabelAndFieldSelectors) {
  MustCreate(kPods, PodJson("a", {{"app", "web"}, {"tier", "front"}}));
  MustCreate(kPods, PodJson("b", {{"app", "db"}}));
  MustCreate(kPods, PodJson("c", json::object()));
  MustCreate("/api/v1/namespaces/kube-system/pods", PodJson("d", {{"app", "web"}}));
  auto names = [&](const std::string& query) {
    Reply r = client_->Get("/api/v1/pods?" + query);
    EXPECT_EQ(r.status, 200) << query << " " << r.raw;
    std::vector<std::string> out;
    for (const json& p : r.body["items"]) out.push_back(p["metadata"]["name"]);
    return out;
  };
  using V = std::vector<std::string>;
  EXPECT_EQ(names("labelSelector=app%3Dweb"), (V{"a", "d"}));
  EXPECT_EQ(names("labelSelector=app!%3Dweb"), (V{"b", "c"}));
  EXPECT_EQ(names("labelSelector=app%20in%20(db,web),tier"), (V{"a"}));
  EXPECT_EQ(names("labelSelector=app%20notin%20(web)"), (V{"b", "c"}));
  EXPECT_EQ(names("labelSelector=!app"), (V{"c"}));
  EXPECT_EQ(names("fieldSelector=metadata.name%3Db"), (V{"b"}));
  EXPECT_EQ(names("fieldSelector=metadata.namespace%3Dkube-system"), (V{"d"}));
  EXPECT_EQ(names("fieldSelector=status.phase%3DPending,metadata.name!%3Da"), (V{"b", "c", "d"}));
  json binding = {{"kind", "Binding"},
                  {"apiVersion", "v1"},
                  {"metadata", {{"name", "b"}}},
                  {"target", {{"kind", "Node"}, {"name", "node-1"}}}};
  ASSERT_EQ(client_->Post(std::string(kPods) + "/b/binding", binding).status, 201);
  EXPECT_EQ(names("fieldSelector=spec.nodeName%3Dnode-1"), (V{"b"}));
  EXPECT_EQ(names("fieldSelector=spec.nodeName%3D"), (V{"a", "c", "d"}));
  ExpectStatus(client_->Get("/api/v1/pods?labelSelector=app%20in%20(x"), 400, "BadRequest");
  ExpectStatus(client_->Get("/api/v1/pods?fieldSelector=nonsense"), 400, "BadRequest");
}

TEST_F(ApiServerTest, Patches) {
  MustCreate(kPods, PodJson("p", {{"a", "1"}}));
  const std::string path = std::string(kPods) + "/p";
  Reply merge = client_->Patch(path, R"({"metadata":{"labels":{"a":null,"b":"2"},
      "annotations":{"hami.io/x":"y"}}})",
                               "application/merge-patch+json");
  ASSERT_EQ(merge.status, 200) << merge.raw;
  EXPECT_FALSE(merge.body["metadata"]["labels"].contains("a"));
  EXPECT_EQ(merge.body["metadata"]["labels"]["b"], "2");

  Reply jp = client_->Patch(
      path, R"([{"op":"add","path":"/metadata/annotations/hami.io~1vgpu-node","value":"n1"},
               {"op":"replace","path":"/metadata/labels/b","value":"3"}])",
      "application/json-patch+json");
  ASSERT_EQ(jp.status, 200) << jp.raw;
  EXPECT_EQ(jp.body["metadata"]["annotations"]["hami.io/vgpu-node"], "n1");
  EXPECT_EQ(jp.body["metadata"]["labels"]["b"], "3");
  // A failing "test" operation rejects the whole patch.
  ExpectStatus(client_->Patch(path, R"([{"op":"test","path":"/metadata/labels/b","value":"x"}])",
                              "application/json-patch+json"),
               422, "Invalid");

  // Strategic merge patch: containers merge by name (the JSON merge patch above would have
  // replaced the list); directives never reach the stored object.
  Reply smp = client_->Patch(path, R"({"metadata":{"labels":{"c":"4"}},
      "spec":{"containers":[{"name":"extra","image":"alpine"}]},
      "$setElementOrder/x":[1]})",
                             "application/strategic-merge-patch+json; charset=utf-8");
  ASSERT_EQ(smp.status, 200) << smp.raw;
  EXPECT_EQ(smp.body["metadata"]["labels"]["c"], "4");
  ASSERT_EQ(smp.body["spec"]["containers"].size(), 2u) << smp.raw;
  EXPECT_EQ(smp.body["spec"]["containers"][0]["name"], "c");
  EXPECT_EQ(smp.body["spec"]["containers"][1]["name"], "extra");
  EXPECT_FALSE(smp.body.contains("$setElementOrder/x"));
  ExpectStatus(client_->Patch(path, R"({"spec":{"containers":[{"image":"no-name"}]}})",
                              "application/strategic-merge-patch+json"),
               400, "BadRequest");

  // A resourceVersion inside the patch is a precondition.
  ExpectStatus(client_->Patch(path, R"({"metadata":{"resourceVersion":"1","labels":{"d":"5"}}})",
                              "application/merge-patch+json"),
               409, "Conflict");
  std::string rv = Rv(client_->Get(path));
  EXPECT_EQ(client_
                ->Patch(path, R"({"metadata":{"resourceVersion":")" + rv + R"("}})",
                        "application/merge-patch+json")
                .status,
            200);
  Reply ssa = client_->Patch(path, "{}", "application/apply-patch+yaml");
  ExpectStatus(ssa, 415, "UnsupportedMediaType");
  EXPECT_NE(ssa.raw.find("server-side apply"), std::string::npos) << ssa.raw;
  ExpectStatus(client_->Patch(path, "[1,2]", "application/merge-patch+json"), 400, "BadRequest");
  ExpectStatus(client_->Patch(std::string(kPods) + "/ghost", "{}", "application/merge-patch+json"),
               404, "NotFound");
  // Identity fields cannot be patched away.
  Reply ident = client_->Patch(path, R"({"metadata":{"uid":"hijack","name":"other"}})",
                               "application/merge-patch+json");
  EXPECT_EQ(ident.body["metadata"]["name"], "p");
  EXPECT_NE(ident.body["metadata"]["uid"], "hijack");
}

// What a typed client's decoding of resource.Quantity requires: wherever the API's types hold
// quantities (resource lists and emptyDir.sizeLimit), a string in canonical form. Found by
// walking the whole object, not from the server's list of fields; `where` names the object.
void ExpectTypedQuantities(const json& j, const std::string& where, int* seen) {
  static const std::set<std::string> kLists = {
      "limits", "requests", "capacity", "allocatable",
      "hard",   "used",     "overhead", "allocatedResources"};
  if (j.is_array()) {
    for (const json& e : j) ExpectTypedQuantities(e, where, seen);
    return;
  }
  if (!j.is_object()) return;
  for (auto it = j.begin(); it != j.end(); ++it) {
    const bool list = kLists.count(it.key()) > 0 && it.value().is_object();
    if (list || it.key() == "sizeLimit") {
      std::vector<std::pair<std::string, json>> values;
      if (list) {
        for (auto q = it.value().begin(); q != it.value().end(); ++q) {
          values.emplace_back(q.key(), q.value());
        }
      } else {
        values.emplace_back("sizeLimit", it.value());
      }
      for (const auto& [name, v] : values) {
        ++*seen;
        ASSERT_TRUE(v.is_string()) << where << ": " << it.key() << "[" << name << "] = " << v;
        Result<std::string> canonical = CanonicalQuantity(v.get<std::string>());
        ASSERT_TRUE(canonical.ok()) << where << ": " << v;
        EXPECT_EQ(*canonical, v.get<std::string>()) << where << ": not in canonical form";
      }
      continue;
    }
    ExpectTypedQuantities(it.value(), where, seen);
  }
}

TEST_F(ApiServerTest, QuantitiesAreStringsOnEveryWritePath) {
  // Written as YAML manifests become JSON: bare numbers.
  json pod = PodJson("q");
  pod["spec"]["containers"][0]["resources"] = {
      {"limits", {{"nvidia.com/gpu", 1}, {"nvidia.com/gpumem", 3000}, {"cpu", 0.5}}},
      {"requests", {{"memory", "1.5Gi"}}}};
  pod["spec"]["volumes"] = {{{"name", "scratch"}, {"emptyDir", {{"sizeLimit", 1024}}}}};
  std::vector<std::pair<std::string, json>> answers;
  json created = MustCreate(kPods, pod);
  answers.emplace_back("POST pod", created);
  const std::string path = std::string(kPods) + "/q";
  EXPECT_EQ(created["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpumem"], "3k");
  EXPECT_EQ(created["spec"]["containers"][0]["resources"]["requests"]["memory"], "1536Mi");

  json put = created;
  put["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpucores"] = 50;
  answers.emplace_back("PUT pod", client_->Put(path, put).body);
  answers.emplace_back(
      "merge patch",
      client_
          ->Patch(
              path,
              R"({"spec":{"containers":[{"name":"c","image":"busybox","resources":{"limits":{"nvidia.com/gpu":2}}}]}})",
              "application/merge-patch+json")
          .body);
  answers.emplace_back(
      "JSON patch",
      client_
          ->Patch(
              path,
              R"([{"op":"add","path":"/spec/containers/0/resources/limits/nvidia.com~1gpumem","value":4096}])",
              "application/json-patch+json")
          .body);
  answers.emplace_back(
      "status patch",
      client_
          ->Patch(
              path + "/status",
              R"({"status":{"containerStatuses":[{"name":"c","allocatedResources":{"cpu":2}}]}})",
              "application/merge-patch+json")
          .body);
  json node = {{"metadata", {{"name", "n1"}}},
               {"status",
                {{"capacity", {{"nvidia.com/gpu", 10}, {"pods", 110}}},
                 {"allocatable", {{"nvidia.com/gpu", 10}, {"memory", 65536000}}}}}};
  answers.emplace_back("POST node", MustCreate("/api/v1/nodes", node));
  answers.emplace_back(
      "PATCH node status",
      client_
          ->Patch("/api/v1/nodes/n1/status", R"({"status":{"capacity":{"nvidia.com/gpu":20}}})",
                  "application/merge-patch+json")
          .body);
  answers.emplace_back("POST quota",
                       MustCreate("/api/v1/namespaces/default/resourcequotas",
                                  {{"metadata", {{"name", "gpus"}}},
                                   {"spec", {{"hard", {{"limits.nvidia.com/gpumem", 20000}}}}}}));
  json deploy = {{"metadata", {{"name", "d"}}},
                 {"spec",
                  {{"selector", {{"matchLabels", {{"app", "d"}}}}},
                   {"template",
                    {{"metadata", {{"labels", {{"app", "d"}}}}},
                     {"spec",
                      {{"containers",
                        {{{"name", "c"},
                          {"image", "x"},
                          {"resources", {{"limits", {{"nvidia.com/gpu", 1}}}}}}}}}}}}}}};
  answers.emplace_back("POST deployment",
                       MustCreate("/apis/apps/v1/namespaces/default/deployments", deploy));
  answers.emplace_back("GET pod", client_->Get(path).body);
  answers.emplace_back("LIST pods", client_->Get(kPods).body);
  answers.emplace_back("LIST nodes", client_->Get("/api/v1/nodes").body);
  for (const json& e : client_->Watch(std::string(kPods) + "?watch=1&resourceVersion=0", 1)) {
    answers.emplace_back("WATCH pods", e);
  }
  int seen = 0;
  for (const auto& [where, body] : answers) {
    ASSERT_TRUE(body.is_object()) << where;
    EXPECT_NE(body.value("kind", ""), "Status") << where << ": " << body;
    ExpectTypedQuantities(body, where, &seen);
  }
  EXPECT_GE(seen, 30) << "the walk found the quantities";
  json stored = client_->Get(path).body["spec"]["containers"][0]["resources"]["limits"];
  EXPECT_EQ(stored["nvidia.com/gpu"], "2");
  EXPECT_EQ(stored["nvidia.com/gpumem"], "4096");
  EXPECT_FALSE(stored.contains("nvidia.com/gpucores")) << "a merge patch replaces the list";
  // An invalid quantity is refused as the real server refuses it, naming the field.
  json bad = PodJson("bad");
  bad["spec"]["containers"][0]["resources"] = {{"limits", {{"nvidia.com/gpumem", "lots"}}}};
  Reply refused = client_->Post(kPods, bad);
  ExpectStatus(refused, 400, "BadRequest");
  EXPECT_NE(refused.body["message"].get<std::string>().find("nvidia.com/gpumem"), std::string::npos)
      << refused.raw;
}

TEST_F(ApiServerTest, StatusSubresourceAndBinding) {
  MustCreate(kPods, PodJson("p"));
  const std::string path = std::string(kPods) + "/p";
  // The main endpoint ignores status; /status changes only status.
  Reply main =
      client_->Patch(path, R"({"status":{"phase":"Running"},"metadata":{"labels":{"l":"1"}}})",
                     "application/merge-patch+json");
  EXPECT_EQ(main.body["status"]["phase"], "Pending");
  EXPECT_EQ(main.body["metadata"]["labels"]["l"], "1");
  Reply st =
      client_->Patch(path + "/status", R"({"status":{"phase":"Running"},"spec":{"nodeName":"x"}})",
                     "application/merge-patch+json");
  EXPECT_EQ(st.body["status"]["phase"], "Running");
  EXPECT_FALSE(st.body["spec"].contains("nodeName"));
  json put = st.body;
  put["status"]["phase"] = "Succeeded";
  EXPECT_EQ(client_->Put(path + "/status", put).body["status"]["phase"], "Succeeded");
  EXPECT_EQ(client_->Get(path + "/status").body["status"]["phase"], "Succeeded");
  // Through /status, labels and annotations may change; other metadata and new fields may not.
  Reply st2 = client_->Patch(
      path + "/status",
      R"({"metadata":{"labels":{"via":"status"},"finalizers":["x"]},"extra":{"a":1}})",
      "application/merge-patch+json");
  EXPECT_EQ(st2.body["metadata"]["labels"]["via"], "status");
  EXPECT_EQ(st2.body["metadata"]["labels"]["l"], "1");
  EXPECT_FALSE(st2.body["metadata"].contains("finalizers"));
  EXPECT_FALSE(st2.body.contains("extra"));
  EXPECT_EQ(st2.body["status"]["phase"], "Succeeded");
  EXPECT_EQ(st2.body["spec"], st.body["spec"]);

  json binding = {{"apiVersion", "v1"},
                  {"kind", "Binding"},
                  {"metadata", {{"name", "p"}, {"annotations", {{"hami.io/bind-time", "1"}}}}},
                  {"target", {{"apiVersion", "v1"}, {"kind", "Node"}, {"name", "node-7"}}}};
  Reply bound = client_->Post(path + "/binding", binding);
  EXPECT_EQ(bound.status, 201) << bound.raw;
  EXPECT_EQ(bound.body["status"], "Success");
  json pod = client_->Get(path).body;
  EXPECT_EQ(pod["spec"]["nodeName"], "node-7");
  EXPECT_EQ(pod["metadata"]["annotations"]["hami.io/bind-time"], "1");
  EXPECT_EQ(pod["status"]["conditions"][0]["type"], "PodScheduled");
  ExpectStatus(client_->Post(path + "/binding", binding), 409, "Conflict");
  binding["target"].erase("name");
  ExpectStatus(client_->Post(path + "/binding", binding), 422, "Invalid");
  ExpectStatus(client_->Post(std::string(kPods) + "/ghost/binding", {{"target", {{"name", "n"}}}}),
               404, "NotFound");
}

// As kube-apiserver: a pod on a node is deleted gracefully (Terminating, deletionTimestamp now +
// grace) until its kubelet deletes it with no grace period; a later deletion may shorten the
// grace, never lengthen it; --force --grace-period=0 and pods on no node go at once.
TEST_F(ApiServerTest, PodsOnANodeAreDeletedGracefully) {
  json on_node = PodJson("g");
  on_node["spec"]["nodeName"] = "node-1";
  on_node["spec"]["terminationGracePeriodSeconds"] = 20;
  MustCreate(kPods, on_node);
  const std::string path = std::string(kPods) + "/g";
  Reply first = client_->Delete(path);
  ASSERT_EQ(first.status, 200) << first.raw;
  EXPECT_EQ(first.body["kind"], "Pod");
  EXPECT_TRUE(first.body["metadata"]["deletionTimestamp"].is_string()) << first.raw;
  EXPECT_EQ(first.body["metadata"]["deletionGracePeriodSeconds"], 20);
  Reply still = client_->Get(path);
  ASSERT_EQ(still.status, 200) << "Terminating, not gone";
  EXPECT_EQ(still.body["metadata"]["deletionGracePeriodSeconds"], 20);
  // Longer: unchanged; shorter (?gracePeriodSeconds= or DeleteOptions): taken.
  json longer = {{"kind", "DeleteOptions"}, {"gracePeriodSeconds", 60}};
  Reply unchanged = client_->Do("DELETE", path, longer.dump());
  EXPECT_EQ(unchanged.body["metadata"]["deletionGracePeriodSeconds"], 20);
  EXPECT_EQ(client_->Delete(path + "?gracePeriodSeconds=5").body["metadata"]
                                                              ["deletionGracePeriodSeconds"],
            5);
  EXPECT_EQ(client_->Get(path).status, 200);
  ExpectStatus(client_->Delete(path + "?gracePeriodSeconds=soon"), 400, "BadRequest");
  EXPECT_EQ(client_->Get(path).status, 200) << "a garbage grace period deletes nothing";
  // The kubelet's confirmation: grace 0 with the uid as precondition.
  json confirm = {{"kind", "DeleteOptions"},
                  {"gracePeriodSeconds", 0},
                  {"preconditions", {{"uid", still.body["metadata"]["uid"]}}}};
  EXPECT_EQ(client_->Do("DELETE", path, confirm.dump()).status, 200);
  ExpectStatus(client_->Get(path), 404, "NotFound");

  // --force --grace-period=0 deletes at once; so does any deletion of a pod on no node.
  MustCreate(kPods, on_node);
  EXPECT_EQ(client_->Delete(path + "?gracePeriodSeconds=0").status, 200);
  ExpectStatus(client_->Get(path), 404, "NotFound");
  MustCreate(kPods, PodJson("pending"));
  EXPECT_EQ(client_->Delete(std::string(kPods) + "/pending").status, 200);
  ExpectStatus(client_->Get(std::string(kPods) + "/pending"), 404, "NotFound");
}

TEST_F(ApiServerTest, OptimisticConcurrencyLosesNoUpdate) {
  const std::string path = "/api/v1/namespaces/default/configmaps/counter";
  MustCreate("/api/v1/namespaces/default/configmaps",
             {{"metadata", {{"name", "counter"}}}, {"data", {{"n", "0"}}}});
  constexpr int kThreads = 4, kIncrements = 25;
  std::atomic<int> conflicts{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&] {
      Client c(*server_);
      for (int i = 0; i < kIncrements;) {
        json cm = c.Get(path).body;
        cm["data"]["n"] = std::to_string(std::stoi(cm["data"]["n"].get<std::string>()) + 1);
        Reply r = c.Put(path, cm);
        if (r.status == 200) {
          ++i;
        } else {
          EXPECT_EQ(r.status, 409) << r.raw;
          ++conflicts;
        }
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(client_->Get(path).body["data"]["n"], std::to_string(kThreads * kIncrements));
}

TEST_F(ApiServerTest, DeleteCollectionWithSelector) {
  MustCreate(kPods, PodJson("a", {{"batch", "1"}}));
  MustCreate(kPods, PodJson("b", {{"batch", "1"}}));
  MustCreate(kPods, PodJson("c", {{"batch", "2"}}));
  Reply r = client_->Delete(std::string(kPods) + "?labelSelector=batch%3D1");
  EXPECT_EQ(r.body["items"].size(), 2u);
  EXPECT_EQ(client_->Get(kPods).body["items"].size(), 1u);
}

TEST_F(ApiServerTest, BadInputGetsStatusErrorsAndServerKeepsRunning) {
  Reply garbage = client_->Do("POST", kPods, "{not json", "application/json");
  ExpectStatus(garbage, 400, "BadRequest");
  ExpectStatus(client_->Do("POST", kPods, "[1,2,3]"), 400, "BadRequest");
  ExpectStatus(client_->Do("POST", kPods, "\"str\""), 400, "BadRequest");
  ExpectStatus(client_->Do("POST", kPods, R"({"metadata":"oops"})"), 400, "BadRequest");
  ExpectStatus(client_->Do("POST", kPods, R"({"metadata":{"name":5}})"), 422, "Invalid");
  json node = {{"kind", "Node"}, {"apiVersion", "v1"}, {"metadata", {{"name", "n"}}}};
  ExpectStatus(client_->Post(kPods, node), 400, "BadRequest");
  json wrong_version = PodJson("v");
  wrong_version["apiVersion"] = "apps/v1";
  ExpectStatus(client_->Post(kPods, wrong_version), 400, "BadRequest");
  ExpectStatus(client_->Get("/api/v1/namespaces/default/widgets"), 404, "NotFound");
  ExpectStatus(client_->Get("/api/v2/pods"), 404, "NotFound");
  ExpectStatus(client_->Get("/api/v1/namespaces/default/pods/p/logs"), 404, "NotFound");
  ExpectStatus(client_->Get("/api/v1/namespaces/default/pods/a/b/c/d"), 404, "NotFound");
  ExpectStatus(client_->Post(std::string(kPods) + "/p", PodJson("p")), 405, "MethodNotAllowed");
  MustCreate(kPods, PodJson("p"));
  ExpectStatus(client_->Put(std::string(kPods) + "/p", PodJson("q")), 400, "BadRequest");
  ExpectStatus(client_->Do("PUT", std::string(kPods) + "/p", "garbage"), 400, "BadRequest");
  ExpectStatus(client_->Do("DELETE", std::string(kPods) + "/p", "garbage"), 400, "BadRequest");
  // Wrong JSON types deep inside an otherwise valid body.
  Reply typed =
      client_->Patch(std::string(kPods) + "/p", R"({"status":7})", "application/merge-patch+json");
  EXPECT_EQ(typed.status, 200);
  ExpectStatus(client_->Get(std::string(kPods) + "?watch=1&resourceVersion=abc"), 400,
               "BadRequest");
  ExpectStatus(client_->Get(std::string(kPods) + "?watch=1&timeoutSeconds=x"), 400, "BadRequest");
  EXPECT_EQ(client_->Get("/healthz").status, 200);
  EXPECT_EQ(client_->Get(std::string(kPods) + "/p").status, 200);
}

TEST_F(ApiServerTest, WatchStreamsChangesInOrder) {
  std::string rv = Rv(client_->Get(kPods));
  MustCreate(kPods, PodJson("w", {{"app", "x"}}));
  ASSERT_EQ(client_
                ->Patch(std::string(kPods) + "/w", R"({"metadata":{"labels":{"k":"v"}}})",
                        "application/merge-patch+json")
                .status,
            200);
  ASSERT_EQ(client_->Delete(std::string(kPods) + "/w").status, 200);
  auto events = client_->Watch(std::string(kPods) + "?watch=1&resourceVersion=" + rv, 3);
  ASSERT_EQ(events.size(), 3u);
  EXPECT_EQ(events[0]["type"], "ADDED");
  EXPECT_EQ(events[1]["type"], "MODIFIED");
  EXPECT_EQ(events[1]["object"]["metadata"]["labels"]["k"], "v");
  EXPECT_EQ(events[2]["type"], "DELETED");
  EXPECT_LT(std::stoll(events[0]["object"]["metadata"]["resourceVersion"].get<std::string>()),
            std::stoll(events[2]["object"]["metadata"]["resourceVersion"].get<std::string>()));

  // Resume after the first event: only the later ones arrive.
  std::string after = events[0]["object"]["metadata"]["resourceVersion"];
  auto resumed = client_->Watch(std::string(kPods) + "?watch=true&resourceVersion=" + after, 2);
  ASSERT_EQ(resumed.size(), 2u);
  EXPECT_EQ(resumed[0]["type"], "MODIFIED");

  // No resourceVersion: the current state first.
  MustCreate(kPods, PodJson("now"));
  auto initial = client_->Watch(std::string(kPods) + "?watch=1", 1);
  ASSERT_EQ(initial.size(), 1u);
  EXPECT_EQ(initial[0]["type"], "ADDED");
  EXPECT_EQ(initial[0]["object"]["metadata"]["name"], "now");
}

TEST_F(ApiServerTest, WatchLiveEventsFromAnotherThread) {
  std::string rv = Rv(client_->Get(kPods));
  std::vector<json> events;
  std::thread watcher([&] {
    Client c(*server_);
    events = c.Watch(std::string(kPods) + "?watch=1&resourceVersion=" + rv, 2);
  });
  // Whether the watch is already open or not, resumption from `rv` delivers both events.
  Client writer(*server_);
  writer.Post(kPods, PodJson("live-1"));
  writer.Post(kPods, PodJson("live-2"));
  watcher.join();
  ASSERT_EQ(events.size(), 2u);
  EXPECT_EQ(events[1]["object"]["metadata"]["name"], "live-2");
}

TEST_F(ApiServerTest, WatchWithSelectorsSeesObjectsEnterAndLeave) {
  std::string rv = Rv(client_->Get(kPods));
  MustCreate(kPods, PodJson("s"));
  json binding = {{"target", {{"name", "node-a"}}}};
  ASSERT_EQ(client_->Post(std::string(kPods) + "/s/binding", binding).status, 201);
  client_->Patch(std::string(kPods) + "/s/status", R"({"status":{"phase":"Succeeded"}})",
                 "application/merge-patch+json");
  // A kubelet-style watch on spec.nodeName sees the pod arrive when bound (ADDED), then change,
  // then leave the selector (DELETED) once its phase no longer matches.
  auto events = client_->Watch(std::string(kPods) +
                                   "?watch=1&fieldSelector=spec.nodeName%3Dnode-a,status.phase%3D"
                                   "Pending&resourceVersion=" +
                                   rv,
                               2);
  ASSERT_EQ(events.size(), 2u);
  EXPECT_EQ(events[0]["type"], "ADDED");
  EXPECT_EQ(events[1]["type"], "DELETED");
  // Namespace scoping: a watch on kube-system sees nothing of default.
  MustCreate("/api/v1/namespaces/kube-system/pods", PodJson("ks"));
  auto scoped =
      client_->Watch("/api/v1/namespaces/kube-system/pods?watch=1&resourceVersion=" + rv, 1);
  ASSERT_EQ(scoped.size(), 1u);
  EXPECT_EQ(scoped[0]["object"]["metadata"]["name"], "ks");
}

TEST_F(ApiServerTest, WatchTimeoutEndsTheStream) {
  auto events = client_->Watch(std::string(kPods) + "?watch=1&timeoutSeconds=0", 10);
  EXPECT_TRUE(events.empty());
}

class SmallHistoryTest : public ApiServerTest {
 protected:
  void SetUp() override {
    ApiServerOptions opts;
    opts.history_window = 5;
    opts.bookmark_interval = std::chrono::milliseconds(20);
    StartServer(opts);
  }
};

TEST_F(SmallHistoryTest, TooOldResourceVersionIsGone) {
  std::string rv = Rv(client_->Get(kPods));
  for (int i = 0; i < 10; ++i) MustCreate(kPods, PodJson("p" + std::to_string(i)));
  int status = 0;
  auto events = client_->Watch(std::string(kPods) + "?watch=1&resourceVersion=" + rv, 1, &status);
  EXPECT_EQ(status, 410);
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0]["kind"], "Status");
  EXPECT_EQ(events[0]["reason"], "Expired");
  EXPECT_EQ(events[0]["code"], 410);
  // Relisting gives a fresh resourceVersion that can be watched from.
  std::string fresh = Rv(client_->Get(kPods));
  MustCreate(kPods, PodJson("after"));
  auto resumed = client_->Watch(std::string(kPods) + "?watch=1&resourceVersion=" + fresh, 1);
  ASSERT_EQ(resumed.size(), 1u);
  EXPECT_EQ(resumed[0]["object"]["metadata"]["name"], "after");
}

TEST_F(SmallHistoryTest, TooOldResourceVersionAsErrorEvent) {
  ApiServerOptions opts;
  opts.history_window = 2;
  opts.expired_watch_as_error_event = true;
  StartServer(opts);
  for (int i = 0; i < 5; ++i) MustCreate(kPods, PodJson("p" + std::to_string(i)));
  int status = 0;
  auto events = client_->Watch(std::string(kPods) + "?watch=1&resourceVersion=1", 2, &status);
  EXPECT_EQ(status, 200);
  ASSERT_EQ(events.size(), 1u);  // the stream ends after the error
  EXPECT_EQ(events[0]["type"], "ERROR");
  EXPECT_EQ(events[0]["object"]["code"], 410);
  EXPECT_EQ(events[0]["object"]["reason"], "Expired");
}

TEST_F(SmallHistoryTest, BookmarksCarryTheCurrentResourceVersion) {
  MustCreate(kPods, PodJson("b"));
  MustCreate("/api/v1/nodes", {{"metadata", {{"name", "n"}}}});  // other resources move rv too
  std::string rv = std::to_string(server_->revision());
  auto events = client_->Watch(
      std::string(kPods) + "?watch=1&allowWatchBookmarks=true&resourceVersion=" + rv, 1);
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0]["type"], "BOOKMARK");
  EXPECT_EQ(events[0]["object"]["kind"], "Pod");
  EXPECT_EQ(events[0]["object"]["metadata"]["resourceVersion"], rv);
}

TEST(ApiServerAuthTest, TokenAndTls) {
  ApiServerOptions opts;
  opts.self_signed = true;
  opts.token = "s3cret";
  auto server = ApiServer::Start(opts);
  ASSERT_TRUE(server.ok()) << server.status().ToString();
  EXPECT_TRUE((*server)->tls());
  EXPECT_EQ((*server)->url().rfind("https://127.0.0.1:", 0), 0u);
  Client anonymous(**server);
  Reply denied = anonymous.Get("/api/v1/pods");
  EXPECT_EQ(denied.status, 401);
  EXPECT_EQ(denied.body["reason"], "Unauthorized");
  EXPECT_EQ(anonymous.Get("/api").status, 401);
  EXPECT_EQ(anonymous.Get("/healthz").status, 200);
  Client wrong(**server, "nope");
  EXPECT_EQ(wrong.Get("/api/v1/pods").status, 401);
  Client good(**server, "s3cret");
  EXPECT_EQ(good.Get("/api/v1/pods").status, 200);
  std::string kubeconfig = (*server)->Kubeconfig();
  EXPECT_NE(kubeconfig.find("certificate-authority-data: "), std::string::npos);
  EXPECT_NE(kubeconfig.find("token: s3cret"), std::string::npos);
  EXPECT_NE(kubeconfig.find("server: " + (*server)->url()), std::string::npos);
}

TEST(ApiServerBinaryTest, StartsPrintsAddressAndStopsOnSigterm) {
  testing::TempDir dir;
  Subprocess proc({HAMI_SIM_APISERVER_PATH, "--port", "0", "--self-signed", "--token", "t",
                   "--write-kubeconfig", dir.File("kubeconfig")},
                  {});
  const std::string& out = proc.ReadUntil("\n");
  ASSERT_NE(out.find("listening on https://127.0.0.1:"), std::string::npos) << out;
  int port = std::stoi(out.substr(out.rfind(':') + 1));
  httplib::SSLClient cli("127.0.0.1", port);
  cli.enable_server_certificate_verification(false);
  auto r = cli.Get("/healthz");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
  EXPECT_TRUE(std::filesystem::exists(dir.File("kubeconfig")));
  proc.Signal(SIGTERM);
  EXPECT_EQ(proc.Wait().exit_code, 0);

  Subprocess bad({HAMI_SIM_APISERVER_PATH, "--port", "x"}, {});
  EXPECT_EQ(bad.Wait().exit_code, 2);
}

}  // namespace
}  // namespace hami::sim
