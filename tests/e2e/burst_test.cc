// Concurrency end to end: 1,000 pods submitted in a burst over 100 nodes through the whole
// simulated control plane (8 scheduling workers), with random deletions while they schedule and
// one hami-scheduler restart in the middle. Capacity is below demand, so the cluster is driven
// full. Checked: no device is ever over-allocated (the service's ledger, sampled throughout, and
// the pods' annotations at the end), and at the end the service's ledger equals a ledger rebuilt
// from the API server's objects.
#include <gtest/gtest.h>

#include <algorithm>
#include <condition_variable>
#include <cstdlib>
#include <functional>
#include <map>
#include <memory>
#include <random>
#include <set>
#include <thread>
#include <vector>

#include "common/clock.h"
#include "common/thread_annotations.h"
#include "device/config.h"
#include "device/pod_devices.h"
#include "device/vendor.h"
#include "extender/k8s_objects.h"
#include "k8s/api_error.h"
#include "k8s/object.h"
#include "k8s/rest_client.h"
#include "k8s/watch_stream.h"
#include "scheduler/ledger.h"
#include "scheduler/test_util.h"
#include "sim/cluster/sim_cluster.h"
#include "sim/world/waits.h"

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

// An object's resourceVersion as the number both API servers make it (0 when absent).
int64_t Revision(const k8s::Object& o) {
  return std::strtoll(k8s::ResourceVersion(o).c_str(), nullptr, 10);
}

// Follows one kind of object in "default": every object listed (as ADDED), then the list's
// revision (as a BOOKMARK), then every watch event from there, bookmarks included, go to `sink`
// until `stop` fires (OK) or a list or stream fails (its error). A stream the server ends is
// resumed where it stopped. No failure is recovered from (Recovery::kNone): a relist would not
// replay the deletions in between, and the view would keep pods that are gone.
Status FollowDefault(k8s::RestClient& client, const k8s::Resource& r,
                     const std::function<void(const k8s::WatchEvent&)>& sink,
                     const Cancellation& stop) {
  sim::FollowOptions options;
  options.cancel = &stop;
  Status s = sim::FollowResource(
      client, r, "default", options,
      [&](const k8s::Object& list) {
        for (const k8s::Object& item : list.at("items")) {
          sink({k8s::WatchEvent::Type::kAdded, std::make_shared<const k8s::Object>(item)});
        }
        Json revision = {{"metadata", {{"resourceVersion", k8s::ResourceVersion(list)}}}};
        sink({k8s::WatchEvent::Type::kBookmark,
              std::make_shared<const k8s::Object>(std::move(revision))});
        return false;
      },
      [&](const k8s::WatchEvent& ev) {
        sink(ev);
        return false;
      });
  return stop.cancelled() ? OkStatus() : s;
}

// Tells when the burst's scheduling has settled, from what the API server reports (a pods watch
// and an events watch on "default", each on its own thread) rather than from a quiet spell.
//
// Settled: no pod is terminating, and every pod without a node has been found unschedulable (the
// kube-scheduler's FailedScheduling event "0/<N> nodes are available", which parks the pod until
// the next cluster event) after both the last change that could alter the room on the nodes (a
// pod getting a node, a bound pod's deletion) and the pod's own last change. Those changes are
// followed by cluster events that make kube-scheduler retry every parked pod (a binding takes and
// then releases a node lock; a bound pod's deletion is one itself), so once placements stop each
// waiting pod is tried once more and the condition comes true; while it holds, no pod is left
// whose last verdict predates what could change it.
//
// The pods stream is the reference: the view is judged as of the last revision it has reported
// (an event, or a bookmark, which SimCluster has its API server send every 500 ms), and failures
// after that revision wait for it to catch up, so no failure is counted against a change that has
// happened but not yet been seen.
//
// Thread safety: the two following threads write under mu_; Wait runs on the test's thread.
class SchedulingSettles {
 public:
  explicit SchedulingSettles(k8s::RestClient& client)
      : pods_thread_([this, &client] {
          Finish(FollowDefault(
              client, k8s::kPods, [this](const k8s::WatchEvent& ev) { OnPod(ev); }, stop_));
        }),
        events_thread_([this, &client] {
          Finish(FollowDefault(
              client, k8s::kEvents, [this](const k8s::WatchEvent& ev) { OnEvent(ev); }, stop_));
        }) {}
  ~SchedulingSettles() {
    stop_.Cancel();
    pods_thread_.join();
    events_thread_.join();
  }
  SchedulingSettles(const SchedulingSettles&) = delete;
  SchedulingSettles& operator=(const SchedulingSettles&) = delete;

  // Blocks until settled: the number of pods bound then. Calls `on_bindings` (without the lock)
  // first and again whenever pods got nodes since its last call. DeadlineExceeded at `deadline`,
  // naming a pod that keeps scheduling from settling; the error of a stream that failed.
  Result<int> Wait(std::chrono::steady_clock::time_point deadline,
                   const std::function<void()>& on_bindings) {
    UniqueLock l(mu_);
    uint64_t seen_bindings = ~uint64_t{0};
    for (;;) {
      if (!failed_.ok()) return failed_;
      if (bindings_ != seen_bindings) {
        seen_bindings = bindings_;
        l.Unlock();
        on_bindings();
        l.Lock();
        continue;
      }
      int bound = 0;
      std::string why = Unsettled(&bound);
      if (why.empty()) return bound;
      if (std::chrono::steady_clock::now() >= deadline) {
        return DeadlineExceededError(why + " (" + std::to_string(bound) + " bound so far)");
      }
      cv_.wait_until(l.native(), deadline);
    }
  }

