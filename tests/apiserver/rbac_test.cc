// RBAC in the simulated API server: the authorizer's rule semantics on their own, then over HTTP
// (TokenRequest, 403 with the standard Status, the decision report, tokens of deleted accounts).
#include "sim/apiserver/rbac.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "test_support.h"

namespace hami::sim {
namespace {

using nlohmann::json;
using testing::Client;

ObjectPtr Obj(const std::string& text) { return std::make_shared<const json>(json::parse(text)); }

RbacPolicy Policy() {
  RbacPolicy p;
  p.cluster_roles = {Obj(R"({"metadata":{"name":"reader"},"rules":[
      {"apiGroups":[""],"resources":["pods"],"verbs":["get","list","watch"]}]})"),
                     Obj(R"({"metadata":{"name":"binder"},"rules":[
      {"apiGroups":[""],"resources":["pods/binding"],"verbs":["create"]},
      {"apiGroups":["admissionregistration.k8s.io"],"resources":["mutatingwebhookconfigurations"],
       "resourceNames":["hami-webhook"],"verbs":["get","patch"]}]})")};
  p.cluster_role_bindings = {
      Obj(R"({"metadata":{"name":"b1"},"roleRef":{"kind":"ClusterRole","name":"reader"},
              "subjects":[{"kind":"ServiceAccount","name":"mon","namespace":"kube-system"}]})"),
      Obj(R"({"metadata":{"name":"b2"},"roleRef":{"kind":"ClusterRole","name":"binder"},
              "subjects":[{"kind":"Group","name":"binders"}]})"),
      Obj(R"({"metadata":{"name":"dangling"},"roleRef":{"kind":"ClusterRole","name":"absent"},
              "subjects":[{"kind":"User","name":"alice"}]})")};
  p.roles = {Obj(R"({"metadata":{"name":"leases","namespace":"kube-system"},"rules":[
      {"apiGroups":["coordination.k8s.io"],"resources":["leases"],"verbs":["*"]}]})")};
  p.role_bindings = {Obj(R"({"metadata":{"name":"rb","namespace":"kube-system"},
              "roleRef":{"kind":"Role","name":"leases"},
              "subjects":[{"kind":"ServiceAccount","name":"mon"}]})"),
                     Obj(R"({"metadata":{"name":"rb2","namespace":"team"},
              "roleRef":{"kind":"ClusterRole","name":"binder"},
              "subjects":[{"kind":"User","name":"alice"}]})")};
  return p;
}

TEST(RbacRulesTest, ClusterRoleBindingGrantsItsVerbsEverywhereAndNothingElse) {
  RbacPolicy p = Policy();
  UserInfo mon = ServiceAccountUser("kube-system", "mon");
  EXPECT_TRUE(Allows(p, mon, {"list", "", "pods", "", "", ""}));
  EXPECT_TRUE(Allows(p, mon, {"get", "", "pods", "", "default", "p"}));
  EXPECT_FALSE(Allows(p, mon, {"patch", "", "pods", "", "default", "p"}));
  EXPECT_FALSE(Allows(p, mon, {"get", "", "nodes", "", "", "n"}));
  EXPECT_FALSE(Allows(p, mon, {"get", "", "pods", "log", "default", "p"}))
      << "a resource does not grant its subresources";
  EXPECT_FALSE(Allows(p, ServiceAccountUser("default", "mon"), {"list", "", "pods", "", "", ""}))
      << "same account name, other namespace";
}

TEST(RbacRulesTest, RoleBindingsApplyInTheirNamespaceOnly) {
  RbacPolicy p = Policy();
  UserInfo mon = ServiceAccountUser("kube-system", "mon");
  Attributes lease{"update", "coordination.k8s.io", "leases", "", "kube-system", "hami-scheduler"};
  EXPECT_TRUE(Allows(p, mon, lease)) << "subject namespace defaults to the binding's";
  lease.ns = "default";
  EXPECT_FALSE(Allows(p, mon, lease));
  UserInfo alice{"alice", {"system:authenticated"}};
  EXPECT_TRUE(Allows(p, alice, {"create", "", "pods", "binding", "team", "p"}));
  EXPECT_FALSE(Allows(p, alice, {"create", "", "pods", "binding", "other", "p"}));
  EXPECT_FALSE(Allows(p, alice, {"get", "", "pods", "", "", "x"})) << "dangling binding";
}

