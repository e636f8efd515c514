#include "monitor/monitor.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "monitor/exporter.h"
#include "monitor/feedback.h"
#include "monitor/procfs.h"
#include "monitor/region_access.h"
#include "vgpu/region.h"

namespace hami::monitor {
namespace {

namespace fs = std::filesystem;
using std::chrono::system_clock;

// --- /proc parsing -------------------------------------------------------------------------

TEST(ProcFs, StartTimeIsField22EvenWithSpacesAndParensInTheName) {
  std::string stat =
      "4242 (a) b (c)) S 1 4242 4242 0 -1 4194560 100 0 0 0 1 2 0 0 20 0 1 0 "
      "987654 1000 10";
  EXPECT_EQ(ParseStatStartTime(stat), 987654u);
  EXPECT_EQ(ParseStatStartTime("1 (x) Z 1 1 1 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 5 0"), std::nullopt)
      << "a zombie has no start time worth matching";
  EXPECT_EQ(ParseStatStartTime("1 (x) S 1 2"), std::nullopt);
  EXPECT_EQ(ParseStatStartTime("garbage"), std::nullopt);
}

TEST(ProcFs, NsPidListsEveryNamespaceInnermostLast) {
  EXPECT_EQ(ParseNsPids("Name:\tpython\nNSpid:\t81234\t17\t1\nNSpgid:\t1\n"),
            (std::vector<int>{81234, 17, 1}));
  EXPECT_EQ(ParseNsPids("Name:\tbash\nNSpid:\t300\n"), (std::vector<int>{300}));
  EXPECT_TRUE(ParseNsPids("Name:\told kernel\n").empty());
  EXPECT_TRUE(ParseNsPids("NSpid:\t12\tx\n").empty()) << "malformed: nothing rather than half";
}

TEST(ProcFs, MappedFilesAreDeviceAndInode) {
  std::string maps =
      "7f00-7f10 rw-s 00000000 fd:01 1234567                    /tmp/vgpu/a.cache\n"
      "7f10-7f20 r-xp 00000000 08:02 42 /usr/lib/libc.so.6\n"
      "7f20-7f30 rw-p 00000000 00:00 0 \n"
      "7f30-7f40 rw-s 00001000 fd:01 1234567 /tmp/vgpu/a.cache\n";
  std::vector<FileId> files = ParseMappedFiles(maps);
  ASSERT_EQ(files.size(), 2u) << "anonymous areas are skipped, repeated files counted once";
  EXPECT_NE(std::find(files.begin(), files.end(), FileIdOf(makedev(0xfd, 1), 1234567)),
            files.end());
  EXPECT_NE(std::find(files.begin(), files.end(), FileIdOf(makedev(8, 2), 42)), files.end());
}

TEST(ProcFs, ReadsTheRealProcOfThisProcess) {
  ProcFs proc;
  std::optional<uint64_t> start = proc.StartTime(getpid());
  ASSERT_TRUE(start);
  EXPECT_TRUE(proc.Alive(getpid(), *start));
  EXPECT_FALSE(proc.Alive(getpid(), *start + 1)) << "another start time is another process";
  std::vector<int> ns = proc.NsPids(getpid());
  ASSERT_FALSE(ns.empty());
  EXPECT_EQ(ns.back(), getpid());
}

TEST(ContainerDirs, NameIsPodUidAndContainer) {
  auto n = ParseContainerDirName("0f1e2d3c-aaaa-bbbb-cccc-000000000001_main");
  ASSERT_TRUE(n);
  EXPECT_EQ(n->pod_uid, "0f1e2d3c-aaaa-bbbb-cccc-000000000001");
  EXPECT_EQ(n->container, "main");
  EXPECT_FALSE(ParseContainerDirName("nounderscore"));
  EXPECT_FALSE(ParseContainerDirName("_main"));
  EXPECT_FALSE(ParseContainerDirName("uid_"));
}

// --- Feedback ------------------------------------------------------------------------------

TEST(Feedback, AloneOnAGpuTheLimitIsRelaxed) {
  auto out = ComputeFeedback({{.priority = 1, .recent_kernel = 2, .uuids = {"GPU-a"}}});
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].recent_kernel, 1);
  EXPECT_EQ(out[0].utilization_switch, 0);
  EXPECT_FALSE(out[0].blocked);
}

