// What the MIG end-to-end tests (node_mig_e2e_test.cc, node_mig_replay_e2e_test.cc) share: the
// node of A100-80GBs they run on, their pods, and how they read what a pod got (the scheduler's
// reservation with the plugin's runtime identity, the memory the container's CUDA saw) and what
// the simulated driver holds (`hami-simctl mig`).
//
// Every pod lives in namespace "default" and has one container, "main". Waits on API objects
// follow the API server's watches; the driver's MIG state has no event, so Destroyed() polls it.
//
// Thread safety: functions of their arguments, for the test's own thread.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <string>
#include <thread>
#include <vector>

#include "device/mig_allocation.h"
#include "device/node_registration.h"
#include "k8s/typed.h"
#include "sim/world/waits.h"
#include "sim/world/world.h"

namespace hami::e2e {

using Json = nlohmann::json;
using sim::PodPhase;
using sim::World;
using sim::WorldOptions;

inline constexpr const char* kNode = "node-m";
inline constexpr uint64_t kMiB = 1 << 20;

// One node, kNode, of `gpus` A100-SXM4-80GBs (98 SMs) whose simulated driver speaks MIG; its
// kubelet starts with relative paths, as the README's by-hand command line runs it.
inline WorldOptions MigNode(int gpus = 2) {
  WorldOptions o;
  o.build_dir = HAMI_BUILD_DIR;
  o.nodes.resize(1);
  o.nodes[0].name = kNode;
  for (int i = 0; i < gpus; ++i) {
    o.nodes[0].gpu_config += "[device]\nname = NVIDIA A100-SXM4-80GB\n"
                             "uuid = GPU-0000000e-0000-4000-8000-00000000000" +
                             std::to_string(i) + "\nmemory = 80Gi\nsm_count = 98\n";
  }
  o.kubelet_relative_paths = true;
  return o;
}

inline std::string Annotation(const k8s::Object& o, const std::string& key) {
  if (!o.contains("metadata") || !o["metadata"].contains("annotations")) return "";
  const Json& a = o["metadata"]["annotations"];
  return a.contains(key) && a[key].is_string() ? a[key].get<std::string>() : "";
}

inline bool Terminal(const k8s::Object& p) {
  return PodPhase(p) == "Succeeded" || PodPhase(p) == "Failed";
}
inline bool Running(const k8s::Object& p) { return PodPhase(p) == "Running"; }

// Waits (up to `timeout`) for an event about pod `name` whose message mentions `text` (the
// scheduler's reason a pod stays Pending): that message, or "" when none came. Re-checked on
// every event the API server's watch of the namespace's events reports.
inline std::string EventSaying(World& w, const std::string& name, const std::string& text,
                               std::chrono::milliseconds timeout = std::chrono::seconds(30)) {
  std::string found;
  auto check = [&](const Json& e) {
    if (!e.is_object() || k8s::GetString(e, "/involvedObject/name") != name) return false;
    std::string m = e.value("message", "");
    if (m.find(text) == std::string::npos) return false;
    found = m;
    return true;
  };
  sim::FollowOptions opts;
  opts.deadline = std::chrono::steady_clock::now() + timeout;
  opts.recovery = sim::Recovery::kRelistOnGone;
  (void)sim::FollowResource(
      w.client(), k8s::kEvents, "default", opts,
      [&](const k8s::Object& list) {
        auto items = list.find("items");
        if (items == list.end() || !items->is_array()) return false;
        for (const Json& e : *items) {
          if (check(e)) return true;
        }
        return false;
      },
      [&](const k8s::WatchEvent& ev) {
        return (ev.type == k8s::WatchEvent::Type::kAdded ||
                ev.type == k8s::WatchEvent::Type::kModified) &&
               check(*ev.object);
      });
  return found;
}

// A pod of `limits` (YAML lines under limits:) running `command` (a JSON array), scheduled by
// hami-scheduler (a pod asking only for nvidia.com/mig-* is not mutated by the webhook, and the
// world runs no default scheduler). `annotations`: YAML lines under metadata.annotations;
// `grace_seconds` >= 0: its terminationGracePeriodSeconds.
inline std::string PodYaml(const std::string& name, const std::string& limits,
                           const std::string& command, const std::string& annotations = "",
                           int grace_seconds = -1) {
  return "apiVersion: v1\nkind: Pod\nmetadata:\n  name: " + name + "\n" +
         (annotations.empty() ? "" : "  annotations:\n" + annotations) +
         "spec:\n  schedulerName: hami-scheduler\n  restartPolicy: Never\n" +
         (grace_seconds < 0
              ? ""
              : "  terminationGracePeriodSeconds: " + std::to_string(grace_seconds) + "\n") +
         "  containers:\n  - name: main\n    image: nvidia/cuda\n    command: " + command +
         "\n    resources:\n      limits:\n" + limits;
}
inline const std::string kInfo = "[\"" HAMI_BUILD_DIR "/bin/vgpu_probe\", \"info\"]";
inline const std::string kHold = "[\"" HAMI_BUILD_DIR
                                 "/bin/vgpu_probe\", \"workload\", \"--mem-fraction\", \"0.1\", "
                                 "\"--duration-ms\", \"0\"]";

// The total memory the container's CUDA saw on its one device, from `vgpu_probe info`.
inline uint64_t SeenTotal(World& w, const std::string& pod) {
  std::string log = w.Logs("default", pod, "main").value_or("");
  size_t at = log.find(" total=");
  if (at == std::string::npos || log.find("device=1") != std::string::npos) return 0;
  return std::stoull(log.substr(at + 7));
}

// The MIG device the plugin recorded for the pod's first container.
inline device::MigAllocation Realised(const k8s::Object& pod) {
  Result<std::vector<device::MigAllocation>> m =
      device::DecodeMigAllocations(Annotation(pod, "hami.io/vgpu-mig-allocations"));
  EXPECT_TRUE(m.ok() && m->size() == 1) << Annotation(pod, "hami.io/vgpu-mig-allocations");
  return m.ok() && !m->empty() ? m->front() : device::MigAllocation{};
}

// Waits (up to 30 s) until `hami-simctl mig` no longer lists `mig_uuid`.
inline bool Destroyed(World& w, const std::string& mig_uuid) {
  const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (std::chrono::steady_clock::now() < end) {
    Result<std::string> out = w.SimCtl(kNode, {"mig"});
    if (out.ok() && out->find(mig_uuid) == std::string::npos) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(200));  // polls the driver's state
  }
  return false;
}

}  // namespace hami::e2e