TEST(RbacRulesTest, ResourceNamesAndGroupsAndWildcards) {
  RbacPolicy p = Policy();
  UserInfo u{"bob", {"binders", "system:authenticated"}};
  const char* g = "admissionregistration.k8s.io";
  EXPECT_TRUE(Allows(p, u, {"patch", g, "mutatingwebhookconfigurations", "", "", "hami-webhook"}));
  EXPECT_FALSE(Allows(p, u, {"patch", g, "mutatingwebhookconfigurations", "", "", "other"}));
  EXPECT_FALSE(Allows(p, u, {"list", g, "mutatingwebhookconfigurations", "", "", ""}))
      << "a named rule never covers list";
  EXPECT_TRUE(
      Allows(p, UserInfo{"root", {"system:masters"}}, {"delete", "", "nodes", "", "", "n"}));
  p.cluster_roles.push_back(Obj(R"({"metadata":{"name":"st"},"rules":[
      {"apiGroups":["*"],"resources":["*/status"],"verbs":["patch"]}]})"));
  p.cluster_role_bindings.push_back(
      Obj(R"({"metadata":{"name":"b3"},"roleRef":{"kind":"ClusterRole","name":"st"},
              "subjects":[{"kind":"User","name":"carol"}]})"));
  UserInfo carol{"carol", {}};
  EXPECT_TRUE(Allows(p, carol, {"patch", "", "nodes", "status", "", "n"}));
  EXPECT_TRUE(Allows(p, carol, {"patch", "apps", "deployments", "status", "ns", "d"}));
  EXPECT_FALSE(Allows(p, carol, {"patch", "", "nodes", "", "", "n"}));
}

TEST(RbacRulesTest, ForbiddenMessagesUseTheApiServersWording) {
  UserInfo mon = ServiceAccountUser("kube-system", "mon");
  EXPECT_EQ(ForbiddenMessage(mon, {"patch", "", "pods", "", "default", "p"}),
            "pods \"p\" is forbidden: User \"system:serviceaccount:kube-system:mon\" cannot patch "
            "resource \"pods\" in API group \"\" in the namespace \"default\"");
  EXPECT_EQ(ForbiddenMessage(mon, {"list", "", "nodes", "", "", ""}),
            "nodes is forbidden: User \"system:serviceaccount:kube-system:mon\" cannot list "
            "resource \"nodes\" in API group \"\" at the cluster scope");
  EXPECT_EQ(ForbiddenMessage(mon, {"create", "", "pods", "binding", "ns", "p"}),
            "pods \"p\" is forbidden: User \"system:serviceaccount:kube-system:mon\" cannot create "
            "resource \"pods/binding\" in API group \"\" in the namespace \"ns\"");
  EXPECT_EQ(ForbiddenMessage(mon, {"get", "coordination.k8s.io", "leases", "", "ns", "l"}),
            "leases.coordination.k8s.io \"l\" is forbidden: User "
            "\"system:serviceaccount:kube-system:mon\" cannot get resource \"leases\" in API group "
            "\"coordination.k8s.io\" in the namespace \"ns\"");
}

class RbacServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ApiServerOptions o;
    o.token = "admin-token";
    o.rbac = true;
    server_ = ApiServer::Start(o).value();
    admin_ = std::make_unique<Client>(*server_, "admin-token");
    ASSERT_EQ(admin_
                  ->Do("POST", "/api/v1/namespaces/kube-system/serviceaccounts",
                       R"({"metadata":{"name":"mon"}})")
                  .status,
              201);
    ASSERT_EQ(admin_
                  ->Do("POST", "/apis/rbac.authorization.k8s.io/v1/clusterroles",
                       R"({"metadata":{"name":"reader"},"rules":[
                {"apiGroups":[""],"resources":["pods"],"verbs":["get","list","watch"]}]})")
                  .status,
              201);
    ASSERT_EQ(admin_
                  ->Do("POST", "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings",
                       R"({"metadata":{"name":"mon"},
                "roleRef":{"apiGroup":"rbac.authorization.k8s.io","kind":"ClusterRole","name":"reader"},
                "subjects":[{"kind":"ServiceAccount","name":"mon","namespace":"kube-system"}]})")
                  .status,
              201);
  }

  std::unique_ptr<ApiServer> server_;
  std::unique_ptr<Client> admin_;
};

TEST_F(RbacServerTest, TokenRequestGivesATokenThatActsAsTheAccount) {
  testing::Reply tr = admin_->Do("POST", "/api/v1/namespaces/kube-system/serviceaccounts/mon/token",
                                 R"({"apiVersion":"authentication.k8s.io/v1","kind":"TokenRequest",
                                     "spec":{"expirationSeconds":600}})");
  ASSERT_EQ(tr.status, 201) << tr.raw;
  EXPECT_EQ(tr.body["kind"], "TokenRequest");
  EXPECT_EQ(tr.body["spec"]["expirationSeconds"], 600);
  std::string token = tr.body["status"]["token"].get<std::string>();
  Client mon(*server_, token);
  EXPECT_EQ(mon.Do("GET", "/api/v1/pods").status, 200);
  EXPECT_EQ(mon.Do("GET", "/api/v1/namespaces/default/pods/absent").status, 404)
      << "allowed to get, and the pod is not there";
  EXPECT_EQ(mon.Do("GET", "/api").status, 200) << "discovery is open to every authenticated user";

  testing::Reply denied =
      mon.Do("PATCH", "/api/v1/nodes/node-a", R"({"metadata":{}})", "application/merge-patch+json");
  EXPECT_EQ(denied.status, 403);
  EXPECT_EQ(denied.body["kind"], "Status");
  EXPECT_EQ(denied.body["reason"], "Forbidden");
  EXPECT_EQ(denied.body["code"], 403);
  EXPECT_EQ(denied.body["details"]["name"], "node-a");
  EXPECT_EQ(denied.body["details"]["kind"], "nodes");
  EXPECT_EQ(denied.body["message"],
            "nodes \"node-a\" is forbidden: User \"system:serviceaccount:kube-system:mon\" "
            "cannot patch resource \"nodes\" in API group \"\" at the cluster scope");
  EXPECT_EQ(mon.Do("POST", "/api/v1/namespaces/kube-system/serviceaccounts/mon/token", "{}").status,
            403)
      << "an account may not mint tokens without a rule for serviceaccounts/token";

  json report = json::parse(server_->AuthorizationReport());
  const json& mine = report["system:serviceaccount:kube-system:mon"];
  EXPECT_EQ(mine["allowed"]["list pods"], 1);
  EXPECT_EQ(mine["allowed"]["get pods"], 1);
  EXPECT_EQ(mine["denied"]["patch nodes"], 1);
  EXPECT_EQ(mine["denied"]["create serviceaccounts/token"], 1);
  EXPECT_EQ(admin_->Do("GET", "/debug/authorization").body, report);
  EXPECT_EQ(mon.Do("GET", "/debug/authorization").status, 403);

  ASSERT_EQ(admin_->Do("DELETE", "/api/v1/namespaces/kube-system/serviceaccounts/mon").status, 200);
  EXPECT_EQ(mon.Do("GET", "/api/v1/pods").status, 401) << "the account is gone, so is its token";
}

