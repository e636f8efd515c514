// End to end with every component as its own process, talking over its real interface
// (src/sim/world): the simulated API server, hami-scheduler (extender and webhook over TLS), the
// kube-scheduler stand-in, and two nodes of different GPU models, each with hami-sim-kubelet and
// hami-device-plugin joined by kubelet's gRPC device plugin API. Pods go from "kubectl apply" to
// processes running under their quotas; faults hit one process at a time.
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <thread>
#include <tuple>

#include "common/subprocess.h"
#include "device/node_registration.h"
#include "device/pod_devices.h"
#include "k8s/api_error.h"
#include "k8s/typed.h"
#include "sim/world/manifests.h"
#include "sim/world/waits.h"
#include "sim/world/world.h"
#include "tests/kube_bin.h"

#ifndef SYS_pidfd_open
#define SYS_pidfd_open 434  // its number on x86-64 and arm64, for C libraries that predate it
#endif

namespace hami::e2e {
namespace {

using Json = nlohmann::json;
using sim::PodPhase;
using sim::World;
using sim::WorldNode;
using sim::WorldOptions;

constexpr const char* kPinned = "GPU-e3b5f6a0-1234-5678-abcd-ef1234567890";  // seed 07's UUID

// `count` GPUs, the first half on NUMA node 0, the rest on node 1, with UUIDs unique to the node
// (`node_tag`, one hex digit); `uuid0` overrides the first one's.
std::string GpuConfig(const std::string& name, const std::string& memory, int count, char node_tag,
                      const char* uuid0) {
  std::string out;
  for (int i = 0; i < count; ++i) {
    std::string uuid =
        std::string("GPU-0000000") + node_tag + "-0000-4000-8000-00000000000" + std::to_string(i);
    if (i == 0 && uuid0 != nullptr) uuid = uuid0;
    out += "[device]\nname = " + name + "\nuuid = " + uuid + "\nmemory = " + memory +
           "\nnuma_node = " + std::to_string(i * 2 / count) + "\n";
  }
  return out;
}

WorldOptions TwoNodes(sim::ControlPlaneKind control_plane = sim::ControlPlaneKind::kSimulated) {
  WorldOptions o;
  o.build_dir = HAMI_BUILD_DIR;
  o.control_plane = control_plane;
  o.kube_bin_dir = kube_pin::BinDir();
  o.chart_dir = HAMI_SOURCE_DIR "/deploy/helm/hami-cpp";
  o.nodes.resize(2);
  o.nodes[0].name = "node-a";
  o.nodes[0].gpu_config = GpuConfig("NVIDIA A100-SXM4-80GB", "80Gi", 8, 'a', nullptr);
  o.nodes[1].name = "node-b";
  o.nodes[1].gpu_config = GpuConfig("Tesla V100-PCIE-32GB", "32Gi", 8, 'b', kPinned);
  // As the README starts a kubelet by hand: relative paths (containers run elsewhere).
  o.kubelet_relative_paths = true;
  return o;
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

std::string Annotation(const k8s::Object& o, const std::string& key) {
  const Json* a = nullptr;
  if (o.contains("metadata") && o["metadata"].contains("annotations")) {
    a = &o["metadata"]["annotations"];
  }
  return a != nullptr && a->contains(key) && (*a)[key].is_string() ? (*a)[key].get<std::string>()
                                                                   : "";
}

bool RunningWithDevices(const k8s::Object& p) {
  return PodPhase(p) == "Running" && Annotation(p, "hami.io/bind-phase") == "success";
}

// The first container's status field (k8s::GetString's pointers do not index arrays).
Json FirstContainer(const k8s::Object& p, const std::string& field) {
  if (!p.contains("status") || !p["status"].contains("containerStatuses") ||
      p["status"]["containerStatuses"].empty()) {
    return Json();
  }
  return p["status"]["containerStatuses"][0].value(field, Json());
}

bool Terminal(const k8s::Object& p) {
  return PodPhase(p) == "Succeeded" || PodPhase(p) == "Failed";
}

// A descriptor that becomes readable once process `pid` has exited, whoever its parent is
// (pidfd_open(2), Linux 5.3 and later). Through syscall(2): older C libraries lack the wrapper.
Result<int> OpenPidFd(pid_t pid) {
  const int fd = static_cast<int>(syscall(SYS_pidfd_open, pid, 0));
  if (fd >= 0) return fd;
  const int err = errno;
  return Status(StatusCode::kUnavailable,
                "pidfd_open(" + std::to_string(pid) + "): " + std::strerror(err) +
                    (err == ENOSYS ? " (the kernel predates Linux 5.3, which these tests need)"
                                   : ""));
}

// Owns a file descriptor: closed with its scope, whichever assertion ends the test.
class OwnedFd {
 public:
  explicit OwnedFd(int fd) : fd_(fd) {}
  ~OwnedFd() { close(fd_); }
  OwnedFd(const OwnedFd&) = delete;
  OwnedFd& operator=(const OwnedFd&) = delete;
  int get() const { return fd_; }

 private:
  int fd_;
};

// Whether the process at `proc` ("/proc/<pid>") exists and is not a zombie.
bool StillRuns(const std::string& proc) {
  std::ifstream in(proc + "/stat");
  std::string stat((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (stat.empty()) return false;  // gone
  size_t paren = stat.rfind(')');  // the state follows the command name, which may hold spaces
  return paren == std::string::npos || paren + 2 >= stat.size() || stat[paren + 2] != 'Z';
}

// Whether the process behind `pidfd` has exited, waiting up to `timeout` for it to.
bool Exited(int pidfd, std::chrono::milliseconds timeout) {
  const auto end = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    pollfd p{pidfd, POLLIN, 0};
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        end - std::chrono::steady_clock::now());
    int ready = poll(&p, 1, static_cast<int>(std::max<int64_t>(left.count(), 0)));
    if (ready >= 0 || errno != EINTR) return ready > 0;
  }
}

// Each test runs on both control planes: the simulated one, and (where the Kubernetes binaries
// were built) etcd, kube-apiserver, kube-controller-manager and kube-scheduler.
class NodeE2E : public ::testing::TestWithParam<sim::ControlPlaneKind> {
 protected:
  void SetUp() override {
    Result<std::unique_ptr<World>> w = World::Start(TwoNodes(GetParam()));
    ASSERT_TRUE(w.ok()) << w.status().ToString();
    w_ = std::move(*w);
  }
  void TearDown() override {
    if (HasFailure() && w_) {
      for (const char* p : {"node-a-kubelet", "node-a-plugin", "node-b-kubelet", "node-b-plugin",
                            "hami-scheduler"}) {
        std::string log = ReadFile(w_->LogFile(p));
        std::cerr << "---- " << p << " (last 3000 bytes)\n"
                  << (log.size() > 3000 ? log.substr(log.size() - 3000) : log) << "\n";
      }
    }
    w_.reset();
  }

  k8s::Object Node(const std::string& name) { return k8s::GetNode(w_->client(), name).value(); }
  std::string NodeLock(const std::string& name) {
    return Annotation(Node(name), "hami.io/mutex.lock");
  }
  // A pod with one container, its command and GPU limits.
  std::string PodYaml(const std::string& name, const std::string& command, int mem, int cores,
                      const std::string& annotations = "", const std::string& policy = "Never") {
    return "apiVersion: v1\nkind: Pod\nmetadata:\n  name: " + name + "\n" +
           (annotations.empty() ? "" : "  annotations:\n" + annotations) +
           "spec:\n  restartPolicy: " + policy +
           "\n  containers:\n  - name: main\n    image: nvidia/cuda\n" +
           (command.empty() ? "" : "    command: " + command + "\n") +
           "    resources:\n      limits:\n        nvidia.com/gpu: 1\n        nvidia.com/gpumem: " +
           std::to_string(mem) + "\n" +
           (cores > 0 ? "        nvidia.com/gpucores: " + std::to_string(cores) + "\n" : "");
  }

  std::unique_ptr<World> w_;
};

TEST_P(NodeE2E, SeedScenariosAreScheduledAllocatedAndRun) {
  // Whole-card requests first (pinned card, NUMA pair, exclusive card), as an operator would
  // order a busy node's work; then the rest.
  std::vector<std::string> pods;
  for (const char* file :
       {"07-gpu-uuid.yaml", "08-numa-aware.yaml", "03-exclusive.yaml",
        "01-two-pods-share-one-gpu.yaml", "02-memory-only.yaml", "04-memory-percentage.yaml",
        "05-policy-override.yaml", "06-gpu-type-selection.yaml"}) {
    std::string path = std::string(HAMI_SOURCE_DIR "/examples/seed000/") + file;
    Result<std::vector<std::string>> names = w_->Apply(ReadFile(path), "default");
    ASSERT_TRUE(names.ok()) << path << ": " << names.status().ToString();
    pods.insert(pods.end(), names->begin(), names->end());
    if (std::set<std::string>{"07-gpu-uuid.yaml", "08-numa-aware.yaml", "03-exclusive.yaml"}
            .count(file) > 0) {
      // Each whole-card pod bound before the next is created: a real kube-scheduler does not
      // promise to schedule pods in the order they were created (a first attempt that fails
      // sends a pod behind the next), and the NUMA pair could otherwise take the pinned card.
      for (const std::string& p : *names) {
        ASSERT_TRUE(w_->WaitForPod("default", p, [](const k8s::Object& o) {
                        return !k8s::GetString(o, "/spec/nodeName").empty();
                      }).ok())
            << p;
      }
    }
  }
  ASSERT_EQ(pods.size(), 12u);
  std::map<std::string, k8s::Object> running;
  for (const std::string& p : pods) {
    Result<k8s::Object> got = w_->WaitForPod("default", p, RunningWithDevices);
    ASSERT_TRUE(got.ok()) << got.status().ToString();
    running[p] = *got;
    // Everything the scheduler reserved was handed to the containers.
    EXPECT_EQ(Annotation(*got, "hami.io/vgpu-devices-to-allocate"), ";") << p;
  }
  EXPECT_EQ(NodeLock("node-a"), "");
  EXPECT_EQ(NodeLock("node-b"), "");
  // Seed 01's pods have no command here: their stand-in workloads see 8 GiB each.
  for (const char* p : {"inference-service-a", "inference-service-b"}) {
    Result<std::string> log = w_->WaitForLog("default", p, "model-server", "workload: device 0");
    ASSERT_TRUE(log.ok()) << log.status().ToString();
    EXPECT_NE(log->find("running the stand-in GPU workload"), std::string::npos) << *log;
    EXPECT_NE(log->find("total=8192MiB"), std::string::npos) << *log;
  }
  // Seed 07 runs on the pinned GPU, seed 06's A100 task on node-a.
  EXPECT_EQ(k8s::GetString(running["uuid-pinned-task"], "/spec/nodeName"), "node-b");
  EXPECT_EQ(
      Annotation(running["uuid-pinned-task"], "hami.io/vgpu-devices-allocated").rfind(kPinned, 0),
      0u);
  EXPECT_EQ(k8s::GetString(running["a100-only-task"], "/spec/nodeName"), "node-a");
  EXPECT_EQ(k8s::GetString(running["selective-gpu"], "/spec/nodeName"), "node-b");

  // The seed's own verification commands, verbatim, through kubectl exec (the API server's
  // pods/exec to the node's kubelet, WebSocket all the way).
  std::string kubectl = kube_pin::Kubectl();
  if (kubectl.empty()) return;
  std::string bin = std::filesystem::path(kubectl).parent_path().string();
  auto shell = [&](const std::string& command) {
    return RunProcess({"/bin/sh", "-c", command},
                      {"PATH=" + bin + ":/usr/bin:/bin", "KUBECONFIG=" + w_->kubeconfig(),
                       "HOME=" + w_->dir()});
  };
  // nvidia-smi in each container shows the memory the scheduler gave it as the card's total
  // (seed 03's training-job is left out: its `python train.py` runs as written where a python
  // is installed, and ends at once without the script).
  for (const char* p : {"inference-service-a", "inference-service-b", "percentage-alloc"}) {
    std::string allocated = Annotation(running[p], "hami.io/vgpu-devices-allocated");
    std::vector<std::string> fields;  // UUID,NVIDIA,<MiB>,<cores>:;
    std::stringstream split(allocated);
    for (std::string f; std::getline(split, f, ',');) fields.push_back(f);
    ASSERT_GE(fields.size(), 3u) << allocated;
    ProcessResult smi = shell(std::string("kubectl exec ") + p + " -- nvidia-smi");
    EXPECT_EQ(smi.exit_code, 0) << p << ": " << smi.err << "\nits log:\n"
                                << w_->Logs("default", p, "").value_or("(none)");
    EXPECT_NE(smi.out.find("NVIDIA-SMI"), std::string::npos) << p << ": " << smi.out;
    EXPECT_NE(smi.out.find("MiB / " + fields[2] + "MiB"), std::string::npos)
        << p << " was given " << allocated << ":\n" << smi.out;
  }
  // Seed 02: no SM limit for a memory-only pod.
  ProcessResult env = shell("kubectl exec memory-only-isolation -- env | grep CUDA");
  EXPECT_EQ(env.exit_code, 0) << env.err;
  EXPECT_NE(env.out.find("CUDA_DEVICE_MEMORY_LIMIT_0=4096m\n"), std::string::npos) << env.out;
  EXPECT_EQ(env.out.find("CUDA_DEVICE_SM_LIMIT=") == std::string::npos ||
                env.out.find("CUDA_DEVICE_SM_LIMIT=0\n") != std::string::npos,
            true)
      << env.out;
  // Seed 06: the A100 task lists an A100.
  ProcessResult list = shell("kubectl exec a100-only-task -- nvidia-smi -L");
  EXPECT_EQ(list.exit_code, 0) << list.err;
  EXPECT_EQ(list.out.rfind("GPU 0: NVIDIA A100-SXM4-80GB (UUID: GPU-", 0), 0u) << list.out;
  // -it as the issue's users type it: without a terminal kubectl says so and runs it anyway...
  ProcessResult it = shell("kubectl exec -it inference-service-a -- nvidia-smi < /dev/null");
  EXPECT_EQ(it.exit_code, 0) << it.err;
  EXPECT_NE(it.out.find("MiB / 8192MiB"), std::string::npos) << it.out;
  // ... and from a terminal (script(1) gives kubectl one) the command gets a terminal too.
  if (access("/usr/bin/script", X_OK) == 0) {
    ProcessResult tty =
        shell("script -qec 'kubectl exec -it memory-only-isolation -- tty' /dev/null < /dev/null");
    EXPECT_EQ(tty.exit_code, 0) << tty.err;
    EXPECT_NE(tty.out.find("/dev/pts/"), std::string::npos) << tty.out;
  }
  // Exit codes and input go through; a missing program is named.
  ProcessResult code = shell("kubectl exec memory-only-isolation -- sh -c 'exit 7'");
  EXPECT_EQ(code.exit_code, 7) << code.err;
  ProcessResult cat = shell("echo through-stdin | kubectl exec -i memory-only-isolation -- cat");
  EXPECT_EQ(cat.out, "through-stdin\n") << cat.err;
  ProcessResult missing = shell("kubectl exec memory-only-isolation -- no-such-tool");
  EXPECT_NE(missing.exit_code, 0);
  EXPECT_NE(missing.err.find("executable file not found in $PATH"), std::string::npos)
      << missing.err;
  // kubectl cp rides on exec (tar in the container); a simulated container shares the host's
  // files, so the world's directory is a path both sides see.
  const std::string copied = w_->dir() + "/copied.txt";
  {
    std::ofstream(w_->dir() + "/to-copy.txt") << "copied through tar\n";
  }
  ProcessResult cp = shell("kubectl cp " + w_->dir() + "/to-copy.txt memory-only-isolation:" +
                           copied + " && kubectl exec memory-only-isolation -- cat " + copied);
  EXPECT_EQ(cp.exit_code, 0) << cp.err;
  EXPECT_EQ(cp.out, "copied through tar\n") << cp.err;
  ProcessResult wrong = shell("kubectl exec memory-only-isolation -c nope -- true");
  EXPECT_NE(wrong.exit_code, 0);
  EXPECT_NE(wrong.err.find("nope"), std::string::npos) << wrong.err;
}

TEST_P(NodeE2E, SmiInsideThePodShowsItsQuota) {
  // GPUs x deviceSplitCount (10).
  for (auto [n, gpus] : {std::pair{"node-a", "80"}, std::pair{"node-b", "80"}}) {
    EXPECT_EQ(k8s::GetString(Node(n), "/status/capacity/nvidia.com~1gpu"), gpus) << n;
    EXPECT_EQ(k8s::GetString(Node(n), "/status/allocatable/nvidia.com~1gpu"), gpus) << n;
  }
  ASSERT_TRUE(w_->Apply(PodYaml("smi", "[\"" HAMI_BUILD_DIR "/bin/hamictl\", \"smi\"]", 8192, 50),
                        "default")
                  .ok());
  Result<k8s::Object> done = w_->WaitForPod("default", "smi", Terminal);
  ASSERT_TRUE(done.ok()) << done.status().ToString();
  EXPECT_EQ(PodPhase(*done), "Succeeded");
  EXPECT_EQ(Annotation(*done, "hami.io/bind-phase"), "success");
  std::string log = w_->Logs("default", "smi", "main").value_or("");
  EXPECT_NE(log.find("0MiB / 8192MiB"), std::string::npos) << log;
  EXPECT_EQ(NodeLock(k8s::GetString(*done, "/spec/nodeName")), "");

  // The same with the real kubectl (the pinned one; else one on PATH).
  std::string kubectl = kube_pin::Kubectl();
  if (kubectl.empty()) return;
  auto run = [&](std::vector<std::string> args) {
    std::vector<std::string> argv = {kubectl, "--kubeconfig", w_->kubeconfig(),
                                     "--request-timeout=20s"};
    argv.insert(argv.end(), args.begin(), args.end());
    return RunProcess(argv, {"HOME=" + w_->dir(), "PATH=/usr/bin:/bin"});
  };
  ProcessResult logs = run({"logs", "smi"});
  EXPECT_EQ(logs.exit_code, 0) << logs.err;
  EXPECT_NE(logs.out.find("0MiB / 8192MiB"), std::string::npos) << logs.out;
  ProcessResult gpus =
      run({"get", "node", "node-a", "-o", "jsonpath={.status.allocatable.nvidia\\.com/gpu}"});
  EXPECT_EQ(gpus.exit_code, 0) << gpus.err;
  EXPECT_EQ(gpus.out, "80");
}

// A node in MPS mode (config.json): pods that ask for it get the MPS daemon's variables and
// limits instead of libvgpu.
TEST(NodeE2EMps, MpsNodesGiveMpsLimits) {
  WorldOptions o = TwoNodes();
  o.node_config_json = R"({"nodeconfig":[{"name":"node-b","operatingmode":"mps"}]})";
  Result<std::unique_ptr<World>> w = World::Start(o);
  ASSERT_TRUE(w.ok()) << w.status().ToString();
  Result<std::vector<device::DeviceInfo>> devs = device::DecodeNodeDevices(
      Annotation(k8s::GetNode((*w)->client(), "node-b").value(), "hami.io/node-nvidia-register"));
  ASSERT_TRUE(devs.ok());
  EXPECT_EQ((*devs)[0].mode, "mps");
  std::string yaml =
      "apiVersion: v1\nkind: Pod\nmetadata:\n  name: mps\n  annotations:\n"
      "    nvidia.com/vgpu-mode: mps\nspec:\n  restartPolicy: Never\n  containers:\n"
      "  - name: main\n    image: busybox\n    command: [\"env\"]\n    resources:\n      limits:\n"
      "        nvidia.com/gpu: 1\n        nvidia.com/gpumem: 4096\n        nvidia.com/gpucores: "
      "40\n";
  ASSERT_TRUE((*w)->Apply(yaml, "default").ok());
  Result<k8s::Object> p = (*w)->WaitForPod("default", "mps", Terminal);
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_EQ(k8s::GetString(*p, "/spec/nodeName"), "node-b");
  std::string env = (*w)->Logs("default", "mps", "main").value_or("");
  EXPECT_NE(env.find("CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=40\n"), std::string::npos) << env;
  EXPECT_NE(env.find("CUDA_MPS_PINNED_DEVICE_MEM_LIMIT=0=4096M\n"), std::string::npos) << env;
  EXPECT_NE(env.find("CUDA_MPS_PIPE_DIRECTORY=/tmp/nvidia-mps\n"), std::string::npos) << env;
  // No libvgpu.so preloaded (a sanitized build's node preloads its sanitizer runtime alone).
  EXPECT_EQ(env.find("libvgpu"), std::string::npos) << env;
  EXPECT_EQ(env.find("CUDA_DEVICE_MEMORY_LIMIT"), std::string::npos) << env;
}

// DEVICE_LIST_STRATEGY (the chart's devicePlugin.deviceListStrategy): a node whose plugin hands
// the GPUs over as volume mounts, another as CDI names; the node's container toolkit (simulated
// by its kubelet) exposes exactly the scheduler's GPU either way, with the quota on it.
TEST(NodeE2EDeviceList, VolumeMountsAndCdiExposeTheAllocatedGpu) {
  WorldOptions o = TwoNodes();
  o.nodes[0].plugin_env = {"DEVICE_LIST_STRATEGY=volume-mounts"};
  o.nodes[1].plugin_env = {"DEVICE_LIST_STRATEGY=cdi-cri,cdi-annotations"};
  Result<std::unique_ptr<World>> started = World::Start(o);
  ASSERT_TRUE(started.ok()) << started.status().ToString();
  World& w = **started;
  for (auto [name, type, node] :
       {std::tuple{"vol", "A100", "node-a"}, std::tuple{"cdi", "V100", "node-b"}}) {
    std::string yaml = "apiVersion: v1\nkind: Pod\nmetadata:\n  name: " + std::string(name) +
                       "\n  annotations:\n    nvidia.com/use-gputype: " + type +
                       "\nspec:\n  restartPolicy: Never\n  containers:\n  - name: main\n"
                       "    image: nvidia/cuda\n    command: [\"" HAMI_BUILD_DIR
                       "/bin/hamictl\", \"smi\", \"--json\"]\n    resources:\n      limits:\n"
                       "        nvidia.com/gpu: 1\n        nvidia.com/gpumem: 4096\n";
    ASSERT_TRUE(w.Apply(yaml, "default").ok()) << name;
    Result<k8s::Object> p = w.WaitForPod("default", name, Terminal);
    ASSERT_TRUE(p.ok()) << p.status().ToString();
    EXPECT_EQ(PodPhase(*p), "Succeeded") << name;
    EXPECT_EQ(k8s::GetString(*p, "/spec/nodeName"), node);
    std::string allocated = Annotation(*p, "hami.io/vgpu-devices-allocated");
    std::string uuid = allocated.substr(0, allocated.find(','));
    ASSERT_EQ(uuid.rfind("GPU-", 0), 0u) << allocated;
    std::string log = w.Logs("default", name, "main").value_or("");
    Json smi = Json::parse(log, nullptr, false);
    ASSERT_TRUE(smi.is_object() && smi.contains("devices")) << name << ": " << log;
    ASSERT_EQ(smi["devices"].size(), 1u) << name << ": " << log;
    EXPECT_EQ(smi["devices"][0].value("uuid", ""), uuid) << name;
    EXPECT_EQ(smi["devices"][0].value("memory_total_mib", 0), 4096) << name;
  }
}

// What the chart gives hami-scheduler and the device plugin for `values` (helm --set pairs): the
// scheduling-policy flags of the extender's command and the literal environment of the plugin's
// container (less what the node's container runtime provides there).
struct ChartSettings {
  std::vector<std::string> scheduler_args, plugin_env;
};
Result<ChartSettings> RenderChartSettings(const std::vector<std::string>& set_values) {
  std::vector<std::string> argv = {kube_pin::BinDir() + "/helm",
                                   "template",
                                   "hami",
                                   HAMI_SOURCE_DIR "/deploy/helm/hami-cpp",
                                   "--namespace",
                                   "kube-system",
                                   "--show-only",
                                   "templates/scheduler-deployment.yaml",
                                   "--show-only",
                                   "templates/device-plugin-daemonset.yaml"};
  for (const std::string& v : set_values) argv.insert(argv.end(), {"--set", v});
  ProcessResult r = RunProcess(argv, {"HOME=/tmp", "HELM_CACHE_HOME=/tmp/.hami-helm-cache",
                                      "HELM_CONFIG_HOME=/tmp/.hami-helm-config",
                                      "HELM_DATA_HOME=/tmp/.hami-helm-data"});
  if (r.exit_code != 0) return InternalError("helm template: " + r.err);
  ChartSettings out;
  for (const std::string& doc : sim::SplitYamlDocuments(r.out)) {
    Result<k8s::Object> o = sim::YamlToJson(doc);
    if (!o.ok() || !o->is_object() || !o->contains("spec")) continue;
    for (const Json& c : (*o)["spec"]["template"]["spec"]["containers"]) {
      if (c.value("name", "") == "vgpu-scheduler-extender") {
        for (const Json& arg : c["command"]) {
          std::string a = arg.get<std::string>();
          if (a.rfind("--gpu-scheduler-policy=", 0) == 0 ||
              a.rfind("--node-scheduler-policy=", 0) == 0) {
            out.scheduler_args.push_back(a);
          }
        }
      }
      if (c.value("name", "") == "device-plugin" && c.contains("env")) {
        static const std::set<std::string> kRuntimes = {"HOOK_PATH", "NVIDIA_VISIBLE_DEVICES",
                                                         "NVIDIA_DRIVER_CAPABILITIES"};
        for (const Json& e : c["env"]) {
          if (!e.contains("value") || kRuntimes.count(e.value("name", ""))) continue;
          out.plugin_env.push_back(e.value("name", "") + "=" + e["value"].get<std::string>());
        }
      }
    }
  }
  if (out.scheduler_args.size() != 2) return InternalError("no policy flags in: " + r.out);
  return out;
}

// gpuSchedulerPolicy: topology-aware through the chart, end to end: the chart's settings make the
// plugin publish its GPUs' pair scores and hami-scheduler rank GPU sets by them, so a 2-GPU pod
// lands on the node's one NVLink-connected pair (GPUs 1 and 3), not on the first two GPUs.
TEST(NodeE2EChart, TopologyAwarePolicyPlacesAPairOnItsNvLink) {
  if (kube_pin::BinDir().empty()) GTEST_SKIP() << "needs helm: bash scripts/kube-tools.sh";
  Result<ChartSettings> chart =
      RenderChartSettings({"scheduler.defaultSchedulerPolicy.gpuSchedulerPolicy=topology-aware"});
  ASSERT_TRUE(chart.ok()) << chart.status().ToString();
  EXPECT_NE(std::find(chart->plugin_env.begin(), chart->plugin_env.end(),
                      "ENABLE_TOPOLOGY_SCORE=true"),
            chart->plugin_env.end());
  WorldOptions o = TwoNodes();
  o.nodes.resize(1);
  o.nodes[0].gpu_config.clear();
  for (int i = 0; i < 4; ++i) {
    o.nodes[0].gpu_config += "[device]\nname = NVIDIA A100-SXM4-80GB\nuuid = "
                             "GPU-0000000a-0000-4000-8000-00000000000" +
                             std::to_string(i) + "\nmemory = 80Gi\nnuma_node = 0\n" +
                             (i == 1 ? "nvlink = 3:12\n" : i == 3 ? "nvlink = 1:12\n" : "");
  }
  o.nodes[0].plugin_env = chart->plugin_env;
  o.scheduler_args = chart->scheduler_args;
  Result<std::unique_ptr<World>> started = World::Start(o);
  ASSERT_TRUE(started.ok()) << started.status().ToString();
  World& w = **started;
  EXPECT_NE(Annotation(k8s::GetNode(w.client(), "node-a").value(), "hami.io/node-nvidia-score"),
            "");
  ASSERT_TRUE(w.Apply("apiVersion: v1\nkind: Pod\nmetadata:\n  name: pair\nspec:\n"
                      "  restartPolicy: Never\n  containers:\n  - name: main\n    image: cuda\n"
                      "    command: [\"sleep\", \"60\"]\n    resources:\n      limits:\n"
                      "        nvidia.com/gpu: 2\n        nvidia.com/gpumem: 1024\n",
                      "default")
                  .ok());
  Result<k8s::Object> p = w.WaitForPod("default", "pair", RunningWithDevices);
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  Result<device::PodSingleDevice> devs =
      device::DecodePodSingleDevice(Annotation(*p, "hami.io/vgpu-devices-allocated"));
  ASSERT_TRUE(devs.ok()) << Annotation(*p, "hami.io/vgpu-devices-allocated");
  std::set<std::string> got;
  for (const auto& c : *devs) {
    for (const auto& d : c) got.insert(d.uuid);
  }
  EXPECT_EQ(got, (std::set<std::string>{"GPU-0000000a-0000-4000-8000-000000000001",
                                        "GPU-0000000a-0000-4000-8000-000000000003"}));
}

TEST_P(NodeE2E, AFailedAllocationFailsThePodWithAReasonAndReleasesTheLock) {
  // Break node-b's hook directory: the plugin cannot create the container's directory.
  std::string containers = w_->HookPath("node-b") + "/vgpu/containers";
  std::filesystem::remove_all(containers);
  std::ofstream(containers) << "not a directory\n";
  std::string ann = std::string("    nvidia.com/use-gpuuuid: \"") + kPinned + "\"\n";
  ASSERT_TRUE(w_->Apply(PodYaml("doomed", "[\"sleep\", \"60\"]", 1024, 10, ann), "default").ok());
  Result<k8s::Object> p = w_->WaitForPod("default", "doomed", Terminal);
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_EQ(PodPhase(*p), "Failed");
  EXPECT_EQ(k8s::GetString(*p, "/status/reason"), "UnexpectedAdmissionError");
  EXPECT_NE(k8s::GetString(*p, "/status/message").find("containers"), std::string::npos);
  EXPECT_EQ(Annotation(*p, "hami.io/bind-phase"), "failed");
  EXPECT_EQ(NodeLock("node-b"), "");
  k8s::ListOptions lo;
  lo.field_selector = "involvedObject.name=doomed";
  Json events = w_->client().List(k8s::kEvents, "default", lo).value();
  std::set<std::string> reasons;
  for (const Json& e : events["items"]) reasons.insert(e.value("reason", ""));
  EXPECT_TRUE(reasons.count("AllocationFailed")) << events.dump();
  EXPECT_TRUE(reasons.count("UnexpectedAdmissionError")) << events.dump();
}

TEST_P(NodeE2E, TheKubeletRestartsAndThePluginRegistersAgain) {
  ASSERT_TRUE(w_->StopKubelet("node-a").ok());
  ASSERT_TRUE(w_->StartKubelet("node-a").ok());
  // The new kubelet starts without devices; the plugin notices kubelet.sock and registers again.
  Result<k8s::Object> n = w_->WaitForNode(
      "node-a",
      [](const k8s::Object& o) {
        return k8s::GetString(o, "/status/allocatable/nvidia.com~1gpu") == "80";
      },
      std::chrono::seconds(5));
  ASSERT_TRUE(n.ok()) << n.status().ToString();
  EXPECT_EQ(k8s::GetString(*n, "/status/allocatable/nvidia.com~1gpu"), "80");
  std::string ann = "    nvidia.com/use-gputype: \"A100\"\n";
  ASSERT_TRUE(w_->Apply(PodYaml("after", "[\"sleep\", \"60\"]", 1024, 0, ann), "default").ok());
  EXPECT_TRUE(w_->WaitForPod("default", "after", RunningWithDevices).ok());
}

TEST_P(NodeE2E, AnXidTakesTheGpuOutOfService) {
  ASSERT_TRUE(w_->InjectXid("node-a", 0, 79).ok());
  auto unhealthy = [](const k8s::Object& o) {
    Result<std::vector<device::DeviceInfo>> devs =
        device::DecodeNodeDevices(Annotation(o, "hami.io/node-nvidia-register"));
    return devs.ok() && devs->size() == 8 && !(*devs)[0].health &&
           k8s::GetString(o, "/status/allocatable/nvidia.com~1gpu") == "70";
  };
  Result<k8s::Object> node = w_->WaitForNode("node-a", unhealthy, std::chrono::seconds(20));
  ASSERT_TRUE(node.ok()) << node.status().ToString();
  ASSERT_TRUE(unhealthy(*node)) << node->dump();
  k8s::Object* n = &*node;
  EXPECT_EQ(k8s::GetString(*n, "/status/capacity/nvidia.com~1gpu"), "80");
  std::string bad =
      device::DecodeNodeDevices(Annotation(*n, "hami.io/node-nvidia-register")).value()[0].id;
  // Exclusive A100 pods: seven fit on the healthy cards, none lands on the broken one.
  std::string ann = "    nvidia.com/use-gputype: \"A100\"\n";
  for (int i = 0; i < 7; ++i) {
    std::string name = "exclusive-" + std::to_string(i);
    ASSERT_TRUE(w_->Apply(PodYaml(name, "[\"sleep\", \"60\"]", 1024, 100, ann), "default").ok());
    Result<k8s::Object> p = w_->WaitForPod("default", name, RunningWithDevices);
    ASSERT_TRUE(p.ok()) << p.status().ToString();
    EXPECT_EQ(Annotation(*p, "hami.io/vgpu-devices-allocated").find(bad), std::string::npos);
  }
}

TEST_P(NodeE2E, RestartingThePluginLeavesRunningPodsAlone) {
  ASSERT_TRUE(
      w_->Apply(PodYaml("steady", "", 4096, 30, "    nvidia.com/use-gputype: \"A100\"\n", "Always"),
                "default")
          .ok());
  Result<k8s::Object> before = w_->WaitForPod("default", "steady", RunningWithDevices);
  ASSERT_TRUE(before.ok()) << before.status().ToString();
  Json id = FirstContainer(*before, "containerID");
  ASSERT_TRUE(id.is_string()) << before->dump();
  ASSERT_TRUE(w_->StopPlugin("node-a").ok());
  ASSERT_TRUE(w_->StartPlugin("node-a").ok());
  ASSERT_TRUE(w_->Apply(PodYaml("newcomer", "[\"sleep\", \"60\"]", 2048, 0,
                                "    nvidia.com/use-gputype: \"A100\"\n"),
                        "default")
                  .ok());
  EXPECT_TRUE(w_->WaitForPod("default", "newcomer", RunningWithDevices).ok());
  Result<k8s::Object> after = k8s::GetPod(w_->client(), "default", "steady");
  ASSERT_TRUE(after.ok());
  EXPECT_EQ(PodPhase(*after), "Running");
  EXPECT_EQ(FirstContainer(*after, "containerID"), id);
  EXPECT_EQ(FirstContainer(*after, "restartCount"), 0);
  std::string log = w_->Logs("default", "steady", "main").value_or("");
  EXPECT_NE(log.find("total=4096MiB"), std::string::npos) << log;
}

// A deleted pod stays Terminating until its kubelet has stopped the container (here only the
// SIGKILL after the grace period does), and its card stays its own until then: a successor
// pinned to the same whole card is not placed while the old process lives.
TEST_P(NodeE2E, ADeletedPodKeepsItsDevicesUntilItsContainerIsGone) {
  auto pinned = [](const std::string& name, const std::string& command) {
    return "apiVersion: v1\nkind: Pod\nmetadata:\n  name: " + name +
           "\n  annotations:\n    nvidia.com/use-gpuuuid: \"" + kPinned +
           "\"\nspec:\n  terminationGracePeriodSeconds: 3\n  containers:\n  - name: main\n"
           "    image: busybox\n    command: " +
           command +
           "\n    resources:\n      limits:\n        nvidia.com/gpu: 1\n"
           "        nvidia.com/gpumem: 32768\n";
  };
  // The container ignores SIGTERM.
  ASSERT_TRUE(w_->Apply(pinned("stubborn", "[\"sh\", \"-c\", \"trap '' TERM; echo ready; "
                                           "while true; do sleep 1; done\"]"),
                        "default")
                  .ok());
  Result<k8s::Object> p = w_->WaitForPod("default", "stubborn", RunningWithDevices);
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  std::string id = FirstContainer(*p, "containerID").get<std::string>();
  ASSERT_EQ(id.rfind("hami-sim://", 0), 0u);
  const std::string pid = id.substr(std::string("hami-sim://").size());
  const std::string proc = "/proc/" + pid;
  ASSERT_TRUE(std::filesystem::exists(proc));
  // Opened while the process surely lives (it ignores SIGTERM and is not deleted yet).
  Result<int> pidfd = OpenPidFd(static_cast<pid_t>(std::stol(pid)));
  ASSERT_TRUE(pidfd.ok()) << pidfd.status().ToString();
  const OwnedFd process(*pidfd);
  Result<std::string> ready = w_->WaitForLog("default", "stubborn", "main", "ready");
  ASSERT_TRUE(ready.ok()) << ready.status().ToString();
  // The kubelet's log says which devices the plugin gave, not only its own slot IDs.
  std::string allocated =
      ReadFile(w_->LogFile("node-a-kubelet")) + ReadFile(w_->LogFile("node-b-kubelet"));
  EXPECT_NE(allocated.find("pod default/stubborn container main: 1 nvidia.com/gpu slot(s) "),
            std::string::npos)
      << allocated;
  EXPECT_NE(allocated.find(std::string("the plugin's devices: NVIDIA_VISIBLE_DEVICES=") + kPinned),
            std::string::npos)
      << allocated;
  ASSERT_TRUE(w_->client().Delete(k8s::kPods, "default", "stubborn").ok());
  Result<k8s::Object> terminating = k8s::GetPod(w_->client(), "default", "stubborn");
  ASSERT_TRUE(terminating.ok()) << "gone at once: " << terminating.status().ToString();
  EXPECT_FALSE(k8s::GetString(*terminating, "/metadata/deletionTimestamp").empty());
  EXPECT_EQ(k8s::GetInt(*terminating, "/metadata/deletionGracePeriodSeconds", -1), 3);
  ASSERT_TRUE(w_->Apply(pinned("successor", "[\"sleep\", \"60\"]"), "default").ok());

  // While the old process lives, the successor has no node: each state of the successor is
  // judged as the API server reports it, against whether the process has exited by then, until
  // it exits.
  Cancellation exited;
  std::string bound_while_running;  // the successor's state when it got a node too early
  Status watched;
  std::thread watcher([&] {
    watched = sim::WatchObject(
        w_->client(), k8s::kPods, "default", "successor",
        [&](const k8s::Object* next) {
          if (next == nullptr || k8s::GetString(*next, "/spec/nodeName").empty() ||
              Exited(process.get(), std::chrono::milliseconds(0))) {
            return false;
          }
          bound_while_running = next->dump();
          return true;
        },
        std::chrono::steady_clock::now() + std::chrono::seconds(30), &exited);
  });
  const bool gone = Exited(process.get(), std::chrono::seconds(20));
  exited.Cancel();
  watcher.join();
  ASSERT_TRUE(bound_while_running.empty())
      << "the successor got the card while the deleted pod's container still ran: "
      << bound_while_running;
  EXPECT_TRUE(watched.ok() || watched.code() == StatusCode::kCancelled) << watched.ToString();
  EXPECT_TRUE(gone) << proc << " still runs";
  // Exited: gone, or a zombie its parent (the kubelet) has not reaped yet.
  EXPECT_FALSE(StillRuns(proc)) << proc << " still runs";
  std::string log =
      ReadFile(w_->LogFile("node-a-kubelet")) + ReadFile(w_->LogFile("node-b-kubelet"));
  EXPECT_NE(log.find("pod default/stubborn is terminating: stopping its containers"),
            std::string::npos)
      << log;
  // kube-scheduler retries the successor on the deletion, possibly before hami-scheduler has
  // seen it; refused then, the pod waits for the next cluster event (docs/deploy.md, known
  // limitations). A label change is such an event.
  if (!w_->WaitForPod("default", "successor", RunningWithDevices, std::chrono::seconds(10)).ok()) {
    (void)w_->client().Patch(k8s::kPods, "default", "successor", k8s::PatchType::kMerge,
                             R"({"metadata":{"labels":{"retry":"1"}}})");
  }
  EXPECT_TRUE(w_->WaitForPod("default", "successor", RunningWithDevices).ok());
  EXPECT_TRUE(k8s::IsNotFound(k8s::GetPod(w_->client(), "default", "stubborn").status()));
  log = ReadFile(w_->LogFile("node-a-kubelet")) + ReadFile(w_->LogFile("node-b-kubelet"));
  EXPECT_NE(log.find("pod default/stubborn container main exited with code 137"), std::string::npos)
      << "SIGKILL after the grace period";
}

// The API server stops answering while a burst of pods is being allocated. Whatever each pod's
// fate, no GPU slice is handed out twice: every running pod's devices are its reservation, and
// no card holds more than it has.
TEST_P(NodeE2E, AnUnreachableApiServerNeverHandsADeviceOutTwice) {
  std::vector<std::string> names;
  for (int i = 0; i < 12; ++i) {
    names.push_back("burst-" + std::to_string(i));
    ASSERT_TRUE(
        w_->Apply(PodYaml(names.back(), "[\"sleep\", \"120\"]", 20000, 20), "default").ok());
  }
  ASSERT_TRUE(w_->Signal("apiserver", SIGSTOP).ok());
  std::this_thread::sleep_for(std::chrono::seconds(3));  // the outage itself, not a sync point
  ASSERT_TRUE(w_->Signal("apiserver", SIGCONT).ok());
  std::map<std::string, int64_t> used;  // GPU UUID -> MiB of running pods
  int ran = 0;
  for (const std::string& p : names) {
    Result<k8s::Object> got = w_->WaitForPod(
        "default", p,
        [](const k8s::Object& o) {
          return RunningWithDevices(o) || Terminal(o) ||
                 Annotation(o, "hami.io/bind-phase") == "failed";
        },
        std::chrono::seconds(90));
    ASSERT_TRUE(got.ok()) << got.status().ToString();
    if (!RunningWithDevices(*got)) {
      EXPECT_NE(PodPhase(*got), "Running") << p;  // no pod runs without its allocation
      continue;
    }
    ++ran;
    Result<device::PodSingleDevice> devs =
        device::DecodePodSingleDevice(Annotation(*got, "hami.io/vgpu-devices-allocated"));
    ASSERT_TRUE(devs.ok());
    for (const device::ContainerDevices& c : *devs) {
      for (const device::ContainerDevice& d : c) used[d.uuid] += d.mem_mib;
    }
  }
  EXPECT_GT(ran, 0);
  std::map<std::string, int64_t> capacity;  // GPU UUID -> MiB it registered
  for (const char* n : {"node-a", "node-b"}) {
    Result<std::vector<device::DeviceInfo>> devs =
        device::DecodeNodeDevices(Annotation(Node(n), "hami.io/node-nvidia-register"));
    ASSERT_TRUE(devs.ok()) << devs.status().ToString();
    for (const device::DeviceInfo& d : *devs) capacity[d.id] = d.devmem;
  }
  for (const auto& [uuid, mib] : used) {
    ASSERT_TRUE(capacity.count(uuid)) << uuid;
    EXPECT_LE(mib, capacity[uuid]) << uuid;
  }
  // Every node lock is released once the burst has settled: some moment finds both nodes without
  // one. A pod whose binding failed may still be retried and lock a node for a while, so each
  // round waits for one node's lock to go and then reads the other's.
  auto unlocked = [](const k8s::Object& o) { return Annotation(o, "hami.io/mutex.lock").empty(); };
  const auto locks_end = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  bool both_unlocked = false;
  std::string waiting = "node-a", other = "node-b";
  while (!both_unlocked && std::chrono::steady_clock::now() < locks_end) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        locks_end - std::chrono::steady_clock::now());
    Result<k8s::Object> free = w_->WaitForNode(waiting, unlocked, left);
    ASSERT_TRUE(free.ok()) << free.status().ToString();
    both_unlocked = unlocked(Node(other));
    std::swap(waiting, other);
  }
  EXPECT_TRUE(both_unlocked) << "node-a: " << NodeLock("node-a") << ", node-b: "
                             << NodeLock("node-b");
}

std::vector<sim::ControlPlaneKind> RealIfBuilt() {
  if (kube_pin::BinDir().empty()) return {};
  return {sim::ControlPlaneKind::kReal};
}

INSTANTIATE_TEST_SUITE_P(Simulated, NodeE2E, ::testing::Values(sim::ControlPlaneKind::kSimulated));
INSTANTIATE_TEST_SUITE_P(Real, NodeE2E, ::testing::ValuesIn(RealIfBuilt()));
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(NodeE2E);

}  // namespace
}  // namespace hami::e2e
