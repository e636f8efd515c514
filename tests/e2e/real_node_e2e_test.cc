// End to end on a real node: containerd, runc and a kubelet built from the control plane's pin
// (scripts/node-tools.sh), registered with the real control plane (scripts/kube-tools.sh), with
// hami-device-plugin as the kubelet's device plugin and the pods' containers started by runc in
// their own namespaces and cgroups from the node image (sim/node/node_image.h). The GPUs are the
// simulated driver's, which the simulated NVIDIA container runtime mounts into GPU containers.
// Label realnode; one at a time (RESOURCE_LOCK): a node owns the machine's kubepods cgroups.

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include <nlohmann/json.hpp>

#include "common/subprocess.h"
#include "k8s/socket_transport.h"
#include "sim/world/demo.h"
#include "k8s/object.h"
#include "k8s/typed.h"
#include "tests/e2e/real_node_util.h"
#include "tests/kube_bin.h"
#include "sim/world/world.h"

namespace hami::e2e {
namespace {

using sim::PodPhase;
using sim::World;
using sim::WorldOptions;

std::string Annotation(const k8s::Object& o, const std::string& key) {
  return k8s::GetString(o, "/metadata/annotations/" + key);
}

bool RunningWithDevices(const k8s::Object& p) {
  return PodPhase(p) == "Running" && Annotation(p, "hami.io~1bind-phase") == "success";
}

// A pod of the node image with one container asking for `gpus` GPU shares of `mem` MiB each,
// given `grace` seconds between SIGTERM and SIGKILL.
std::string GpuPod(const std::string& name, int mem, int cores, const std::string& script,
                   int gpus = 1, int grace = 2) {
  return "apiVersion: v1\nkind: Pod\nmetadata:\n  name: " + name +
         "\nspec:\n  restartPolicy: Never\n  terminationGracePeriodSeconds: " +
         std::to_string(grace) + "\n  containers:\n  - name: main\n    image: " +
         std::string(sim::kNodeTestImage) + "\n    imagePullPolicy: Never\n    command: "
         "[\"sh\", \"-c\", " + k8s::Object(script).dump() +
         "]\n    resources:\n      limits:\n        nvidia.com/gpu: " + std::to_string(gpus) +
         "\n        nvidia.com/gpumem: " + std::to_string(mem) + "\n" +
         (cores > 0 ? "        nvidia.com/gpucores: " + std::to_string(cores) + "\n" : "");
}

std::string ContainerId(const k8s::Object& pod) {
  return k8s::GetString(pod["status"]["containerStatuses"][0], "/containerID");
}

int RestartCount(const k8s::Object& pod) {
  return pod["status"]["containerStatuses"][0].value("restartCount", -1);
}

class RealNodeE2E : public ::testing::Test {
 protected:
  void SetUp() override {
    if (kube_pin::BinDir().empty() || NodeBinDir().empty()) {
      GTEST_FAIL() << "needs the Kubernetes binaries and the node's tools: "
                      "bash scripts/kube-tools.sh && bash scripts/node-tools.sh";
    }
    WorldOptions o;
    o.build_dir = HAMI_BUILD_DIR;
    o.control_plane = sim::ControlPlaneKind::kReal;
    o.kube_bin_dir = kube_pin::BinDir();
    o.node_bin_dir = NodeBinDir();
    o.chart_dir = HAMI_SOURCE_DIR "/deploy/helm/hami-cpp";
    o.monitors = true;
    o.start_timeout = std::chrono::seconds(180);
    o.nodes.resize(1);
    o.nodes[0].name = "node-1";
    o.nodes[0].gpu_config =
        "node = node-1\n[device]\nname = NVIDIA A100-SXM4-80GB\nmemory = 80Gi\nnuma_node = 0\n"
        "[device]\nname = NVIDIA A100-SXM4-80GB\nmemory = 80Gi\nnuma_node = 1\n";
    Result<std::unique_ptr<World>> w = World::Start(o);
    ASSERT_TRUE(w.ok()) << w.status().ToString();
    w_ = std::move(*w);
  }
  void TearDown() override {
    if (HasFailure() && w_) {
      for (const char* p : {"node-1-plugin", "hami-scheduler", "node-1-monitor"}) {
        std::string log = ReadFile(w_->LogFile(p));
        std::cerr << "---- " << p << " (last 3000 bytes)\n"
                  << (log.size() > 3000 ? log.substr(log.size() - 3000) : log) << "\n";
      }
      if (sim::KubeNode* node = w_->real_node("node-1")) {
        for (const char* p : {"kubelet", "containerd"}) {
          if (sim::LoggedProcess* lp = node->Process(p)) {
            std::cerr << "---- " << p << "\n" << lp->LogTail(40) << "\n";
          }
        }
      }
    }
    w_.reset();
  }

