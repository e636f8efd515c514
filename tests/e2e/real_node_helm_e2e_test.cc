// hami-cpp as an operator deploys it: `helm install` of deploy/helm/hami-cpp on the real control
// plane and a real node (WorldOptions::helm_install). hami-scheduler with kube-scheduler, the
// device plugin and the monitor all run as the chart's pods, from the node image and a
// kube-scheduler image of the pinned binary, under the chart's ServiceAccounts and RBAC, and
// reach the API server through the kubernetes Service (kube-proxy on the node); the API server
// calls the webhook at its Service. The cluster's default scheduler places the chart's own pods;
// GPU pods are handed to the chart's (schedulerName hami-scheduler) by the webhook. Label
// realnode (one node at a time).

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <thread>
#include <vector>

#include "common/subprocess.h"
#include "k8s/object.h"
#include "k8s/socket_transport.h"
#include "k8s/typed.h"
#include "sim/world/demo.h"
#include "sim/world/waits.h"
#include "sim/world/world.h"
#include "tests/e2e/real_node_seed.h"
#include "tests/e2e/real_node_util.h"
#include "tests/kube_bin.h"

namespace hami::e2e {
namespace {

namespace fs = std::filesystem;
using sim::PodPhase;

// The world of the seed scenarios (the main job's eight A100s and its policies), deployed by the
// chart with those policies as its values.
sim::WorldOptions HelmWorld() {
  sim::WorldOptions o = SeedNodeWorld();
  o.start_timeout = std::chrono::seconds(240);
  o.helm_install = true;
  o.helm_values_yaml =
      "scheduler:\n"
      "  defaultSchedulerPolicy: {nodeSchedulerPolicy: spread, gpuSchedulerPolicy: binpack}\n"
      "devicePlugin:\n"
      "  monitor:\n"
      "    extraArgs: [-v=4, --update-interval=1s]\n";
  return o;
}

// The chart's pods by component (app.kubernetes.io/component), in kube-system.
std::map<std::string, k8s::Object> ComponentPods(sim::World& w) {
  std::map<std::string, k8s::Object> out;
  Result<k8s::Object> pods = w.client().ListAll(k8s::kPods, "kube-system");
  for (const auto& pod : pods.ok() ? (*pods)["items"] : k8s::Object::array()) {
    const std::string c = k8s::GetString(pod, "/metadata/labels/app.kubernetes.io~1component");
    if (!c.empty() && pod["metadata"].value("deletionTimestamp", "").empty()) out[c] = pod;
  }
  return out;
}

struct ObjectRef {
  k8s::Resource resource;
  std::string ns, name;
};

// Every object of the release or of its components, in all namespaces, by "<resource>
// <namespace>/<name>": named after the release (hami-...), or labelled as the release's or as
// hami-scheduler's own. Events aside.
std::map<std::string, ObjectRef> ReleaseObjects(k8s::RestClient& client) {
  static const k8s::Resource kKinds[] = {
      k8s::kPods,
      {"v1", "services", true},
      {"v1", "configmaps", true},
      {"v1", "secrets", true},
      {"v1", "serviceaccounts", true},
      {"apps/v1", "deployments", true},
      {"apps/v1", "replicasets", true},
      {"apps/v1", "daemonsets", true},
      {"apps/v1", "controllerrevisions", true},
      {"rbac.authorization.k8s.io/v1", "roles", true},
      {"rbac.authorization.k8s.io/v1", "rolebindings", true},
      {"rbac.authorization.k8s.io/v1", "clusterroles", false},
      {"rbac.authorization.k8s.io/v1", "clusterrolebindings", false},
      {"admissionregistration.k8s.io/v1", "mutatingwebhookconfigurations", false},
      {"node.k8s.io/v1", "runtimeclasses", false},
      {"coordination.k8s.io/v1", "leases", true},
      {"policy/v1", "poddisruptionbudgets", true},
      {"discovery.k8s.io/v1", "endpointslices", true},
  };
  std::map<std::string, ObjectRef> found;
  for (const k8s::Resource& kind : kKinds) {
    Result<k8s::Object> list = client.ListAll(kind, "");
    if (!list.ok()) {
      found[kind.plural + " (cannot list: " + list.status().ToString() + ")"] = {kind, "", ""};
      continue;
    }
    for (const auto& o : (*list)["items"]) {
      const std::string name = k8s::Name(o);
      const std::string instance =
          k8s::GetString(o, "/metadata/labels/app.kubernetes.io~1instance");
      const std::string manager =
          k8s::GetString(o, "/metadata/labels/app.kubernetes.io~1managed-by");
      if (name.rfind("hami", 0) == 0 || instance == sim::World::kHelmRelease ||
          manager == "hami-scheduler") {
        found[kind.plural + " " + k8s::Namespace(o) + "/" + name] = {kind, k8s::Namespace(o), name};
      }
    }
  }
  return found;
}

// Processes of hami-cpp (and kube-scheduler) in the node's pod cgroups: only a real node makes
// those, one at a time, so nothing else of the machine is counted.
std::vector<std::string> ComponentProcessesInPods() {
  std::vector<std::string> found;
  std::error_code ec;
  for (const fs::directory_entry& e : fs::directory_iterator("/proc", ec)) {
    const std::string pid = e.path().filename().string();
    if (pid.find_first_not_of("0123456789") != std::string::npos) continue;
    std::string comm = ReadFile("/proc/" + pid + "/comm");
    if (!comm.empty() && comm.back() == '\n') comm.pop_back();
    if (comm.rfind("hami-", 0) != 0 && comm != "kube-scheduler") continue;
    if (ReadFile("/proc/" + pid + "/cgroup").find("kubepods") != std::string::npos) {
      found.push_back(pid + " " + comm);
    }
  }
  return found;
}

// The GPU an `echo GPU=$NVIDIA_VISIBLE_DEVICES` container printed.
std::string GpuOf(const std::string& log) {
  const size_t at = log.find("GPU=");
  return at == std::string::npos ? "" : log.substr(at + 4, log.find('\n', at) - at - 4);
}

class RealNodeHelmE2E : public ::testing::Test {
 protected:
  void SetUp() override {
    if (kube_pin::BinDir().empty() || NodeBinDir().empty()) {
      GTEST_FAIL() << "needs the Kubernetes binaries and the node's tools: "
                      "bash scripts/kube-tools.sh && bash scripts/node-tools.sh";
    }
    Result<std::unique_ptr<sim::World>> w = sim::World::Start(HelmWorld());
    ASSERT_TRUE(w.ok()) << w.status().ToString();
    w_ = std::move(*w);
  }
  void TearDown() override {
    if (HasFailure() && w_) {
      for (const auto& [component, pod] : ComponentPods(*w_)) {
        for (const auto& c : pod["spec"]["containers"]) {
          Result<std::string> log = w_->Logs("kube-system", k8s::Name(pod), c.value("name", ""));
          std::string text = log.ok() ? *log : log.status().ToString();
          std::cerr << "---- " << k8s::Name(pod) << "/" << c.value("name", "") << "\n"
                    << (text.size() > 3000 ? text.substr(text.size() - 3000) : text) << "\n";
        }
      }
    }
    w_.reset();
  }

