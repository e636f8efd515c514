// Black-box test with the real kubectl (skipped when kubectl is not on PATH): apply a pod from
// YAML, read an annotation with -o jsonpath, list nodes and pods, delete.
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <sstream>

#include "common/subprocess.h"
#include "gtest/gtest.h"
#include "test_support.h"

namespace hami::sim {
namespace {

class KubectlTest : public ::testing::Test {
 protected:
  void SetUp() override {
    kubectl_ = FindOnPath("kubectl");
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

  ProcessResult del = Kubectl({"delete", "pod", "gpu-pod"});
  ASSERT_EQ(del.exit_code, 0) << del.err;
  EXPECT_EQ(api.Get("/api/v1/namespaces/default/pods/gpu-pod").status, 404);

  ProcessResult missing = Kubectl({"get", "pod", "gpu-pod"});
  EXPECT_NE(missing.exit_code, 0);
  EXPECT_NE(missing.err.find("NotFound"), std::string::npos) << missing.err;
}

}  // namespace
}  // namespace hami::sim
