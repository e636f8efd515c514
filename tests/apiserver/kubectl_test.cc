// Black-box test with the real kubectl (skipped when kubectl is not on PATH): apply a pod from
// YAML, read an annotation with -o jsonpath, list nodes and pods, delete (gracefully, then by
// force).
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <sstream>

#include "common/subprocess.h"
#include "gtest/gtest.h"
#include "test_support.h"

namespace hami::sim {
namespace {

using nlohmann::json;

class KubectlTest : public ::testing::Test {
 protected:
  void SetUp() override {
    kubectl_ = *HAMI_KUBECTL ? HAMI_KUBECTL : FindOnPath("kubectl");
    if (kubectl_.empty()) GTEST_SKIP() << "kubectl is not on PATH";
    ApiServerOptions opts;
    opts.self_signed = true;
    opts.token = "kubectl-token";
    server_ = ApiServer::Start(opts).value();
    ASSERT_TRUE(server_->WriteKubeconfig(dir_.File("kubeconfig")).ok());
  }

  ProcessResult Kubectl(std::vector<std::string> args) {
    std::vector<std::string> argv = {kubectl_, "--kubeconfig", dir_.File("kubeconfig"),
                                     "--request-timeout=20s"};
    argv.insert(argv.end(), args.begin(), args.end());
    // HOME points into the temp dir so kubectl's discovery cache stays hermetic.
    Subprocess proc(argv, {"HOME=" + dir_.path(), "PATH=/usr/bin:/bin"});
    return proc.Wait();
  }

  testing::TempDir dir_;
  std::string kubectl_;
  std::unique_ptr<ApiServer> server_;
};

TEST_F(KubectlTest, ApplyGetJsonpathNodesDelete) {
  std::ofstream(dir_.File("pod.yaml")) << R"(apiVersion: v1
kind: Pod
metadata:
  name: gpu-pod
  labels:
    app: demo
  annotations:
    hami.io/vgpu-devices-allocated: "GPU-0,NVIDIA,1000,30:;"
spec:
  containers:
  - name: cuda
    image: ubuntu:22.04
    resources:
      limits:
        nvidia.com/gpu: 1
)";
  testing::Client api(*server_, "kubectl-token");
  ASSERT_EQ(api.Post("/api/v1/nodes",
                     {{"metadata", {{"name", "node-1"}}},
                      {"status", {{"conditions", {{{"type", "Ready"}, {"status", "True"}}}}}}})
                .status,
            201);

  ProcessResult apply = Kubectl({"apply", "-f", dir_.File("pod.yaml")});
  ASSERT_EQ(apply.exit_code, 0) << apply.out << apply.err;
  EXPECT_NE(apply.out.find("pod/gpu-pod created"), std::string::npos) << apply.out;

  ProcessResult jsonpath =
      Kubectl({"get", "pod", "gpu-pod", "-o",
               "jsonpath={.metadata.annotations.hami\\.io/vgpu-devices-allocated}"});
  ASSERT_EQ(jsonpath.exit_code, 0) << jsonpath.err;
  EXPECT_EQ(jsonpath.out, "GPU-0,NVIDIA,1000,30:;");

  ProcessResult nodes = Kubectl({"get", "nodes"});
  ASSERT_EQ(nodes.exit_code, 0) << nodes.err;
  EXPECT_NE(nodes.out.find("node-1"), std::string::npos) << nodes.out;
  EXPECT_NE(nodes.out.find("Ready"), std::string::npos) << nodes.out;

  ProcessResult pods = Kubectl({"get", "pods", "-l", "app=demo"});
  ASSERT_EQ(pods.exit_code, 0) << pods.err;
  EXPECT_NE(pods.out.find("gpu-pod"), std::string::npos) << pods.out;

