#include "extender/k8s_objects.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

namespace hami::extender {

using scheduler::PodObject;

namespace {

using Json = nlohmann::json;

// A pod as a real API server returns it after kubectl apply, kubelet and a HAMi bind.
Json FullPod() {
  return Json::parse(R"({
    "apiVersion": "v1", "kind": "Pod",
    "metadata": {
      "name": "p", "namespace": "ns", "uid": "u-1", "resourceVersion": "42",
      "creationTimestamp": "2026-11-24T08:00:00Z", "deletionTimestamp": "2026-11-24T09:00:00Z",
      "labels": {"app": "x", "scheduling.x-k8s.io/pod-group": "g"},
      "annotations": {
        "hami.io/vgpu-node": "n1", "hami.io/bind-phase": "success",
        "hami.io/vgpu-devices-allocated": "GPU-0,NVIDIA,1024,10:;",
        "nvidia.com/use-gputype": "A100",
        "kubectl.kubernetes.io/last-applied-configuration": "{\"a whole copy\":\"of the pod\"}"
      },
      "ownerReferences": [{"kind": "ReplicaSet", "name": "rs"}],
      "managedFields": [{"manager": "kubectl", "fieldsV1": {"f:spec": {"f:containers": {}}}}]
    },
    "spec": {
      "nodeName": "n1", "schedulerName": "hami-scheduler", "priority": 0,
      "initContainers": [{"name": "init", "image": "busybox", "command": ["true"],
                          "resources": {"limits": {"nvidia.com/gpu": 1}}}],
      "containers": [{"name": "main", "image": "cuda", "env": [{"name": "A", "value": "1"}],
                      "volumeMounts": [{"name": "v", "mountPath": "/v"}],
                      "resources": {"limits": {"nvidia.com/gpu": "1", "nvidia.com/gpumem": "1024"},
                                    "requests": {"cpu": "1"}}}],
      "volumes": [{"name": "v", "emptyDir": {}}],
      "tolerations": [{"operator": "Exists"}]
    },
    "status": {
      "phase": "Running", "podIP": "10.0.0.1",
      "conditions": [{"type": "Ready", "status": "True"}],
      "initContainerStatuses": [{"name": "init", "image": "busybox", "restartCount": 0,
                                 "state": {"terminated": {"exitCode": 0}}}],
      "containerStatuses": [{"name": "main", "ready": true}]
    }
  })");
}

TEST(TrimPodForScheduler, KeepsWhatTheSchedulerReadsAndDropsTheRest) {
  Json full = FullPod();
  Json trimmed = TrimPodForScheduler(full);

  PodObject a = PodObjectOf(full), b = PodObjectOf(trimmed);
  EXPECT_EQ(b.uid, "u-1");
  EXPECT_EQ(a.uid, b.uid);
  EXPECT_EQ(a.name_space, b.name_space);
  EXPECT_EQ(a.name, b.name);
  EXPECT_EQ(a.node_name, b.node_name);
  EXPECT_EQ(a.phase, b.phase);
  EXPECT_EQ(a.deleting, b.deleting);
  EXPECT_TRUE(b.init_containers_done);
  EXPECT_EQ(a.init_containers_done, b.init_containers_done);
  EXPECT_EQ(a.init_container_count, b.init_container_count);
  device::Annotations want = a.annotations;
  want.erase("kubectl.kubernetes.io/last-applied-configuration");
  EXPECT_EQ(b.annotations, want);
  EXPECT_EQ(LabelsOf(trimmed), LabelsOf(full));

  device::PodResources ra = PodResourcesOf(full), rb = PodResourcesOf(trimmed);
  ASSERT_EQ(ra.containers.size(), rb.containers.size());
  ASSERT_EQ(ra.init_containers.size(), rb.init_containers.size());
  EXPECT_EQ(rb.containers[0].name, "main");
  EXPECT_EQ(ra.containers[0].limits, rb.containers[0].limits);
  EXPECT_EQ(ra.containers[0].requests, rb.containers[0].requests);
  EXPECT_EQ(ra.init_containers[0].limits, rb.init_containers[0].limits);

  EXPECT_EQ(trimmed["metadata"]["resourceVersion"], "42");
  EXPECT_EQ(trimmed["spec"]["schedulerName"], "hami-scheduler");
  EXPECT_FALSE(trimmed["metadata"].contains("managedFields"));
  EXPECT_FALSE(trimmed["metadata"].contains("ownerReferences"));
  EXPECT_FALSE(trimmed["spec"].contains("volumes"));
  EXPECT_FALSE(trimmed["spec"]["containers"][0].contains("env"));
  EXPECT_FALSE(trimmed["status"].contains("conditions"));
  EXPECT_LT(trimmed.dump().size(), full.dump().size() * 3 / 4);
}

TEST(TrimPodForScheduler, OddShapesPassThroughForTheReadersToJudge) {
  EXPECT_EQ(TrimPodForScheduler(Json("not an object")), Json("not an object"));
  Json odd = {{"metadata", {{"name", "p"}}},
              {"spec", {{"containers", "not a list"}}},
              {"status", {{"initContainerStatuses", 3}}}};
  Json trimmed = TrimPodForScheduler(odd);
  EXPECT_EQ(trimmed["spec"]["containers"], "not a list");
  EXPECT_EQ(trimmed["status"]["initContainerStatuses"], 3);
  EXPECT_EQ(PodResourcesOf(trimmed).containers.size(), PodResourcesOf(odd).containers.size());
}

}  // namespace
}  // namespace hami::extender
