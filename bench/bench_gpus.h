// The GPUs the benchmarks' nodes register: 8 V100-PCIE-32GB per node, 10 slots each, NUMA 0
// for cards 0-3 and 1 for 4-7, with IDs "GPU-<node>-<card>" unique across the cluster; and the
// pod they place: one GPU, 1024 MiB, 10 % of its cores. One definition, so every benchmark
// places the same pods on the same cluster.
#pragma once

#include <string>
#include <vector>

#include "device/node_registration.h"
#include "k8s/object.h"

namespace hami::bench {

inline std::vector<device::DeviceInfo> V100Node(int node) {
  std::vector<device::DeviceInfo> gpus;
  for (int g = 0; g < 8; ++g) {
    device::DeviceInfo d;
    d.id = "GPU-" + std::to_string(node) + "-" + std::to_string(g);
    d.index = static_cast<uint32_t>(g);
    d.count = 10;
    d.devmem = 32768;
    d.devcore = 100;
    d.type = "NVIDIA-Tesla V100-PCIE-32GB";
    d.numa = g / 4;
    d.mode = "hami-core";
    d.health = true;
    gpus.push_back(d);
  }
  return gpus;
}

// Pending pod "pod-<p>" for hami-scheduler.
inline k8s::Object GpuPod(int p) {
  k8s::Object pod;
  pod["apiVersion"] = "v1";
  pod["kind"] = "Pod";
  pod["metadata"]["name"] = "pod-" + std::to_string(p);
  pod["spec"]["schedulerName"] = "hami-scheduler";
  pod["spec"]["containers"] = k8s::Object::array(
      {k8s::Object{{"name", "main"},
                   {"image", "x"},
                   {"resources",
                    {{"limits",
                      {{"nvidia.com/gpu", "1"},
                       {"nvidia.com/gpumem", "1024"},
                       {"nvidia.com/gpucores", "10"}}}}}}});
  return pod;
}

}  // namespace hami::bench