  // kubectl (the pinned one) against the world.
  ProcessResult Kubectl(const std::vector<std::string>& args) {
    return e2e::Kubectl(*w_, args);
  }

  // The node monitor's samples for pod `pod`, once `done` holds for them (the monitor updates
  // every second and publishes only when scraped: no event to wait on, so it is asked every
  // quarter second), at most 60 s; the last samples seen either way.
  std::vector<sim::MetricSample> WaitForMetrics(
      const std::string& pod,
      const std::function<bool(const std::vector<sim::MetricSample>&)>& done) {
    auto transport = k8s::SocketTransport::Create({});
    EXPECT_TRUE(transport.ok());
    std::vector<sim::MetricSample> mine;
    const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    while (transport.ok() && std::chrono::steady_clock::now() < end) {
      k8s::HttpRequest req;
      req.url = w_->MonitorMetricsUrl("node-1");
      req.timeout = std::chrono::seconds(5);
      Result<k8s::HttpResponse> resp = (*transport)->Do(req);
      mine.clear();
      if (resp.ok() && resp->status == 200) {
        for (sim::MetricSample& m : sim::ParseExposition(resp->body)) {
          auto it = m.labels.find("pod");
          if (it != m.labels.end() && it->second == pod) mine.push_back(std::move(m));
        }
      }
      if (done(mine)) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(250));
    }
    return mine;
  }

  // How often the plugin has registered with a kubelet, from its log.
  size_t Registrations() {
    const std::string log = ReadFile(w_->LogFile("node-1-plugin"));
    size_t n = 0;
    for (size_t at = log.find(kRegistered); at != std::string::npos;
         at = log.find(kRegistered, at + 1)) {
      ++n;
    }
    return n;
  }