TEST(Feedback, TwoActiveAtOnePriorityEnforceTheLimit) {
  auto out = ComputeFeedback({{.priority = 1, .recent_kernel = 2, .uuids = {"GPU-a"}},
                              {.priority = 1, .recent_kernel = 2, .uuids = {"GPU-a"}},
                              {.priority = 1, .recent_kernel = 2, .uuids = {"GPU-b"}}});
  EXPECT_EQ(out[0].utilization_switch, 1);
  EXPECT_EQ(out[1].utilization_switch, 1);
  EXPECT_EQ(out[2].utilization_switch, 0) << "GPU-b is not shared";
}

TEST(Feedback, AHigherPriorityTaskBlocksTheLowerUntilItGoesIdle) {
  std::vector<FeedbackIn> in = {{.priority = 0, .recent_kernel = 2, .uuids = {"GPU-a"}},
                                {.priority = 1, .recent_kernel = 2, .uuids = {"GPU-a"}}};
  auto out = ComputeFeedback(in);
  EXPECT_FALSE(out[0].blocked);
  EXPECT_EQ(out[0].utilization_switch, 0);
  EXPECT_TRUE(out[1].blocked);
  EXPECT_EQ(out[1].recent_kernel, -1);
  EXPECT_EQ(out[1].utilization_switch, 1);
  // Next round: the high-priority task launched nothing more (1 -> 0: idle).
  in[0].recent_kernel = out[0].recent_kernel;
  in[1].recent_kernel = out[1].recent_kernel;
  out = ComputeFeedback(in);
  EXPECT_EQ(out[0].recent_kernel, 0);
  EXPECT_FALSE(out[1].blocked);
  EXPECT_EQ(out[1].recent_kernel, 0) << "-1 is reset once nothing blocks";
}

TEST(Feedback, IdleContainersCountForNothing) {
  auto out = ComputeFeedback({{.priority = 0, .recent_kernel = 1, .uuids = {"GPU-a"}},
                              {.priority = 1, .recent_kernel = 2, .uuids = {"GPU-a"}}});
  EXPECT_FALSE(out[1].blocked) << "1 decrements to 0: not active";
}

// --- Monitor over real region files ---------------------------------------------------------

class FakeGpus : public GpuStats {
 public:
  std::vector<HostGpu> gpus;
  std::map<std::string, std::vector<GpuProcess>> procs;
  std::map<std::string, std::vector<ProcessSample>> samples;
  Result<std::vector<HostGpu>> Gpus() override { return gpus; }
  Result<std::vector<GpuProcess>> Processes(const std::string& uuid) override {
    return procs[uuid];
  }
  Result<std::vector<ProcessSample>> Samples(const std::string& uuid, uint64_t since) override {
    std::vector<ProcessSample> out;
    for (const ProcessSample& s : samples[uuid]) {
      if (s.timestamp_us > since) out.push_back(s);
    }
    return out;
  }
};

class FakePods : public PodDirectory {
 public:
  bool synced = true;
  std::map<std::string, PodRef> pods;
  bool Synced() const override { return synced; }
  std::optional<PodRef> Find(const std::string& uid) const override {
    auto it = pods.find(uid);
    if (it == pods.end()) return std::nullopt;
    return it->second;
  }
  std::map<std::string, PodRef> MigPods() const override { return {}; }
};

ExporterOptions NodeOnly(const std::string& node) {
  ExporterOptions o;
  o.node = node;
  return o;
}

