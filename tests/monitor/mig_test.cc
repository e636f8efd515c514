// The monitor's MIG metrics on the simulated driver: MIG instances made through NVML (as an
// operator or the device plugin would), a process in a "container" handed one of them
// (NVIDIA_VISIBLE_DEVICES=MIG-<uuid>) allocating memory there, and the page showing that
// instance's use as the driver charges it, beside the pod's reservation of it.
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "common/subprocess.h"
#include "monitor/exporter.h"
#include "monitor/monitor.h"
#include "monitor/nvml_stats.h"
#include "nvml/abi.h"

namespace hami::monitor {
namespace {

namespace fs = std::filesystem;

const std::string kNvml = std::string(HAMI_SIM_DIR) + "/libnvidia-ml.so.1";

// The NVML calls that change MIG, which the monitor never makes, from the library it loads.
struct SimMig {
  SimMig() {
    lib = dlopen(kNvml.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (lib == nullptr) return;
    Resolve("nvmlInit_v2", &init);
    Resolve("nvmlDeviceGetHandleByIndex_v2", &by_index);
    Resolve("nvmlDeviceSetMigMode", &set_mode);
    Resolve("nvmlDeviceGetGpuInstanceProfileInfo", &profile);
    Resolve("nvmlDeviceCreateGpuInstance", &create_gi);
    Resolve("nvmlGpuInstanceCreateComputeInstance", &create_ci);
  }
  template <typename F>
  void Resolve(const char* name, F* f) {
    *f = reinterpret_cast<F>(dlsym(lib, name));
    ok = ok && *f != nullptr;
  }
  // A GPU instance of profile enum `gi_enum` on `dev` and in it a compute instance of
  // `ci_profile`.
  nvmlReturn_t Create(nvmlDevice_t dev, unsigned gi_enum, unsigned ci_profile) {
    nvmlGpuInstanceProfileInfo_t info{};
    nvmlGpuInstance_t gi = nullptr;
    nvmlComputeInstance_t ci = nullptr;
    nvmlReturn_t r = profile(dev, gi_enum, &info);
    if (r == NVML_SUCCESS) r = create_gi(dev, info.id, &gi);
    if (r == NVML_SUCCESS) r = create_ci(gi, ci_profile, &ci);
    return r;
  }

  void* lib = nullptr;
  bool ok = true;
  decltype(&nvmlInit_v2) init = nullptr;
  decltype(&nvmlDeviceGetHandleByIndex_v2) by_index = nullptr;
  decltype(&nvmlDeviceSetMigMode) set_mode = nullptr;
  decltype(&nvmlDeviceGetGpuInstanceProfileInfo) profile = nullptr;
  decltype(&nvmlDeviceCreateGpuInstance) create_gi = nullptr;
  decltype(&nvmlGpuInstanceCreateComputeInstance) create_ci = nullptr;
};

class OnePod : public PodDirectory {
 public:
  PodRef pod;
  bool Synced() const override { return true; }
  std::optional<PodRef> Find(const std::string&) const override { return pod; }
  std::map<std::string, PodRef> MigPods() const override { return {{"uid-1", pod}}; }
};

// The value of the series `family{labels}` on `page`; -1 when it is not there.
double Sample(const std::string& page, const std::string& series) {
  size_t at = page.find(series + " ");
  if (at == std::string::npos) return -1;
  std::istringstream in(page.substr(at + series.size() + 1));
  double v = -1;
  in >> v;
  return v;
}

class MigMetricsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/hami-monitor-mig-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    // The built-in node: two A100-SXM4-80GB. NVML in this process reads these once.
    unsetenv("HAMI_SIM_CONFIG");
    unsetenv("NVIDIA_VISIBLE_DEVICES");
    setenv("HAMI_SIM_STATE", (dir_ + "/state").c_str(), 1);
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::string dir_;
};

TEST_F(MigMetricsTest, AContainersMigAllocationIsItsInstancesUse) {
  Result<std::unique_ptr<NvmlStats>> nvml = NvmlStats::Open(kNvml);
  ASSERT_TRUE(nvml.ok()) << nvml.status().ToString();
  SimMig sim;
  ASSERT_TRUE(sim.ok) << dlerror();
  ASSERT_EQ(sim.init(), NVML_SUCCESS);
  nvmlDevice_t dev = nullptr;
  ASSERT_EQ(sim.by_index(1, &dev), NVML_SUCCESS);
  nvmlReturn_t activation = NVML_SUCCESS;
  ASSERT_EQ(sim.set_mode(dev, NVML_DEVICE_MIG_ENABLE, &activation), NVML_SUCCESS);
  ASSERT_EQ(activation, NVML_SUCCESS);
  // A 1g.10gb instance, and a 3g.40gb GPU instance with a one-slice compute instance: its
  // device is named "1c.3g.40gb", its GPU instance's profile is 3g.40gb.
  ASSERT_EQ(sim.Create(dev, NVML_GPU_INSTANCE_PROFILE_1_SLICE, 0), NVML_SUCCESS);
  ASSERT_EQ(sim.Create(dev, NVML_GPU_INSTANCE_PROFILE_3_SLICE, 0), NVML_SUCCESS);

  Result<std::vector<HostGpu>> gpus = (*nvml)->Gpus();
  ASSERT_TRUE(gpus.ok()) << gpus.status().ToString();
  ASSERT_EQ(gpus->size(), 2u);
  EXPECT_TRUE((*gpus)[0].migs.empty()) << "MIG is disabled on GPU 0";
  ASSERT_EQ((*gpus)[1].migs.size(), 2u);
  const HostGpu& gpu = (*gpus)[1];
  std::map<std::string, MigDevice> by_profile;
  for (const MigDevice& m : gpu.migs) by_profile[m.profile] = m;
  ASSERT_EQ(by_profile.count("1g.10gb"), 1u);
  ASSERT_EQ(by_profile.count("3g.40gb"), 1u);
  const MigDevice small = by_profile["1g.10gb"];
  EXPECT_EQ(small.uuid.rfind("MIG-", 0), 0u) << small.uuid;
  EXPECT_EQ(small.memory_total, 9728ull << 20);
  EXPECT_EQ(small.memory_used, 0u);

  // The container: its runtime hands it the 1g.10gb instance; it allocates 300 MiB there.
  Subprocess work({HAMI_PROBE, "alloc", "--kind", "data", "--bytes", "300Mi", "--hold"},
                  {"PATH=/usr/bin:/bin", std::string("LD_LIBRARY_PATH=") + HAMI_SIM_DIR,
                   "HAMI_SIM_STATE=" + dir_ + "/state", "NVIDIA_VISIBLE_DEVICES=" + small.uuid,
                   "ASAN_OPTIONS=detect_leaks=0"});
  std::string out = work.ReadUntil("visible_total=");
  ASSERT_NE(out.find("ok=1 fail=0"), std::string::npos) << out;

  // Its pod holds that instance as container 0's device 0.
  OnePod pods;
  pods.pod = PodRef{.ns = "team-a",
                    .name = "trainer",
                    .containers = {"main"},
                    .mig_allocations =
                        "[{\"containerIndex\":0,\"deviceIndex\":0,\"gpuUUID\":\"" + gpu.uuid +
                        "\",\"profile\":\"1g.10gb\",\"placement\":{\"start\":6,\"size\":1},"
                        "\"migUUID\":\"" + small.uuid + "\",\"gpuInstanceID\":" +
                        std::to_string(small.gpu_instance_id) + ",\"computeInstanceID\":" +
                        std::to_string(small.compute_instance_id) + "}]"};
  Monitor monitor(MonitorOptions{.containers_dir = dir_ + "/containers"}, nvml->get(), &pods);
  monitor.Update(std::chrono::system_clock::now());
  ExporterOptions eo;
  eo.node = "node-a";
  std::string page = RenderMonitorMetrics(monitor.Snapshot(), eo);
  const std::string ids = "\",gpu_instance_id=\"" + std::to_string(small.gpu_instance_id) +
                          "\",compute_instance_id=\"" +
                          std::to_string(small.compute_instance_id) + "\",zone=\"vGPU\"}";
  const std::string labels = "{node=\"node-a\",device_index=\"1\",device_uuid=\"" + gpu.uuid +
                             "\",mig_uuid=\"" + small.uuid + "\",profile=\"1g.10gb" + ids;
  EXPECT_EQ(Sample(page, "hami_mig_device_memory_used_bytes" + labels), 300.0 * (1 << 20))
      << page;
  EXPECT_EQ(Sample(page, "hami_mig_device_memory_total_bytes" + labels), 9728.0 * (1 << 20));
  EXPECT_EQ(Sample(page, "hami_mig_device_info{namespace=\"team-a\",pod=\"trainer\","
                         "container=\"main\",vdevice_index=\"0\",device_uuid=\"" +
                             gpu.uuid + "\",mig_uuid=\"" + small.uuid + "\",profile=\"1g.10gb" +
                             ids),
            1)
      << page;
  EXPECT_NE(page.find("profile=\"3g.40gb\""), std::string::npos) << "every instance is shown";
  EXPECT_EQ(page.find("hami_mig_device_memory_used_bytes{node=\"node-a\",device_index=\"0\""),
            std::string::npos);

  // The process frees and exits: the instance is empty again.
  ProcessResult done = work.Wait();
  EXPECT_EQ(done.exit_code, 0) << done.out << done.err;
  monitor.Update(std::chrono::system_clock::now());
  page = RenderMonitorMetrics(monitor.Snapshot(), eo);
  EXPECT_EQ(Sample(page, "hami_mig_device_memory_used_bytes" + labels), 0) << page;
}

}  // namespace
}  // namespace hami::monitor
