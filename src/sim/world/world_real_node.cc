// World (world.h): a real node, containerd and a kubelet (kube_node.h), in place of
// hami-sim-kubelet, with the node image made from the build and the simulated NVIDIA runtime.

#include <filesystem>

#include "common/file_util.h"
#include "sim/node/node_image.h"
#include "sim/node/oci_image.h"
#include "sim/world/world.h"

namespace hami::sim {

KubeNode* World::real_node(const std::string& name) {
  auto it = real_nodes_.find(name);
  return it == real_nodes_.end() ? nullptr : it->second.get();
}

std::string World::DevicePluginDir(const std::string& node) {
  if (KubeNode* real = real_node(node)) return real->device_plugin_dir();
  return dir_ + "/" + node + "/device-plugins";
}

Status World::StartRealNode(const WorldNode& n) {
  if (!control_plane_) {
    return InvalidArgumentError("a real node needs the real control plane (--control-plane real)");
  }
  if (!real_nodes_.empty()) {
    return InvalidArgumentError("a world has one real node at most (node " + n.name +
                                "): a second kubelet would share the machine's cgroups");
  }
  if (node_image_.empty()) {
    const std::string rootfs = dir_ + "/node-image";
    NodeImageSpec spec;
    spec.build_dir = options_.build_dir;
    spec.pause = Bin("hami-sim-pause");
    HAMI_RETURN_IF_ERROR(AssembleNodeRootfs(spec, rootfs));
    HAMI_RETURN_IF_ERROR(
        WriteOciArchive({kNodeTestImage, rootfs, {"/pause"}}, dir_ + "/node-image.tar"));
    std::error_code ec;
    std::filesystem::remove_all(rootfs, ec);
    node_image_ = dir_ + "/node-image.tar";
  }
  const std::string node_dir = dir_ + "/" + n.name;
  // The simulated driver's state is bind-mounted into every GPU container, so it must exist
  // before the first one starts (whichever process opens it first initialises an empty file),
  // as a GPU node's driver is loaded before any container starts.
  if (!std::filesystem::exists(GpuState(n.name))) {
    HAMI_RETURN_IF_ERROR(WriteFileAtomically(GpuState(n.name), "", 0666));
  }
  const std::string runtime_conf = node_dir + "/sim-runtime.conf";
  HAMI_RETURN_IF_ERROR(WriteFileAtomically(
      runtime_conf,
      "# The simulated NVIDIA container runtime of node " + n.name + "\n" +
          "lib_dir = " + options_.build_dir + "/sim\n" +
          "gpu_config = " + node_dir + "/gpu.conf\n" +
          "gpu_state = " + GpuState(n.name) + "\n" +
          "nvidia_smi = " + Bin("hamictl") + "\n",
      0644));
  KubeNodeOptions o;
  o.bin_dir = options_.node_bin_dir;
  o.dir = node_dir + "/node";
  o.node_name = n.name;
  o.labels = n.labels;
  o.image_archives = {node_image_};
  if (options_.helm_install) {
    HAMI_ASSIGN_OR_RETURN(std::string scheduler_image, WriteKubeSchedulerImage());
    o.image_archives.push_back(scheduler_image);
    o.service_proxy = true;  // the chart's pods reach the API server at its Service's IP
  }
  o.sandbox_image = kNodeTestImage;
  o.runtime_binary = Bin("hami-sim-container-runtime");
  o.containerd_env = {"HAMI_SIM_RUNTIME_CONFIG=" + runtime_conf};
  o.start_timeout = std::max(options_.start_timeout, std::chrono::seconds(120));
  o.on_start = [&](const std::string& what) {
    if (options_.on_start) options_.on_start(n.name + "-" + what);
  };
  HAMI_ASSIGN_OR_RETURN(real_nodes_[n.name], KubeNode::Start(*control_plane_, std::move(o)));
  return OkStatus();
}

}  // namespace hami::sim
