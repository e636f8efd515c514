#include "deviceplugin/allocation.h"

#include <gtest/gtest.h>

#include <algorithm>

#include "deviceplugin/device_ids.h"

namespace hami::deviceplugin {
namespace {

constexpr const char* kKey = "hami.io/vgpu-devices-to-allocate";

ReplicaMap Replicas(std::initializer_list<const char*> gpus, int split = 4) {
  ReplicaMap out;
  for (const char* g : gpus) {
    for (int i = 0; i < split; ++i) out[ReplicaId(g, static_cast<uint32_t>(i))] = g;
  }
  return out;
}

// init container "setup" (no GPU), "train" (two GPUs), "sidecar" (none), "eval" (one GPU).
PodView TrainingPod() {
  PodView p;
  p.ns = "ml";
  p.name = "train";
  p.uid = "0b9c1d2e-aaaa-4bbb-8ccc-000000000001";
  p.containers = {{"setup", {}}, {"train", {}}, {"sidecar", {}}, {"eval", {}}};
  p.annotations[kKey] = ";GPU-a,NVIDIA,8192,50:GPU-b,NVIDIA,8192,50:;;GPU-a,NVIDIA,4096,0:;";
  return p;
}

std::function<std::string()> Names() {
  auto n = std::make_shared<int>(0);
  return [n] { return "region-" + std::to_string((*n)++) + ".cache"; };
}

TEST(Allocation, HamiCoreGivesEachContainerItsSliceInKubeletsOrder) {
  AllocationSettings s;
  s.hook_path = "/usr/local";
  s.libvgpu_file = "libvgpu.so.0.1.0";
  s.lib_cuda_log_level = 1;
  PodView pod = TrainingPod();
  ReplicaMap ids = Replicas({"GPU-a", "GPU-b"});

  Result<AllocationPlan> first = PlanAllocation(pod, {{"GPU-a-0", "GPU-b-0"}}, ids, s, Names());
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  ASSERT_EQ(first->containers.size(), 1u);
  const ContainerAllocation& train = first->containers[0];
  EXPECT_EQ(train.container_index, 1u);
  EXPECT_EQ(train.container_name, "train");
  std::map<std::string, std::string> want = {
      {"NVIDIA_VISIBLE_DEVICES", "GPU-a,GPU-b"},
      {"CUDA_DEVICE_MEMORY_LIMIT_0", "8192m"},
      {"CUDA_DEVICE_MEMORY_LIMIT_1", "8192m"},
      {"CUDA_DEVICE_SM_LIMIT", "50"},
      {"CUDA_DEVICE_MEMORY_SHARED_CACHE", "/usr/local/vgpu/region-0.cache"},
      {"LIBCUDA_LOG_LEVEL", "1"},
  };
  EXPECT_EQ(train.envs, want);
  const std::string dir = "/usr/local/vgpu/containers/0b9c1d2e-aaaa-4bbb-8ccc-000000000001_train";
  EXPECT_EQ(train.host_dir, dir);
  std::vector<Mount> mounts = {
      {"/usr/local/vgpu", dir, false},
      {"/usr/local/vgpu/libvgpu.so", "/usr/local/vgpu/libvgpu.so.0.1.0", true},
      {"/etc/ld.so.preload", "/usr/local/vgpu/ld.so.preload", true},
  };
  EXPECT_EQ(train.mounts, mounts);
  EXPECT_EQ(first->to_allocate, ";;;GPU-a,NVIDIA,4096,0:;");
  EXPECT_FALSE(first->complete);

  // Kubelet's next call is for "eval"; it sees the annotation as the first call left it.
  pod.annotations[kKey] = first->to_allocate;
  Result<AllocationPlan> second = PlanAllocation(pod, {{"GPU-a-3"}}, ids, s, Names());
  ASSERT_TRUE(second.ok()) << second.status().ToString();
  const ContainerAllocation& eval = second->containers[0];
  EXPECT_EQ(eval.container_name, "eval");
  EXPECT_EQ(eval.envs.at("CUDA_DEVICE_MEMORY_LIMIT_0"), "4096m");
  EXPECT_EQ(eval.envs.count("CUDA_DEVICE_SM_LIMIT"), 0u);  // no cores asked: no SM limit
  EXPECT_EQ(second->to_allocate, ";;;;");
  EXPECT_TRUE(second->complete);
}

TEST(Allocation, SeveralContainerRequestsInOneCall) {
  AllocationSettings s;
  Result<AllocationPlan> p = PlanAllocation(TrainingPod(), {{"GPU-a-0", "GPU-b-1"}, {"GPU-a-1"}},
                                            Replicas({"GPU-a", "GPU-b"}), s, Names());
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  ASSERT_EQ(p->containers.size(), 2u);
  EXPECT_EQ(p->containers[0].container_name, "train");
  EXPECT_EQ(p->containers[1].container_name, "eval");
  EXPECT_NE(p->containers[0].envs.at("CUDA_DEVICE_MEMORY_SHARED_CACHE"),
            p->containers[1].envs.at("CUDA_DEVICE_MEMORY_SHARED_CACHE"));
  EXPECT_TRUE(p->complete);
  EXPECT_EQ(s.lib_cuda_log_level, -1);
  EXPECT_EQ(p->containers[0].envs.count("LIBCUDA_LOG_LEVEL"), 0u);
}

TEST(Allocation, ContainerSettingsAndNodeSettings) {
  AllocationSettings s;
  s.device_memory_scaling = 2;
  s.disable_core_limit = true;
  PodView pod = TrainingPod();
  pod.containers[1].env["CUDA_DISABLE_CONTROL"] = "true";
  Result<AllocationPlan> p =
      PlanAllocation(pod, {{"GPU-a-0", "GPU-b-0"}}, Replicas({"GPU-a", "GPU-b"}), s, Names());
  ASSERT_TRUE(p.ok());
  const ContainerAllocation& c = p->containers[0];
  EXPECT_EQ(c.envs.at("CUDA_OVERSUBSCRIBE"), "true");
  EXPECT_EQ(c.envs.at("GPU_CORE_UTILIZATION_POLICY"), "disable");
  EXPECT_TRUE(std::none_of(c.mounts.begin(), c.mounts.end(), [](const Mount& m) {
    return m.container_path == "/etc/ld.so.preload";
  }));
  EXPECT_EQ(c.mounts.size(), 2u);
}

TEST(Allocation, MpsModeUsesTheMpsDaemonInsteadOfLibvgpu) {
  AllocationSettings s;
  s.operating_mode = device::OperatingMode::kMps;
  s.mps_pipe_directory = "/run/nvidia/mps";
  Result<AllocationPlan> p = PlanAllocation(TrainingPod(), {{"GPU-a-0", "GPU-b-0"}},
                                            Replicas({"GPU-a", "GPU-b"}), s, Names());
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  const ContainerAllocation& c = p->containers[0];
  std::map<std::string, std::string> want = {
      {"NVIDIA_VISIBLE_DEVICES", "GPU-a,GPU-b"},
      {"CUDA_MPS_PIPE_DIRECTORY", "/run/nvidia/mps"},
      {"CUDA_MPS_ACTIVE_THREAD_PERCENTAGE", "50"},
      {"CUDA_MPS_PINNED_DEVICE_MEM_LIMIT", "0=8192M,1=8192M"},
  };
  EXPECT_EQ(c.envs, want);
  EXPECT_EQ(c.mounts, (std::vector<Mount>{{"/run/nvidia/mps", "/run/nvidia/mps", false}}));
  EXPECT_TRUE(c.host_dir.empty());
}

TEST(Allocation, ClearErrors) {
  AllocationSettings s;
  ReplicaMap ids = Replicas({"GPU-a", "GPU-b"});
  auto plan = [&](const PodView& pod, std::vector<std::vector<std::string>> req) {
    return PlanAllocation(pod, req, ids, s, Names());
  };
  Result<AllocationPlan> r = plan(TrainingPod(), {{"GPU-z-0", "GPU-a-0"}});
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(r.status().message().find("GPU-z-0"), std::string::npos);

  r = plan(TrainingPod(), {{"GPU-a-0"}});  // the entry has two GPUs
  EXPECT_EQ(r.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(r.status().message().find("device number not matched"), std::string::npos);

  PodView other_node = TrainingPod();
  other_node.annotations[kKey] = ";GPU-q,NVIDIA,1,0:GPU-b,NVIDIA,1,0:;;;";
  r = plan(other_node, {{"GPU-a-0", "GPU-b-0"}});
  EXPECT_NE(r.status().message().find("GPU-q is not served"), std::string::npos);

  PodView none = TrainingPod();
  none.annotations.clear();
  EXPECT_EQ(plan(none, {{"GPU-a-0"}}).status().code(), StatusCode::kFailedPrecondition);

  PodView garbage = TrainingPod();
  garbage.annotations[kKey] = "GPU-a,NVIDIA,lots,0:;";
  r = plan(garbage, {{"GPU-a-0"}});
  EXPECT_EQ(r.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(r.status().message().find(kKey), std::string::npos);

  PodView too_many = TrainingPod();
  too_many.annotations[kKey] = ";;;;GPU-a,NVIDIA,1,0:;";
  EXPECT_NE(plan(too_many, {{"GPU-a-0"}}).status().message().find("lists 5 containers"),
            std::string::npos);

  PodView done = TrainingPod();
  done.annotations[kKey] = ";;;;";
  EXPECT_NE(plan(done, {{"GPU-a-0"}}).status().message().find("no container is waiting"),
            std::string::npos);

  for (const char* uid : {"../../etc", "..x", "a/b", "a_b", ""}) {
    PodView evil = TrainingPod();
    evil.uid = uid;
    EXPECT_EQ(plan(evil, {{"GPU-a-0", "GPU-b-0"}}).status().code(), StatusCode::kInvalidArgument)
        << uid;
  }

  // MIG mode: the reserved GPUs, and nothing of libvgpu or the device list (the MIG devices
  // are named once they exist).
  s.operating_mode = device::OperatingMode::kMig;
  Result<AllocationPlan> mig = plan(TrainingPod(), {{"GPU-a-0", "GPU-b-0"}});
  ASSERT_TRUE(mig.ok()) << mig.status().ToString();
  EXPECT_EQ(mig->containers[0].devices.size(), 2u);
  EXPECT_TRUE(mig->containers[0].envs.empty());
  EXPECT_TRUE(mig->containers[0].mounts.empty());
  EXPECT_TRUE(mig->containers[0].host_dir.empty());
}

TEST(Allocation, OtherVendorsKeepThePodIncomplete) {
  AllocationSettings s;
  s.other_to_allocate_keys = {"hami.io/cambricon-mlu-devices-to-allocate"};
  PodView pod = TrainingPod();
  pod.annotations[kKey] = ";;;GPU-a,NVIDIA,4096,0:;";
  pod.annotations["hami.io/cambricon-mlu-devices-to-allocate"] = ";MLU-1,MLU,100,0:;;;";
  Result<AllocationPlan> p = PlanAllocation(pod, {{"GPU-a-0"}}, Replicas({"GPU-a"}), s, Names());
  ASSERT_TRUE(p.ok());
  EXPECT_FALSE(p->complete);
  pod.annotations["hami.io/cambricon-mlu-devices-to-allocate"] = ";;;;";
  p = PlanAllocation(pod, {{"GPU-a-0"}}, Replicas({"GPU-a"}), s, Names());
  ASSERT_TRUE(p.ok());
  EXPECT_TRUE(p->complete);
}

TEST(Allocation, DeviceListStrategiesTellTheRuntimeTheGpusTheirWay) {
  PodView pod = TrainingPod();
  ReplicaMap ids = Replicas({"GPU-a", "GPU-b"});
  auto plan = [&](const std::string& strategies) {
    AllocationSettings s;
    s.device_list = ParseDeviceListStrategies(strategies).value();
    Result<AllocationPlan> p = PlanAllocation(pod, {{"GPU-a-0", "GPU-b-0"}}, ids, s, Names());
    EXPECT_TRUE(p.ok()) << p.status().ToString();
    return p.ok() ? p->containers.at(0) : ContainerAllocation{};
  };
  const std::string cdi_key = "cdi.k8s.io/hami-device-plugin_" + pod.uid;

  ContainerAllocation env = plan("envvar");
  EXPECT_EQ(env.envs.at("NVIDIA_VISIBLE_DEVICES"), "GPU-a,GPU-b");
  EXPECT_TRUE(env.annotations.empty());
  EXPECT_TRUE(env.cdi_devices.empty());
  EXPECT_EQ(env.mounts.size(), 3u);  // the hook directory, libvgpu.so, ld.so.preload

  ContainerAllocation vol = plan("volume-mounts");
  EXPECT_EQ(vol.envs.at("NVIDIA_VISIBLE_DEVICES"), "/var/run/nvidia-container-devices");
  std::vector<Mount> device_mounts;
  for (const Mount& m : vol.mounts) {
    if (m.host_path == "/dev/null") device_mounts.push_back(m);
  }
  EXPECT_EQ(device_mounts,
            (std::vector<Mount>{{"/var/run/nvidia-container-devices/GPU-a", "/dev/null", true},
                                {"/var/run/nvidia-container-devices/GPU-b", "/dev/null", true}}));
  EXPECT_EQ(vol.envs.at("CUDA_DEVICE_MEMORY_LIMIT_1"), "8192m");  // the quota is unchanged

  // Only CDI: no visible-devices variable, so nothing injects the GPUs twice.
  ContainerAllocation cri = plan("cdi-cri");
  EXPECT_EQ(cri.envs.count("NVIDIA_VISIBLE_DEVICES"), 0u);
  EXPECT_EQ(cri.cdi_devices,
            (std::vector<std::string>{"nvidia.com/gpu=GPU-a", "nvidia.com/gpu=GPU-b"}));
  EXPECT_TRUE(cri.annotations.empty());
  EXPECT_EQ(cri.envs.at("CUDA_DEVICE_SM_LIMIT"), "50");

  ContainerAllocation ann = plan("cdi-annotations");
  EXPECT_EQ(ann.annotations, (std::map<std::string, std::string>{
                                 {cdi_key, "nvidia.com/gpu=GPU-a,nvidia.com/gpu=GPU-b"}}));
  EXPECT_TRUE(ann.cdi_devices.empty());
  EXPECT_EQ(ann.envs.count("NVIDIA_VISIBLE_DEVICES"), 0u);

  ContainerAllocation both = plan("envvar, cdi-cri,cdi-annotations");
  EXPECT_EQ(both.envs.at("NVIDIA_VISIBLE_DEVICES"), "GPU-a,GPU-b");
  EXPECT_EQ(both.cdi_devices.size(), 2u);
  EXPECT_EQ(both.annotations.count(cdi_key), 1u);
}

TEST(Allocation, RuntimeFeaturesAreAskedForUnlessOnlyCdiIsUsed) {
  PodView pod = TrainingPod();
  AllocationSettings s;
  s.gdrcopy = s.mofed = true;
  Result<AllocationPlan> p =
      PlanAllocation(pod, {{"GPU-a-0", "GPU-b-0"}}, Replicas({"GPU-a", "GPU-b"}), s, Names());
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_EQ(p->containers[0].envs.at("NVIDIA_GDRCOPY"), "enabled");
  EXPECT_EQ(p->containers[0].envs.at("NVIDIA_MOFED"), "enabled");
  EXPECT_EQ(p->containers[0].envs.count("NVIDIA_GDS"), 0u);
  s.device_list = ParseDeviceListStrategies("cdi-cri").value();
  p = PlanAllocation(pod, {{"GPU-a-0", "GPU-b-0"}}, Replicas({"GPU-a", "GPU-b"}), s, Names());
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_EQ(p->containers[0].envs.count("NVIDIA_GDRCOPY"), 0u);
}

TEST(Allocation, DeviceListStrategiesParse) {
  EXPECT_EQ(ParseDeviceListStrategies("").value(), DeviceListStrategies{});
  EXPECT_EQ(ParseDeviceListStrategies("envvar").value(), DeviceListStrategies{});
  DeviceListStrategies v = ParseDeviceListStrategies(" volume-mounts ,cdi-cri").value();
  EXPECT_FALSE(v.envvar);
  EXPECT_TRUE(v.volume_mounts);
  EXPECT_TRUE(v.cdi_cri);
  EXPECT_FALSE(v.cdi_annotations);
  EXPECT_FALSE(v.OnlyCdi());
  EXPECT_TRUE(ParseDeviceListStrategies("cdi-annotations").value().OnlyCdi());
  Result<DeviceListStrategies> bad = ParseDeviceListStrategies("envvar,volume_mounts");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("\"volume_mounts\""), std::string::npos)
      << bad.status().message();
}

TEST(Preferred, ReplicasOfTheReservedGpus) {
  PodView pod = TrainingPod();
  ReplicaMap ids = Replicas({"GPU-a", "GPU-b", "GPU-c"});
  PreferredRequest r;
  r.available = {"GPU-a-0", "GPU-a-1", "GPU-b-2", "GPU-c-0"};
  r.size = 2;
  EXPECT_EQ(PreferredDevices(pod, kKey, 0, r, ids),
            (std::vector<std::string>{"GPU-a-0", "GPU-b-2"}));
  // must-include first, and it covers its GPU.
  r.must_include = {"GPU-b-2"};
  EXPECT_EQ(PreferredDevices(pod, kKey, 0, r, ids),
            (std::vector<std::string>{"GPU-b-2", "GPU-a-0"}));
  // The second pending container (eval) wants one replica of GPU-a.
  PreferredRequest e{{"GPU-a-1", "GPU-b-0"}, {}, 1};
  EXPECT_EQ(PreferredDevices(pod, kKey, 1, e, ids), (std::vector<std::string>{"GPU-a-1"}));
  // No free replica of a reserved GPU, a size that does not fit, no annotation: no preference.
  PreferredRequest none{{"GPU-c-0", "GPU-a-0"}, {}, 2};
  EXPECT_TRUE(PreferredDevices(pod, kKey, 0, none, ids).empty());
  EXPECT_TRUE(PreferredDevices(pod, kKey, 0, {{"GPU-a-0"}, {}, 3}, ids).empty());
  EXPECT_TRUE(PreferredDevices(pod, kKey, 5, r, ids).empty());
  EXPECT_TRUE(PreferredDevices(pod, "other-key", 0, r, ids).empty());
}

}  // namespace
}  // namespace hami::deviceplugin
