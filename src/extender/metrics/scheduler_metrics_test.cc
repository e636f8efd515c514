#include "extender/metrics/scheduler_metrics.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "scheduler/test_util.h"

namespace hami::extender {

using scheduler::Decision;
using scheduler::Ledger;
using scheduler::PlaceAndReserve;
using scheduler::PodSpec;
using scheduler::Reservation;
using scheduler::TraceLevel;

namespace {

using scheduler::testing::Gpu;
using scheduler::testing::Limits;
using scheduler::testing::SchedulerWorld;

constexpr std::string_view kV100 = "NVIDIA-Tesla V100-PCIE-32GB";

std::vector<std::string> Lines(const std::string& page) {
  std::vector<std::string> out;
  std::istringstream in(page);
  for (std::string line; std::getline(in, line);) out.push_back(line);
  return out;
}

bool HasLine(const std::string& page, const std::string& line) {
  return page.find("\n" + line + "\n") != std::string::npos || page.rfind(line + "\n", 0) == 0;
}

// Lines of `page` that start with `prefix`.
std::vector<std::string> Grep(const std::string& page, const std::string& prefix) {
  std::vector<std::string> out;
  for (const std::string& l : Lines(page)) {
    if (l.rfind(prefix, 0) == 0) out.push_back(l);
  }
  return out;
}

bool IsNameChar(char c, bool first, bool colon) {
  if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_') return true;
  if (colon && c == ':') return true;
  return !first && c >= '0' && c <= '9';
}

// Reads a metric or label name at `s[*i]`; "" when there is none.
std::string ReadName(const std::string& s, size_t* i, bool colon) {
  size_t start = *i;
  while (*i < s.size() && IsNameChar(s[*i], *i == start, colon)) ++*i;
  return s.substr(start, *i - start);
}

// "" when `page` is valid text exposition (format 0.0.4) as this renderer promises it: every
// family introduced by # HELP then # TYPE gauge (untyped for hami_gpu_shared_count, whose
// upstream name linters reserve for summaries; counter for the service's hami_scheduler_*_total
// counters), its samples contiguous after it, every sample
// `name{label="value",...} number` with properly escaped values, and no series twice.
std::string CheckExposition(const std::string& page) {
  if (page.empty() || page.back() != '\n') return "page does not end with a newline";
  std::set<std::string> families, series;
  std::string current, pending_help;
  for (const std::string& line : Lines(page)) {
    if (line.rfind("# HELP ", 0) == 0) {
      size_t i = 7;
      pending_help = ReadName(line, &i, true);
      if (pending_help.empty() || i >= line.size() || line[i] != ' ') return "bad HELP: " + line;
      continue;
    }
    if (line.rfind("# TYPE ", 0) == 0) {
      size_t i = 7;
      std::string name = ReadName(line, &i, true);
      if (name != pending_help) return "TYPE without its HELP: " + line;
      const bool counter = name.rfind("hami_scheduler_", 0) == 0 && name.ends_with("_total");
      const std::string want = name == "hami_gpu_shared_count" ? " untyped"
                               : counter                       ? " counter"
                                                               : " gauge";
      if (line.substr(i) != want) return "not a" + want + ": " + line;
      if (!families.insert(name).second) return "family repeated: " + name;
      current = name;
      pending_help.clear();
      continue;
    }
    if (line.empty() || line[0] == '#') return "unexpected line: " + line;
    size_t i = 0;
    std::string name = ReadName(line, &i, true);
    if (name.empty() || name != current) return "sample outside its family: " + line;
    if (i >= line.size() || line[i] != '{') return "no labels: " + line;
    ++i;
    std::set<std::string> labels;
    while (true) {
      std::string label = ReadName(line, &i, false);
      if (label.empty() || !labels.insert(label).second) return "bad label name: " + line;
      if (line.compare(i, 2, "=\"") != 0) return "bad label syntax: " + line;
      i += 2;
      while (i < line.size() && line[i] != '"') {
        if (line[i] == '\\') {
          if (i + 1 >= line.size() ||
              std::string_view("\\\"n").find(line[i + 1]) == std::string_view::npos) {
            return "bad escape: " + line;
          }
          ++i;
        }
        ++i;
      }
      if (i >= line.size()) return "unterminated label value: " + line;
      ++i;
      if (i < line.size() && line[i] == ',') {
        ++i;
        continue;
      }
      if (i < line.size() && line[i] == '}') {
        ++i;
        break;
      }
      return "bad label separator: " + line;
    }
    if (!labels.count("zone")) return "no zone label: " + line;
    if (i >= line.size() || line[i] != ' ') return "no value: " + line;
    std::string value = line.substr(i + 1);
    if (value != "+Inf" && value != "-Inf" && value != "NaN") {
      char* end = nullptr;
      std::strtod(value.c_str(), &end);
      if (value.empty() || *end != '\0') return "bad value: " + line;
    }
    if (!series.insert(line.substr(0, i)).second) return "duplicate series: " + line;
  }
  return "";
}

std::string Render(const SchedulerWorld& w, const std::vector<QuotaMetric>& quotas = {},
                   bool legacy = false) {
  BuildInfo build{"v0.1.0", "abc123", "2024-01-02", "g++ 12.2", "linux/amd64"};
  MetricsOptions options;
  options.legacy = legacy;
  return RenderSchedulerMetrics(w.ledger(), quotas, build, options);
}

PodSpec SharedPod(SchedulerWorld& w, const std::string& name) {
  return w.Pod(name, {Limits({{"nvidia.com/gpu", "1"},
                              {"nvidia.com/gpumem", "3000"},
                              {"nvidia.com/gpucores", "30"}})});
}

TEST(SchedulerMetrics, DeviceAndPodSeries) {
  SchedulerWorld w;
  ASSERT_TRUE(w.AddNode("node-a", {Gpu("GPU-a0", 0, 16384)}).ok());
  ASSERT_TRUE(w.Schedule(SharedPod(w, "p1")).ok());
  std::string page = Render(w);
  ASSERT_EQ(CheckExposition(page), "");

  const std::string dev =
      R"(node="node-a",device_uuid="GPU-a0",device_index="0",device_type="NVIDIA-Tesla V100-PCIE-32GB")";
  for (
      const std::string& line : std::vector<std::string>{
          "# HELP hami_gpu_memory_limit_bytes Device memory HAMi may allocate on a GPU, in bytes",
          "# TYPE hami_gpu_memory_limit_bytes gauge",
          "hami_gpu_memory_limit_bytes{" + dev + R"(,zone="vGPU"} 1.7179869184e+10)",
          "hami_gpu_core_limit_ratio{" + dev + R"(,zone="vGPU"} 100)",
          "hami_gpu_memory_allocated_bytes{" + dev +
              R"(,device_cores="30",zone="vGPU"} 3.145728e+09)",
          "hami_gpu_shared_count{" + dev + R"(,zone="vGPU"} 1)",
          "hami_gpu_core_allocated_ratio{" + dev + R"(,zone="vGPU"} 30)",
          "hami_node_gpu_overview{" + dev +
              R"(,device_cores="30",device_memory_limit="16384",zone="vGPU"} 3.145728e+09)",
          R"(hami_node_gpu_memory_allocated_ratio{node="node-a",device_uuid="GPU-a0",device_index="0",zone="vGPU"} 0.18310546875)",
          R"(hami_vgpu_memory_allocated_bytes{namespace="default",node="node-a",pod="p1",container_index="0",device_uuid="GPU-a0",zone="vGPU"} 3.145728e+09)",
          R"(hami_vgpu_core_allocated_ratio{namespace="default",node="node-a",pod="p1",container_index="0",device_uuid="GPU-a0",zone="vGPU"} 30)",
          R"(hami_build_info{version="v0.1.0",revision="abc123",build_date="2024-01-02",compiler="g++ 12.2",platform="linux/amd64",zone="vGPU"} 1)",
      }) {
    EXPECT_TRUE(HasLine(page, line)) << "missing: " << line << "\n" << page;
  }
  // No quotas, no MIG: those families are left out entirely.
  EXPECT_EQ(page.find("hami_resource_quota"), std::string::npos);
  EXPECT_EQ(page.find("mig_instance"), std::string::npos);
  EXPECT_EQ(page.find("GPUDevice"), std::string::npos);

  // Released pods disappear; the device shows zero use.
  w.DeletePod("uid-p1");
  page = Render(w);
  EXPECT_EQ(page.find("hami_vgpu_"), std::string::npos);
  EXPECT_TRUE(HasLine(page, "hami_gpu_shared_count{" + dev + R"(,zone="vGPU"} 0)"));
  EXPECT_TRUE(HasLine(
      page,
      R"(hami_node_gpu_memory_allocated_ratio{node="node-a",device_uuid="GPU-a0",device_index="0",zone="vGPU"} 0)"));
}

TEST(SchedulerMetrics, OutputIsSortedByNodeDeviceAndPod) {
  SchedulerWorld w;
  ASSERT_TRUE(w.AddNode("node-b", {Gpu("GPU-b1", 1, 16384), Gpu("GPU-b0", 0, 16384)}).ok());
  ASSERT_TRUE(w.AddNode("node-a", {Gpu("GPU-a0", 0, 16384)}).ok());
  // Three pods that each take a whole card (cores 100) fill the three GPUs.
  for (const char* name : {"zeta", "alpha", "mid"}) {
    Result<Decision> d = w.Schedule(
        w.Pod(name, {Limits({{"nvidia.com/gpu", "1"}, {"nvidia.com/gpucores", "100"}})}));
    ASSERT_TRUE(d.ok() && d->fit());
  }
  std::string page = Render(w);
  ASSERT_EQ(CheckExposition(page), "");
  std::vector<std::string> shared = Grep(page, "hami_gpu_shared_count{");
  ASSERT_EQ(shared.size(), 3u);
  EXPECT_NE(shared[0].find(R"(node="node-a",device_uuid="GPU-a0")"), std::string::npos);
  EXPECT_NE(shared[1].find(R"(node="node-b",device_uuid="GPU-b0")"), std::string::npos);
  EXPECT_NE(shared[2].find(R"(node="node-b",device_uuid="GPU-b1")"), std::string::npos);
  std::vector<std::string> pods = Grep(page, "hami_vgpu_core_allocated_ratio{");
  ASSERT_EQ(pods.size(), 3u);
  // By node, then device index on the node.
  EXPECT_NE(pods[0].find(R"(node="node-a")"), std::string::npos);
  EXPECT_NE(pods[1].find(R"(device_uuid="GPU-b0")"), std::string::npos);
  EXPECT_NE(pods[2].find(R"(device_uuid="GPU-b1")"), std::string::npos);
  // Deterministic: a ledger rebuilt from the same objects renders the same page.
  std::unique_ptr<Ledger> rebuilt = w.Rebuild();
  EXPECT_EQ(
      RenderSchedulerMetrics(*rebuilt, {},
                             BuildInfo{"v0.1.0", "abc123", "2024-01-02", "g++ 12.2", "linux/amd64"},
                             MetricsOptions{}),
      page);
}

TEST(SchedulerMetrics, LabelValuesAreEscaped) {
  SchedulerWorld w;
  ASSERT_TRUE(w.AddNode("node-a", {Gpu("GPU-a0", 0, 1024, "Tesla \"X\" \\ GPU\nrev2")}).ok());
  BuildInfo build{"v\"1", "a\\b", "", "", ""};
  std::string page = RenderSchedulerMetrics(w.ledger(), {}, build, MetricsOptions{});
  ASSERT_EQ(CheckExposition(page), "");
  EXPECT_TRUE(HasLine(
      page,
      R"(hami_gpu_core_limit_ratio{node="node-a",device_uuid="GPU-a0",device_index="0",device_type="Tesla \"X\" \\ GPU\nrev2",zone="vGPU"} 100)"))
      << page;
  EXPECT_TRUE(HasLine(
      page,
      R"(hami_build_info{version="v\"1",revision="a\\b",build_date="",compiler="",platform="",zone="vGPU"} 1)"));
}

TEST(SchedulerMetrics, PendingPodsPerNamespace) {
  SchedulerWorld w;
  std::string page = RenderSchedulerMetrics(w.ledger(), {}, BuildInfo{}, MetricsOptions{},
                                            PendingPods{{"team-a", 3}, {"team-b", 0}});
  ASSERT_EQ(CheckExposition(page), "");
  EXPECT_TRUE(HasLine(page, R"(hami_scheduler_pending_pods{namespace="team-a",zone="vGPU"} 3)"))
      << page;
  EXPECT_EQ(page.find("team-b"), std::string::npos) << "namespaces with none are left out";
  page = RenderSchedulerMetrics(w.ledger(), {}, BuildInfo{}, MetricsOptions{});
  EXPECT_EQ(page.find("hami_scheduler_pending_pods"), std::string::npos);
}

TEST(SchedulerMetrics, ServiceCountersAreCountersWithOneHeaderPerFamily) {
  SchedulerWorld w;
  std::vector<CounterMetric> counters = {
      {"hami_scheduler_filter_requests_total", "Filter calls", "", "", 7},
      {"hami_scheduler_filter_results_total", "Filter answers by result", "result", "fit", 5},
      {"hami_scheduler_filter_results_total", "", "result", "no_fit", 2},
  };
  std::string page =
      RenderSchedulerMetrics(w.ledger(), {}, BuildInfo{}, MetricsOptions{}, {}, counters);
  ASSERT_EQ(CheckExposition(page), "");
  EXPECT_TRUE(HasLine(page, "# TYPE hami_scheduler_filter_requests_total counter")) << page;
  EXPECT_TRUE(HasLine(page, R"(hami_scheduler_filter_requests_total{zone="vGPU"} 7)")) << page;
  EXPECT_TRUE(HasLine(page, "# TYPE hami_scheduler_filter_results_total counter")) << page;
  EXPECT_TRUE(HasLine(page, R"(hami_scheduler_filter_results_total{result="fit",zone="vGPU"} 5)"))
      << page;
  EXPECT_TRUE(
      HasLine(page, R"(hami_scheduler_filter_results_total{result="no_fit",zone="vGPU"} 2)"))
      << page;
  size_t first = page.find("# HELP hami_scheduler_filter_results_total");
  ASSERT_NE(first, std::string::npos);
  EXPECT_EQ(page.find("# HELP hami_scheduler_filter_results_total", first + 1), std::string::npos);
}

TEST(SchedulerMetrics, QuotaSeries) {
  SchedulerWorld w;
  std::vector<QuotaMetric> quotas = {
      {"team-b", "gpu-quota", "limits.nvidia.com/gpucores", 30, 200},
      {"team-a", "big", "limits.nvidia.com/gpumem", 3000, 20000},
      {"team-a", "small", "limits.nvidia.com/gpumem", 3000, 10000},
      {"team-c", "huge", "limits.nvidia.com/gpumem", 2500000, 4000000},
  };
  std::string page = Render(w, quotas);
  ASSERT_EQ(CheckExposition(page), "");
  std::vector<std::string> used = Grep(page, "hami_resource_quota_used{");
  ASSERT_EQ(used.size(), 3u);
  // One series per namespace and resource, carrying the limit that binds.
  EXPECT_EQ(
      used[0],
      R"(hami_resource_quota_used{namespace="team-a",quota_name="nvidia.com/gpumem",limit="10000",zone="vGPU"} 3000)");
  EXPECT_EQ(
      used[1],
      R"(hami_resource_quota_used{namespace="team-b",quota_name="nvidia.com/gpucores",limit="200",zone="vGPU"} 30)");
  // Limit labels are plain integers; sample values use the Go client's float format.
  EXPECT_EQ(
      used[2],
      R"(hami_resource_quota_used{namespace="team-c",quota_name="nvidia.com/gpumem",limit="4000000",zone="vGPU"} 2.5e+06)");
  EXPECT_TRUE(HasLine(
      page,
      R"(hami_resource_quota_limit{namespace="team-a",quota_name="nvidia.com/gpumem",zone="vGPU"} 10000)"));
  EXPECT_EQ(page.find("QuotaUsed"), std::string::npos);
  std::string legacy = Render(w, quotas, /*legacy=*/true);
  EXPECT_TRUE(HasLine(
      legacy,
      R"(QuotaUsed{quotanamespace="team-a",quotaName="nvidia.com/gpumem",limit="10000",zone="vGPU"} 3000)"));
}

TEST(SchedulerMetrics, LegacyNamesOnlyOnRequest) {
  SchedulerWorld w;
  ASSERT_TRUE(w.AddNode("node-a", {Gpu("GPU-a0", 0, 16384)}).ok());
  ASSERT_TRUE(w.Schedule(SharedPod(w, "p1")).ok());
  std::string current = Render(w);
  std::string legacy = Render(w, {}, /*legacy=*/true);
  ASSERT_EQ(CheckExposition(legacy), "");
  for (const char* name : {"GPUDeviceMemoryLimit", "GPUDeviceCoreLimit", "GPUDeviceMemoryAllocated",
                           "GPUDeviceSharedNum", "GPUDeviceCoreAllocated", "nodeGPUOverview",
                           "nodeGPUMemoryPercentage", "vGPUMemoryAllocated", "vGPUCoreAllocated"}) {
    std::string type = std::string("# TYPE ") + name + " gauge";
    EXPECT_FALSE(HasLine(current, type)) << name;
    EXPECT_TRUE(HasLine(legacy, type)) << name;
  }
  // The current names are all still there, unchanged.
  EXPECT_EQ(legacy.substr(0, current.size()), current);
  const std::string dev = R"(nodeid="node-a",deviceuuid="GPU-a0",deviceidx="0")";
  for (
      const std::string& line : std::vector<std::string>{
          "GPUDeviceMemoryLimit{" + dev +
              R"(,devicetype="NVIDIA-Tesla V100-PCIE-32GB",zone="vGPU"} 1.7179869184e+10)",
          "GPUDeviceMemoryAllocated{" + dev +
              R"(,devicecores="30",devicetype="NVIDIA-Tesla V100-PCIE-32GB",zone="vGPU"} 3.145728e+09)",
          "GPUDeviceSharedNum{" + dev +
              R"(,devicetype="NVIDIA-Tesla V100-PCIE-32GB",zone="vGPU"} 1)",
          "nodeGPUOverview{" + dev +
              R"(,devicecores="30",devicememorylimit="16384",devicetype="NVIDIA-Tesla V100-PCIE-32GB",zone="vGPU"} 3.145728e+09)",
          "nodeGPUMemoryPercentage{" + dev + R"(,zone="vGPU"} 0.18310546875)",
          R"(vGPUMemoryAllocated{podnamespace="default",nodename="node-a",podname="p1",containeridx="0",deviceuuid="GPU-a0",zone="vGPU"} 3.145728e+09)",
          R"(vGPUCoreAllocated{podnamespace="default",nodename="node-a",podname="p1",containeridx="0",deviceuuid="GPU-a0",zone="vGPU"} 30)",
      }) {
    EXPECT_TRUE(HasLine(legacy, line)) << "missing: " << line << "\n" << legacy;
  }
}

TEST(SchedulerMetrics, MigInstances) {
  SchedulerWorld w;
  device::DeviceInfo mig = Gpu("GPU-m0", 0, 40960, "NVIDIA A100-SXM4-40GB");
  mig.mode = "mig";
  mig.mig_profiles = {
      device::MigProfile{"1g.5gb", 4864, 14, 1, {{0, 1}, {1, 1}, {2, 1}}},
      device::MigProfile{"2g.10gb", 9984, 28, 2, {{0, 2}, {2, 2}}},
  };
  ASSERT_TRUE(w.AddNode("node-m", {mig}).ok());
  for (const char* name : {"a", "b"}) {
    Result<Decision> d =
        w.Schedule(w.Pod(name, {Limits({{"nvidia.com/gpu", "1"}, {"nvidia.com/gpumem", "4000"}})}));
    ASSERT_TRUE(d.ok() && d->fit() && d->mig.size() == 1u);
  }
  std::string page = Render(w, {}, /*legacy=*/true);
  ASSERT_EQ(CheckExposition(page), "");
  const std::string dev = R"(node="node-m",device_uuid="GPU-m0",device_index="0")";
  std::vector<std::string> info = Grep(page, "hami_node_gpu_mig_instance_info{");
  ASSERT_EQ(info.size(), 2u) << page;
  // 1g instances are placed from the highest start down: slices 2 then 1; listed by start.
  EXPECT_EQ(
      info[0],
      "hami_node_gpu_mig_instance_info{" + dev +
          R"(,mig_uuid="",profile="1g.5gb",gpu_instance_id="",compute_instance_id="",placement_start="1",placement_size="1",zone="vGPU"} 1)");
  EXPECT_EQ(
      info[1],
      "hami_node_gpu_mig_instance_info{" + dev +
          R"(,mig_uuid="",profile="1g.5gb",gpu_instance_id="",compute_instance_id="",placement_start="2",placement_size="1",zone="vGPU"} 1)");
  // The legacy family cannot tell the two instances apart (no instance id): one series.
  std::vector<std::string> legacy = Grep(page, "nodeGPUMigInstance{");
  ASSERT_EQ(legacy.size(), 1u);
  EXPECT_EQ(
      legacy[0],
      R"(nodeGPUMigInstance{nodeid="node-m",deviceuuid="GPU-m0",deviceidx="0",migname="1g.5gb",zone="vGPU"} 1)");
  // MIG charges are the profile's memory.
  EXPECT_TRUE(HasLine(
      page,
      "hami_gpu_memory_allocated_bytes{" + dev +
          R"(,device_type="NVIDIA A100-SXM4-40GB",device_cores="28",zone="vGPU"} 1.0200547328e+10)"));
}

TEST(SchedulerMetrics, EmptyLedgerHasOnlyBuildInfo) {
  SchedulerWorld w;
  std::string page = Render(w);
  ASSERT_EQ(CheckExposition(page), "");
  EXPECT_EQ(Lines(page).size(), 3u) << page;
}

TEST(SchedulerMetrics, ReservedPodsAreReported) {
  SchedulerWorld w;
  ASSERT_TRUE(w.AddNode("node-a", {Gpu("GPU-a0", 0, 16384)}).ok());
  Result<Decision> d = PlaceAndReserve(w.ledger(), w.engine(), SharedPod(w, "pending"),
                                       w.NodeNames(), TraceLevel::kNodes);
  ASSERT_TRUE(d.ok() && d->fit());
  std::string page = Render(w);
  EXPECT_TRUE(HasLine(
      page,
      R"(hami_vgpu_core_allocated_ratio{namespace="default",node="node-a",pod="pending",container_index="0",device_uuid="GPU-a0",zone="vGPU"} 30)"));
}

TEST(SchedulerMetrics, LargeClusterRendersEverySeries) {
  constexpr int kNodes = 5000, kGpus = 8;
  SchedulerWorld w;
  for (int n = 0; n < kNodes; ++n) {
    std::string node = "node-" + std::to_string(n);
    std::vector<device::DeviceInfo> gpus;
    for (int g = 0; g < kGpus; ++g) {
      gpus.push_back(Gpu("GPU-" + std::to_string(n) + "-" + std::to_string(g), g, 81920,
                         "NVIDIA-H100-80GB-HBM3"));
    }
    ASSERT_TRUE(w.AddNode(node, gpus).ok());
    Reservation r;
    r.uid = "uid-" + std::to_string(n);
    r.name_space = "default";
    r.name = "pod-" + std::to_string(n);
    r.node = node;
    r.devices["NVIDIA"] = {
        {device::ContainerDevice{"GPU-" + std::to_string(n) + "-3", "NVIDIA", 4096, 25}}};
    ASSERT_TRUE(w.ledger().Reserve(r).ok());
  }
  auto start = std::chrono::steady_clock::now();
  std::string page = Render(w, {}, /*legacy=*/false);
  auto elapsed = std::chrono::steady_clock::now() - start;
  // Measured, not asserted (tests do not depend on machine speed).
  std::cout << "rendered " << kNodes << "x" << kGpus << " GPUs + " << kNodes
            << " pods: " << page.size() / 1024 << " KiB in "
            << std::chrono::duration_cast<std::chrono::microseconds>(elapsed).count() / 1000.0
            << " ms\n";
  size_t samples = 0;
  for (char c : page) samples += c == '\n';
  // 7 device families, 2 pod families, build info; plus a HELP and a TYPE line per family.
  EXPECT_EQ(samples, size_t{kNodes} * kGpus * 7 + size_t{kNodes} * 2 + 1 + 10 * 2);
}

}  // namespace
}  // namespace hami::extender