constexpr char kUid[] = "11111111-2222-3333-4444-555555555555";
constexpr char kGpu[] = "GPU-00000000-0000-0000-0000-000000000001";

class MonitorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/hami-monitor-test-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    containers_ = dir_ + "/containers";
    fs::create_directories(containers_ + "/" + kUid + "_main");
    gpus_.gpus = {{.index = 0,
                   .uuid = kGpu,
                   .name = "NVIDIA A100-SXM4-80GB",
                   .memory_used = 3u << 30,
                   .memory_total = 80ull << 30,
                   .utilization = 42,
                   .memory_utilization = 7}};
    pods_.pods[kUid] = PodRef{"team-a", "trainer", {"main", "sidecar"}};
  }
  void TearDown() override {
    if (region_ != nullptr) vgpu::Region::Free(region_);
    fs::remove_all(dir_);
  }
  // The container's region, created as libvgpu does, with this process registered in it.
  void CreateRegion() {
    vgpu::RegionInit init;
    init.device_count = 1;
    init.mem_limit[0] = 8ull << 30;
    init.sm_limit[0] = 30;
    init.priority = 1;
    char err[256] = {};
    std::string path = containers_ + "/" + kUid + "_main/abc.cache";
    region_ = vgpu::Region::Open(path.c_str(), init, err, sizeof(err));
    ASSERT_NE(region_, nullptr) << err;
    char uuids[1][vgpu::kUuidLen] = {};
    std::strncpy(uuids[0], kGpu, vgpu::kUuidLen - 1);
    region_->SetDevices(1, uuids);
    slot_ = region_->RegisterSelf();
    ASSERT_GE(slot_, 0);
  }
  MonitorOptions Options() const {
    MonitorOptions o;
    o.containers_dir = containers_;
    return o;
  }

  std::string dir_, containers_;
  FakeGpus gpus_;
  FakePods pods_;
  vgpu::Region* region_ = nullptr;
  int slot_ = -1;
};

