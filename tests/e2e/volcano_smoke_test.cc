// Volcano's own scheduler on the real control plane: KubeControlPlane (tools/kube) with
// vc-controller-manager and vc-scheduler beside it (tools/volcano, scripts/volcano-tools.sh),
// the release a node agent speaking Volcano's deviceshare protocol is checked against. The smoke
// test: a Node object (no kubelet: its status is written once, Ready, with room for a pod) and a
// pod of schedulerName `volcano`; the controller manager gives the pod its PodGroup and
// vc-scheduler, running the chart's tiers plus `deviceshare` in vGPU mode, binds it to the node.
// Then a node announcing vGPUs gets the scheduler's handshake answer.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "k8s/config.h"
#include "k8s/object.h"
#include "k8s/rest_client.h"
#include "sim/world/kube_control_plane.h"
#include "sim/world/waits.h"
#include "tests/kube_bin.h"

namespace hami {
namespace {

using nlohmann::json;

// The Helm chart's volcano-scheduler.conf of the release (installer/helm/chart/volcano/config),
// with deviceshare in vGPU mode as a HAMi-style node agent is run against it.
constexpr const char* kSchedulerConf = R"(actions: "enqueue, allocate, backfill"
tiers:
- plugins:
  - name: priority
  - name: gang
    enablePreemptable: false
  - name: conformance
- plugins:
  - name: overcommit
  - name: drf
    enablePreemptable: false
  - name: deviceshare
    arguments:
      deviceshare.VGPUEnable: true
      deviceshare.SchedulePolicy: binpack
      deviceshare.ScheduleWeight: 10
  - name: predicates
  - name: proportion
  - name: nodeorder
  - name: binpack
)";

const k8s::Resource kPodGroups{"scheduling.volcano.sh/v1beta1", "podgroups", true};

json NodeObject(const std::string& name) {
  json capacity = {{"cpu", "8"}, {"memory", "32Gi"}, {"pods", "110"}};
  return {{"apiVersion", "v1"},
          {"kind", "Node"},
          {"metadata", {{"name", name}, {"labels", {{"kubernetes.io/hostname", name}}}}},
          {"status",
           {{"capacity", capacity},
            {"allocatable", capacity},
            {"conditions",
             json::array({{{"type", "Ready"},
                           {"status", "True"},
                           {"reason", "KubeletReady"},
                           {"message", "written by the test"}}})}}}};
}

json PodObject(const std::string& name) {
  return {{"apiVersion", "v1"},
          {"kind", "Pod"},
          {"metadata", {{"name", name}, {"namespace", "default"}}},
          {"spec",
           {{"schedulerName", "volcano"},
            // No kubelet keeps the node's heartbeat: should the node lifecycle controller taint
            // it meanwhile, the pod still fits.
            {"tolerations", json::array({{{"operator", "Exists"}}})},
            {"containers",
             json::array({{{"name", "main"},
                           {"image", "registry.k8s.io/pause:3.10"},
                           {"resources",
                            {{"requests", {{"cpu", "100m"}, {"memory", "64Mi"}}},
                             {"limits", {{"cpu", "100m"}, {"memory", "64Mi"}}}}}}})}}}};
}

class VolcanoSmoke : public ::testing::Test {
 protected:
  void SetUp() override {
    volcano_bin_ = HAMI_VOLCANO_BIN;
    if (const char* env = std::getenv("HAMI_VOLCANO_BIN"); env != nullptr && *env != '\0') {
      volcano_bin_ = env;
    }
    if (volcano_bin_.empty() || kube_pin::BinDir().empty()) {
      GTEST_SKIP() << "needs both scripts/kube-tools.sh and scripts/volcano-tools.sh builds";
    }
    if (const char* keep = std::getenv("VOLCANO_SMOKE_DIR")) {  // keep the logs
      dir_ = keep;
      keep_ = true;
      std::filesystem::create_directories(dir_);
    } else {
      std::string tmpl = (std::filesystem::temp_directory_path() / "volcano-smoke-XXXXXX").string();
      ASSERT_NE(mkdtemp(tmpl.data()), nullptr);
      dir_ = tmpl;
    }
    sim::KubeControlPlaneOptions o;
    o.bin_dir = kube_pin::BinDir();
    o.dir = dir_;
    auto cp = sim::KubeControlPlane::Start(o);
    ASSERT_TRUE(cp.ok()) << cp.status().ToString();
    cp_ = std::move(*cp);
    k8s::RestConfig rest = k8s::LoadKubeconfigFile(cp_->admin_kubeconfig()).value();
    rest.qps = 0;
    client_ = k8s::RestClient::Create(rest).value();
  }

