// The extender client on a scripted transport: ExtenderArgs shapes (nodenames vs nodes),
// ExtenderFilterResult decoding, error mapping, binding arguments and managed-resource interest.
#include "sim/kubescheduler/extender.h"

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "k8s/fake_transport.h"
#include "k8s/object.h"

namespace hami::sim {
namespace {

using k8s::FakeTransport;
using k8s::Object;
using k8s::ObjectPtr;

Object Pod(const std::string& resource = "") {
  Object c = {{"name", "c"}};
  if (!resource.empty()) c["resources"] = {{"limits", {{resource, "1"}}}};
  return {{"apiVersion", "v1"},
          {"kind", "Pod"},
          {"metadata", {{"name", "p"}, {"namespace", "ns"}, {"uid", "u-1"}}},
          {"spec", {{"containers", Object::array({c})}}}};
}

std::vector<ObjectPtr> Nodes(std::initializer_list<const char*> names) {
  std::vector<ObjectPtr> out;
  for (const char* n : names) {
    out.push_back(std::make_shared<const Object>(
        Object{{"kind", "Node"}, {"metadata", {{"name", n}, {"labels", {{"zone", "a"}}}}}}));
  }
  return out;
}

struct Fixture {
  explicit Fixture(ExtenderConfig cfg) {
    auto t = std::make_unique<FakeTransport>();
    fake = t.get();
    ext = std::make_unique<Extender>(std::move(cfg), std::move(t));
  }
  Object LastBody() const {
    std::vector<k8s::HttpRequest> reqs = fake->requests();
    if (reqs.empty()) return Object();
    return *k8s::ParseObject(reqs.back().body);
  }
  FakeTransport* fake = nullptr;
  std::unique_ptr<Extender> ext;
};

ExtenderConfig Config(bool node_cache_capable) {
  ExtenderConfig c;
  c.url_prefix = "http://ext:80";
  c.filter_verb = "filter";
  c.bind_verb = "bind";
  c.node_cache_capable = node_cache_capable;
  c.http_timeout = std::chrono::milliseconds(1234);
  return c;
}

TEST(ExtenderTest, FilterSendsNodeNamesWhenNodeCacheCapable) {
  Fixture f(Config(true));
  f.fake->Push("POST", "http://ext:80/filter", FakeTransport::Json(200, R"({"nodenames":["n2"],
                   "failedNodes":{"n1":"CardInsufficientMemory"},
                   "failedAndUnresolvableNodes":{"n3":"gone"},"error":""})"));
  Result<ExtenderFilterResult> r = f.ext->Filter(Pod(), Nodes({"n1", "n2", "n3"}));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->node_names, std::vector<std::string>({"n2"}));
  EXPECT_EQ(r->failed_nodes.at("n1"), "CardInsufficientMemory");
  EXPECT_EQ(r->failed_and_unresolvable_nodes.at("n3"), "gone");

  std::vector<k8s::HttpRequest> reqs = f.fake->requests();
  ASSERT_EQ(reqs.size(), 1u);
  EXPECT_EQ(reqs[0].method, "POST");
  EXPECT_EQ(reqs[0].timeout, std::chrono::milliseconds(1234));
  Object body = f.LastBody();
  EXPECT_EQ(body["NodeNames"], Object::array({"n1", "n2", "n3"}));
  EXPECT_FALSE(body.contains("Nodes"));
  EXPECT_EQ(body["Pod"]["metadata"]["uid"], "u-1");
}

TEST(ExtenderTest, FilterSendsNodeObjectsOtherwise) {
  Fixture f(Config(false));
  f.fake->Push("POST", "/filter",
               FakeTransport::Json(200, R"({"nodes":{"items":[{"metadata":{"name":"n1"}}]}})"));
  Result<ExtenderFilterResult> r = f.ext->Filter(Pod(), Nodes({"n1", "n2"}));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->node_names, std::vector<std::string>({"n1"}));
  Object body = f.LastBody();
  EXPECT_FALSE(body.contains("NodeNames"));
  ASSERT_EQ(body["Nodes"]["items"].size(), 2u);
  EXPECT_EQ(body["Nodes"]["items"][1]["metadata"]["name"], "n2");
  EXPECT_EQ(body["Nodes"]["items"][1]["metadata"]["labels"]["zone"], "a");
}