TEST_F(MonitorTest, MetricsAreTheRegionsAndNvmlsFigures) {
  CreateRegion();
  ASSERT_TRUE(region_->Reserve(slot_, 0, 1000 << 20, vgpu::MemKind::kData).ok);
  ASSERT_TRUE(region_->Reserve(slot_, 0, 24 << 20, vgpu::MemKind::kContext).ok);
  ASSERT_TRUE(region_->Reserve(slot_, 0, 100 << 20, vgpu::MemKind::kAsync).ok);
  region_->header()->last_kernel_time.store(1'700'000'000);
  Monitor m(Options(), &gpus_, &pods_);
  UpdateResult r = m.Update(system_clock::now());
  EXPECT_EQ(r.containers, 1);
  EXPECT_EQ(r.mapped_now, 1);
  ExporterOptions eo;
  eo.node = "node-a";
  eo.now_s = 1'700'000'012;
  eo.version = "9.9";
  std::string page = RenderMonitorMetrics(m.Snapshot(), eo);
  const std::string labels =
      "{namespace=\"team-a\",pod=\"trainer\",container=\"main\",vdevice_index=\"0\","
      "device_uuid=\"" +
      std::string(kGpu) + "\",zone=\"vGPU\"} ";
  auto has = [&](const std::string& line) {
    EXPECT_NE(page.find(line + "\n"), std::string::npos) << line << "\n--- page:\n" << page;
  };
  has("hami_vgpu_memory_used_bytes" + labels + "1.178599424e+09");  // 1124 MiB
  has("hami_vgpu_memory_limit_bytes" + labels + "8.589934592e+09");
  has("hami_container_device_memory_bytes" + labels + "1.178599424e+09");
  has("hami_vgpu_memory_context_bytes" + labels + "2.5165824e+07");  // Go's %g form
  has("hami_vgpu_memory_module_bytes" + labels + "0");
  has("hami_vgpu_memory_buffer_bytes" + labels + "1.1534336e+09");
  has("hami_container_last_kernel_elapsed_seconds" + labels + "12");
  const std::string host = "{node=\"node-a\",device_index=\"0\",device_uuid=\"" +
                           std::string(kGpu) + "\",device_type=\"NVIDIA-NVIDIA A100-SXM4-80GB\"";
  has("hami_host_gpu_memory_used_bytes" + host + ",zone=\"vGPU\"} 3.221225472e+09");
  has("hami_host_gpu_utilization_ratio" + host + ",zone=\"vGPU\"} 42");
  has("hami_host_gpu_memory_controller_utilization_ratio" + host + ",zone=\"vGPU\"} 7");
  EXPECT_NE(page.find("# TYPE hami_vgpu_memory_used_bytes gauge\n"), std::string::npos);
  EXPECT_NE(page.find("hami_build_info{version=\"9.9\""), std::string::npos);
  EXPECT_EQ(page.find("HostGPUMemoryUsage"), std::string::npos) << "legacy names only on request";

  eo.legacy = true;
  page = RenderMonitorMetrics(m.Snapshot(), eo);
  has("vGPU_device_memory_usage_in_bytes{podnamespace=\"team-a\",podname=\"trainer\",ctrname="
      "\"main\",vdeviceid=\"0\",deviceuuid=\"" +
      std::string(kGpu) + "\",zone=\"vGPU\"} 1.178599424e+09");
  EXPECT_NE(page.find("Device_memory_desc_of_container{"), std::string::npos);
  EXPECT_NE(page.find("HostCoreUtilization{nodeid=\"node-a\""), std::string::npos);
}

TEST_F(MonitorTest, ContainersOfUnknownPodsOrNamesAreNotExported) {
  CreateRegion();
  pods_.pods.clear();
  Monitor m(Options(), &gpus_, &pods_);
  m.Update(system_clock::now());
  std::string page = RenderMonitorMetrics(m.Snapshot(), NodeOnly("n"));
  EXPECT_EQ(page.find("hami_vgpu_memory_used_bytes"), std::string::npos) << page;
  pods_.pods[kUid] = PodRef{"ns", "p", {"other"}};
  page = RenderMonitorMetrics(m.Snapshot(), NodeOnly("n"));
  EXPECT_EQ(page.find("hami_vgpu_memory_used_bytes"), std::string::npos) << page;
}

TEST_F(MonitorTest, GpuProcessesGetTheirHostPidAndTheirSmUtilisation) {
  CreateRegion();
  ASSERT_EQ(region_->header()->slots[slot_].host_pid.load(), 0);
  // This process runs on the GPU (NVML reports it), and so does one that is not a container's.
  const uint64_t now_us = static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::microseconds>(system_clock::now().time_since_epoch())
          .count());
  gpus_.procs[kGpu] = {{getpid(), 1 << 30}, {getppid(), 1 << 20}};
  gpus_.samples[kGpu] = {
      {getpid(), 20, now_us - 2000}, {getpid(), 40, now_us - 1000}, {getppid(), 90, now_us - 1000}};
  Monitor m(Options(), &gpus_, &pods_);
  UpdateResult r = m.Update(system_clock::now());
  EXPECT_EQ(r.host_pids_written, 1);
  EXPECT_EQ(region_->header()->slots[slot_].host_pid.load(), getpid());
  MonitorSnapshot snap = m.Snapshot();
  ASSERT_EQ(snap.containers.size(), 1u);
  ASSERT_EQ(snap.containers[0].devices.size(), 1u);
  EXPECT_DOUBLE_EQ(snap.containers[0].devices[0].sm_util, 30) << "samples of a pid averaged";
  EXPECT_EQ(snap.containers[0].host_pids_known, 1);
  // A later update finds nothing new to write; a slot reset by libvgpu is written again.
  EXPECT_EQ(m.Update(system_clock::now()).host_pids_written, 0);
  region_->header()->slots[slot_].host_pid.store(0);
  EXPECT_EQ(m.Update(system_clock::now()).host_pids_written, 1);
}

