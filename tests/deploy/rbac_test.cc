// Least privilege, end to end: the whole system (world.h) with RBAC on in the API server, the RBAC
// objects of deploy/kustomize/base as shipped, and hami-scheduler, the device plugin and the
// monitor each talking to the API server with its own ServiceAccount's token. A GPU pod is
// admitted, scheduled, allocated and run; then the API server's record shows that every call of
// the three accounts was allowed, and calls outside their roles are refused with 403. It runs on
// the simulated API server (its record of decisions) and on a real kube-apiserver with its RBAC
// authorizer (its audit log), where kube-scheduler also runs with hami-scheduler's account, as
// the chart deploys it.
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "common/subprocess.h"
#include "k8s/api_error.h"
#include "k8s/config.h"
#include "k8s/rest_client.h"
#include "k8s/typed.h"
#include "sim/world/manifests.h"
#include "sim/world/world.h"
#include "tests/kube_bin.h"

namespace hami {
namespace {

using nlohmann::json;
using sim::World;
using sim::WorldOptions;

const char* const kAccounts[] = {"hami-scheduler", "hami-device-plugin", "hami-monitor"};

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string Base(const std::string& file) {
  return ReadFile(std::string(HAMI_SOURCE_DIR) + "/deploy/kustomize/base/" + file);
}

// The shipped device-config.yaml (the hami-scheduler-device ConfigMap's content).
std::string ShippedDeviceConfig() {
  for (const std::string& doc : sim::SplitYamlDocuments(Base("scheduler-config.yaml"))) {
    k8s::Object cm = sim::YamlToJson(doc).value();
    if (k8s::GetString(cm, "/metadata/name") == "hami-scheduler-device") {
      return k8s::GetString(cm, "/data/device-config.yaml");
    }
  }
  return "";
}

class RbacE2E : public ::testing::TestWithParam<sim::ControlPlaneKind> {
 protected:
  void SetUp() override {
    WorldOptions o;
    o.build_dir = HAMI_BUILD_DIR;
    o.control_plane = GetParam();
    o.kube_bin_dir = kube_pin::BinDir();
    o.chart_dir = std::string(HAMI_SOURCE_DIR) + "/deploy/helm/hami-cpp";
    if (const char* d = std::getenv("RBAC_E2E_DIR")) o.dir = d;  // keep the logs
    o.nodes.resize(1);
    o.nodes[0].name = "gpu-node";
    o.nodes[0].gpu_config =
        "[device]\nname = NVIDIA A100-SXM4-80GB\nuuid = GPU-0000000a-0000-4000-8000-000000000000"
        "\nmemory = 80Gi\nnuma_node = 0\n";
    o.monitors = true;
    o.leader_elect = true;
    o.webhook_cert_secret = true;
    o.device_config_yaml = ShippedDeviceConfig();
    o.rbac_manifests = Base("scheduler-rbac.yaml") + "\n---\n" + Base("device-plugin-rbac.yaml") +
                       "\n---\n" + Base("monitor-rbac.yaml");
    for (const char* a : kAccounts) o.service_accounts[a] = std::string("kube-system/") + a;
    Result<std::unique_ptr<World>> w = World::Start(o);
    ASSERT_TRUE(w.ok()) << w.status().ToString();
    world_ = std::move(*w);
  }
  void TearDown() override { world_.reset(); }

  // A client with one component's credentials.
  std::unique_ptr<k8s::RestClient> ClientOf(const std::string& component) {
    k8s::RestConfig rest = k8s::LoadKubeconfigFile(world_->KubeconfigOf(component)).value();
    rest.qps = 0;
    return k8s::RestClient::Create(rest).value();
  }

