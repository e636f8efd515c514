#include "k8s/typed.h"

#include <gtest/gtest.h>

#include "k8s/api_error.h"
#include "k8s/test_util.h"

namespace hami::k8s {
namespace {

using testing::FakeClient;
using testing::Header;

TEST(TypedTest, BindPodPostsBindingSubresource) {
  FakeClient fc;
  fc.fake->Push("POST", "/api/v1/namespaces/ns/pods/p1/binding",
                FakeTransport::Json(201, R"({"kind":"Status","status":"Success"})"));
  ASSERT_TRUE(BindPod(*fc.client, "ns", "p1", "uid-1", "node-7").ok());
  Object b = *ParseObject(fc.fake->requests().at(0).body);
  EXPECT_EQ(b["kind"], "Binding");
  EXPECT_EQ(b["metadata"]["name"], "p1");
  EXPECT_EQ(b["metadata"]["uid"], "uid-1");
  EXPECT_EQ(b["target"]["kind"], "Node");
  EXPECT_EQ(b["target"]["name"], "node-7");
  EXPECT_FALSE(b["metadata"].contains("annotations"));
  fc.fake->Push("POST", "/api/v1/namespaces/ns/pods/p1/binding",
                FakeTransport::Json(201, R"({"kind":"Status","status":"Success"})"));
  ASSERT_TRUE(
      BindPod(*fc.client, "ns", "p1", "", "node-7", {{"hami.io/bind-phase", "allocating"}}).ok());
  b = *ParseObject(fc.fake->requests().at(1).body);
  EXPECT_EQ(b["metadata"]["annotations"]["hami.io/bind-phase"], "allocating");
  EXPECT_FALSE(b["metadata"].contains("uid"));
}

TEST(TypedTest, BindConflictIsDistinguishable) {
  FakeClient fc;
  fc.fake->Push("POST", "/binding",
                FakeTransport::Json(409, R"({"reason":"Conflict","message":"already assigned"})"));
  EXPECT_TRUE(IsConflict(BindPod(*fc.client, "ns", "p1", "", "n")));
}

TEST(TypedTest, AnnotationPatchSetsAndRemoves) {
  FakeClient fc;
  fc.fake->Push("PATCH", "/api/v1/namespaces/ns/pods/p", FakeTransport::Json(200, "{}"));
  fc.fake->Push("PATCH", "/api/v1/nodes/n", FakeTransport::Json(200, "{}"));
  ASSERT_TRUE(PatchPodAnnotations(*fc.client, "ns", "p",
                                  {{"hami.io/bind-phase", "allocating"}, {"gone", std::nullopt}})
                  .ok());
  ASSERT_TRUE(PatchNodeAnnotations(*fc.client, "n", {{"hami.io/mutex.lock", std::nullopt}}).ok());
  auto reqs = fc.fake->requests();
  EXPECT_EQ(reqs[0].body,
            R"({"metadata":{"annotations":{"gone":null,"hami.io/bind-phase":"allocating"}}})");
  EXPECT_EQ(Header(reqs[0], "Content-Type"), "application/merge-patch+json");
  EXPECT_EQ(reqs[1].body, R"({"metadata":{"annotations":{"hami.io/mutex.lock":null}}})");
}

TEST(TypedTest, EventLooksLikeASchedulerEvent) {
  FakeClient fc;
  fc.fake->Push("POST", "/api/v1/namespaces/team/events", FakeTransport::Json(201, "{}"));
  EventSpec spec;
  spec.involved = std::make_shared<const Object>(
      Object{{"kind", "Pod"},
             {"apiVersion", "v1"},
             {"metadata",
              {{"name", "p"}, {"namespace", "team"}, {"uid", "u"}, {"resourceVersion", "4"}}}});
  spec.type = "Warning";
  spec.reason = "FilteringFailed";
  spec.message = "no node fits";
  spec.host = "sched-0";
  ASSERT_TRUE(CreateEvent(*fc.client, spec).ok());
  Object ev = *ParseObject(fc.fake->requests().at(0).body);
  EXPECT_EQ(ev["kind"], "Event");
  EXPECT_EQ(ev["metadata"]["namespace"], "team");
  // "<name>.<hex nanoseconds>" at the fake clock's 2024-01-01T00:00:00Z.
  EXPECT_EQ(ev["metadata"]["name"], "p.17a6101701650000");
  EXPECT_EQ(ev["involvedObject"]["uid"], "u");
  EXPECT_EQ(ev["involvedObject"]["kind"], "Pod");
  EXPECT_EQ(ev["involvedObject"]["resourceVersion"], "4");
  EXPECT_EQ(ev["reason"], "FilteringFailed");
  EXPECT_EQ(ev["type"], "Warning");
  EXPECT_EQ(ev["source"]["component"], "hami-scheduler");
  EXPECT_EQ(ev["source"]["host"], "sched-0");
  EXPECT_EQ(ev["firstTimestamp"], "2024-01-01T00:00:00Z");
  EXPECT_EQ(ev["lastTimestamp"], "2024-01-01T00:00:00Z");
  EXPECT_EQ(ev["count"], 1);
}

TEST(TypedTest, EventForClusterScopedObjectGoesToDefault) {
  Object ev =
      MakeEvent({.involved = std::make_shared<const Object>(Object{{"metadata", {{"name", "n1"}}}}),
                 .kind = "Node",
                 .reason = "Registered"},
                WallTimePoint(std::chrono::seconds(1)));
  EXPECT_EQ(ev["metadata"]["namespace"], "default");
  EXPECT_EQ(ev["involvedObject"]["kind"], "Node");
  EXPECT_FALSE(ev["involvedObject"].contains("namespace"));
}

TEST(TypedTest, GetAndListHelpers) {
  FakeClient fc;
  fc.fake->Push("GET", "/api/v1/nodes/n1",
                FakeTransport::Json(200, R"({"metadata":{"name":"n1"}})"));
  fc.fake->Push("GET", "/api/v1/nodes?labelSelector=gpu%3Don",
                FakeTransport::Json(200, R"({"metadata":{},"items":[]})"));
  fc.fake->Push("GET", "/api/v1/namespaces/ns/pods/p",
                FakeTransport::Json(200, R"({"metadata":{"name":"p"}})"));
  EXPECT_EQ(Name(*GetNode(*fc.client, "n1")), "n1");
  ListOptions o;
  o.label_selector = "gpu=on";
  EXPECT_TRUE(ListNodes(*fc.client, o)->at("items").empty());
  EXPECT_EQ(Name(*GetPod(*fc.client, "ns", "p")), "p");
}

TEST(ObjectTest, TimeFormats) {
  WallTimePoint t = WallTimePoint(std::chrono::seconds(1704067200)) + std::chrono::microseconds(42);
  EXPECT_EQ(FormatTime(t), "2024-01-01T00:00:00Z");
  EXPECT_EQ(FormatMicroTime(t), "2024-01-01T00:00:00.000042Z");
}

TEST(ObjectTest, SafeAccessors) {
  Object o = *ParseObject(R"({"metadata":{"name":"x","annotations":{"a/b":"v"}},"n":3})");
  EXPECT_EQ(GetString(o, "/metadata/annotations/a~1b"), "v");
  EXPECT_EQ(GetString(o, "/metadata/missing"), "");
  EXPECT_EQ(GetString(o, "/n"), "");
  EXPECT_EQ(GetInt(o, "/n"), 3);
  EXPECT_EQ(GetInt(o, "/metadata/name", -1), -1);
  EXPECT_EQ(ObjectKey(o), "x");
  EXPECT_FALSE(ParseObject("[]").ok());
}

TEST(ObjectTest, ScanResourceVersionReadsOnlyTheObjectsOwn) {
  // Nested resourceVersions (an Event's involvedObject, a List's items) are not the object's.
  EXPECT_EQ(*ScanResourceVersion(
                R"({"kind":"Event","involvedObject":{"resourceVersion":"1"},"spec":{"metadata":)"
                R"({"resourceVersion":"2"}},"metadata":{"labels":{"resourceVersion":"3"},)"
                R"("ownerReferences":[{"resourceVersion":"4"}],"resourceVersion":"42"}})"),
            "42");
  EXPECT_EQ(*ScanResourceVersion(R"({"metadata":{"name":"x"}})"), "");
  EXPECT_EQ(*ScanResourceVersion(R"({"metadata":{"resourceVersion":7}})"), "");
  EXPECT_EQ(*ScanResourceVersion("{}"), "");
  // Duplicate keys: the last wins, as in the parsed document.
  EXPECT_EQ(*ScanResourceVersion(R"({"metadata":{"resourceVersion":"1","resourceVersion":2}})"),
            "");
  EXPECT_EQ(*ScanResourceVersion(R"({"metadata":{"resourceVersion":"1"},"metadata":{}})"), "");
  EXPECT_EQ(*ScanResourceVersion(R"({"metadata":{"resourceVersion":{"a":"1"}}})"), "");
  EXPECT_FALSE(ScanResourceVersion("[]").ok());
  EXPECT_FALSE(ScanResourceVersion(R"({"metadata":{"resourceVersion":"1"})").ok());
  EXPECT_FALSE(ScanResourceVersion(R"({"metadata":{}} trailing)").ok());
  EXPECT_FALSE(ScanResourceVersion("").ok());
}

}  // namespace
}  // namespace hami::k8s