TEST_F(MonitorTest, FeedbackIsAppliedToTheRegions) {
  CreateRegion();
  vgpu::RegionHeader* h = region_->header();
  h->recent_kernel.store(2);
  ASSERT_EQ(h->utilization_switch.load(), 1) << "a new region enforces";
  Monitor m(Options(), &gpus_, &pods_);
  m.Update(system_clock::now());
  EXPECT_EQ(h->recent_kernel.load(), 1);
  EXPECT_EQ(h->utilization_switch.load(), 0) << "alone on its GPU";
  MonitorOptions off = Options();
  off.feedback = false;
  h->utilization_switch.store(1);
  Monitor quiet(off, &gpus_, &pods_);
  quiet.Update(system_clock::now());
  EXPECT_EQ(h->utilization_switch.load(), 1) << "--no-feedback leaves regions alone";
}

TEST_F(MonitorTest, DirectoriesOfGonePodsAreRemovedOnlyWhenSafe) {
  CreateRegion();
  region_->ReleaseSlot(slot_);
  MonitorOptions o = Options();
  o.resync_delay = std::chrono::seconds(60);
  Monitor m(o, &gpus_, &pods_);
  const std::string path = containers_ + "/" + kUid + "_main";
  auto later = system_clock::now() + std::chrono::seconds(120);
  EXPECT_EQ(m.Update(later).removed, 0) << "the pod is on the node";
  pods_.pods.clear();
  pods_.synced = false;
  EXPECT_EQ(m.Update(later).removed, 0) << "the pod list is not synced: nothing is known gone";
  pods_.synced = true;
  EXPECT_EQ(m.Update(system_clock::now()).removed, 0) << "younger than the resync delay";
  EXPECT_TRUE(fs::exists(path));
  UpdateResult removed = m.Update(later);
  EXPECT_EQ(removed.removed, 1);
  EXPECT_FALSE(fs::exists(path));
  bool said = false;
  for (const auto& [level, text] : removed.logs) {
    said |= level == LogLevel::kInfo && text.find("is no longer on this node") != std::string::npos;
  }
  EXPECT_TRUE(said) << "the removal is logged, with its reason";
  EXPECT_EQ(m.Snapshot().containers.size(), 0u);
}

TEST_F(MonitorTest, ADirectoryWithALiveProcessIsKept) {
  CreateRegion();
  region_->header()->slots[slot_].host_pid.store(getpid());  // as the monitor writes it
  pods_.pods.clear();
  MonitorOptions o = Options();
  o.resync_delay = std::chrono::seconds(0);
  Monitor m(o, &gpus_, &pods_);
  EXPECT_EQ(m.Update(system_clock::now() + std::chrono::hours(1)).removed, 0);
  EXPECT_TRUE(fs::exists(containers_ + "/" + kUid + "_main"));
}

// The update thread and metrics requests run at once (hami-monitor's shape); under TSan this
// shows the container table is guarded.
TEST_F(MonitorTest, ScrapesWhileUpdating) {
  CreateRegion();
  gpus_.procs[kGpu] = {{getpid(), 1 << 20}};
  Monitor m(Options(), &gpus_, &pods_);
  std::atomic<bool> stop{false};
  std::atomic<int> updates{0};
  std::thread updater([&] {
    while (!stop.load()) {
      m.Update(system_clock::now());
      ++updates;
    }
  });
  size_t pages = 0;
  while (pages < 200 || updates.load() < 20) {
    pages += RenderMonitorMetrics(m.Snapshot(), NodeOnly("n")).size() > 0 ? 1 : 0;
  }
  stop.store(true);
  updater.join();
  EXPECT_EQ(region_->header()->slots[slot_].host_pid.load(), getpid());
}

