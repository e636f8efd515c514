// The seed's own verification commands with the real kubectl (skipped when kubectl is not on
// PATH): `kubectl apply -f examples/seed000/<scenario>.yaml` against the simulated cluster
// (webhook + scheduler + kube-scheduler stand-in), then the user guide's
// `kubectl get pod ... -o jsonpath='{.metadata.annotations.hami\.io/vgpu-devices-allocated}'`
// and its node-registration listing.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <sstream>

#include "common/subprocess.h"
#include "scheduler/test_util.h"
#include "sim/cluster/sim_cluster.h"

namespace hami::e2e {
using sim::SimCluster;
using sim::SimClusterOptions;
using sim::SplitYamlDocuments;
using sim::YamlToJson;
namespace {

using scheduler::testing::Gpu;

class KubectlSeedTest : public ::testing::Test {
 protected:
  void SetUp() override {
    kubectl_ = *HAMI_KUBECTL ? HAMI_KUBECTL : FindOnPath("kubectl");
    if (kubectl_.empty()) GTEST_SKIP() << "kubectl is not on PATH";
    char tmpl[] = "/tmp/hami-kubectl-XXXXXX";
    dir_ = mkdtemp(tmpl);
    cluster_ = std::make_unique<SimCluster>();
    ASSERT_TRUE(cluster_->apiserver().WriteKubeconfig(dir_ + "/kubeconfig").ok());
  }
  void TearDown() override {
    cluster_.reset();
    if (!dir_.empty()) std::filesystem::remove_all(dir_);
  }
  ProcessResult Kubectl(std::vector<std::string> args) {
    std::vector<std::string> argv = {kubectl_, "--kubeconfig", dir_ + "/kubeconfig",
                                     "--request-timeout=20s"};
    argv.insert(argv.end(), args.begin(), args.end());
    Subprocess proc(argv, {"HOME=" + dir_, "PATH=/usr/bin:/bin"});
    return proc.Wait();
  }
  // The guide's command, word for word after the shell's quote removal.
  std::string Allocated(const std::string& pod) {
    ProcessResult r =
        Kubectl({"get", "pod", pod, "-o",
                 "jsonpath={.metadata.annotations.hami\\.io/vgpu-devices-allocated}"});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return r.out;
  }
  void ApplyAndWait(const std::string& file, const std::vector<std::string>& pods) {
    ProcessResult apply =
        Kubectl({"apply", "-f", std::string(HAMI_SOURCE_DIR) + "/examples/seed000/" + file});
    ASSERT_EQ(apply.exit_code, 0) << apply.out << apply.err;
    for (const std::string& p : pods) {
      ASSERT_TRUE(SimCluster::WaitFor([&] { return !cluster_->BoundNode("default", p).empty(); }))
          << p << " not bound";
    }
  }

  std::string kubectl_, dir_;
  std::unique_ptr<SimCluster> cluster_;
};

TEST_F(KubectlSeedTest, Example1SharedGpuAnnotations) {
  cluster_->AddNode("gpu-node", {Gpu("GPU-v100", 0, 32768, "NVIDIA-Tesla V100-PCIE-32GB")});
  ApplyAndWait("01-two-pods-share-one-gpu.yaml", {"inference-service-a", "inference-service-b"});
  EXPECT_EQ(Allocated("inference-service-a"), "GPU-v100,NVIDIA,8192,50:;");
  EXPECT_EQ(Allocated("inference-service-b"), "GPU-v100,NVIDIA,8192,50:;");
  // The guide's node listing shows the registration.
  ProcessResult nodes =
      Kubectl({"get", "nodes", "-o",
               "jsonpath={range .items[*]}{.metadata.name}{\"\\t\"}"
               "{.metadata.annotations.hami\\.io/node-nvidia-register}{\"\\n\"}{end}"});
  ASSERT_EQ(nodes.exit_code, 0) << nodes.err;
  EXPECT_NE(nodes.out.find("gpu-node\t[{\"id\":\"GPU-v100\""), std::string::npos) << nodes.out;
}

TEST_F(KubectlSeedTest, Example3And8ExclusiveAndNuma) {
  cluster_->AddNode("hpc", {Gpu("GPU0", 0, 32768, "NVIDIA-Tesla V100-PCIE-32GB", 0),
                            Gpu("GPU1", 1, 32768, "NVIDIA-Tesla V100-PCIE-32GB", 0),
                            Gpu("GPU2", 2, 32768, "NVIDIA-Tesla V100-PCIE-32GB", 1),
                            Gpu("GPU3", 3, 32768, "NVIDIA-Tesla V100-PCIE-32GB", 1)});
  ApplyAndWait("03-exclusive.yaml", {"training-job"});
  std::string exclusive = Allocated("training-job");
  EXPECT_NE(exclusive.find(",NVIDIA,32768,100:;"), std::string::npos) << exclusive;
  ApplyAndWait("08-numa-aware.yaml", {"numa-aware-training"});
  std::string numa = Allocated("numa-aware-training");
  // Two cards, 32 GiB and 100 % each, on one NUMA node, neither the exclusive pod's.
  EXPECT_EQ(std::count(numa.begin(), numa.end(), ':'), 2) << numa;
  bool low = numa.find("GPU0") != std::string::npos && numa.find("GPU1") != std::string::npos;
  bool high = numa.find("GPU2") != std::string::npos && numa.find("GPU3") != std::string::npos;
  EXPECT_TRUE(low || high) << numa;
  EXPECT_EQ(numa.find(exclusive.substr(0, exclusive.find(','))), std::string::npos) << numa;
}

}  // namespace
}  // namespace hami::e2e