  ProcessResult Kubectl(const std::vector<std::string>& args) {
    return e2e::Kubectl(*w_, args);
  }

  // The monitor pod's page once it has a sample of `pod` (it updates every second and publishes
  // only when scraped: no event to wait on, so it is asked every quarter second), at most 60 s.
  std::string MonitorPageWith(const std::string& pod) {
    auto transport = k8s::SocketTransport::Create({});
    EXPECT_TRUE(transport.ok());
    std::string page;
    const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    while (transport.ok() && std::chrono::steady_clock::now() < end) {
      k8s::HttpRequest req;
      req.url = w_->MonitorMetricsUrl(sim::DemoNodes()[0].name);
      req.timeout = std::chrono::seconds(5);
      Result<k8s::HttpResponse> resp = (*transport)->Do(req);
      page = resp.ok() ? resp->body : resp.status().ToString();
      if (page.find("pod=\"" + pod + "\"") != std::string::npos) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(250));
    }
    return page;
  }

  std::unique_ptr<sim::World> w_;
};

TEST_F(RealNodeHelmE2E, EveryComponentRunsAsAPodTheSeedsHoldAndUninstallLeavesNothing) {
  // (1) The chart's three workloads run as pods, ready, from the locally built images, under
  // the chart's accounts; the world started none of them itself.
  std::map<std::string, k8s::Object> pods = ComponentPods(*w_);
  const std::map<std::string, std::string> account = {
      {"hami-scheduler", "hami-scheduler"},
      {"hami-device-plugin", "hami-device-plugin"},
      {"hami-monitor", "hami-monitor"}};
  for (const auto& [component, sa] : account) {
    ASSERT_EQ(pods.count(component), 1u) << component;
    const k8s::Object& pod = pods[component];
    EXPECT_EQ(PodPhase(pod), "Running") << component;
    EXPECT_TRUE(sim::PodReady(pod)) << component;
    EXPECT_EQ(k8s::GetString(pod, "/spec/serviceAccountName"), sa) << component;
    EXPECT_EQ(k8s::GetString(pod, "/spec/nodeName"), sim::DemoNodes()[0].name);
  }
  std::set<std::string> images;
  for (const auto& c : pods["hami-scheduler"]["spec"]["containers"]) images.insert(c["image"]);
  EXPECT_EQ(images.count(sim::kNodeTestImage), 1u);
  EXPECT_TRUE(std::any_of(images.begin(), images.end(), [](const std::string& i) {
    return i.rfind("localhost/kube-scheduler:v1.", 0) == 0;
  })) << "kube-scheduler's image, tagged by the chart with the cluster's release";
  EXPECT_EQ(w_->Pid("hami-scheduler"), -1) << "hami-scheduler runs in its pod only";
  EXPECT_GE(ComponentProcessesInPods().size(), 4u)
      << "hami-scheduler, kube-scheduler, hami-device-plugin, hami-monitor in the pods";

  // (2) A GPU pod through the webhook (at its Service), the scheduler pod and the plugin pod;
  // the monitor pod meters its container.
  ASSERT_TRUE(w_->Apply(R"(apiVersion: v1
kind: Pod
metadata: {name: metered}
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - name: main
    image: )" + std::string(sim::kNodeTestImage) + R"(
    imagePullPolicy: Never
    command: [vgpu_probe, workload, --mem-fraction, "0.5"]
    resources: {limits: {nvidia.com/gpu: 1, nvidia.com/gpumem: 4096}}
)",
                        "default")
                  .ok());
  Result<k8s::Object> metered = w_->WaitForPod(
      "default", "metered", [](const k8s::Object& p) { return PodPhase(p) == "Running"; },
      std::chrono::seconds(120));
  ASSERT_TRUE(metered.ok()) << metered.status().ToString();
  EXPECT_EQ(k8s::GetString(*metered, "/spec/schedulerName"), "hami-scheduler");
  ASSERT_TRUE(w_->WaitForLog("default", "metered", "main", "CUDA_DEVICE_SM_LIMIT").ok());
  const std::string page = MonitorPageWith("metered");
  double limit = -1;
  for (const sim::MetricSample& m : sim::ParseExposition(page)) {
    auto pod = m.labels.find("pod");
    if (m.name == "hami_vgpu_memory_limit_bytes" && pod != m.labels.end() &&
        pod->second == "metered") {
      limit = m.value;
    }
  }
  EXPECT_EQ(limit, 4096.0 * 1024 * 1024) << page;
  ASSERT_EQ(Kubectl({"delete", "pod", "metered", "--wait=true", "--timeout=60s"}).exit_code, 0);