  // kubectl wait lists and then watches; the binding may land before or after its watch opens.
  std::vector<std::string> wait_argv = {kubectl_,
                                        "--kubeconfig",
                                        dir_.File("kubeconfig"),
                                        "wait",
                                        "--for=jsonpath={.spec.nodeName}=node-1",
                                        "pod/gpu-pod",
                                        "--timeout=20s"};
  Subprocess waiter(wait_argv, {"HOME=" + dir_.path(), "PATH=/usr/bin:/bin"});
  ASSERT_EQ(api.Post("/api/v1/namespaces/default/pods/gpu-pod/binding",
                     {{"target", {{"kind", "Node"}, {"name", "node-1"}}}})
                .status,
            201);
  ProcessResult waited = waiter.Wait();
  EXPECT_EQ(waited.exit_code, 0) << waited.out << waited.err;
  EXPECT_NE(waited.out.find("condition met"), std::string::npos) << waited.out;

  // Re-applying a changed manifest goes through PATCH.
  std::string yaml;
  {
    std::ifstream in(dir_.File("pod.yaml"));
    std::stringstream ss;
    ss << in.rdbuf();
    yaml = ss.str();
  }
  yaml.replace(yaml.find("app: demo"), 9, "app: demo2");
  std::ofstream(dir_.File("pod.yaml")) << yaml;
  ProcessResult reapply = Kubectl({"apply", "-f", dir_.File("pod.yaml")});
  ASSERT_EQ(reapply.exit_code, 0) << reapply.err;
  EXPECT_EQ(api.Get("/api/v1/namespaces/default/pods/gpu-pod").body["metadata"]["labels"]["app"],
            "demo2");

  // A pod on a node is deleted gracefully: Terminating until its kubelet (none here) confirms;
  // --grace-period=0 --force does not wait for it.
  ProcessResult del = Kubectl({"delete", "pod", "gpu-pod", "--wait=false"});
  ASSERT_EQ(del.exit_code, 0) << del.err;
  ProcessResult terminating = Kubectl({"get", "pod", "gpu-pod"});
  EXPECT_NE(terminating.out.find("Terminating"), std::string::npos) << terminating.out;
  ProcessResult force = Kubectl({"delete", "pod", "gpu-pod", "--grace-period=0", "--force"});
  ASSERT_EQ(force.exit_code, 0) << force.err;
  EXPECT_EQ(api.Get("/api/v1/namespaces/default/pods/gpu-pod").status, 404);

  ProcessResult missing = Kubectl({"get", "pod", "gpu-pod"});
  EXPECT_NE(missing.exit_code, 0);
  EXPECT_NE(missing.err.find("NotFound"), std::string::npos) << missing.err;
}

// Re-applying changed manifests, as users and certificate rotation do: kubectl sends a
// strategic merge patch computed from its last-applied configuration, and the server merges
// lists by their published keys (webhooks and containers by name, env by name). Entries other
// clients added survive; entries removed from the manifest go. The expected objects are written
// from those merge keys. (kube-apiserver would also fill in defaults, e.g. a webhook's
// timeoutSeconds: 10 or a container's terminationMessagePath; the simulated server models a
// pod's spec-level defaults only, so the lists compared hold what the manifests and patches say.)
TEST_F(KubectlTest, ReapplyingChangedManifestsMergesListsByKey) {
  testing::Client api(*server_, "kubectl-token");
  auto apply = [&](const std::string& name, const std::string& yaml) {
    std::ofstream(dir_.File(name)) << yaml;
    ProcessResult r = Kubectl({"apply", "-f", dir_.File(name)});
    EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  };

  // --- a Pod: its labels changed by someone else, its image and an env value by the manifest.
  const std::string pod_v1 = R"(apiVersion: v1
kind: Pod
metadata:
  name: trainer
  labels: {app: train}
spec:
  containers:
  - name: main
    image: cuda:12
    env:
    - {name: A, value: "1"}
    - {name: B, value: "2"}
    resources:
      limits: {nvidia.com/gpu: 1, nvidia.com/gpumem: 3000}
  - name: sidecar
    image: busybox
)";
  apply("pod.yaml", pod_v1);
  ASSERT_EQ(api.Patch("/api/v1/namespaces/default/pods/trainer",
                      R"({"metadata":{"labels":{"owner":"ops"}}})", "application/merge-patch+json")
                .status,
            200);
  std::string pod_v2 = pod_v1;
  pod_v2.replace(pod_v2.find("cuda:12"), 7, "cuda:13");
  pod_v2.replace(pod_v2.find("{name: B, value: \"2\"}"), 21, "{name: B, value: \"3\"}");
  apply("pod.yaml", pod_v2);
  json pod = api.Get("/api/v1/namespaces/default/pods/trainer").body;
  EXPECT_EQ(pod["metadata"]["labels"], json::parse(R"({"app":"train","owner":"ops"})"));
  ASSERT_EQ(pod["spec"]["containers"].size(), 2u) << pod.dump();
  json main = pod["spec"]["containers"][0];
  EXPECT_EQ(main["name"], "main");
  EXPECT_EQ(main["image"], "cuda:13");
  EXPECT_EQ(main["env"], json::parse(R"([{"name":"A","value":"1"},{"name":"B","value":"3"}])"));
  EXPECT_EQ(main["resources"]["limits"],
            json::parse(R"({"nvidia.com/gpu":"1","nvidia.com/gpumem":"3k"})"));
  EXPECT_EQ(pod["spec"]["containers"][1]["name"], "sidecar");

