// Table rows as kubectl prints them, at a fixed "now".
#include "sim/apiserver/tables.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

namespace hami::sim {
namespace {

using json = nlohmann::json;

constexpr std::time_t kNow = 1764115200;  // 2025-11-26T00:00:00Z

ResourceInfo Kind(const char* kind) {
  ResourceInfo r;
  r.kind = kind;
  return r;
}

json Table(const char* kind, const char* object) {
  return TableOf(Kind(kind), {std::make_shared<const json>(json::parse(object))}, 7, kNow);
}

std::vector<std::string> Headers(const json& table, bool wide) {
  std::vector<std::string> out;
  for (const json& c : table["columnDefinitions"]) {
    if (wide || c["priority"] == 0) out.push_back(c["name"]);
  }
  return out;
}

TEST(HumanDuration, AsKubectlPrintsAges) {
  const std::pair<long long, const char*> cases[] = {
      {0, "0s"},       {45, "45s"},      {119, "119s"},       {200, "3m20s"},   {300, "5m"},
      {1800, "30m"},   {10800, "3h"},    {11100, "3h5m"},     {90000, "25h"},   {190800, "2d5h"},
      {864000, "10d"}, {63072000, "2y"}, {65664000, "2y30d"}, {-5, "<invalid>"}};
  for (const auto& [s, want] : cases) EXPECT_EQ(HumanDuration(s), want) << s;
}

TEST(Tables, PodColumnsAndWideColumns) {
  json t =
      Table("Pod", R"({"metadata":{"name":"trainer","creationTimestamp":"2025-11-25T23:55:00Z"},
      "spec":{"nodeName":"node-1","containers":[{"name":"a"},{"name":"b"}],
              "readinessGates":[{"conditionType":"hami.io/ready"}]},
      "status":{"phase":"Running","podIP":"10.0.0.5","nominatedNodeName":"node-2",
        "conditions":[{"type":"hami.io/ready","status":"True"}],
        "containerStatuses":[
          {"name":"a","ready":true,"restartCount":2,"state":{"running":{}},
           "lastState":{"terminated":{"finishedAt":"2025-11-25T23:58:00Z"}}},
          {"name":"b","ready":false,"restartCount":0,"state":{"waiting":{"reason":"CrashLoopBackOff"}}}]}})");
  EXPECT_EQ(Headers(t, false),
            (std::vector<std::string>{"Name", "Ready", "Status", "Restarts", "Age"}));
  EXPECT_EQ(Headers(t, true),
            (std::vector<std::string>{"Name", "Ready", "Status", "Restarts", "Age", "IP", "Node",
                                      "Nominated Node", "Readiness Gates"}));
  EXPECT_EQ(t["rows"][0]["cells"],
            json::parse(R"j(["trainer","1/2","CrashLoopBackOff","2 (2m ago)","5m","10.0.0.5",
                            "node-1","node-2","1/1"])j"));
  EXPECT_EQ(t["metadata"]["resourceVersion"], "7");

  json pending = Table("Pod", R"({"metadata":{"name":"p"},"spec":{"containers":[{"name":"a"}]},
      "status":{"phase":"Pending"}})");
  EXPECT_EQ(pending["rows"][0]["cells"],
            json::parse(R"(["p","0/1","Pending","0","<unknown>","<none>","<none>","<none>",
                            "<none>"])"));
  json deleting = Table("Pod", R"({"metadata":{"name":"d","deletionTimestamp":"x"},
      "spec":{"containers":[]},"status":{"phase":"Running"}})");
  EXPECT_EQ(deleting["rows"][0]["cells"][2], "Terminating");
  json init = Table("Pod", R"({"metadata":{"name":"i"},
      "spec":{"initContainers":[{"name":"x"},{"name":"y"}],"containers":[{"name":"a"}]},
      "status":{"phase":"Pending","initContainerStatuses":[
        {"name":"x","state":{"terminated":{"exitCode":0}}},{"name":"y","state":{"running":{}}}]}})");
  EXPECT_EQ(init["rows"][0]["cells"][2], "Init:1/2");
}

TEST(Tables, NodeColumns) {
  json t = Table("Node", R"({"metadata":{"name":"gpu-1","creationTimestamp":"2025-11-24T00:00:00Z",
      "labels":{"node-role.kubernetes.io/worker":"","node-role.kubernetes.io/gpu":""}},
      "spec":{"unschedulable":true},
      "status":{"conditions":[{"type":"Ready","status":"True"}],
        "addresses":[{"type":"InternalIP","address":"10.1.0.7"}],
        "nodeInfo":{"kubeletVersion":"v1.32.0","osImage":"Debian 12","kernelVersion":"6.1",
                    "containerRuntimeVersion":"containerd://1.7"}}})");
  EXPECT_EQ(Headers(t, false),
            (std::vector<std::string>{"Name", "Status", "Roles", "Age", "Version"}));
  EXPECT_EQ(t["rows"][0]["cells"],
            json::parse(R"(["gpu-1","Ready,SchedulingDisabled","gpu,worker","2d","v1.32.0",
                            "10.1.0.7","<none>","Debian 12","6.1","containerd://1.7"])"));
}

TEST(Tables, EventColumnsForBothEventApis) {
  json core = Table("Event", R"({"metadata":{"name":"trainer.1"},"type":"Warning",
      "reason":"FilteringFailed","message":"no node fits",
      "involvedObject":{"kind":"Pod","name":"trainer"},"source":{"component":"hami-scheduler"},
      "firstTimestamp":"2025-11-25T23:50:00Z","lastTimestamp":"2025-11-25T23:59:30Z","count":3})");
  EXPECT_EQ(Headers(core, false),
            (std::vector<std::string>{"Last Seen", "Type", "Reason", "Object", "Message"}));
  EXPECT_EQ(core["rows"][0]["cells"],
            json::parse(R"(["30s","Warning","FilteringFailed","pod/trainer","",
                            "hami-scheduler","no node fits","10m",3,"trainer.1"])"));
  json modern = Table("Event", R"({"metadata":{"name":"e"},"type":"Normal","reason":"Bound",
      "note":"bound to node-1","regarding":{"kind":"Pod","name":"p"},
      "reportingController":"hami-scheduler","eventTime":"2025-11-25T23:59:00Z"})");
  EXPECT_EQ(modern["rows"][0]["cells"][0], "60s");
  EXPECT_EQ(modern["rows"][0]["cells"][3], "pod/p");
  EXPECT_EQ(modern["rows"][0]["cells"][6], "bound to node-1");
}

TEST(Tables, LeaseColumns) {
  json t = Table("Lease", R"({"metadata":{"name":"hami-scheduler",
      "creationTimestamp":"2025-11-25T23:00:00Z"},"spec":{"holderIdentity":"replica-a"}})");
  EXPECT_EQ(Headers(t, true), (std::vector<std::string>{"Name", "Holder", "Age"}));
  EXPECT_EQ(t["rows"][0]["cells"], json::parse(R"(["hami-scheduler","replica-a","60m"])"));
}

}  // namespace
}  // namespace hami::sim