  // (3) The seed scenarios through the chart's components.
  CheckSeedScenarios(*w_);

  // (4) helm uninstall: the release's objects, the webhook certificate's Secret (owned by the
  // webhook configuration) and kube-scheduler's Lease (made by the chart) go, and so do the
  // pods and their processes.
  const std::map<std::string, ObjectRef> installed = ReleaseObjects(w_->client());
  for (const char* expected :
       {"secrets kube-system/hami-scheduler-tls", "leases kube-system/hami-scheduler",
        "mutatingwebhookconfigurations /hami-webhook", "daemonsets kube-system/hami-device-plugin",
        "daemonsets kube-system/hami-monitor", "deployments kube-system/hami-scheduler",
        "clusterroles /hami-scheduler"}) {
    EXPECT_EQ(installed.count(expected), 1u) << expected << " is among the release's objects";
  }
  Result<std::string> uninstalled = w_->Helm(
      {"uninstall", sim::World::kHelmRelease, "--namespace", "kube-system", "--wait", "--timeout",
       "120s"});
  ASSERT_TRUE(uninstalled.ok()) << uninstalled.status().ToString();
  // What helm deletes goes at once; the rest (pods, ReplicaSets, ControllerRevisions and
  // EndpointSlices after their owners, the Secret after the webhook configuration) through the
  // garbage collector: each waited for on its watch.
  for (const auto& [key, ref] : installed) {
    EXPECT_TRUE(sim::WatchObject(
                    w_->client(), ref.resource, ref.ns, ref.name,
                    [](const k8s::Object* o) { return o == nullptr; },
                    std::chrono::steady_clock::now() + std::chrono::seconds(120))
                    .ok())
        << key << " is still there";
  }
  std::string left;
  for (const auto& [key, ref] : ReleaseObjects(w_->client())) left += "\n  " + key;
  EXPECT_TRUE(left.empty()) << "left behind by helm uninstall:" << left;
  EXPECT_TRUE(ComponentProcessesInPods().empty());
}