  void TearDown() override {
    if (cp_ && HasFailure()) {
      for (const char* name : {"vc-controller-manager", "vc-scheduler"}) {
        if (sim::LoggedProcess* p = cp_->Process(name)) {
          ADD_FAILURE() << name << " log (" << p->log() << "):\n" << p->LogTail(40);
        }
      }
    }
    client_.reset();
    cp_.reset();
    if (!keep_ && !dir_.empty() && !HasFailure()) {
      std::error_code ec;
      std::filesystem::remove_all(dir_, ec);
    }
  }

  std::string volcano_bin_;
  std::string dir_;
  bool keep_ = false;
  std::unique_ptr<sim::KubeControlPlane> cp_;
  std::unique_ptr<k8s::RestClient> client_;
};

TEST_F(VolcanoSmoke, VcSchedulerBindsAPodOfSchedulerNameVolcano) {
  Status started = cp_->StartVolcano(volcano_bin_, kSchedulerConf);
  ASSERT_TRUE(started.ok()) << started.ToString();
  ASSERT_NE(cp_->Process("vc-scheduler"), nullptr);
  ASSERT_NE(cp_->Process("vc-controller-manager"), nullptr);
  // The queue every PodGroup without one lands in, which vc-scheduler made.
  Result<k8s::Object> queue =
      client_->Get({"scheduling.volcano.sh/v1beta1", "queues", false}, "", "default");
  ASSERT_TRUE(queue.ok()) << queue.status().ToString();

  Result<k8s::Object> node = client_->Create(k8s::kNodes, "", NodeObject("volcano-node"));
  ASSERT_TRUE(node.ok()) << node.status().ToString();
  Result<k8s::Object> pod = client_->Create(k8s::kPods, "default", PodObject("smoke"));
  ASSERT_TRUE(pod.ok()) << pod.status().ToString();

  Result<k8s::Object> bound = sim::WaitForObject(
      *client_, k8s::kPods, "default", "smoke",
      [](const k8s::Object& p) { return !k8s::GetString(p, "/spec/nodeName").empty(); },
      std::chrono::seconds(120));
  ASSERT_TRUE(bound.ok()) << bound.status().ToString();
  EXPECT_EQ(k8s::GetString(*bound, "/spec/nodeName"), "volcano-node");
  // vc-controller-manager's podgroup controller grouped it; that PodGroup is what vc-scheduler
  // scheduled.
  std::string group = k8s::GetAnnotation(*bound, "scheduling.k8s.io/group-name");
  ASSERT_FALSE(group.empty()) << bound->dump(2);
  Result<k8s::Object> pg = client_->Get(kPodGroups, "default", group);
  ASSERT_TRUE(pg.ok()) << pg.status().ToString();
  // (Its spec.queue stays empty without Volcano's admission webhook; vc-scheduler reads that as
  // the `default` Queue.)
  EXPECT_EQ(k8s::GetInt(*pg, "/spec/minMember"), 1) << pg->dump(2);

  // A node that registers vGPUs as a (<= v1.12) volcano-vgpu-device-plugin does: the v1.10
  // scheduler answers its "Reported" handshake with "Requesting_<time>", through the client its
  // vGPU code builds from $KUBECONFIG (StartVolcano sets it; without it this patch would be a
  // null dereference).
  json gpu_node = NodeObject("volcano-gpu-node");
  gpu_node["metadata"]["annotations"] = {
      {"volcano.sh/node-vgpu-register",
       "GPU-0000000a-0000-4000-8000-000000000000,10,81920,NVIDIA-NVIDIA A100-SXM4-80GB,true,"
       "hami-core:"},
      {"volcano.sh/node-vgpu-handshake", "Reported 2024-05-13 08:42:42.36 +0000 UTC"}};
  ASSERT_TRUE(client_->Create(k8s::kNodes, "", gpu_node).ok());
  Result<k8s::Object> answered = sim::WaitForObject(
      *client_, k8s::kNodes, "", "volcano-gpu-node",
      [](const k8s::Object& n) {
        return k8s::GetAnnotation(n, "volcano.sh/node-vgpu-handshake").rfind("Requesting_", 0) ==
               0;
      },
      std::chrono::seconds(60));
  EXPECT_TRUE(answered.ok()) << answered.status().ToString();

  // Both still run (vc-scheduler klog.Fatal()s on a deviceshare conf it rejects).
  EXPECT_NE(cp_->Process("vc-scheduler"), nullptr);
  EXPECT_NE(cp_->Process("vc-controller-manager"), nullptr);
  ASSERT_TRUE(cp_->StopVolcano().ok());
  EXPECT_EQ(cp_->Process("vc-scheduler"), nullptr);
}

}  // namespace
}  // namespace hami