  std::unique_ptr<World> world_;
};

TEST_P(RbacE2E, EachComponentDoesItsWorkWithOnlyItsRoleAndIsRefusedTheRest) {
  ASSERT_NE(world_->KubeconfigOf("hami-monitor"), world_->kubeconfig());
  ASSERT_TRUE(world_
                  ->Apply(R"(apiVersion: v1
kind: Pod
metadata:
  name: smi
spec:
  restartPolicy: Never
  containers:
  - name: main
    image: nvidia/cuda
    command: [")" HAMI_BUILD_DIR R"(/bin/hamictl", "smi"]
    resources:
      limits:
        nvidia.com/gpu: 1
        nvidia.com/gpumem: 4096
        nvidia.com/gpucores: 30
)",
                          "default")
                  .ok());
  Result<k8s::Object> done = world_->WaitForPod("default", "smi", [](const k8s::Object& p) {
    std::string phase = sim::PodPhase(p);
    return phase == "Succeeded" || phase == "Failed";
  });
  ASSERT_TRUE(done.ok()) << done.status().ToString();
  EXPECT_EQ(sim::PodPhase(*done), "Succeeded");
  EXPECT_EQ(k8s::GetString(*done, "/spec/schedulerName"), "hami-scheduler") << "webhook";
  EXPECT_EQ(k8s::GetString(*done, "/metadata/annotations/hami.io~1bind-phase"), "success");
  std::string log = world_->Logs("default", "smi", "main").value_or("");
  EXPECT_NE(log.find("4096MiB"), std::string::npos) << log;

  // Every call each account made was allowed, and each did make the calls its work needs.
  json report = json::parse(world_->AuthorizationReport().value());
  for (const char* a : kAccounts) {
    std::string user = std::string("system:serviceaccount:kube-system:") + a;
    ASSERT_TRUE(report.contains(user)) << a << " made no call at all: " << report.dump(2);
    EXPECT_TRUE(report[user]["denied"].empty())
        << a << " was refused calls its role should allow: " << report[user].dump(2);
  }
  auto allowed = [&](const char* account, const char* call) {
    json a = report[std::string("system:serviceaccount:kube-system:") + account]["allowed"];
    return a.contains(call) && a[call].get<int>() > 0;
  };
  for (const char* call :
       {"list pods", "watch pods", "list nodes", "watch nodes", "patch nodes",
        "create pods/binding", "get leases.coordination.k8s.io", "get secrets", "create secrets",
        "get mutatingwebhookconfigurations.admissionregistration.k8s.io",
        "patch mutatingwebhookconfigurations.admissionregistration.k8s.io"}) {
    EXPECT_TRUE(allowed("hami-scheduler", call)) << call << ": " << report.dump(2);
  }
  for (const char* call : {"get nodes", "patch nodes", "patch pods"}) {
    EXPECT_TRUE(allowed("hami-device-plugin", call)) << call << ": " << report.dump(2);
  }
  for (const char* call : {"list pods", "watch pods"}) {
    EXPECT_TRUE(allowed("hami-monitor", call)) << call << ": " << report.dump(2);
  }

  // Outside their roles: refused with the standard 403 Status.
  auto monitor = ClientOf("hami-monitor");
  Status s = monitor
                 ->Patch(k8s::kNodes, "", "gpu-node", k8s::PatchType::kMerge,
                         R"({"metadata":{"labels":{"x":"y"}}})")
                 .status();
  EXPECT_EQ(s.code(), StatusCode::kPermissionDenied) << s.ToString();
  EXPECT_NE(s.message().find("cannot patch resource \"nodes\""), std::string::npos) << s.message();
  auto plugin = ClientOf("hami-device-plugin");
  s = plugin->Delete(k8s::kPods, "default", "smi");
  EXPECT_EQ(s.code(), StatusCode::kPermissionDenied) << s.ToString();
  s = plugin->List(k8s::kNodes, "").status();
  EXPECT_EQ(s.code(), StatusCode::kPermissionDenied) << s.ToString();
  auto scheduler = ClientOf("hami-scheduler");
  k8s::Resource secrets{"v1", "secrets", true};
  // Its own certificate Secret, which it created.
  Result<k8s::Object> tls = scheduler->Get(secrets, "kube-system", "hami-scheduler-tls");
  ASSERT_TRUE(tls.ok()) << tls.status().ToString();
  EXPECT_FALSE(k8s::GetString(*tls, "/data/ca.crt").empty());
  s = scheduler->Get(secrets, "kube-system", "some-other-secret").status();
  EXPECT_EQ(s.code(), StatusCode::kPermissionDenied) << s.ToString();
  s = scheduler->Create(secrets, "default", json{{"metadata", {{"name", "x"}}}}).status();
  EXPECT_EQ(s.code(), StatusCode::kPermissionDenied) << s.ToString();
  // (It may delete pods: kube-scheduler shares the account, and the system:kube-scheduler role
  // the chart binds lets it evict pods for preemption. A real API server has that role built in;
  // the simulated one has no built-in roles, so there the binding grants nothing.)
  s = scheduler->Delete(k8s::kNodes, "", "gpu-node");
  EXPECT_EQ(s.code(), StatusCode::kPermissionDenied) << s.ToString();
  EXPECT_TRUE(k8s::GetNode(world_->client(), "gpu-node").ok()) << "nothing was deleted";
  EXPECT_TRUE(k8s::GetPod(world_->client(), "default", "smi").ok()) << "nothing was deleted";