  // Whether the plugin has registered `n` times within 60 s. Its log is read every 100 ms: the
  // plugin announces a registration nowhere else.
  bool WaitForRegistrations(size_t n) {
    const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    while (Registrations() < n) {
      if (std::chrono::steady_clock::now() > end) return false;
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    return true;
  }

  static constexpr const char* kRegistered = "registered nvidia.com/gpu with kubelet";
  std::unique_ptr<World> w_;
};

double Value(const std::vector<sim::MetricSample>& samples, const std::string& name) {
  for (const sim::MetricSample& m : samples) {
    if (m.name == name) return m.value;
  }
  return -1;
}

TEST_F(RealNodeE2E, AGpuPodRunsInARealContainerUnderItsQuota) {
  k8s::Object node = k8s::GetNode(w_->client(), "node-1").value();
  EXPECT_EQ(k8s::GetString(node, "/status/allocatable/nvidia.com~1gpu"), "20")
      << "2 GPUs x deviceSplitCount 10, registered by the plugin with the real kubelet";
  // 3 GiB fits the 4096 MiB quota; 5 GiB more does not.
  ASSERT_TRUE(w_->Apply(GpuPod("quota", 4096, 50,
                               "vgpu_probe info && vgpu_probe alloc --bytes 3221225472 && "
                               "vgpu_probe alloc --bytes 5368709120; echo probe-done; "
                               "exec sleep 3600"),
                        "default")
                  .ok());
  Result<k8s::Object> running = w_->WaitForPod("default", "quota", RunningWithDevices,
                                               std::chrono::seconds(120));
  ASSERT_TRUE(running.ok()) << running.status().ToString();
  Result<std::string> log = w_->WaitForLog("default", "quota", "main", "probe-done");
  ASSERT_TRUE(log.ok()) << log.status().ToString();
  EXPECT_NE(log->find("device=0 "), std::string::npos) << *log;
  EXPECT_EQ(log->find("device=1 "), std::string::npos) << "one GPU only:\n" << *log;
  EXPECT_NE(log->find("total=4294967296 "), std::string::npos) << "CUDA sees the quota:\n"
                                                               << *log;
  EXPECT_NE(log->find("ok=1 fail=0"), std::string::npos) << "under the quota:\n" << *log;
  EXPECT_NE(log->find("ok=0 fail=1 first_error=2"), std::string::npos)
      << "past the quota, CUDA_ERROR_OUT_OF_MEMORY:\n" << *log;

  // The container is runc's: PID 1 in its own PID namespace is the pod's command (the shell
  // exec'd sleep), and libvgpu is preloaded through the /etc/ld.so.preload the plugin mounted.
  ProcessResult init = Kubectl({"exec", "quota", "--", "cat", "/proc/1/cmdline"});
  EXPECT_EQ(init.exit_code, 0) << init.err;
  EXPECT_EQ(init.out, std::string("sleep\0003600\0", 11)) << init.out;
  ProcessResult preload = Kubectl({"exec", "quota", "--", "cat", "/etc/ld.so.preload"});
  EXPECT_EQ(preload.exit_code, 0) << preload.err;
  EXPECT_NE(preload.out.find("libvgpu.so"), std::string::npos) << preload.out;
  // nvidia-smi (hamictl, mounted by the runtime as the NVIDIA runtime mounts the host's) shows
  // the container's view: its quota as the card's memory.
  ProcessResult smi = Kubectl({"exec", "quota", "--", "nvidia-smi"});
  EXPECT_EQ(smi.exit_code, 0) << smi.err;
  EXPECT_NE(smi.out.find("MiB / 4096MiB"), std::string::npos) << smi.out;
  ProcessResult view = Kubectl({"exec", "quota", "--", "hamictl", "smi"});
  EXPECT_EQ(view.exit_code, 0) << view.err;
  EXPECT_NE(view.out.find("MiB / 4096MiB"), std::string::npos) << view.out;
  ProcessResult logs = Kubectl({"logs", "quota"});
  EXPECT_EQ(logs.exit_code, 0) << logs.err;
  EXPECT_NE(logs.out.find("probe-done"), std::string::npos) << logs.out;
}

// The monitor on the host against a real container without hostPID: the container's processes
// have PIDs of their own namespace, the simulated driver reports host PIDs (as a kernel driver
// does), and the monitor maps one to the other so that libvgpu can hold the SM limit.
TEST_F(RealNodeE2E, TheMonitorMapsContainerPidsAndTheSmLimitHolds) {
  // Under the default policy the monitor relaxes an SM limit while its GPU runs nothing else
  // (HAMi's semantics); force holds it alone on the GPU too.
  ASSERT_TRUE(w_->Apply(GpuPod("worker", 4096, 30,
                               "GPU_CORE_UTILIZATION_POLICY=force exec vgpu_probe workload "
                               "--mem-fraction 0.5"),
                        "default")
                  .ok());
  ASSERT_TRUE(w_->WaitForPod("default", "worker", RunningWithDevices, std::chrono::seconds(120))
                  .ok());
  Result<std::string> log = w_->WaitForLog("default", "worker", "main", "workload: kernels=");
  ASSERT_TRUE(log.ok()) << log.status().ToString();
  EXPECT_NE(log->find("total=4096MiB"), std::string::npos) << *log;
  EXPECT_NE(log->find("allocated=2048MiB rc=0"), std::string::npos) << *log;
  EXPECT_NE(log->find("CUDA_DEVICE_SM_LIMIT=30"), std::string::npos) << *log;

  // The container's view of its region: its process is PID 1 there, and the monitor wrote the
  // host PID beside it.
  ProcessResult cache = Kubectl({"exec", "worker", "--", "sh", "-c",
                                 "hamictl region show --json $CUDA_DEVICE_MEMORY_SHARED_CACHE"});
  ASSERT_EQ(cache.exit_code, 0) << cache.err;
  nlohmann::json region = nlohmann::json::parse(cache.out, nullptr, false);
  ASSERT_TRUE(region.is_object()) << cache.out;
  int host_pid = 0;
  for (const auto& p : region["processes"]) {
    if (p["pid"] == 1) host_pid = p.value("host_pid", 0);
  }
  ASSERT_GT(host_pid, 1) << "the monitor maps PID 1 of the container to its host PID:\n"
                         << cache.out;
  // That host PID is the container's PID 1, in the container's own PID namespace.
  std::string status = ReadFile("/proc/" + std::to_string(host_pid) + "/status");
  std::string nspid = status.substr(status.find("NSpid:"));
  nspid = nspid.substr(0, nspid.find('\n'));
  EXPECT_EQ(nspid, "NSpid:\t" + std::to_string(host_pid) + "\t1") << status;

  // The monitor's per-container figures: what the workload allocated, and the SM use held near
  // the 30 % limit once whole sampling windows are in.
  std::vector<sim::MetricSample> m = WaitForMetrics("worker", [](const auto& samples) {
    return Value(samples, "hami_vgpu_memory_used_bytes") > 0 &&
           Value(samples, "hami_container_device_utilization_ratio") > 0;
  });
  EXPECT_GE(Value(m, "hami_vgpu_memory_used_bytes"), 2048.0 * 1024 * 1024);
  EXPECT_LE(Value(m, "hami_vgpu_memory_used_bytes"), 4096.0 * 1024 * 1024);
  EXPECT_EQ(Value(m, "hami_vgpu_memory_limit_bytes"), 4096.0 * 1024 * 1024);
  const auto settle = std::chrono::steady_clock::now() + std::chrono::milliseconds(3000);
  m = WaitForMetrics("worker",
                     [&](const auto&) { return std::chrono::steady_clock::now() > settle; });
  const double util = Value(m, "hami_container_device_utilization_ratio");
  EXPECT_GT(util, 0) << "the workload runs kernels";
  EXPECT_LE(util, 40) << "held to its 30 % SM limit (percent); its log:\n"
                       << w_->Logs("default", "worker", "main").value_or("(none)");
}

// The kubelet stops and starts again while a GPU pod runs: the plugin registers again on the
// new kubelet.sock, the running container is left alone (same container, no restart), and the
// kubelet's checkpoint keeps its devices taken, so that the node offers no more than before.
TEST_F(RealNodeE2E, AKubeletRestartKeepsRunningPodsAndTheirDevices) {
  ASSERT_TRUE(w_->Apply(GpuPod("steady", 8192, 0, "echo started; exec sleep 3600"), "default")
                  .ok());
  Result<k8s::Object> before = w_->WaitForPod("default", "steady", RunningWithDevices,
                                              std::chrono::seconds(120));
  ASSERT_TRUE(before.ok()) << before.status().ToString();
  const std::string container_id =
      k8s::GetString((*before)["status"]["containerStatuses"][0], "/containerID");
  ASSERT_FALSE(container_id.empty());

  sim::KubeNode* node = w_->real_node("node-1");
  ASSERT_NE(node, nullptr);
  const size_t registrations = Registrations();
  ASSERT_TRUE(node->StopKubelet().ok());
  ASSERT_TRUE(node->StartKubelet().ok());
  // The node object still says 20 from before the restart: what tells that the new kubelet has
  // the plugin is the plugin registering again. A pod bound before that is refused by the
  // kubelet (UnexpectedAdmissionError), as with any device plugin.
  EXPECT_TRUE(WaitForRegistrations(registrations + 1)) << ReadFile(w_->LogFile("node-1-plugin"));
  Result<k8s::Object> back = w_->WaitForNode("node-1", [](const k8s::Object& n) {
    return k8s::GetString(n, "/status/allocatable/nvidia.com~1gpu") == "20";
  }, std::chrono::seconds(120));
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  Result<k8s::Object> after = w_->WaitForPod("default", "steady", [](const k8s::Object& p) {
    return PodPhase(p) == "Running";
  });
  ASSERT_TRUE(after.ok());
  EXPECT_EQ(k8s::GetString((*after)["status"]["containerStatuses"][0], "/containerID"),
            container_id);
  EXPECT_EQ((*after)["status"]["containerStatuses"][0].value("restartCount", -1), 0);

  // A new pod after the restart is placed and handed devices: nothing given twice.
  ASSERT_TRUE(w_->Apply(GpuPod("later", 8192, 0, "exec sleep 3600"), "default").ok());
  Result<k8s::Object> later = w_->WaitForPod("default", "later", RunningWithDevices,
                                             std::chrono::seconds(120));
  ASSERT_TRUE(later.ok()) << later.status().ToString();
  ProcessResult env = Kubectl({"exec", "later", "--", "sh", "-c", "echo $NVIDIA_VISIBLE_DEVICES"});
  EXPECT_EQ(env.exit_code, 0) << env.err;
  EXPECT_EQ(env.out.rfind("GPU-", 0), 0u) << env.out;
}

// hami-device-plugin stops and starts again while a pod holds a whole GPU's memory: it registers
// again, the running container is left alone, the kubelet's checkpoint keeps that pod's devices
// and the scheduler its memory, so that the next pod gets the other GPU and a third waits.
TEST_F(RealNodeE2E, ADevicePluginRestartKeepsAllocations) {
  ASSERT_TRUE(w_->Apply(GpuPod("first", 81920, 0, "exec sleep 3600"), "default").ok());
  Result<k8s::Object> first = w_->WaitForPod("default", "first", RunningWithDevices,
                                             std::chrono::seconds(120));
  ASSERT_TRUE(first.ok()) << first.status().ToString();

  ASSERT_TRUE(w_->StopPlugin("node-1").ok());
  ASSERT_TRUE(w_->StartPlugin("node-1").ok());
  Result<k8s::Object> back = w_->WaitForNode("node-1", [](const k8s::Object& n) {
    return k8s::GetString(n, "/status/allocatable/nvidia.com~1gpu") == "20";
  }, std::chrono::seconds(120));
  ASSERT_TRUE(back.ok()) << back.status().ToString();

  ASSERT_TRUE(w_->Apply(GpuPod("second", 81920, 0, "exec sleep 3600"), "default").ok());
  Result<k8s::Object> second = w_->WaitForPod("default", "second", RunningWithDevices,
                                              std::chrono::seconds(120));
  ASSERT_TRUE(second.ok()) << second.status().ToString();
  ProcessResult a = Kubectl({"exec", "first", "--", "sh", "-c", "echo $NVIDIA_VISIBLE_DEVICES"});
  ProcessResult b = Kubectl({"exec", "second", "--", "sh", "-c", "echo $NVIDIA_VISIBLE_DEVICES"});
  ASSERT_EQ(a.exit_code, 0) << a.err;
  ASSERT_EQ(b.exit_code, 0) << b.err;
  EXPECT_EQ(a.out.rfind("GPU-", 0), 0u) << a.out;
  EXPECT_NE(a.out, b.out) << "each pod holds a whole GPU's memory: never the same GPU";

  // Both GPUs are full: a third such pod is refused by the scheduler, not over-committed.
  ASSERT_TRUE(w_->Apply(GpuPod("third", 81920, 0, "exec sleep 3600"), "default").ok());
  EXPECT_TRUE(w_->WaitForPod("default", "third", Unschedulable, std::chrono::seconds(60)).ok());
  Result<k8s::Object> after = k8s::GetPod(w_->client(), "default", "first");
  ASSERT_TRUE(after.ok());
  EXPECT_EQ(PodPhase(*after), "Running");
  EXPECT_EQ(ContainerId(*after), ContainerId(*first));
  EXPECT_EQ(RestartCount(*after), 0);
}

// containerd stops and starts again under a running pod: the container keeps running under its
// shim (same container, no restart, exec still works) and the kubelet starts new pods on the new
// containerd.
TEST_F(RealNodeE2E, AContainerdRestartLeavesRunningPodsAlone) {
  ASSERT_TRUE(w_->Apply(GpuPod("steady", 8192, 0, "exec sleep 3600"), "default").ok());
  Result<k8s::Object> before = w_->WaitForPod("default", "steady", RunningWithDevices,
                                              std::chrono::seconds(120));
  ASSERT_TRUE(before.ok()) << before.status().ToString();
  sim::KubeNode* node = w_->real_node("node-1");
  ASSERT_NE(node, nullptr);
  ASSERT_TRUE(node->RestartContainerd().ok());

  ASSERT_TRUE(w_->Apply(GpuPod("later", 8192, 0, "exec sleep 3600"), "default").ok());
  Result<k8s::Object> later = w_->WaitForPod("default", "later", RunningWithDevices,
                                             std::chrono::seconds(120));
  ASSERT_TRUE(later.ok()) << later.status().ToString();
  Result<k8s::Object> after = k8s::GetPod(w_->client(), "default", "steady");
  ASSERT_TRUE(after.ok());
  EXPECT_EQ(PodPhase(*after), "Running");
  EXPECT_EQ(ContainerId(*after), ContainerId(*before));
  EXPECT_EQ(RestartCount(*after), 0);
  ProcessResult smi = Kubectl({"exec", "steady", "--", "nvidia-smi"});
  EXPECT_EQ(smi.exit_code, 0) << smi.err;
  EXPECT_NE(smi.out.find("MiB / 8192MiB"), std::string::npos) << smi.out;
}

// A pod holding both GPUs whole is deleted while its container ignores SIGTERM: the kubelet
// kills it only after the grace period, and until then its devices stay taken, so that a pod
// asking the same waits and starts only once the first one's process is gone.
TEST_F(RealNodeE2E, APodIgnoringSigtermKeepsItsDevicesUntilItsContainerIsGone) {
  ASSERT_TRUE(w_->Apply(GpuPod("stubborn", 81920, 0,
                               "trap '' TERM; echo ignoring-term; while :; do sleep 1; done", 2,
                               8),
                        "default")
                  .ok());
  Result<k8s::Object> stubborn = w_->WaitForPod("default", "stubborn", RunningWithDevices,
                                                std::chrono::seconds(120));
  ASSERT_TRUE(stubborn.ok()) << stubborn.status().ToString();
  ASSERT_TRUE(w_->WaitForLog("default", "stubborn", "main", "ignoring-term").ok());
  // The container's shell as the host sees it: containerd's task of that container.
  std::string id = ContainerId(*stubborn);
  id = id.substr(id.find("://") + 3);
  Result<std::string> tasks = w_->real_node("node-1")->Ctr({"tasks", "list"});
  ASSERT_TRUE(tasks.ok()) << tasks.status().ToString();
  std::istringstream rows(*tasks);
  int pid = 0;
  for (std::string task, line; std::getline(rows, line);) {
    std::istringstream fields(line);
    fields >> task;
    if (task == id) fields >> pid;
  }
  ASSERT_GT(pid, 1) << *tasks;

  ProcessResult del = Kubectl({"delete", "pod", "stubborn", "--wait=false"});
  ASSERT_EQ(del.exit_code, 0) << del.err;
  ASSERT_TRUE(w_->Apply(GpuPod("successor", 81920, 0, "exec sleep 3600", 2), "default").ok());
  Result<k8s::Object> successor = w_->WaitForPod("default", "successor", RunningWithDevices,
                                                 std::chrono::seconds(120));
  ASSERT_TRUE(successor.ok()) << successor.status().ToString();
  EXPECT_FALSE(std::filesystem::exists("/proc/" + std::to_string(pid) + "/cmdline"))
      << "the successor runs while the stubborn container's process " << pid << " still lives";
  EXPECT_EQ(k8s::GetPod(w_->client(), "default", "stubborn").status().code(),
            StatusCode::kNotFound);
}

}  // namespace
}  // namespace hami::e2e
