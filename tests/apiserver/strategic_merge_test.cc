// Strategic merge patch: expected objects follow the documented semantics
// (community/contributors/devel/sig-api-machinery/strategic-merge-patch.md) and the published
// merge keys of k8s.io/api, not this implementation.
#include "sim/apiserver/strategic_merge.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

namespace hami::sim {
namespace {

using json = nlohmann::json;

json Patched(const std::string& kind, json object, const char* patch) {
  Status s = ApplyStrategicMergePatch(kind, object, json::parse(patch));
  EXPECT_TRUE(s.ok()) << s.message();
  return object;
}

const json kPod = json::parse(R"({
  "metadata": {"name": "p", "labels": {"a": "1", "b": "2"}, "finalizers": ["x"]},
  "spec": {
    "containers": [
      {"name": "main", "image": "cuda:12", "env": [{"name": "A", "value": "1"}, {"name": "B", "value": "2"}],
       "resources": {"limits": {"nvidia.com/gpu": "1"}}},
      {"name": "sidecar", "image": "busybox"}
    ],
    "tolerations": [{"key": "k1"}, {"key": "k2"}],
    "volumes": [{"name": "data", "hostPath": {"path": "/data"}}]
  }
})");

TEST(StrategicMerge, ListsMergeByTheirKeyAndUnlistedEntriesSurvive) {
  json out = Patched("Pod", kPod, R"({"spec": {"containers": [
      {"name": "main", "image": "cuda:13", "env": [{"name": "B", "value": "3"}, {"name": "C", "value": "4"}]},
      {"name": "debug", "image": "alpine"}]}})");
  const json& c = out["spec"]["containers"];
  ASSERT_EQ(c.size(), 3u);
  EXPECT_EQ(c[0]["name"], "main");
  EXPECT_EQ(c[0]["image"], "cuda:13");
  EXPECT_EQ(c[0]["resources"]["limits"]["nvidia.com/gpu"], "1") << "fields not in the patch stay";
  EXPECT_EQ(c[0]["env"], json::parse(R"([{"name":"A","value":"1"},{"name":"B","value":"3"},
                                          {"name":"C","value":"4"}])"));
  EXPECT_EQ(c[1]["name"], "sidecar");
  EXPECT_EQ(c[2], json::parse(R"({"name":"debug","image":"alpine"})"));
}

TEST(StrategicMerge, ListsWithoutAStrategyAreReplaced) {
  json out = Patched("Pod", kPod, R"({"spec": {"tolerations": [{"key": "k3"}]}})");
  EXPECT_EQ(out["spec"]["tolerations"], json::parse(R"([{"key":"k3"}])"));
}

TEST(StrategicMerge, DeleteAndReplaceDirectives) {
  json out = Patched("Pod", kPod,
                     R"({"spec": {"containers": [{"$patch": "delete", "name": "sidecar"}]}})");
  ASSERT_EQ(out["spec"]["containers"].size(), 1u);
  EXPECT_EQ(out["spec"]["containers"][0]["name"], "main");

  out = Patched(
      "Pod", kPod,
      R"({"spec": {"containers": [{"$patch": "replace"}, {"name": "only", "image": "x"}]}})");
  EXPECT_EQ(out["spec"]["containers"], json::parse(R"([{"name":"only","image":"x"}])"));

  out = Patched("Pod", kPod, R"({"metadata": {"labels": {"$patch": "replace", "c": "3"}}})");
  EXPECT_EQ(out["metadata"]["labels"], json::parse(R"({"c":"3"})"));

  out = Patched("Pod", kPod, R"({"metadata": {"labels": {"$patch": "delete"}}})");
  EXPECT_FALSE(out["metadata"].contains("labels"));

  out = Patched("Pod", kPod, R"({"metadata": {"labels": {"a": null, "z": "9"}}})");
  EXPECT_EQ(out["metadata"]["labels"], json::parse(R"({"b":"2","z":"9"})"));
}

TEST(StrategicMerge, RetainKeysClearsTheOtherKeys) {
  // volumes are "merge,retainKeys": switching a volume's source drops the old one.
  json out = Patched("Pod", kPod, R"({"spec": {"volumes": [
      {"name": "data", "emptyDir": {}, "$retainKeys": ["emptyDir", "name"]}]}})");
  EXPECT_EQ(out["spec"]["volumes"], json::parse(R"([{"name":"data","emptyDir":{}}])"));
  json deploy = {
      {"spec", {{"strategy", {{"type", "RollingUpdate"}, {"rollingUpdate", {{"maxSurge", 1}}}}}}}};
  out = Patched("Deployment", deploy,
                R"({"spec": {"strategy": {"type": "Recreate", "$retainKeys": ["type"]}}})");
  EXPECT_EQ(out["spec"]["strategy"], json::parse(R"({"type":"Recreate"})"));
}