// The device plugin's pod is deleted while a pod holds a GPU: the DaemonSet starts a new one,
// which registers with the kubelet again; the running pod keeps its container and GPU, and the
// GPUs are never handed out twice: of eight exclusive pods asked for next, the seven free GPUs
// take seven and the eighth waits.
TEST_F(RealNodeHelmE2E, ADeletedDevicePluginPodComesBackAndTheAllocationsSurvive) {
  auto exclusive = [](const std::string& name) {
    return "apiVersion: v1\nkind: Pod\nmetadata: {name: " + name +
           "}\nspec:\n  terminationGracePeriodSeconds: 1\n  containers:\n  - name: main\n"
           "    image: " + std::string(sim::kNodeTestImage) + "\n    imagePullPolicy: Never\n"
           "    command: [sh, -c, 'echo GPU=$NVIDIA_VISIBLE_DEVICES; exec sleep 3600']\n"
           "    resources: {limits: {nvidia.com/gpu: 1, nvidia.com/gpucores: 100}}\n";
  };
  auto running = [](const k8s::Object& p) { return PodPhase(p) == "Running"; };
  ASSERT_TRUE(w_->Apply(exclusive("holder"), "default").ok());
  Result<k8s::Object> holder =
      w_->WaitForPod("default", "holder", running, std::chrono::seconds(120));
  ASSERT_TRUE(holder.ok()) << holder.status().ToString();
  const std::string holder_gpu =
      w_->WaitForLog("default", "holder", "main", "GPU=GPU-").value_or("");
  ASSERT_FALSE(holder_gpu.empty());
  const std::string container = k8s::GetString((*holder)["status"]["containerStatuses"][0],
                                               "/containerID");

  const k8s::Object old_plugin = ComponentPods(*w_)["hami-device-plugin"];
  ProcessResult deleted = Kubectl({"delete", "pod", "-n", "kube-system", k8s::Name(old_plugin),
                                   "--wait=true", "--timeout=60s"});
  ASSERT_EQ(deleted.exit_code, 0) << deleted.err;
  // The DaemonSet's new pod, and its registration with the kubelet (its log says so).
  Result<k8s::Object> plugin_ds = sim::WaitForObject(
      w_->client(), {"apps/v1", "daemonsets", true}, "kube-system", "hami-device-plugin",
      [](const k8s::Object& ds) { return ds["status"].value("numberReady", 0) == 1; },
      std::chrono::seconds(120));
  ASSERT_TRUE(plugin_ds.ok()) << plugin_ds.status().ToString();
  const k8s::Object new_plugin = ComponentPods(*w_)["hami-device-plugin"];
  ASSERT_NE(k8s::Uid(new_plugin), k8s::Uid(old_plugin));
  ASSERT_TRUE(w_->WaitForLog("kube-system", k8s::Name(new_plugin), "device-plugin",
                             "registered nvidia.com/gpu with kubelet", std::chrono::seconds(120))
                  .ok());

  // The running pod is untouched.
  Result<k8s::Object> still = k8s::GetPod(w_->client(), "default", "holder");
  ASSERT_TRUE(still.ok());
  EXPECT_EQ(PodPhase(*still), "Running");
  EXPECT_EQ(k8s::GetString((*still)["status"]["containerStatuses"][0], "/containerID"), container);
  EXPECT_EQ((*still)["status"]["containerStatuses"][0].value("restartCount", -1), 0);

  // Eight more exclusive pods: seven GPUs are free. Until the kubelet reports the new plugin's
  // devices, hami-scheduler keeps the node out of scheduling (its allocatable dropped to 0 when
  // the old plugin went); kube-scheduler tries those pods again when the node changes. So each
  // pod ends Running, or refused for want of a GPU rather than for the node's registration.
  std::set<std::string> gpus;
  for (int i = 0; i < 8; ++i) {
    ASSERT_TRUE(w_->Apply(exclusive("next-" + std::to_string(i)), "default").ok());
  }
  auto refused_for_gpus = [](const k8s::Object& p) {
    if (!Unschedulable(p)) return false;
    for (const auto& c : p["status"].value("conditions", k8s::Object::array())) {
      if (c.value("type", "") == "PodScheduled") {
        return c.value("message", "").find("unregistered") == std::string::npos;
      }
    }
    return false;
  };
  int waiting = 0;
  for (int i = 0; i < 8; ++i) {
    const std::string name = "next-" + std::to_string(i);
    Result<k8s::Object> p = w_->WaitForPod(
        "default", name,
        [&](const k8s::Object& o) {
          return running(o) || refused_for_gpus(o) || PodPhase(o) == "Failed";
        },
        std::chrono::seconds(180));
    ASSERT_TRUE(p.ok()) << name << ": " << p.status().ToString();
    ASSERT_NE(PodPhase(*p), "Failed") << name << " was refused by the kubelet: "
                                      << (*p)["status"].value("reason", "") << " "
                                      << (*p)["status"].value("message", "");
    if (!running(*p)) {
      ++waiting;
      continue;
    }
    Result<std::string> log = w_->WaitForLog("default", name, "main", "GPU=GPU-");
    ASSERT_TRUE(log.ok()) << name;
    gpus.insert(GpuOf(*log));
  }
  EXPECT_EQ(waiting, 1) << "eight GPUs, one held: the eighth new pod must wait";
  EXPECT_EQ(gpus.size(), 7u) << "each running pod on a GPU of its own";
  EXPECT_EQ(gpus.count(GpuOf(holder_gpu)), 0u)
      << "the held GPU is not handed out again";
}

}  // namespace
}  // namespace hami::e2e
