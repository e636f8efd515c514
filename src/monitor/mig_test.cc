// The monitor's MIG metrics on fakes: the pods' realised MIG reservations (hami_mig_device_info)
// and the MIG devices NVML reports on each GPU (hami_mig_device_memory_*_bytes).
#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

#include "monitor/exporter.h"
#include "monitor/mig_reservations.h"
#include "monitor/monitor.h"
#include "monitor/nvml_stats.h"

namespace hami::monitor {
namespace {

using std::chrono::system_clock;

constexpr char kGpu0[] = "GPU-00000000-0000-0000-0000-000000000001";
constexpr char kGpu1[] = "GPU-00000000-0000-0000-0000-000000000002";
constexpr char kMigA[] = "MIG-aaaaaaaa-0000-4000-8000-000000000001";
constexpr char kMigB[] = "MIG-bbbbbbbb-0000-4000-8000-000000000002";

// One entry of hami.io/vgpu-mig-allocations as the scheduler writes it, with the device
// plugin's runtime identity when `mig` is not empty.
std::string Entry(int container, int device, const std::string& mig = "", int gi = 0,
                  int ci = 0) {
  std::string e = "{\"containerIndex\":" + std::to_string(container) +
                  ",\"deviceIndex\":" + std::to_string(device) + ",\"gpuUUID\":\"" + kGpu1 +
                  "\",\"profile\":\"1g.10gb\",\"placement\":{\"start\":" +
                  std::to_string(container + device) + ",\"size\":1}";
  if (!mig.empty()) {
    e += ",\"migUUID\":\"" + mig + "\",\"gpuInstanceID\":" + std::to_string(gi) +
         ",\"computeInstanceID\":" + std::to_string(ci);
  }
  return e + "}";
}

PodRef MigPod(const std::string& name, std::string annotation) {
  return PodRef{.ns = "team-a",
                .name = name,
                .containers = {"main", "sidecar"},
                .init_containers = {"setup"},
                .mig_allocations = std::move(annotation)};
}

class FakeGpus : public GpuStats {
 public:
  std::vector<HostGpu> gpus;
  Result<std::vector<HostGpu>> Gpus() override { return gpus; }
  Result<std::vector<GpuProcess>> Processes(const std::string&) override {
    return std::vector<GpuProcess>{};
  }
  Result<std::vector<ProcessSample>> Samples(const std::string&, uint64_t) override {
    return std::vector<ProcessSample>{};
  }
};

class FakeMigPods : public PodDirectory {
 public:
  std::map<std::string, PodRef> pods;  // by UID
  bool Synced() const override { return true; }
  std::optional<PodRef> Find(const std::string& uid) const override {
    auto it = pods.find(uid);
    if (it == pods.end()) return std::nullopt;
    return it->second;
  }
  std::map<std::string, PodRef> MigPods() const override {
    std::map<std::string, PodRef> out;
    for (const auto& [uid, pod] : pods) {
      if (!pod.mig_allocations.empty()) out.emplace(uid, pod);
    }
    return out;
  }
};

ExporterOptions Node(const std::string& node) {
  ExporterOptions o;
  o.node = node;
  return o;
}

void ExpectLine(const std::string& page, const std::string& line) {
  EXPECT_NE(page.find(line + "\n"), std::string::npos) << line << "\n--- page:\n" << page;
}

// --- Reservations from the annotation ----------------------------------------------------------

TEST(MigReservations, RealisedEntriesNameTheirContainerInitContainersFirst) {
  PodRef pod = MigPod("trainer", "[" + Entry(1, 0, kMigA, 7, 0) + "," + Entry(2, 1, kMigB, 3, 1) +
                                     "," + Entry(1, 1) + "]");
  Result<std::vector<MigReservation>> r = RealisedMigReservations(pod);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ(r->size(), 2u) << "the entry without a runtime identity is not realised yet";
  const MigReservation& a = (*r)[0];
  EXPECT_EQ(a.ns, "team-a");
  EXPECT_EQ(a.pod, "trainer");
  EXPECT_EQ(a.container, "main") << "index 0 is the init container";
  EXPECT_EQ(a.vdevice_index, 0);
  EXPECT_EQ(a.gpu_uuid, kGpu1);
  EXPECT_EQ(a.mig_uuid, kMigA);
  EXPECT_EQ(a.profile, "1g.10gb");
  EXPECT_EQ(a.gpu_instance_id, 7u);
  EXPECT_EQ(a.compute_instance_id, 0u);
  EXPECT_EQ((*r)[1].container, "sidecar");
  EXPECT_EQ((*r)[1].vdevice_index, 1);
  EXPECT_EQ((*r)[1].gpu_instance_id, 3u);
  EXPECT_EQ((*r)[1].compute_instance_id, 1u);

  pod.mig_allocations = "[" + Entry(0, 0, kMigA, 7, 0) + "]";
  r = RealisedMigReservations(pod);
  ASSERT_TRUE(r.ok());
  ASSERT_EQ(r->size(), 1u);
  EXPECT_EQ((*r)[0].container, "setup") << "an init container may hold a MIG device too";
}

TEST(MigReservations, AnAnnotationThatDoesNotFitThePodIsAnError) {
  for (const std::string& text : {
           std::string("not json"),
           std::string("{\"containerIndex\":0}"),                   // not a list
           "[" + Entry(0, 0, kMigA) + "," + Entry(0, 0, kMigB) + "]",  // duplicate
           "[" + Entry(3, 0, kMigA) + "]",                          // 3 containers: 0..2
           "[" + Entry(3, 0) + "]",                                 // not realised, still wrong
       }) {
    Result<std::vector<MigReservation>> r = RealisedMigReservations(MigPod("p", text));
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument) << text;
  }
  Result<std::vector<MigReservation>> none = RealisedMigReservations(MigPod("p", "[]"));
  ASSERT_TRUE(none.ok());
  EXPECT_TRUE(none->empty());
}

// --- The monitor and its page ------------------------------------------------------------------

TEST(MigMetrics, EachRealisedReservationIsOneInfoSeries) {
  FakeMigPods pods;
  pods.pods["uid-1"] = MigPod("trainer", "[" + Entry(1, 0, kMigA, 7, 0) + "," + Entry(2, 0) + "]");
  pods.pods["uid-2"] = PodRef{.ns = "team-b", .name = "plain", .containers = {"main"}};
  Monitor m(MonitorOptions{.containers_dir = "/nonexistent/hami-monitor-test"}, nullptr, &pods);
  m.Update(system_clock::now());
  MonitorSnapshot snap = m.Snapshot();
  ASSERT_EQ(snap.mig_reservations.size(), 1u);
  std::string page = RenderMonitorMetrics(snap, Node("node-a"));
  ExpectLine(page,
             "hami_mig_device_info{namespace=\"team-a\",pod=\"trainer\",container=\"main\","
             "vdevice_index=\"0\",device_uuid=\"" +
                 std::string(kGpu1) + "\",mig_uuid=\"" + kMigA +
                 "\",profile=\"1g.10gb\",gpu_instance_id=\"7\",compute_instance_id=\"0\","
                 "zone=\"vGPU\"} 1");
  EXPECT_NE(page.find("# HELP hami_mig_device_info "), std::string::npos);
  EXPECT_NE(page.find("# TYPE hami_mig_device_info gauge\n"), std::string::npos);

  // The pod leaves the node: its series goes with the next update.
  pods.pods.erase("uid-1");
  m.Update(system_clock::now());
  page = RenderMonitorMetrics(m.Snapshot(), Node("node-a"));
  EXPECT_EQ(page.find("hami_mig_device_info"), std::string::npos) << page;
}

bool Logged(const UpdateResult& r, const std::string& what) {
  for (const auto& [level, text] : r.logs) {
    if (level == LogLevel::kVerbose && text.find(what) != std::string::npos) return true;
  }
  return false;
}

TEST(MigMetrics, APodWithAnUnusableAnnotationIsSkippedAndLoggedOnce) {
  FakeMigPods pods;
  pods.pods["uid-bad"] = MigPod("broken", "[{\"containerIndex\":");
  pods.pods["uid-good"] = MigPod("trainer", "[" + Entry(1, 0, kMigA, 7, 0) + "]");
  Monitor m(MonitorOptions{.containers_dir = "/nonexistent/hami-monitor-test"}, nullptr, &pods);
  UpdateResult first = m.Update(system_clock::now());
  EXPECT_TRUE(Logged(first, "pod team-a/broken: hami.io/vgpu-mig-allocations is unusable"));
  EXPECT_TRUE(first.problems.empty()) << "not a problem of the node";
  MonitorSnapshot snap = m.Snapshot();
  ASSERT_EQ(snap.mig_reservations.size(), 1u) << "the other pods are still exported";
  EXPECT_EQ(snap.mig_reservations[0].pod, "trainer");
  EXPECT_FALSE(Logged(m.Update(system_clock::now()), "broken")) << "logged once";
  // Another unusable text is news; so is the same text once the pod came back.
  pods.pods["uid-bad"].mig_allocations = "[" + Entry(9, 0, kMigB, 3, 0) + "]";
  EXPECT_TRUE(Logged(m.Update(system_clock::now()), "past the pod's 3 containers"));
  pods.pods.erase("uid-bad");
  EXPECT_FALSE(Logged(m.Update(system_clock::now()), "broken"));
  pods.pods["uid-bad"] = MigPod("broken", "[" + Entry(9, 0, kMigB, 3, 0) + "]");
  EXPECT_TRUE(Logged(m.Update(system_clock::now()), "broken"));
}

TEST(MigMetrics, MigDevicesOfEachGpuWithTheirMemory) {
  FakeGpus gpus;
  gpus.gpus = {{.index = 0, .uuid = kGpu0, .name = "NVIDIA A100-SXM4-80GB"},
               {.index = 1,
                .uuid = kGpu1,
                .name = "NVIDIA A100-SXM4-80GB",
                .migs = {{.uuid = kMigA,
                          .profile = "1g.10gb",
                          .gpu_instance_id = 7,
                          .compute_instance_id = 0,
                          .memory_used = 300ull << 20,
                          .memory_total = 9728ull << 20},
                         {.uuid = kMigB,
                          .profile = "3g.40gb",
                          .gpu_instance_id = 2,
                          .compute_instance_id = 1,
                          .memory_used = 0,
                          .memory_total = 40192ull << 20}}}};
  FakeMigPods pods;
  Monitor m(MonitorOptions{.containers_dir = "/nonexistent/hami-monitor-test"}, &gpus, &pods);
  m.Update(system_clock::now());
  std::string page = RenderMonitorMetrics(m.Snapshot(), Node("node-a"));
  const std::string a = "{node=\"node-a\",device_index=\"1\",device_uuid=\"" + std::string(kGpu1) +
                        "\",mig_uuid=\"" + kMigA +
                        "\",profile=\"1g.10gb\",gpu_instance_id=\"7\",compute_instance_id=\"0\","
                        "zone=\"vGPU\"} ";
  const std::string b = "{node=\"node-a\",device_index=\"1\",device_uuid=\"" + std::string(kGpu1) +
                        "\",mig_uuid=\"" + kMigB +
                        "\",profile=\"3g.40gb\",gpu_instance_id=\"2\",compute_instance_id=\"1\","
                        "zone=\"vGPU\"} ";
  ExpectLine(page, "hami_mig_device_memory_used_bytes" + a + "3.145728e+08");
  ExpectLine(page, "hami_mig_device_memory_total_bytes" + a + "1.0200547328e+10");
  ExpectLine(page, "hami_mig_device_memory_used_bytes" + b + "0");
  ExpectLine(page, "hami_mig_device_memory_total_bytes" + b + "4.2144366592e+10");
  EXPECT_EQ(page.find("hami_mig_device_memory_used_bytes{node=\"node-a\",device_index=\"0\""),
            std::string::npos)
      << "GPU 0 has no MIG devices";
  EXPECT_NE(page.find("# HELP hami_mig_device_memory_total_bytes "), std::string::npos);

  // Without MIG anywhere the page has no MIG family at all.
  gpus.gpus.resize(1);
  m.Update(system_clock::now());
  page = RenderMonitorMetrics(m.Snapshot(), Node("node-a"));
  EXPECT_EQ(page.find("hami_mig"), std::string::npos) << page;
  EXPECT_NE(page.find("hami_host_gpu_memory_used_bytes{"), std::string::npos);
}

TEST(MigMetrics, ProfileFromAMigDevicesName) {
  EXPECT_EQ(ProfileFromMigName("NVIDIA A100-SXM4-40GB MIG 1g.5gb"), "1g.5gb");
  EXPECT_EQ(ProfileFromMigName("NVIDIA A100-SXM4-80GB MIG 1g.10gb+me"), "1g.10gb+me");
  EXPECT_EQ(ProfileFromMigName("NVIDIA H100 80GB HBM3 MIG 1c.3g.40gb"), "3g.40gb")
      << "a compute instance smaller than its GPU instance: the GI's profile";
  EXPECT_EQ(ProfileFromMigName("NVIDIA A100-SXM4-80GB"), "");
}

}  // namespace
}  // namespace hami::monitor
