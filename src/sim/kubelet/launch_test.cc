#include "sim/kubelet/launch.h"

#include <gtest/gtest.h>

#include <algorithm>

namespace hami::sim {
namespace {

std::string Env(const Launch& l, const std::string& key) {
  for (const std::string& kv : l.env) {
    if (kv.rfind(key + "=", 0) == 0) return kv.substr(key.size() + 1);
  }
  return "<unset>";
}

LaunchContext Context() {
  LaunchContext ctx;
  ctx.node_env = {"PATH=/opt/bin:/usr/bin", "LD_LIBRARY_PATH=/build/sim", "HAMI_SIM_STATE=/w/a"};
  ctx.stand_in = {"/build/bin/vgpu_probe", "workload"};
  ctx.path = "/opt/bin:/usr/bin";
  ctx.fields = {{"metadata.name", "p"}, {"spec.nodeName", "node-a"}};
  ctx.read_file = [](const std::string& path) -> std::optional<std::string> {
    if (path == "/hook/vgpu/ld.so.preload") return "/usr/local/vgpu/libvgpu.so\n";
    return std::nullopt;
  };
  ctx.executable = [](const std::string& path) {
    return path == "/usr/bin/python3" || path == "/build/bin/hamictl";
  };
  return ctx;
}

ContainerDevices HamiCore() {
  ContainerDevices d;
  d.name = "main";
  d.envs = {{"NVIDIA_VISIBLE_DEVICES", "GPU-a"},
            {"CUDA_DEVICE_MEMORY_LIMIT_0", "8192m"},
            {"CUDA_DEVICE_MEMORY_SHARED_CACHE", "/usr/local/vgpu/1234.cache"}};
  d.mounts = {{"/usr/local/vgpu", "/hook/vgpu/containers/uid_main", false},
              {"/usr/local/vgpu/libvgpu.so", "/hook/vgpu/libvgpu.so.1.0", true},
              {"/etc/ld.so.preload", "/hook/vgpu/ld.so.preload", true}};
  return d;
}

TEST(Launch, AppliesMountsToTheEnvironmentAndPreload) {
  ContainerSpec spec;
  spec.name = "main";
  spec.command = {"/build/bin/hamictl", "smi"};
  spec.env = {{"MODE", std::string("fast"), std::nullopt},
              {"NVIDIA_VISIBLE_DEVICES", std::string("override"), std::nullopt},
              {"NODE", std::nullopt, std::string("spec.nodeName")}};
  ContainerDevices d = HamiCore();
  Result<Launch> l = PrepareLaunch(spec, {&d}, Context());
  ASSERT_TRUE(l.ok()) << l.status().ToString();
  EXPECT_FALSE(l->stand_in);
  EXPECT_EQ(l->argv, (std::vector<std::string>{"/build/bin/hamictl", "smi"}));
  EXPECT_EQ(Env(*l, "CUDA_DEVICE_MEMORY_SHARED_CACHE"),
            "/hook/vgpu/containers/uid_main/1234.cache");
  EXPECT_EQ(Env(*l, "LD_PRELOAD"), "/hook/vgpu/libvgpu.so.1.0");  // the longest mount wins
  EXPECT_EQ(Env(*l, "CUDA_DEVICE_MEMORY_LIMIT_0"), "8192m");
  EXPECT_EQ(Env(*l, "NVIDIA_VISIBLE_DEVICES"), "override");  // the spec's own env wins
  EXPECT_EQ(Env(*l, "NODE"), "node-a");
  EXPECT_EQ(Env(*l, "LD_LIBRARY_PATH"), "/build/sim");
  EXPECT_TRUE(std::is_sorted(l->env.begin(), l->env.end()));
}

TEST(Launch, CommandsOnPathRunAsWrittenOthersGetTheStandIn) {
  ContainerSpec spec;
  spec.name = "main";
  spec.image = "nvcr.io/nvidia/pytorch:23.04-py3";
  spec.command = {"python3"};
  spec.args = {"train.py", "--epochs", "3"};
  Result<Launch> l = PrepareLaunch(spec, {}, Context());
  ASSERT_TRUE(l.ok());
  EXPECT_EQ(l->argv, (std::vector<std::string>{"/usr/bin/python3", "train.py", "--epochs", "3"}));
  EXPECT_EQ(Env(*l, "LD_PRELOAD"), "<unset>");  // no plugin answer, no preload

  spec.command = {"torchrun"};
  l = PrepareLaunch(spec, {}, Context());
  ASSERT_TRUE(l.ok());
  EXPECT_TRUE(l->stand_in);
  EXPECT_EQ(l->argv, (std::vector<std::string>{"/build/bin/vgpu_probe", "workload"}));
  EXPECT_NE(l->note.find("torchrun"), std::string::npos);

  spec.command.clear();
  l = PrepareLaunch(spec, {}, Context());
  ASSERT_TRUE(l.ok());
  EXPECT_TRUE(l->stand_in);
  EXPECT_NE(l->note.find("pytorch:23.04-py3"), std::string::npos);

  LaunchContext bare = Context();
  bare.stand_in.clear();
  EXPECT_EQ(PrepareLaunch(spec, {}, bare).status().code(), StatusCode::kFailedPrecondition);
}

TEST(Launch, Errors) {
  ContainerSpec spec;
  spec.command = {"python3"};
  spec.env = {{"X", std::nullopt, std::string("status.podIPs")}};
  EXPECT_EQ(PrepareLaunch(spec, {}, Context()).status().code(), StatusCode::kInvalidArgument);
  spec.env.clear();
  ContainerDevices d = HamiCore();
  d.mounts[2].host_path = "/missing/ld.so.preload";
  Result<Launch> l = PrepareLaunch(spec, {&d}, Context());
  EXPECT_EQ(l.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(l.status().message().find("/missing/ld.so.preload"), std::string::npos);
}

// The toolkit's part: CDI names and device volume mounts become the visible-devices list; the
// pod's own NVIDIA_VISIBLE_DEVICES cannot widen what volume mounts grant.
TEST(Launch, TheToolkitReadsCdiNamesAndDeviceVolumeMounts) {
  ContainerSpec spec;
  spec.name = "main";
  spec.command = {"/build/bin/hamictl", "smi"};
  ContainerDevices vol = HamiCore();
  vol.envs["NVIDIA_VISIBLE_DEVICES"] = "/var/run/nvidia-container-devices";
  vol.mounts.push_back({"/var/run/nvidia-container-devices/GPU-b", "/dev/null", true});
  vol.mounts.push_back({"/var/run/nvidia-container-devices/GPU-c", "/dev/null", true});
  Result<Launch> l = PrepareLaunch(spec, {&vol}, Context());
  ASSERT_TRUE(l.ok()) << l.status().ToString();
  EXPECT_EQ(Env(*l, "NVIDIA_VISIBLE_DEVICES"), "GPU-b,GPU-c");

  spec.env = {{"NVIDIA_VISIBLE_DEVICES", std::string("/var/run/nvidia-container-devices"),
               std::nullopt}};
  ContainerDevices none = HamiCore();
  none.envs.erase("NVIDIA_VISIBLE_DEVICES");
  l = PrepareLaunch(spec, {&none}, Context());
  ASSERT_TRUE(l.ok());
  EXPECT_EQ(Env(*l, "NVIDIA_VISIBLE_DEVICES"), "none");  // the directory names no GPU
  spec.env.clear();

  ContainerDevices cri = HamiCore();
  cri.envs.erase("NVIDIA_VISIBLE_DEVICES");
  cri.cdi_devices = {"nvidia.com/gpu=GPU-a", "vendor.example/fpga=0"};
  ContainerDevices ann = HamiCore();
  ann.envs.erase("NVIDIA_VISIBLE_DEVICES");
  ann.annotations = {
      {"cdi.k8s.io/hami-device-plugin_uid", "nvidia.com/gpu=GPU-d,nvidia.com/gpu=GPU-a"},
      {"other.example/x", "nvidia.com/gpu=GPU-z"}};
  l = PrepareLaunch(spec, {&cri, &ann}, Context());
  ASSERT_TRUE(l.ok());
  EXPECT_EQ(Env(*l, "NVIDIA_VISIBLE_DEVICES"), "GPU-a,GPU-d");

  ContainerDevices plain = HamiCore();  // envvar: the variable as the plugin set it
  l = PrepareLaunch(spec, {&plain}, Context());
  ASSERT_TRUE(l.ok());
  EXPECT_EQ(Env(*l, "NVIDIA_VISIBLE_DEVICES"), "GPU-a");
}

TEST(Launch, WithACdiRegistryUnresolvableNamesFailTheContainer) {
  ContainerSpec spec;
  spec.name = "main";
  spec.command = {"/build/bin/hamictl", "smi"};
  ContainerDevices cri = HamiCore();
  cri.envs.erase("NVIDIA_VISIBLE_DEVICES");
  cri.cdi_devices = {"nvidia.com/gpu=MIG-new"};
  ContainerDevices ann = HamiCore();
  ann.envs.erase("NVIDIA_VISIBLE_DEVICES");
  ann.annotations = {{"cdi.k8s.io/hami-device-plugin_uid", "nvidia.com/gpu=GPU-a"}};
  LaunchContext ctx = Context();
  std::set<std::string> known = {"nvidia.com/gpu=GPU-a"};
  int reads = 0;
  ctx.cdi_registry = [&] {
    ++reads;
    return known;
  };
  Result<Launch> l = PrepareLaunch(spec, {&cri, &ann}, ctx);
  ASSERT_FALSE(l.ok());
  EXPECT_EQ(l.status().message(),
            "CDI device injection failed: unresolvable CDI devices nvidia.com/gpu=MIG-new");
  // A container given no CDI name does not read the registry.
  ContainerDevices plain = HamiCore();
  EXPECT_TRUE(PrepareLaunch(spec, {&plain}, ctx).ok());
  EXPECT_EQ(reads, 1);
  known.insert("nvidia.com/gpu=MIG-new");
  l = PrepareLaunch(spec, {&cri, &ann}, ctx);
  ASSERT_TRUE(l.ok()) << l.status().ToString();
  EXPECT_EQ(Env(*l, "NVIDIA_VISIBLE_DEVICES"), "MIG-new,GPU-a");
  // Without a registry (no spec directories) every name resolves, as before.
  l = PrepareLaunch(spec, {&cri}, Context());
  EXPECT_TRUE(l.ok());
}

TEST(HostPath, LongestCoveringMount) {
  std::vector<KubeletMount> m = {{"/a", "/h/a", false}, {"/a/b", "/h/ab", false}};
  EXPECT_EQ(HostPath("/a/b/c", m), "/h/ab/c");
  EXPECT_EQ(HostPath("/a/bc", m), "/h/a/bc");
  EXPECT_EQ(HostPath("/a", m), "/h/a");
  EXPECT_EQ(HostPath("/ab", m), "/ab");
  EXPECT_EQ(HostPath("relative/a", m), "relative/a");
}

TEST(AddDriverTools, OnlyContainersWithNvidiaDevicesGetNvidiaSmi) {
  Launch gpu;
  gpu.env = {"NVIDIA_VISIBLE_DEVICES=GPU-1", "PATH=/usr/bin:/bin"};
  AddDriverTools(&gpu, "/node/bin");
  EXPECT_EQ(gpu.env[1], "PATH=/node/bin:/usr/bin:/bin");

  Launch no_path;
  no_path.env = {"NVIDIA_VISIBLE_DEVICES=all"};
  AddDriverTools(&no_path, "/node/bin");
  EXPECT_EQ(no_path.env, (std::vector<std::string>{"NVIDIA_VISIBLE_DEVICES=all",
                                                   "PATH=/node/bin:/usr/local/bin:/usr/bin:/bin"}));

  for (const char* none : {"NVIDIA_VISIBLE_DEVICES=void", "NVIDIA_VISIBLE_DEVICES=none",
                           "NVIDIA_VISIBLE_DEVICES=", "CUDA_VISIBLE_DEVICES=0"}) {
    Launch cpu;
    cpu.env = {none, "PATH=/usr/bin"};
    AddDriverTools(&cpu, "/node/bin");
    EXPECT_EQ(cpu.env[1], "PATH=/usr/bin") << none;
  }
  Launch off;
  off.env = {"NVIDIA_VISIBLE_DEVICES=GPU-1", "PATH=/usr/bin"};
  AddDriverTools(&off, "");
  EXPECT_EQ(off.env[1], "PATH=/usr/bin");
}

}  // namespace
}  // namespace hami::sim
