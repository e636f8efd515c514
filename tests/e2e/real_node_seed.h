// The user's seed scenarios (examples/seed000) on a real node of the main job's eight A100s
// (sim/world/demo.h), for the real-node tests: the seed test, where the world starts hami-cpp's
// processes itself, and the Helm test, where the chart runs them as pods. The pods are applied
// as written except for the container (the node image and the stand-in GPU workload instead of
// the model server: there is no registry and no real GPU). Each container's CUDA sees its quota
// (`kubectl logs`), `hamictl smi` inside it shows the virtual view, and the placements are the
// scenarios' own as far as one node can show them.
#pragma once

#include <gtest/gtest.h>

#include <map>
#include <set>
#include <string>
#include <vector>

#include "common/subprocess.h"
#include "k8s/object.h"
#include "k8s/typed.h"
#include "sim/world/demo.h"
#include "sim/world/manifests.h"
#include "sim/world/world.h"
#include "tests/e2e/real_node_util.h"
#include "tests/kube_bin.h"

namespace hami::e2e {

// One pod of a seed scenario as it runs here: the scenario's metadata and resources, the node
// image's stand-in workload (allocates half its quota and launches kernels until stopped).
inline k8s::Object AsRealContainer(k8s::Object pod) {
  pod["spec"]["terminationGracePeriodSeconds"] = 1;
  for (auto& c : pod["spec"]["containers"]) {
    c["image"] = sim::kNodeTestImage;
    c["imagePullPolicy"] = "Never";
    c["command"] = {"vgpu_probe", "workload", "--mem-fraction", "0.5"};
    c.erase("args");
  }
  return pod;
}

// The device memory a pod's container is given on an 80 GiB A100, in MiB: its gpumem, or its
// percentage of the card, or the whole card.
inline int QuotaMiB(const k8s::Object& pod) {
  const k8s::Object& limits = pod["spec"]["containers"][0]["resources"]["limits"];
  if (limits.contains("nvidia.com/gpumem")) {
    return std::stoi(limits["nvidia.com/gpumem"].is_string()
                         ? limits["nvidia.com/gpumem"].get<std::string>()
                         : std::to_string(limits["nvidia.com/gpumem"].get<int>()));
  }
  if (limits.contains("nvidia.com/gpumem-percentage")) {
    return 81920 * limits["nvidia.com/gpumem-percentage"].get<int>() / 100;
  }
  return 81920;
}

// The index of a GPU of the main job's A100 node by its UUID (sim::DemoNodes: the last one is
// the pinned UUID of scenario 07, the others end in their index).
inline int GpuIndex(const std::string& uuid) {
  if (uuid == sim::kDemoPinnedUuid) return 7;
  return uuid.empty() ? -1 : uuid.back() - '0';
}

// A world of the main job's A100 node (DemoNodes()[0]) as a real node, on the real control
// plane, with the main job's node config; the caller adds how hami-cpp is started.
inline sim::WorldOptions SeedNodeWorld() {
  sim::WorldOptions o;
  o.build_dir = HAMI_BUILD_DIR;
  o.control_plane = sim::ControlPlaneKind::kReal;
  o.kube_bin_dir = kube_pin::BinDir();
  o.node_bin_dir = NodeBinDir();
  o.chart_dir = HAMI_SOURCE_DIR "/deploy/helm/hami-cpp";
  o.nodes = {sim::DemoNodes()[0]};  // dgx-a100
  o.node_config_json = sim::DemoNodeConfigJson();
  return o;
}

// Runs scenarios 01 to 08 on `w` (a world of DemoNodes()[0] as a real node, with the main
// job's scheduling policies: nodes spread, GPUs packed) and checks them, leaving no pod behind.
inline void CheckSeedScenarios(sim::World& w) {
  auto kubectl = [&](const std::vector<std::string>& args) { return Kubectl(w, args); };

  // Applies the pods of `files` and, for each that should run, checks what its container sees;
  // returns pod -> NVIDIA_VISIBLE_DEVICES of its container. Those named in `pending` must be
  // refused by the scheduler instead.
  auto run = [&](const std::vector<std::string>& files, const std::set<std::string>& pending) {
    std::map<std::string, int> quota;
    for (const std::string& file : files) {
      const std::string text = ReadFile(HAMI_SOURCE_DIR "/examples/seed000/" + file);
      EXPECT_FALSE(text.empty()) << file;
      for (const std::string& doc : sim::SplitYamlDocuments(text)) {
        Result<k8s::Object> pod = k8s::YamlToJson(doc);
        EXPECT_TRUE(pod.ok()) << file << ": " << pod.status().ToString();
        if (!pod.ok() || !pod->is_object()) continue;
        quota[k8s::Name(*pod)] = QuotaMiB(*pod);
        Result<std::vector<std::string>> applied =
            w.Apply(AsRealContainer(*pod).dump(), "default");
        EXPECT_TRUE(applied.ok()) << file << ": " << applied.status().ToString();
      }
    }
    std::map<std::string, std::string> gpu;
    for (const auto& [name, mib] : quota) {
      if (pending.count(name) != 0) {
        EXPECT_TRUE(w.WaitForPod("default", name, Unschedulable).ok()) << name;
        continue;
      }
      Result<k8s::Object> running = w.WaitForPod(
          "default", name, [](const k8s::Object& p) { return sim::PodPhase(p) == "Running"; },
          std::chrono::seconds(120));
      EXPECT_TRUE(running.ok()) << running.status().ToString();
      if (!running.ok()) continue;
      // Handed to hami-scheduler by the webhook (a pod the webhook missed would be placed by
      // whatever else schedules, or by nothing).
      EXPECT_EQ(k8s::GetString(*running, "/spec/schedulerName"), "hami-scheduler") << name;
      const std::string container =
          k8s::GetString((*running)["spec"]["containers"][0], "/name");
      Result<std::string> log = w.WaitForLog("default", name, container, "CUDA_DEVICE_SM_LIMIT");
      EXPECT_TRUE(log.ok()) << name << ": " << log.status().ToString();
      ProcessResult logs = kubectl({"logs", name});
      EXPECT_NE(logs.out.find("memory total=" + std::to_string(mib) + "MiB"), std::string::npos)
          << name << ":\n" << logs.out << logs.err;
      ProcessResult smi = kubectl({"exec", name, "--", "hamictl", "smi"});
      EXPECT_EQ(smi.exit_code, 0) << name << ": " << smi.err;
      EXPECT_NE(smi.out.find("MiB / " + std::to_string(mib) + "MiB"), std::string::npos)
          << name << ":\n" << smi.out;
      ProcessResult env =
          kubectl({"exec", name, "--", "sh", "-c", "printf %s $NVIDIA_VISIBLE_DEVICES"});
      EXPECT_EQ(env.out.rfind("GPU-", 0), 0u) << name << ": " << env.out << env.err;
      gpu[name] = env.out;
    }
    return gpu;
  };

  // Scenarios 01 to 04 together: two pods sharing a GPU, memory alone, a whole GPU by its
  // cores, a percentage of the memory.
  std::map<std::string, std::string> gpu =
      run({"01-two-pods-share-one-gpu.yaml", "02-memory-only.yaml", "03-exclusive.yaml",
           "04-memory-percentage.yaml"},
          {});
  EXPECT_EQ(gpu["inference-service-a"], gpu["inference-service-b"])
      << "scenario 01: both pods on the same physical GPU";
  for (const auto& [name, uuid] : gpu) {
    if (name != "training-job") {
      EXPECT_NE(uuid, gpu["training-job"]) << "scenario 03: " << name << " shares its GPU";
    }
  }
  ProcessResult gone = kubectl({"delete", "pods", "--all", "--wait=true", "--timeout=120s"});
  ASSERT_EQ(gone.exit_code, 0) << gone.err;

  // Scenarios 05 to 08 on the emptied node: a policy override, GPU models (the SXM A100 is
  // the only model here, so the pod that excludes it waits), UUIDs, NUMA.
  gpu = run({"05-policy-override.yaml", "06-gpu-type-selection.yaml", "07-gpu-uuid.yaml",
             "08-numa-aware.yaml"},
            {"selective-gpu"});
  EXPECT_EQ(gpu["uuid-pinned-task"], sim::kDemoPinnedUuid);
  EXPECT_EQ(gpu["uuid-exclude-task"].find(sim::kDemoPinnedUuid), std::string::npos);
  // Two GPUs of one NUMA node: GPUs 0 to 3 are on node 0, 4 to 7 on node 1.
  const std::string numa = gpu["numa-aware-training"];
  const size_t comma = numa.find(',');
  ASSERT_NE(comma, std::string::npos) << "two GPUs: " << numa;
  EXPECT_EQ(GpuIndex(numa.substr(0, comma)) / 4, GpuIndex(numa.substr(comma + 1)) / 4) << numa;
  gone = kubectl({"delete", "pods", "--all", "--wait=true", "--timeout=120s"});
  EXPECT_EQ(gone.exit_code, 0) << gone.err;
}

}  // namespace hami::e2e