TEST(StrategicMerge, SetElementOrderKeepsOthersInTheirPlace) {
  // "s" was added by someone else between a and b; the patch adds "n" after a.
  json hook = json::parse(R"({"webhooks": [{"name": "a"}, {"name": "s"}, {"name": "b"}]})");
  auto names = [](const json& obj) {
    std::vector<std::string> out;
    for (const json& w : obj["webhooks"]) out.push_back(w["name"]);
    return out;
  };
  json out = Patched("MutatingWebhookConfiguration", hook, R"({
      "$setElementOrder/webhooks": [{"name": "a"}, {"name": "n"}, {"name": "b"}],
      "webhooks": [{"name": "n"}]})");
  EXPECT_EQ(names(out), (std::vector<std::string>{"a", "n", "s", "b"}));
  // Reordered: the listed ones in the given order; "s" stays ahead of b, which it preceded.
  out = Patched("MutatingWebhookConfiguration", hook, R"({
      "$setElementOrder/webhooks": [{"name": "b"}, {"name": "n"}, {"name": "a"}],
      "webhooks": [{"name": "n"}]})");
  EXPECT_EQ(names(out), (std::vector<std::string>{"s", "b", "n", "a"}));

  json scalars = {{"metadata", {{"finalizers", {"x", "y"}}}}};
  out = Patched("Pod", scalars, R"({"metadata": {
      "$setElementOrder/finalizers": ["z", "x"], "finalizers": ["z"]}})");
  EXPECT_EQ(out["metadata"]["finalizers"], json::parse(R"(["z","x","y"])"));
}

TEST(StrategicMerge, ScalarSetsMergeAndDeleteFromPrimitiveList) {
  json out = Patched("Pod", kPod, R"({"metadata": {"finalizers": ["y", "x"]}})");
  EXPECT_EQ(out["metadata"]["finalizers"], json::parse(R"(["x","y"])"));
  out = Patched("Pod", out, R"({"metadata": {"$deleteFromPrimitiveList/finalizers": ["x"]}})");
  EXPECT_EQ(out["metadata"]["finalizers"], json::parse(R"(["y"])"));
}

TEST(StrategicMerge, TemplatesNodesAndConditions) {
  json deploy = {{"spec", {{"template", {{"spec", kPod["spec"]}}}}}};
  json out = Patched("Deployment", deploy, R"({"spec": {"template": {"spec": {"containers": [
      {"name": "main", "image": "cuda:13"}]}}}})");
  EXPECT_EQ(out["spec"]["template"]["spec"]["containers"].size(), 2u);
  EXPECT_EQ(out["spec"]["template"]["spec"]["containers"][0]["image"], "cuda:13");
  json node = json::parse(R"({"status": {"conditions": [{"type": "Ready", "status": "True"},
      {"type": "MemoryPressure", "status": "False"}]}})");
  out = Patched("Node", node,
                R"({"status": {"conditions": [{"type": "Ready", "status": "False"}]}})");
  EXPECT_EQ(out["status"]["conditions"], json::parse(R"([{"type":"Ready","status":"False"},
                            {"type":"MemoryPressure","status":"False"}])"));
}

TEST(StrategicMerge, KindsWithoutListStrategiesReplaceLists) {
  json role = json::parse(R"({"rules": [{"verbs": ["get"]}, {"verbs": ["list"]}]})");
  json out = Patched("ClusterRole", role, R"({"rules": [{"verbs": ["watch"]}]})");
  EXPECT_EQ(out["rules"], json::parse(R"([{"verbs":["watch"]}])"));
}

TEST(StrategicMerge, MalformedPatchesAreRefused) {
  for (const char* patch : {
           R"({"spec": {"containers": [{"image": "no-name"}]}})",
           R"({"spec": {"containers": ["main"]}})",
           R"({"metadata": {"labels": {"$patch": "shred"}}})",
           R"({"metadata": {"$retainKeys": "name"}})",
           R"({"metadata": {"$deleteFromPrimitiveList/finalizers": "x"}})",
           R"({"$patch": "delete"})",
           R"({"$bogus": 1})",
           R"({"$setElementOrder/webhooks": "a", "webhooks": []})",
       }) {
    json obj = kPod;
    json hook = {{"webhooks", json::array()}};
    Status s = ApplyStrategicMergePatch(
        std::string(patch).find("webhooks") != std::string::npos ? "MutatingWebhookConfiguration"
                                                                 : "Pod",
        std::string(patch).find("webhooks") != std::string::npos ? hook : obj, json::parse(patch));
    EXPECT_FALSE(s.ok()) << patch;
  }
}

}  // namespace
}  // namespace hami::sim