  json after = json::parse(world_->AuthorizationReport().value());
  EXPECT_EQ(after["system:serviceaccount:kube-system:hami-monitor"]["denied"]["patch nodes"], 1);
}

// Volcano's GPU sharing: the chart rendered with devicePlugin.volcano.mode=share grants the
// device plugin `patch nodes/status`, which it needs to put volcano.sh/gpu-number in the node's
// status for Volcano's scheduler. The plugin runs with only that role; the write lands and no
// call of the plugin's is refused. (Rendering needs the pinned helm of scripts/kube-tools.sh.)
class RbacVolcanoE2E : public ::testing::TestWithParam<sim::ControlPlaneKind> {};

TEST_P(RbacVolcanoE2E, SharingModesStatusWriteIsAllowedByTheChartsRole) {
  if (kube_pin::BinDir().empty()) GTEST_SKIP() << "needs helm (bash scripts/kube-tools.sh)";
  ProcessResult rbac = RunProcess(
      {kube_pin::BinDir() + "/helm", "template", "hami",
       std::string(HAMI_SOURCE_DIR) + "/deploy/helm/hami-cpp", "--namespace", "kube-system",
       "--set", "devicePlugin.volcano.mode=share", "--show-only",
       "templates/device-plugin-rbac.yaml"},
      {"HOME=/tmp", "HELM_CACHE_HOME=/tmp/.hami-helm-cache",
       "HELM_CONFIG_HOME=/tmp/.hami-helm-config", "HELM_DATA_HOME=/tmp/.hami-helm-data"});
  ASSERT_EQ(rbac.exit_code, 0) << rbac.err;
  ASSERT_NE(rbac.out.find("nodes/status"), std::string::npos) << rbac.out;
  WorldOptions o;
  o.build_dir = HAMI_BUILD_DIR;
  o.control_plane = GetParam();
  o.kube_bin_dir = kube_pin::BinDir();
  o.nodes.resize(1);
  o.nodes[0].name = "share-node";
  o.nodes[0].volcano = "share";
  o.nodes[0].gpu_config =
      "[device]\nname = Tesla T4\nuuid = GPU-0000000b-0000-4000-8000-000000000000"
      "\nmemory = 15360Mi\n";
  o.rbac_manifests = rbac.out;
  o.service_accounts["hami-device-plugin"] = "kube-system/hami-device-plugin";
  Result<std::unique_ptr<World>> w = World::Start(o);
  ASSERT_TRUE(w.ok()) << w.status().ToString();
  Result<k8s::Object> node = (*w)->WaitForNode("share-node", [](const k8s::Object& n) {
    return k8s::GetString(n, "/status/capacity/volcano.sh~1gpu-number") == "1";
  });
  ASSERT_TRUE(node.ok()) << node.status().ToString();
  json report = json::parse((*w)->AuthorizationReport().value());
  const json& plugin = report["system:serviceaccount:kube-system:hami-device-plugin"];
  EXPECT_TRUE(plugin["denied"].empty()) << plugin.dump(2);
  EXPECT_GT(plugin["allowed"].value("patch nodes/status", 0), 0) << plugin.dump(2);
}

std::vector<sim::ControlPlaneKind> RealIfBuilt() {
  if (kube_pin::BinDir().empty()) return {};
  return {sim::ControlPlaneKind::kReal};
}

INSTANTIATE_TEST_SUITE_P(Simulated, RbacE2E, ::testing::Values(sim::ControlPlaneKind::kSimulated));
INSTANTIATE_TEST_SUITE_P(Real, RbacE2E, ::testing::ValuesIn(RealIfBuilt()));
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(RbacE2E);
INSTANTIATE_TEST_SUITE_P(Simulated, RbacVolcanoE2E,
                         ::testing::Values(sim::ControlPlaneKind::kSimulated));
INSTANTIATE_TEST_SUITE_P(Real, RbacVolcanoE2E, ::testing::ValuesIn(RealIfBuilt()));
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(RbacVolcanoE2E);

}  // namespace
}  // namespace hami