 private:
  struct PodView {
    std::string name;
    bool bound = false;
    bool terminating = false;
    int64_t revision = 0;  // of its last change
  };

  void OnPod(const k8s::WatchEvent& ev) {
    const k8s::Object& pod = *ev.object;
    const int64_t revision = Revision(pod);
    const bool bound = !k8s::GetString(pod, "/spec/nodeName").empty();
    {
      MutexLock l(mu_);
      pods_through_ = std::max(pods_through_, revision);
      if (ev.type == k8s::WatchEvent::Type::kDeleted) {
        if (bound) room_changed_at_ = std::max(room_changed_at_, revision);
        pods_.erase(k8s::Uid(pod));
      } else if (ev.type != k8s::WatchEvent::Type::kBookmark) {
        PodView& p = pods_[k8s::Uid(pod)];
        if (bound && !p.bound) {
          room_changed_at_ = std::max(room_changed_at_, revision);
          ++bindings_;
        }
        p = {k8s::Name(pod), bound,
             !k8s::GetString(pod, "/metadata/deletionTimestamp").empty(), revision};
      }
    }
    cv_.notify_all();
  }

  void OnEvent(const k8s::WatchEvent& ev) {
    const k8s::Object& e = *ev.object;
    if (ev.type == k8s::WatchEvent::Type::kBookmark ||
        ev.type == k8s::WatchEvent::Type::kDeleted ||
        k8s::GetString(e, "/reason") != "FailedScheduling" ||
        k8s::GetString(e, "/message").rfind("0/", 0) != 0 ||
        k8s::GetString(e, "/involvedObject/kind") != "Pod") {
      return;
    }
    const int64_t revision = Revision(e);
    {
      MutexLock l(mu_);
      std::vector<int64_t>& at = unschedulable_at_[k8s::GetString(e, "/involvedObject/uid")];
      at.insert(std::upper_bound(at.begin(), at.end(), revision), revision);
    }
    cv_.notify_all();
  }

  void Finish(const Status& s) {
    if (s.ok()) return;
    {
      MutexLock l(mu_);
      failed_ = s;
    }
    cv_.notify_all();
  }

  // "" when settled (then `*bound` pods have a node), else why not.
  std::string Unsettled(int* bound) const REQUIRES(mu_) {
    *bound = 0;
    for (const auto& [uid, pod] : pods_) {
      if (pod.bound) ++*bound;
    }
    for (const auto& [uid, pod] : pods_) {
      if (pod.terminating) return pod.name + " is terminating";
      if (pod.bound) continue;
      const int64_t since = std::max(room_changed_at_, pod.revision);
      int64_t last_verdict = 0;  // the latest unschedulable verdict the pods view can vouch for
      if (auto it = unschedulable_at_.find(uid); it != unschedulable_at_.end()) {
        auto after = std::upper_bound(it->second.begin(), it->second.end(), pods_through_);
        if (after != it->second.begin()) last_verdict = *std::prev(after);
      }
      if (last_verdict <= since) {
        return pod.name + " has not been found unschedulable since revision " +
               std::to_string(since) + " (pods seen up to revision " +
               std::to_string(pods_through_) + ")";
      }
    }
    return "";
  }

  Cancellation stop_;
  mutable Mutex mu_;
  std::condition_variable cv_;
  std::map<std::string, PodView> pods_ GUARDED_BY(mu_);  // by uid
  // By pod uid: revisions of its unschedulable verdicts, ascending.
  std::map<std::string, std::vector<int64_t>> unschedulable_at_ GUARDED_BY(mu_);
  int64_t pods_through_ GUARDED_BY(mu_) = 0;     // the pods stream is complete up to here
  int64_t room_changed_at_ GUARDED_BY(mu_) = 0;  // the last binding or bound pod's deletion
  uint64_t bindings_ GUARDED_BY(mu_) = 0;
  Status failed_ GUARDED_BY(mu_);
  // Last: they start in the constructor and use everything above.
  std::thread pods_thread_;
  std::thread events_thread_;
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

  // Followed from before the first pod, so that every binding and deletion is seen.
  SchedulingSettles settles(c.client());
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

  // Until every pod is placed or has been refused since anything changed (SchedulingSettles),
  // with the ledger checked again each time pods got nodes.
  Result<int> settled =
      settles.Wait(std::chrono::steady_clock::now() + std::chrono::seconds(120), check_ledger);
  EXPECT_TRUE(settled.ok()) << "scheduling did not settle: " << settled.status().ToString();
  check_ledger();
  int last = settled.value_or(0);
  if (!settled.ok()) {  // the checks below still run, against the pods bound by now
    Result<k8s::Object> now = c.client().List(k8s::kPods, "default");
    ASSERT_TRUE(now.ok()) << now.status().ToString();
    for (const Json& p : (*now)["items"]) last += !k8s::GetString(p, "/spec/nodeName").empty();
  }
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
      c.WaitForScheduler([&] { return c.scheduler().LedgerDump() == fresh.CanonicalDump(); },
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