TEST(ExtenderTest, FilterErrors) {
  Fixture f(Config(true));
  // The extender's own error text is passed through verbatim.
  f.fake->Push("POST", "/filter", FakeTransport::Json(200, R"({"error":"no node synced"})"));
  Result<ExtenderFilterResult> r = f.ext->Filter(Pod(), Nodes({"n1"}));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(), "no node synced");

  f.fake->Push("POST", "/filter", FakeTransport::Json(500, "{}"));
  r = f.ext->Filter(Pod(), Nodes({"n1"}));
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("HTTP 500"), std::string::npos) << r.status().message();

  f.fake->Push("POST", "/filter", UnavailableError("connection refused"));
  r = f.ext->Filter(Pod(), Nodes({"n1"}));
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("http://ext:80/filter: connection refused"),
            std::string::npos)
      << r.status().message();

  f.fake->Push("POST", "/filter", FakeTransport::Json(200, "not json"));
  r = f.ext->Filter(Pod(), Nodes({"n1"}));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kDataLoss);

  f.fake->Push("POST", "/filter", FakeTransport::Json(200, R"({"nodenames":["n9"]})"));
  r = f.ext->Filter(Pod(), Nodes({"n1"}));
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("\"n9\" which was not offered"), std::string::npos);

  f.fake->Push("POST", "/filter", FakeTransport::Json(200, R"({"failedNodes":["n1"]})"));
  r = f.ext->Filter(Pod(), Nodes({"n1"}));
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("FailedNodes"), std::string::npos);
}

TEST(ExtenderTest, EmptyResultMeansNoNodePassed) {
  Fixture f(Config(true));
  f.fake->Push("POST", "/filter", FakeTransport::Json(200, R"({"nodenames":null})"));
  Result<ExtenderFilterResult> r = f.ext->Filter(Pod(), Nodes({"n1"}));
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(r->node_names.empty());
}

TEST(ExtenderTest, BindSendsBindingArgs) {
  Fixture f(Config(true));
  f.fake->Push("POST", "http://ext:80/bind", FakeTransport::Json(200, "{}"));
  ASSERT_TRUE(f.ext->Bind({"p", "ns", "u-1", "n1"}).ok());
  Object body = f.LastBody();
  EXPECT_EQ(body,
            Object({{"PodName", "p"}, {"PodNamespace", "ns"}, {"PodUID", "u-1"}, {"Node", "n1"}}));

  f.fake->Push("POST", "/bind", FakeTransport::Json(200, R"({"error":"node n1 locked"})"));
  Status s = f.ext->Bind({"p", "ns", "u-1", "n1"});
  EXPECT_EQ(s.message(), "node n1 locked");
}

TEST(ExtenderTest, InterestFollowsManagedResources) {
  ExtenderConfig cfg = Config(true);
  Fixture all(cfg);
  EXPECT_TRUE(all.ext->IsInterested(Pod()));
  EXPECT_TRUE(all.ext->IsFilter());
  EXPECT_TRUE(all.ext->IsBinder());

  cfg.managed_resources = {{"nvidia.com/gpu", true}, {"nvidia.com/gpumem", true}};
  Fixture managed(cfg);
  EXPECT_FALSE(managed.ext->IsInterested(Pod()));
  EXPECT_FALSE(managed.ext->IsInterested(Pod("cpu")));
  EXPECT_TRUE(managed.ext->IsInterested(Pod("nvidia.com/gpumem")));
  Object init = Pod();
  init["spec"]["initContainers"] =
      Object::array({{{"name", "i"}, {"resources", {{"requests", {{"nvidia.com/gpu", "1"}}}}}}});
  EXPECT_TRUE(managed.ext->IsInterested(init));
}

TEST(ExtenderTest, CreateAcceptsServerNameAndReportsMissingFiles) {
  ExtenderConfig cfg = Config(true);
  cfg.url_prefix = "https://ext:443";
  cfg.tls.server_name = "ext.example";   // verified and sent as SNI by the socket transport
  cfg.tls.ca_data = "not really a PEM";  // rejected by the first exchange, not here
  EXPECT_TRUE(Extender::Create(cfg).ok());

  cfg.tls.ca_data.clear();
  cfg.tls.insecure = true;
  EXPECT_TRUE(Extender::Create(cfg).ok());

  cfg.tls.insecure = false;
  cfg.tls.server_name.clear();
  cfg.tls.ca_file = "/nonexistent/ca.pem";
  Result<std::unique_ptr<Extender>> r = Extender::Create(cfg);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kNotFound);
}

}  // namespace
}  // namespace hami::sim