  // --- a Deployment: an injector adds a container; the manifest drops its sidecar and adds an
  // env var.
  const std::string deploy_v1 = R"(apiVersion: apps/v1
kind: Deployment
metadata:
  name: infer
spec:
  selector: {matchLabels: {app: infer}}
  template:
    metadata:
      labels: {app: infer}
    spec:
      containers:
      - name: server
        image: triton:24
        env:
        - {name: MODEL, value: llama}
      - name: sidecar
        image: busybox
)";
  apply("deploy.yaml", deploy_v1);
  const std::string deploy_path = "/apis/apps/v1/namespaces/default/deployments/infer";
  ASSERT_EQ(api.Patch(deploy_path,
                      R"({"spec":{"template":{"spec":{"containers":[
                          {"name":"injected","image":"proxy"}]}}}})",
                      "application/strategic-merge-patch+json")
                .status,
            200);
  std::string deploy_v2 = deploy_v1;
  deploy_v2.replace(deploy_v2.find("      - name: sidecar\n        image: busybox\n"), 44, "");
  deploy_v2.replace(deploy_v2.find("        - {name: MODEL, value: llama}\n"), 38,
                    "        - {name: MODEL, value: llama}\n        - {name: DEVICE, value: "
                    "cuda}\n");
  apply("deploy.yaml", deploy_v2);
  json deploy = api.Get(deploy_path).body;
  EXPECT_EQ(deploy["spec"]["template"]["spec"]["containers"], json::parse(R"([
      {"name":"server","image":"triton:24",
       "env":[{"name":"MODEL","value":"llama"},{"name":"DEVICE","value":"cuda"}]},
      {"name":"injected","image":"proxy"}])"))
      << deploy.dump();

  // --- the scheduler's MutatingWebhookConfiguration, its CA rotated. Another webhook was added
  // to the same configuration by someone else. (Pods do not match it: objectSelector.)
  const std::string hook_v1 = R"(apiVersion: admissionregistration.k8s.io/v1
kind: MutatingWebhookConfiguration
metadata:
  name: hami-webhook