TEST_F(RbacServerTest, UnknownTokensAreUnauthenticatedAndTheAdminMayDoAnything) {
  Client stranger(*server_, "made-up");
  EXPECT_EQ(stranger.Do("GET", "/api/v1/pods").status, 401);
  EXPECT_EQ(
      admin_->Do("POST", "/api/v1/namespaces/default/serviceaccounts/absent/token", "{}").status,
      404);
  EXPECT_FALSE(server_->IssueServiceAccountToken("default", "absent").ok());
  std::string token = server_->IssueServiceAccountToken("kube-system", "mon").value();
  EXPECT_EQ(Client(*server_, token).Do("GET", "/api/v1/pods").status, 200);
  EXPECT_EQ(Client(*server_, token).Do("DELETE", "/api/v1/namespaces/default/pods").status, 403);
}

TEST_F(RbacServerTest, MalformedBindingsGrantNothingAndBreakNothing) {
  // Found by fuzz_rbac: a binding without roleRef or with odd shapes is stored as sent.
  for (const char* body : {R"({"metadata":{"name":"no-ref"},"subjects":[{"kind":"ServiceAccount",
                               "name":"mon","namespace":"kube-system"}]})",
                           R"({"metadata":{"name":"odd"},"roleRef":"reader","subjects":{"a":1}})",
                           R"({"metadata":{"name":"odd2"},"roleRef":{"kind":"ClusterRole",
                               "name":"reader"},"subjects":[7,null,{"kind":5}]})"}) {
    ASSERT_EQ(
        admin_->Do("POST", "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings", body).status,
        201)
        << body;
  }
  ASSERT_EQ(admin_
                ->Do("POST", "/apis/rbac.authorization.k8s.io/v1/clusterroles",
                     R"({"metadata":{"name":"weird"},"rules":[1,{"verbs":"get"},
                           {"verbs":["*"],"apiGroups":["*"],"resources":["*"],"resourceNames":7}]})")
                .status,
            201);
  std::string token = server_->IssueServiceAccountToken("kube-system", "mon").value();
  Client mon(*server_, token);
  EXPECT_EQ(mon.Do("GET", "/api/v1/pods").status, 200) << "the good binding still works";
  EXPECT_EQ(mon.Do("GET", "/api/v1/nodes").status, 403);
}

TEST(SecretTest, StringDataIsFoldedIntoDataOnEveryWrite) {
  auto server = ApiServer::Start({}).value();
  Client c(*server);
  testing::Reply r = c.Do("POST", "/api/v1/namespaces/default/secrets",
                          R"({"metadata":{"name":"s"},"data":{"a":"eA=="},
                              "stringData":{"b":"hello","a":"y"}})");
  ASSERT_EQ(r.status, 201) << r.raw;
  EXPECT_EQ(r.body["type"], "Opaque");
  EXPECT_EQ(r.body["data"], json({{"a", "eQ=="}, {"b", "aGVsbG8="}}));
  EXPECT_FALSE(r.body.contains("stringData"));
  r = c.Do("PATCH", "/api/v1/namespaces/default/secrets/s", R"({"stringData":{"c":"z"}})",
           "application/merge-patch+json");
  ASSERT_EQ(r.status, 200) << r.raw;
  EXPECT_EQ(r.body["data"]["c"], "eg==");
  EXPECT_FALSE(r.body.contains("stringData"));
}

TEST(RbacOptionsTest, RbacWithoutAnAdministratorTokenIsRefused) {
  ApiServerOptions o;
  o.rbac = true;
  EXPECT_FALSE(ApiServer::Start(o).ok());
}

}  // namespace
}  // namespace hami::sim
