// Fuzzes the device plugin's allocation plan with what reaches it from outside: the pod's
// `hami.io/vgpu-devices-to-allocate` annotation (written by a scheduler, editable by anyone who
// can patch the pod), its container names and UID (host path components), the CUDA_DISABLE_CONTROL
// value, and kubelet's device IDs. Invariants: no crash; a plan gives each request exactly the
// devices the annotation names, never a device of another node, and only paths under the hook
// directory; the re-encoded annotation decodes again with the consumed entries emptied.
#include <stddef.h>
#include <stdint.h>

#include <string>
#include <string_view>
#include <vector>

#include "device/pod_devices.h"
#include "deviceplugin/allocation.h"

using namespace hami::deviceplugin;

namespace {

// Splits the input at NUL bytes into fields.
std::vector<std::string> Fields(const uint8_t* data, size_t size) {
  std::vector<std::string> out(1);
  for (size_t i = 0; i < size; ++i) {
    if (data[i] == 0) {
      out.emplace_back();
    } else {
      out.back() += static_cast<char>(data[i]);
    }
  }
  return out;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::vector<std::string> f = Fields(data, size);
  f.resize(6);
  PodView pod;
  pod.ns = "default";
  pod.name = "p";
  pod.uid = f[1];
  pod.containers = {{"init", {}}, {f[2].empty() ? "main" : f[2], {{"CUDA_DISABLE_CONTROL", f[3]}}}};
  pod.annotations["hami.io/vgpu-devices-to-allocate"] = f[0];
  ReplicaMap replicas;
  for (const char* g : {"GPU-a", "GPU-b"}) {
    for (int i = 0; i < 3; ++i) replicas[std::string(g) + "-" + std::to_string(i)] = g;
  }
  std::vector<std::vector<std::string>> requests;
  for (size_t i = 4; i < f.size(); ++i) {
    std::vector<std::string> ids;
    size_t start = 0;
    while (start <= f[i].size()) {
      size_t comma = f[i].find(',', start);
      if (comma == std::string::npos) comma = f[i].size();
      ids.push_back(f[i].substr(start, comma - start));
      start = comma + 1;
    }
    requests.push_back(std::move(ids));
  }
  AllocationSettings s;
  s.hook_path = "/hook";
  int n = 0;
  hami::Result<AllocationPlan> plan =
      PlanAllocation(pod, requests, replicas, s, [&] { return std::to_string(n++) + ".cache"; });
  if (!plan.ok()) return 0;
  if (plan->containers.size() != requests.size()) __builtin_trap();
  for (size_t r = 0; r < requests.size(); ++r) {
    const ContainerAllocation& a = plan->containers[r];
    if (a.devices.size() != requests[r].size()) __builtin_trap();
    for (const hami::device::ContainerDevice& d : a.devices) {
      if (d.uuid != "GPU-a" && d.uuid != "GPU-b") __builtin_trap();
    }
    // One plain directory under the hook's containers/: no separator, no "." or "..".
    const std::string prefix = "/hook/vgpu/containers/";
    if (a.host_dir.rfind(prefix, 0) != 0) __builtin_trap();
    std::string leaf = a.host_dir.substr(prefix.size());
    if (leaf.empty() || leaf == "." || leaf == ".." || leaf.find('/') != std::string::npos) {
      __builtin_trap();
    }
  }
  hami::Result<hami::device::PodSingleDevice> again =
      hami::device::DecodePodSingleDevice(plan->to_allocate);
  if (!again.ok()) __builtin_trap();
  for (const ContainerAllocation& a : plan->containers) {
    if (a.container_index >= again->size() || !(*again)[a.container_index].empty()) {
      __builtin_trap();
    }
  }
  // The preference path reads the same annotation.
  PreferredRequest pr;
  pr.available = {"GPU-a-0", "GPU-a-1", "GPU-b-0"};
  pr.size = 1;
  (void)PreferredDevices(pod, "hami.io/vgpu-devices-to-allocate", 0, pr, replicas);
  return 0;
}