webhooks:
- name: vgpu.hami.io
  clientConfig:
    url: https://127.0.0.1:1/webhook
    caBundle: T0xE
  rules:
  - {apiGroups: [""], apiVersions: [v1], operations: [CREATE], resources: [pods]}
  objectSelector: {matchLabels: {hami.io/webhook: never}}
  failurePolicy: Fail
  sideEffects: None
  admissionReviewVersions: [v1]
)";
  apply("hook.yaml", hook_v1);
  const std::string hook_path =
      "/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations/hami-webhook";
  json other_hook = json::parse(R"({"name":"audit.example.com",
      "clientConfig":{"url":"https://127.0.0.1:2/audit"},"sideEffects":"None",
      "admissionReviewVersions":["v1"]})");
  ASSERT_EQ(api.Patch(hook_path, json{{"webhooks", {other_hook}}}.dump(),
                      "application/strategic-merge-patch+json")
                .status,
            200);
  std::string hook_v2 = hook_v1;
  hook_v2.replace(hook_v2.find("caBundle: T0xE"), 14, "caBundle: TkVX");
  apply("hook.yaml", hook_v2);
  json hooks = api.Get(hook_path).body["webhooks"];
  EXPECT_EQ(hooks, json::array({json::parse(R"({"name":"vgpu.hami.io",
      "clientConfig":{"url":"https://127.0.0.1:1/webhook","caBundle":"TkVX"},
      "rules":[{"apiGroups":[""],"apiVersions":["v1"],"operations":["CREATE"],
                "resources":["pods"]}],
      "objectSelector":{"matchLabels":{"hami.io/webhook":"never"}},
      "failurePolicy":"Fail","sideEffects":"None","admissionReviewVersions":["v1"]})"),
                                other_hook}))
      << hooks.dump();

  // kubectl edit / patch send the same kind of patch.
  ProcessResult patched = Kubectl({"patch", "deployment", "infer", "-p",
                                   R"({"spec":{"template":{"spec":{"containers":[
                                       {"name":"server","image":"triton:25"}]}}}})"});
  ASSERT_EQ(patched.exit_code, 0) << patched.err;
  deploy = api.Get(deploy_path).body;
  ASSERT_EQ(deploy["spec"]["template"]["spec"]["containers"].size(), 2u) << deploy.dump();
  EXPECT_EQ(deploy["spec"]["template"]["spec"]["containers"][0]["image"], "triton:25");
  EXPECT_EQ(deploy["spec"]["template"]["spec"]["containers"][0]["env"].size(), 2u);

  // kubectl edit: the "editor" changes the image in the YAML it is given.
  Subprocess edit(
      {kubectl_, "--kubeconfig", dir_.File("kubeconfig"), "edit", "deployment", "infer"},
      {"HOME=" + dir_.path(), "PATH=/usr/bin:/bin", "KUBE_EDITOR=sed -i s/triton:25/triton:26/"});
  ProcessResult edited = edit.Wait();
  ASSERT_EQ(edited.exit_code, 0) << edited.out << edited.err;
  deploy = api.Get(deploy_path).body;
  ASSERT_EQ(deploy["spec"]["template"]["spec"]["containers"].size(), 2u) << deploy.dump();
  EXPECT_EQ(deploy["spec"]["template"]["spec"]["containers"][0]["image"], "triton:26");
  EXPECT_EQ(deploy["spec"]["template"]["spec"]["containers"][1]["name"], "injected");

  // Server-side apply is refused with a reason kubectl shows.
  ProcessResult ssa = Kubectl({"apply", "--server-side", "-f", dir_.File("deploy.yaml")});
  EXPECT_NE(ssa.exit_code, 0);
  EXPECT_NE(ssa.err.find("server-side apply"), std::string::npos) << ssa.out << ssa.err;
}

// The words of the first line (the header) and of the line starting with `name`.
std::vector<std::string> Words(const std::string& line) {
  std::vector<std::string> out;
  std::istringstream in(line);
  for (std::string w; in >> w;) out.push_back(w);
  return out;
}
std::string LineOf(const std::string& text, const std::string& start) {
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    if (line.rfind(start, 0) == 0) return line;
  }
  return "";
}

