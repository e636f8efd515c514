// Concurrency end to end: 1,000 pods submitted in a burst over 100 nodes through the whole
// simulated control plane (8 scheduling workers), with random deletions while they schedule and
// one hami-scheduler restart in the middle. Capacity is below demand, so the cluster is driven
// full. Checked: no device is ever over-allocated (the service's ledger, sampled throughout, and
// the pods' annotations at the end), and at the end the service's ledger equals a ledger rebuilt
// from the API server's objects.
#include <gtest/gtest.h>

#include <map>
#include <random>
#include <set>
#include <thread>

#include "device/config.h"
#include "device/pod_devices.h"
#include "device/vendor.h"
#include "extender/k8s_objects.h"
#include "k8s/api_error.h"
#include "scheduler/ledger.h"
#include "scheduler/test_util.h"
#include "sim/cluster/sim_cluster.h"

namespace hami::e2e {
using sim::SimCluster;
using sim::SimClusterOptions;
using sim::SplitYamlDocuments;
using sim::YamlToJson;
namespace {

using scheduler::testing::Gpu;
using Json = nlohmann::json;

constexpr int kNodes = 100;
constexpr int kGpusPerNode = 2;
constexpr int kGpuMem = 16384;
constexpr int kPods = 1000;

Json MakePod(const std::string& name, int gpus, int mem, int cores) {
  Json pod;
  pod["apiVersion"] = "v1";
  pod["kind"] = "Pod";
  pod["metadata"]["name"] = name;
  Json limits;
  limits["nvidia.com/gpu"] = std::to_string(gpus);
  limits["nvidia.com/gpumem"] = std::to_string(mem);
  if (cores > 0) limits["nvidia.com/gpucores"] = std::to_string(cores);
  pod["spec"]["containers"] =
      Json::array({Json{{"name", "main"}, {"image", "x"}, {"resources", {{"limits", limits}}}}});
  return pod;
}

struct Use {
  int64_t slots = 0, mem = 0, cores = 0;
};

TEST(BurstE2E, ThousandPodsHundredNodesDeletionsAndRestart) {
  SimClusterOptions opts;
  opts.driver_workers = 8;
  SimCluster c(opts);
  std::map<std::string, std::string> gpu_node;
  for (int n = 0; n < kNodes; ++n) {
    std::string name = "node-" + std::to_string(n);
    std::vector<device::DeviceInfo> gpus;
    for (int g = 0; g < kGpusPerNode; ++g) {
      std::string id = "GPU-" + std::to_string(n) + "-" + std::to_string(g);
      gpus.push_back(Gpu(id, g, kGpuMem, "NVIDIA-Tesla T4", g % 2));
      gpu_node[id] = name;
    }
    c.AddNode(name, gpus);
  }

  std::mt19937 rng(20261122);
  const int mems[] = {1024, 2048, 4096, 8192};
  const int cores[] = {0, 10, 20, 30, 50};
  std::set<std::string> deleted;
  auto check_ledger = [&] {
    std::vector<scheduler::OverCommit> over = c.scheduler().OverCommitted();
    EXPECT_TRUE(over.empty()) << over.size() << " over-committed devices, first "
                              << (over.empty() ? "" : over[0].uuid);
    Status s = c.scheduler().CheckLedger();
    EXPECT_TRUE(s.ok()) << s.ToString();
  };
  for (int i = 0; i < kPods; ++i) {
    std::string name = "burst-" + std::to_string(i);
    int gpus = rng() % 10 == 0 ? 2 : 1;
    ASSERT_TRUE(c.CreatePod("default", MakePod(name, gpus, mems[rng() % 4], cores[rng() % 5])).ok())
        << name;
    if (i % 10 == 9) {  // delete one random earlier pod, bound or not
      std::string victim = "burst-" + std::to_string(rng() % (i + 1));
      if (deleted.insert(victim).second) {
        Status s = c.client().Delete(k8s::kPods, "default", victim);
        EXPECT_TRUE(s.ok() || k8s::IsNotFound(s)) << s.ToString();
      }
    }
    if (i % 100 == 0) check_ledger();
    if (i == kPods / 2) c.RestartScheduler();
  }

  // Run until the bound count stops moving (pending pods keep retrying and fail to fit).
  auto bound_count = [&] {
    Result<k8s::Object> list = c.client().List(k8s::kPods, "default");
    int n = 0;
    if (list.ok()) {
      for (const Json& p : (*list)["items"]) n += !k8s::GetString(p, "/spec/nodeName").empty();
    }
    return n;
  };
  int last = -1;
  int stable = 0;
  for (int round = 0; round < 600 && stable < 15; ++round) {
    int now = bound_count();
    stable = now == last ? stable + 1 : 0;
    last = now;
    check_ledger();
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  EXPECT_GE(stable, 15) << "scheduling did not settle";
  EXPECT_GT(last, kPods / 2) << "too few pods bound";

  // Annotations: no device holds more than it has.
  Result<k8s::Object> pods = c.client().List(k8s::kPods, "default");
  ASSERT_TRUE(pods.ok());
  std::map<std::string, Use> use;
  int with_devices = 0;
  for (const Json& p : (*pods)["items"]) {
    std::string a = k8s::GetString(p, "/metadata/annotations/hami.io~1vgpu-devices-allocated");
    if (a.empty()) continue;
    ++with_devices;
    Result<device::PodSingleDevice> d = device::DecodePodSingleDevice(a);
    ASSERT_TRUE(d.ok()) << a;
    for (const device::ContainerDevices& ctr : *d) {
      for (const device::ContainerDevice& dev : ctr) {
        Use& u = use[dev.uuid];
        u.slots += 1;
        u.mem += dev.mem_mib;
        u.cores += dev.cores;
      }
    }
    if (!k8s::GetString(p, "/spec/nodeName").empty()) {
      EXPECT_EQ(k8s::GetString(p, "/metadata/annotations/hami.io~1vgpu-node"),
                k8s::GetString(p, "/spec/nodeName"));
    }
  }
  EXPECT_GE(with_devices, last);
  for (const auto& [uuid, u] : use) {
    EXPECT_LE(u.mem, kGpuMem) << uuid;
    EXPECT_LE(u.cores, 100) << uuid;
    EXPECT_LE(u.slots, 10) << uuid;
  }

  // The ledger equals what the objects say.
  device::VendorRegistry vendors =
      device::VendorRegistry::FromConfig(device::DefaultDeviceConfig()).value();
  hami::RealClock clock;
  scheduler::Ledger fresh(vendors, clock);
  Result<k8s::Object> nodes = c.client().List(k8s::kNodes, "");
  ASSERT_TRUE(nodes.ok());
  for (const Json& n : (*nodes)["items"]) {
    ASSERT_TRUE(fresh.UpsertNode(extender::NodeObjectOf(n)).ok());
  }
  for (const Json& p : (*pods)["items"]) {
    ASSERT_TRUE(fresh.UpsertPod(extender::PodObjectOf(p)).ok());
  }
  EXPECT_TRUE(
      SimCluster::WaitFor([&] { return c.scheduler().LedgerDump() == fresh.CanonicalDump(); },
                          std::chrono::seconds(10)));
  if (c.scheduler().LedgerDump() != fresh.CanonicalDump()) {
    ADD_FAILURE() << "ledger differs from the objects:\n--- service\n"
                  << c.scheduler().LedgerDump().substr(0, 3000) << "\n--- objects\n"
                  << fresh.CanonicalDump().substr(0, 3000);
  }
  extender::ServiceStats st = c.scheduler().stats();
  std::printf(
      "burst: %d bound, %d with devices, filters %llu (fit %llu, no fit %llu), "
      "binds %llu (errors %llu), lock waits %llu, races %llu, stale events %llu\n",
      last, with_devices, (unsigned long long)st.filters,                       // NOLINT
      (unsigned long long)st.filter_fit, (unsigned long long)st.filter_no_fit,  // NOLINT
      (unsigned long long)st.binds, (unsigned long long)st.bind_errors,         // NOLINT
      (unsigned long long)st.lock_waits,                                        // NOLINT
      (unsigned long long)st.replaced_after_race,                               // NOLINT
      (unsigned long long)st.stale_pod_events);                                 // NOLINT
}

}  // namespace
}  // namespace hami::e2e
