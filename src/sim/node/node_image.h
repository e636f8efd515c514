// The image a real node of the tests runs (sim/world/kube_node.h): hami-cpp's production layout,
// assembled from the build being tested instead of compiled again inside deploy/Dockerfile.
//
//   /usr/local/bin/hami-scheduler hami-device-plugin hami-monitor hamictl   (as the image ships)
//   /k8s-vgpu/lib/nvidia/libvgpu.so                                         (as the image ships)
//   /usr/local/bin/vgpu_probe      the test workload (a CUDA program: tests/vgpu/probe.cc)
//   /pause                         the pod sandbox's process (the image is also the pause image)
//   /bin/busybox and its applets   a shell and the usual commands, for `kubectl exec`
//   /usr/lib/x86_64-linux-gnu/...  the shared libraries those binaries load (ldd), from this host
//
// The binaries are stripped as deploy/Dockerfile strips them. Nothing of the GPU driver is in
// the image: on a GPU node the container runtime mounts it (sim_runtime_hook.h here).
//
// Thread safety: free functions.
#pragma once

#include <string>
#include <vector>

#include "common/status.h"

namespace hami::sim {

struct NodeImageSpec {
  std::string build_dir;  // bin/ and lib/ of the build
  std::string pause;      // a static pause program
  std::string busybox = "/bin/busybox";
  // Paths inside the image -> host ELF files (stripped, their libraries added), beside the
  // default set above.
  std::vector<std::pair<std::string, std::string>> extra_files;
};

// Fills `rootfs` (created; must not exist yet). InvalidArgument naming a missing binary,
// Internal when copying, stripping or ldd fails.
Status AssembleNodeRootfs(const NodeImageSpec& spec, const std::string& rootfs);

// The shared libraries `ldd` lists for an ELF file, the program interpreter included, as paths
// on this host ("linux-vdso.so.1" and other lines without a path left out). Pure parsing.
std::vector<std::string> ParseLddOutput(const std::string& text);

}  // namespace hami::sim