// A container started under HAMi-core (its 1.x region file) is monitored too: a node can switch
// to hami-monitor while such containers still run.
TEST_F(MonitorTest, HamiCoreRegionsAreReadAndFedBack) {
  const std::string path = containers_ + "/" + kUid + "_main/legacy.cache";
  int fd = open(path.c_str(), O_RDWR | O_CREAT, 0644);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(ftruncate(fd, static_cast<off_t>(kHamiCoreV1Size)), 0);
  auto* b = static_cast<unsigned char*>(
      mmap(nullptr, kHamiCoreV1Size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0));
  close(fd);
  ASSERT_NE(b, MAP_FAILED);
  auto put32 = [&](size_t off, int32_t v) { std::memcpy(b + off, &v, 4); };
  auto put64 = [&](size_t off, uint64_t v) { std::memcpy(b + off, &v, 8); };
  put32(0, kHamiCoreMagic);
  put32(4, 1);   // major
  put32(8, 0);   // minor
  put64(56, 1);  // devices
  std::memcpy(b + 64, kGpu, sizeof(kGpu));
  put64(1600, 4ull << 30);  // limit[0]
  put64(1728, 30);          // smLimit[0]
  const size_t proc = 1856;
  put32(proc, getpid());            // pid (as the container saw it; here the same namespace)
  put64(proc + 8, 10 << 20);        // used[0].context
  put64(proc + 8 + 8, 5 << 20);     // used[0].module
  put64(proc + 8 + 16, 100 << 20);  // used[0].buffer
  put64(proc + 8 + 32, 115 << 20);  // used[0].total
  put32(proc + 1928, 1);            // status
  put32(2008896, 1);                // procnum
  put32(2008900, 1);                // utilizationSwitch
  put32(2008904, 2);                // recentKernel
  put32(2008908, 1);                // priority
  put64(2008912, 1'700'000'000);    // lastKernelTime
  gpus_.procs[kGpu] = {{getpid(), 115 << 20}};
  Monitor m(Options(), &gpus_, &pods_);
  UpdateResult r = m.Update(system_clock::now());
  EXPECT_EQ(r.mapped_now, 1) << (r.problems.empty() ? "" : r.problems[0]);
  EXPECT_EQ(r.host_pids_written, 1);
  int32_t host = 0;
  std::memcpy(&host, b + proc + 4, 4);
  EXPECT_EQ(host, getpid()) << "hostpid written where HAMi-core's limiter polls it";
  int32_t recent = 0, sw = 0;
  std::memcpy(&recent, b + 2008904, 4);
  std::memcpy(&sw, b + 2008900, 4);
  EXPECT_EQ(recent, 1);
  EXPECT_EQ(sw, 0);
  MonitorSnapshot snap = m.Snapshot();
  ASSERT_EQ(snap.containers.size(), 1u);
  ASSERT_EQ(snap.containers[0].devices.size(), 1u);
  const ContainerDeviceUsage& d = snap.containers[0].devices[0];
  EXPECT_EQ(d.uuid, kGpu);
  EXPECT_EQ(d.used, 115ull << 20);
  EXPECT_EQ(d.context, 10ull << 20);
  EXPECT_EQ(d.module, 5ull << 20);
  EXPECT_EQ(d.buffer, 100ull << 20);
  EXPECT_EQ(d.limit, 4ull << 30);
  EXPECT_EQ(d.sm_limit, 30u);
  EXPECT_EQ(snap.containers[0].last_kernel_time, 1'700'000'000u);
  std::string page = RenderMonitorMetrics(snap, NodeOnly("n"));
  EXPECT_NE(page.find("hami_vgpu_memory_module_bytes{namespace=\"team-a\",pod=\"trainer\","
                      "container=\"main\",vdevice_index=\"0\",device_uuid=\"" +
                      std::string(kGpu) + "\",zone=\"vGPU\"} 5.24288e+06"),
            std::string::npos)
      << page;
  // The process leaves: HAMi-core shrinks its process count; the monitor's remembered slot index
  // is now past the end and must read as free, not beyond the table.
  put32(2008896, 0);
  r = m.Update(system_clock::now());
  EXPECT_EQ(r.host_pids_written, 0);
  snap = m.Snapshot();
  ASSERT_EQ(snap.containers.size(), 1u);
  EXPECT_EQ(snap.containers[0].processes, 0);
  std::string why;
  std::unique_ptr<RegionAccess> direct = OpenRegion(path, &why);
  ASSERT_NE(direct, nullptr) << why;
  EXPECT_EQ(direct->SlotCount(), 0);
  put32(2008896, 1);
  ASSERT_TRUE(direct->Refresh(&why)) << why;
  EXPECT_EQ(direct->Slot(0).pid, getpid());
  put32(2008896, 0);
  ASSERT_TRUE(direct->Refresh(&why)) << why;
  EXPECT_EQ(direct->Slot(0).pid, 0) << "past the count: free, not the stale table";
  // Another HAMi-core version is refused with its reason.
  put32(4, 2);
  munmap(b, kHamiCoreV1Size);
  Monitor fresh(Options(), &gpus_, &pods_);
  r = fresh.Update(system_clock::now());
  ASSERT_EQ(r.problems.size(), 1u);
  EXPECT_NE(r.problems[0].find("HAMi-core region of version 2"), std::string::npos)
      << r.problems[0];
}

// A container can write its region file: one it truncates, even between an update and a
// scrape, is never read past its end (through a mapping that would kill the monitor with
// SIGBUS) and is let go.
TEST_F(MonitorTest, ARegionFileThatShrinksIsLetGo) {
  CreateRegion();
  Monitor m(Options(), &gpus_, &pods_);
  ASSERT_EQ(m.Update(system_clock::now()).mapped_now, 1);
  vgpu::Region::Free(region_);
  region_ = nullptr;
  ASSERT_EQ(truncate((containers_ + "/" + kUid + "_main/abc.cache").c_str(), 4096), 0);
  // A scrape right after: with the region mapped this read would fault (SIGBUS); read through
  // the file it finds the region gone.
  MonitorSnapshot before = m.Snapshot();
  ASSERT_EQ(before.containers.size(), 1u);
  EXPECT_TRUE(before.containers[0].devices.empty());
  UpdateResult r = m.Update(system_clock::now());
  EXPECT_EQ(r.mapped_now, 0);
  ASSERT_EQ(r.problems.size(), 1u);
  EXPECT_NE(r.problems[0].find("4096 bytes"), std::string::npos) << r.problems[0];
  MonitorSnapshot snap = m.Snapshot();
  ASSERT_EQ(snap.containers.size(), 1u);
  EXPECT_TRUE(snap.containers[0].devices.empty());
}

TEST_F(MonitorTest, UnusableRegionFilesAreReportedNotFatal) {
  std::ofstream(containers_ + "/" + kUid + "_main/old.cache") << std::string(4096, 'x');
  fs::create_directories(containers_ + "/not-a-container-dir");
  Monitor m(Options(), &gpus_, &pods_);
  UpdateResult r = m.Update(system_clock::now());
  ASSERT_EQ(r.problems.size(), 1u);
  EXPECT_NE(r.problems[0].find("old.cache"), std::string::npos) << r.problems[0];
  EXPECT_TRUE(m.Update(system_clock::now()).problems.empty()) << "reported once";
  // Two region files in one directory: ambiguous.
  std::ofstream(containers_ + "/" + kUid + "_main/new.cache") << "y";
  r = m.Update(system_clock::now());
  ASSERT_EQ(r.problems.size(), 1u);
  EXPECT_NE(r.problems[0].find("2 region files"), std::string::npos) << r.problems[0];
}

}  // namespace
}  // namespace hami::monitor
