// Unit tests of the world's pure helpers (the processes themselves are tested end to end in
// tests/e2e and tests/deploy).
#include "sim/world/world.h"

#include <gtest/gtest.h>

namespace hami::sim {
namespace {

TEST(WorldTest, ControlPlaneKindsParseAndPrint) {
  EXPECT_EQ(ParseControlPlaneKind("real").value(), ControlPlaneKind::kReal);
  EXPECT_EQ(ParseControlPlaneKind("simulated").value(), ControlPlaneKind::kSimulated);
  Result<ControlPlaneKind> bad = ParseControlPlaneKind("kind");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("want simulated or real"), std::string::npos);
  EXPECT_STREQ(ControlPlaneKindName(ControlPlaneKind::kReal), "real");
}

// Audit events as kube-apiserver writes them (Metadata level, RequestReceived omitted).
TEST(WorldTest, AuthorizationReportCountsEachRequestOnceByUserAndCall) {
  const std::string sa = "system:serviceaccount:kube-system:hami-monitor";
  auto event = [&](const std::string& id, const std::string& stage, const std::string& verb,
                   const std::string& ref, const std::string& decision) {
    return R"({"kind":"Event","apiVersion":"audit.k8s.io/v1","level":"Metadata","auditID":")" +
           id + R"(","stage":")" + stage + R"(","verb":")" + verb + R"(","user":{"username":")" +
           sa + R"("},"objectRef":)" + ref +
           R"(,"annotations":{"authorization.k8s.io/decision":")" + decision + R"("}})" + "\n";
  };
  std::string log =
      // A watch: logged when its answer starts and when it ends; one request.
      event("w1", "ResponseStarted", "watch", R"({"resource":"pods"})", "allow") +
      event("w1", "ResponseComplete", "watch", R"({"resource":"pods"})", "allow") +
      event("g1", "ResponseComplete", "get", R"({"resource":"pods","namespace":"x"})", "allow") +
      event("g2", "ResponseComplete", "get", R"({"resource":"pods","namespace":"x"})", "allow") +
      event("p1", "ResponseComplete", "patch", R"({"resource":"nodes"})", "forbid") +
      event("l1", "ResponseComplete", "get",
            R"({"resource":"leases","apiGroup":"coordination.k8s.io"})", "allow") +
      event("b1", "ResponseComplete", "create", R"({"resource":"pods","subresource":"binding"})",
            "allow") +
      // A request for a path, not a resource, and a line that is not JSON: not counted.
      R"({"auditID":"h","stage":"ResponseComplete","verb":"get","user":{"username":"u"}})" +
      std::string("\nnot json\n");
  k8s::Object r = AuthorizationReportFromAudit(log);
  ASSERT_TRUE(r.contains(sa)) << r.dump();
  EXPECT_EQ(r.size(), 1u) << r.dump();
  EXPECT_EQ(r[sa]["allowed"]["watch pods"], 1);
  EXPECT_EQ(r[sa]["allowed"]["get pods"], 2);
  EXPECT_EQ(r[sa]["allowed"]["get leases.coordination.k8s.io"], 1);
  EXPECT_EQ(r[sa]["allowed"]["create pods/binding"], 1);
  EXPECT_EQ(r[sa]["denied"]["patch nodes"], 1);
  EXPECT_EQ(r[sa]["denied"].size(), 1u);
}

}  // namespace
}  // namespace hami::sim