TEST_F(KubectlTest, GetShowsTheStandardColumns) {
  testing::Client api(*server_, "kubectl-token");
  ASSERT_EQ(api.Post("/api/v1/nodes", json::parse(R"({"metadata":{"name":"gpu-1",
          "labels":{"node-role.kubernetes.io/worker":""}},
          "status":{"conditions":[{"type":"Ready","status":"True"}],
            "addresses":[{"type":"InternalIP","address":"10.1.0.7"}],
            "nodeInfo":{"kubeletVersion":"v1.32.0","osImage":"Debian 12",
                        "kernelVersion":"6.1","containerRuntimeVersion":"containerd://1.7"}}})"))
                .status,
            201);
  ASSERT_EQ(
      api.Post("/api/v1/namespaces/default/pods", json::parse(R"({"metadata":{"name":"trainer"},
          "spec":{"containers":[{"name":"main","image":"cuda"}]}})"))
          .status,
      201);
  ASSERT_EQ(api.Post("/api/v1/namespaces/default/pods/trainer/binding",
                     {{"target", {{"kind", "Node"}, {"name", "gpu-1"}}}})
                .status,
            201);
  ASSERT_EQ(api.Patch("/api/v1/namespaces/default/pods/trainer/status",
                      R"({"status":{"phase":"Running","podIP":"10.2.0.9",
          "containerStatuses":[{"name":"main","ready":true,"restartCount":0,
                                "state":{"running":{}}}]}})",
                      "application/merge-patch+json")
                .status,
            200);
  ASSERT_EQ(api.Post("/api/v1/namespaces/default/events",
                     json::parse(R"({"metadata":{"name":"trainer.1"},"type":"Warning",
          "reason":"FilteringFailed","message":"no node fits",
          "involvedObject":{"kind":"Pod","name":"trainer","namespace":"default"},
          "source":{"component":"hami-scheduler"}})"))
                .status,
            201);
  ASSERT_EQ(api.Post("/apis/coordination.k8s.io/v1/namespaces/kube-system/leases",
                     json::parse(R"({"metadata":{"name":"hami-scheduler"},
          "spec":{"holderIdentity":"replica-a","leaseDurationSeconds":15}})"))
                .status,
            201);

  ProcessResult pods = Kubectl({"get", "pods", "-o", "wide"});
  ASSERT_EQ(pods.exit_code, 0) << pods.err;
  EXPECT_EQ(Words(pods.out.substr(0, pods.out.find('\n'))),
            (std::vector<std::string>{"NAME", "READY", "STATUS", "RESTARTS", "AGE", "IP", "NODE",
                                      "NOMINATED", "NODE", "READINESS", "GATES"}))
      << pods.out;
  std::vector<std::string> row = Words(LineOf(pods.out, "trainer"));
  ASSERT_EQ(row.size(), 9u) << pods.out;
  EXPECT_EQ(row[1], "1/1");
  EXPECT_EQ(row[2], "Running");
  EXPECT_EQ(row[3], "0");
  EXPECT_EQ(row[5], "10.2.0.9");
  EXPECT_EQ(row[6], "gpu-1");
  EXPECT_EQ(row[7], "<none>");
  EXPECT_EQ(row[8], "<none>");
  ProcessResult narrow = Kubectl({"get", "pods"});
  EXPECT_EQ(Words(narrow.out.substr(0, narrow.out.find('\n'))),
            (std::vector<std::string>{"NAME", "READY", "STATUS", "RESTARTS", "AGE"}))
      << narrow.out;

  ProcessResult events = Kubectl({"get", "events"});
  ASSERT_EQ(events.exit_code, 0) << events.err;
  EXPECT_EQ(Words(events.out.substr(0, events.out.find('\n'))),
            (std::vector<std::string>{"LAST", "SEEN", "TYPE", "REASON", "OBJECT", "MESSAGE"}))
      << events.out;
  EXPECT_NE(events.out.find("Warning   FilteringFailed   pod/trainer   no node fits"),
            std::string::npos)
      << events.out;

  ProcessResult nodes = Kubectl({"get", "nodes"});
  ASSERT_EQ(nodes.exit_code, 0) << nodes.err;
  EXPECT_EQ(Words(nodes.out.substr(0, nodes.out.find('\n'))),
            (std::vector<std::string>{"NAME", "STATUS", "ROLES", "AGE", "VERSION"}))
      << nodes.out;
  row = Words(LineOf(nodes.out, "gpu-1"));
  ASSERT_EQ(row.size(), 5u) << nodes.out;
  EXPECT_EQ(row[1], "Ready");
  EXPECT_EQ(row[2], "worker");
  EXPECT_EQ(row[4], "v1.32.0");

  ProcessResult leases = Kubectl({"get", "leases", "-n", "kube-system"});
  ASSERT_EQ(leases.exit_code, 0) << leases.err;
  EXPECT_EQ(Words(leases.out.substr(0, leases.out.find('\n'))),
            (std::vector<std::string>{"NAME", "HOLDER", "AGE"}))
      << leases.out;
  row = Words(LineOf(leases.out, "hami-scheduler"));
  ASSERT_EQ(row.size(), 3u) << leases.out;
  EXPECT_EQ(row[1], "replica-a");
}

}  // namespace
}  // namespace hami::sim
