// hami-sim-cluster: the control-plane half of the README's main job. It starts the whole
// simulated control plane in this process (API server, hami-scheduler with its webhook over TLS,
// the kube-scheduler stand-in configured with the extender, fake device plugins), registers GPU
// nodes as device plugins do, applies the user's own example pod specs and reports, from the API
// objects, where each pod went, which GPU slice it holds and why a pod that did not fit waits.
// Every line marked "ok" is a check computed from those objects; the exit status is 0 only when
// all of them hold.
//
//   hami-sim-cluster [--examples DIR]     (DIR: examples/seed000, found next to the binary's
//                                          source tree by default)
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>
#include <vector>

#include "device/device.h"
#include "k8s/object.h"
#include "sim/cluster/sim_cluster.h"

namespace {

using hami::device::DeviceInfo;
using hami::sim::SimCluster;

int failures = 0;

void Check(bool ok, const std::string& what) {
  std::printf("  %s  %s\n", ok ? "ok  " : "FAIL", what.c_str());
  if (!ok) ++failures;
}

DeviceInfo Gpu(const std::string& uuid, uint32_t index, int32_t mem_mib, const std::string& type,
               int32_t numa = 0) {
  DeviceInfo d;
  d.id = uuid;
  d.index = index;
  d.count = 10;
  d.devmem = mem_mib;
  d.devcore = 100;
  d.type = type;
  d.numa = numa;
  d.mode = "hami-core";
  d.health = true;
  return d;
}

bool Bound(SimCluster& c, const std::string& pod) {
  return SimCluster::WaitFor([&] { return !c.BoundNode("default", pod).empty(); },
                             std::chrono::seconds(20));
}

std::string Allocated(SimCluster& c, const std::string& pod) {
  return c.Annotation("default", pod, "hami.io/vgpu-devices-allocated");
}

void ShowPod(SimCluster& c, const std::string& pod) {
  std::printf("  pod %-20s node %-16s devices %s\n", pod.c_str(),
              c.BoundNode("default", pod).c_str(), Allocated(c, pod).c_str());
}

// The newest event of `reason` for the pod, waiting for it to appear.
std::string EventMessage(SimCluster& c, const std::string& pod, const std::string& reason) {
  std::string message;
  SimCluster::WaitFor(
      [&] {
        for (const hami::k8s::Object& e : c.Events("default", pod)) {
          if (hami::k8s::GetString(e, "/reason") == reason) {
            message = hami::k8s::GetString(e, "/message");
          }
        }
        return !message.empty();
      },
      std::chrono::seconds(20));
  return message;
}

void SharedGpu(const std::string& examples) {
  std::printf(
      "\n[1] Two inference services share one V100 (01-two-pods-share-one-gpu.yaml:\n"
      "    nvidia.com/gpu 1, gpumem 8192, gpucores 50 each)\n");
  SimCluster c;
  c.AddNode("v100-node", {Gpu("GPU-v100-0", 0, 32768, "NVIDIA-Tesla V100-PCIE-32GB")});
  c.ApplyYamlFile(examples + "/01-two-pods-share-one-gpu.yaml", "default");
  bool a = Bound(c, "inference-service-a"), b = Bound(c, "inference-service-b");
  ShowPod(c, "inference-service-a");
  ShowPod(c, "inference-service-b");
  Check(a && b, "both pods bound by hami-scheduler (webhook set schedulerName, extender placed)");
  Check(Allocated(c, "inference-service-a") == "GPU-v100-0,NVIDIA,8192,50:;" &&
            Allocated(c, "inference-service-b") == "GPU-v100-0,NVIDIA,8192,50:;",
        "each holds 8192 MiB and 50 % of the same GPU");
  Check(SimCluster::WaitFor([&] {
          return c.Annotation("default", "inference-service-b", "hami.io/bind-phase") == "success";
        }),
        "the device plugin acknowledged the allocation (hami.io/bind-phase: success)");

  std::printf("    a third copy asks for 50 %% more of a GPU whose cores are all taken:\n");
  hami::Result<hami::k8s::Object> third = hami::sim::YamlToJson(R"(
apiVersion: v1
kind: Pod
metadata: {name: inference-service-c}
spec:
  containers:
  - name: model-server
    image: x
    resources: {limits: {nvidia.com/gpu: 1, nvidia.com/gpumem: 8192, nvidia.com/gpucores: 50}}
)");
  bool created = third.ok() && c.CreatePod("default", *third).ok();
  std::string why = created ? EventMessage(c, "inference-service-c", "FilteringFailed") : "";
  std::printf("  pod %-20s pending; event FilteringFailed: %s\n", "inference-service-c",
              why.c_str());
  Check(created && c.BoundNode("default", "inference-service-c").empty() &&
            why.find("CardInsufficientCore") != std::string::npos,
        "it stays pending, and the event says which resource is short");
}

void TypeSelection(const std::string& examples) {
  std::printf(
      "\n[2] GPU type selection (06-gpu-type-selection.yaml: nvidia.com/use-gputype and\n"
      "    nvidia.com/nouse-gputype) on five nodes of different models\n");
  SimCluster c;
  c.AddNode("t4-node", {Gpu("GPU-t4-0", 0, 16384, "NVIDIA-Tesla T4")});
  c.AddNode("p100-node", {Gpu("GPU-p100-0", 0, 16384, "NVIDIA-Tesla P100-PCIE-16GB")});
  c.AddNode("v100-node", {Gpu("GPU-v100-0", 0, 32768, "NVIDIA-Tesla V100-PCIE-32GB")});
  c.AddNode("a100-sxm-node", {Gpu("GPU-a100-sxm-0", 0, 81920, "NVIDIA A100-SXM4-80GB")});
  c.AddNode("a100-pcie-node", {Gpu("GPU-a100-pcie-0", 0, 40960, "NVIDIA A100-PCIE-40GB")});
  c.ApplyYamlFile(examples + "/06-gpu-type-selection.yaml", "default");
  bool all = true;
  for (const char* p : {"a100-only-task", "exclude-old-gpu", "selective-gpu"}) {
    all = Bound(c, p) && all;
    ShowPod(c, p);
  }
  Check(all, "all three pods bound");
  std::string a = c.BoundNode("default", "a100-only-task");
  Check(a == "a100-sxm-node" || a == "a100-pcie-node", "a100-only-task runs on an A100");
  std::string b = c.BoundNode("default", "exclude-old-gpu");
  Check(!b.empty() && b != "t4-node" && b != "p100-node", "exclude-old-gpu avoids T4 and P100");
  std::string s = c.BoundNode("default", "selective-gpu");
  Check(s == "v100-node" || s == "a100-pcie-node",
        "selective-gpu runs on a V100 or A100 but not the SXM A100");
}

}  // namespace

int main(int argc, char** argv) {
  std::string examples = HAMI_EXAMPLES_DIR;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--examples" && i + 1 < argc) {
      examples = argv[++i];
    } else if (arg.rfind("--examples=", 0) == 0) {
      examples = arg.substr(11);
    } else {
      std::fprintf(stderr,
                   "usage: hami-sim-cluster [--examples DIR]\n"
                   "Runs the simulated control plane on the example pod specs in DIR and checks\n"
                   "where they land (default DIR: %s).\n",
                   HAMI_EXAMPLES_DIR);
      return arg == "--help" || arg == "-h" ? 0 : 2;
    }
  }
  // The parts log every decision (klog format) on stderr; the report goes to stdout.
  std::printf(
      "Simulated control plane: API server, hami-scheduler (extender + webhook over TLS),\n"
      "kube-scheduler stand-in, device plugins. Pod specs from %s.\n",
      examples.c_str());
  try {
    SharedGpu(examples);
    TypeSelection(examples);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "hami-sim-cluster: %s\n", e.what());
    return 1;
  }
  std::printf("\n%s: %d check(s) failed\n", failures == 0 ? "PASS" : "FAIL", failures);
  return failures == 0 ? 0 : 1;
}
