// Property tests of the scheduling core: random clusters and random pod streams (seeded, fully
// deterministic). After every step:
//   - the ledger is internally consistent (usage == sum of charges, indexes agree);
//   - no device exceeds its slots, memory or cores (every pod was placed by the engine);
//   - every device the engine chose passed the filters the pod asked for;
//   - the incremental ledger equals one rebuilt from scratch from the same objects;
//   - the engine's remembered verdicts (verdict cache) agree with a fresh engine's, node by node.
#include <gtest/gtest.h>

#include <cstdint>
#include <map>
#include <set>

#include "scheduler/placement.h"
#include "scheduler/test_util.h"

namespace hami::scheduler {
namespace {

using testing::AnnotatedPod;
using testing::Gpu;
using testing::Limits;
using testing::SchedulerWorld;

// splitmix64: the same sequence on every platform (std distributions are not portable).
class Rng {
 public:
  explicit Rng(uint64_t seed) : s_(seed) {}
  uint64_t Next() {
    uint64_t z = (s_ += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  int Below(int n) { return static_cast<int>(Next() % static_cast<uint64_t>(n)); }
  bool Chance(int percent) { return Below(100) < percent; }

 private:
  uint64_t s_;
};

const char* kTypes[] = {"NVIDIA-Tesla T4", "NVIDIA-Tesla V100-PCIE-32GB", "NVIDIA A100-PCIE-40GB",
                        "NVIDIA A100-SXM4-80GB"};
const int32_t kMems[] = {15360, 32768, 40960, 81920};

class PropertyRun {
 public:
  explicit PropertyRun(uint64_t seed)
      : rng_(seed),
        probe_(
            w_.Pod("probe", {Limits({{"nvidia.com/gpu", "1"}, {"nvidia.com/gpumem", "1024"}})})) {}

  void Run(int steps) {
    int nodes = 3 + rng_.Below(6);
    for (int n = 0; n < nodes; ++n) RegisterNode(n);
    for (int step = 0; step < steps; ++step) {
      Step(step);
      CheckInvariants(step);
      if (HasFailure()) return;
    }
  }

  uint64_t fingerprint() const { return w_.ledger().Fingerprint(); }
  int placed() const { return placed_; }
  int cache_checks() const { return cache_checks_; }

 private:
  static bool HasFailure() { return ::testing::Test::HasFailure(); }

  // First call: a new node with random devices. Later calls: the same devices re-registered
  // (health, cordon and policies may change; capacities stay, so no pod is over-committed).
  void RegisterNode(int n) {
    std::string name = "node-" + std::to_string(n);
    std::vector<device::DeviceInfo>& list = devices_[name];
    if (list.empty()) {
      int gpus = 1 + rng_.Below(8);
      int type = rng_.Below(4);
      for (int g = 0; g < gpus; ++g) {
        list.push_back(Gpu(name + "-gpu" + std::to_string(g), static_cast<uint32_t>(g), kMems[type],
                           kTypes[type], g * 2 / gpus, 2 + rng_.Below(9)));
      }
    }
    int gpus = static_cast<int>(list.size());
    for (device::DeviceInfo& d : list) d.health = !rng_.Chance(5);
    device::Annotations extra;
    if (rng_.Chance(15)) extra["hami.io/device-cordon"] = name + "-gpu0";
    if (rng_.Chance(15))
      extra["hami.io/gpu-scheduler-policy"] = rng_.Chance(50) ? "binpack" : "spread";
    if (rng_.Chance(10)) extra["hami.io/node-scheduler-policy"] = "spread";
    if (gpus >= 2 && rng_.Chance(30)) {
      extra["hami.io/node-nvidia-score"] =
          R"([{"uuid":")" + name + R"(-gpu0","score":{")" + name + R"(-gpu1":600}}])";
    }
    ASSERT_TRUE(w_.AddNode(name, list, extra).ok());
  }

  PodSpec RandomPod(int id) {
    std::vector<device::ContainerResources> app, init;
    int containers = 1 + rng_.Below(3);
    for (int c = 0; c < containers; ++c) app.push_back(RandomContainer());
    if (rng_.Chance(15)) init.push_back(RandomContainer());
    device::Annotations a;
    const char* policies[] = {"binpack", "spread",         "best-fit",   "idle-first",
                              "mutex",   "topology-aware", "numa-first", "numa,binpack"};
    if (rng_.Chance(40)) a["hami.io/gpu-scheduler-policy"] = policies[rng_.Below(8)];
    if (rng_.Chance(20))
      a["hami.io/node-scheduler-policy"] = rng_.Chance(50) ? "spread" : "binpack";
    if (rng_.Chance(10)) a["nvidia.com/numa-bind"] = "true";
    if (rng_.Chance(10)) a["nvidia.com/use-gputype"] = rng_.Chance(50) ? "a100" : "T4,V100";
    if (rng_.Chance(5)) a["nvidia.com/nouse-gputype"] = "SXM4";
    if (rng_.Chance(10)) a["hami.io/device-scoring-weights"] = "slot=0,core=2,memory=1";
    return w_.Pod("p" + std::to_string(id), app, a, init);
  }

  device::ContainerResources RandomContainer() {
    testing::Quantities q;
    if (rng_.Chance(15)) return Limits({{"cpu", "1"}});
    q["nvidia.com/gpu"] = std::to_string(1 + (rng_.Chance(25) ? rng_.Below(3) : 0));
    int kind = rng_.Below(4);
    if (kind == 0) q["nvidia.com/gpumem"] = std::to_string(512 * (1 + rng_.Below(24)));
    if (kind == 1) q["nvidia.com/gpumem-percentage"] = std::to_string(5 + rng_.Below(60));
    if (rng_.Chance(70))
      q["nvidia.com/gpucores"] = std::to_string(rng_.Chance(10) ? 100 : rng_.Below(60));
    return Limits(q);
  }

  void Step(int step) {
    int op = rng_.Below(100);
    if (op < 55) {
      PodSpec pod = RandomPod(next_pod_++);
      std::vector<std::string_view> names = w_.NodeNames();
      CheckCachedVerdicts(pod, names);
      Result<Decision> d = PlaceAndReserve(w_.ledger(), w_.engine(), pod, names);
      ASSERT_TRUE(d.ok()) << d.status().ToString();
      if (!d->fit()) return;
      ++placed_;
      CheckChoice(pod, *d);
      int64_t now = w_.clock().NowUnixSeconds();
      int fate = rng_.Below(10);
      if (fate < 6) {  // annotated and bound
        PodObject o = AnnotatedPod(w_.vendors(), pod, *d, now, true);
        if (!o.annotations.empty() && rng_.Chance(10)) o.init_containers_done = true;
        ASSERT_TRUE(w_.ledger().UpsertPod(o).ok());
        w_.pod_objects()[o.uid] = o;
      } else if (fate < 9) {  // annotated, bind still pending
        PodObject o = AnnotatedPod(w_.vendors(), pod, *d, now, false);
        ASSERT_TRUE(w_.ledger().UpsertPod(o).ok());
        w_.pod_objects()[o.uid] = o;
      } else {  // the annotation patch was lost: only the in-memory reservation exists
        Reservation r = d->ToReservation(pod);
        r.since = now;
        memory_only_[pod.uid] = r;
      }
    } else if (op < 70) {
      DeleteRandomPod(false);
    } else if (op < 77) {
      DeleteRandomPod(true);
    } else if (op < 87) {
      w_.clock().Advance(std::chrono::seconds(30 + rng_.Below(120)));
      w_.ledger().ExpireReservations();
      for (auto it = memory_only_.begin(); it != memory_only_.end();) {
        it = w_.ledger().FindPod(it->first) == nullptr ? memory_only_.erase(it) : std::next(it);
      }
    } else if (op < 95) {
      // Re-registration with the same capacities (health, cordon, policies may change).
      int n = rng_.Below(static_cast<int>(w_.node_objects().size()));
      RegisterNode(n);
    } else {
      // A pending pod whose reservation still holds gets bound. (One that expired is not
      // bound: binding after the TTL would over-commit, which is why the TTL must exceed the
      // bind latency by far.)
      for (auto& [uid, o] : w_.pod_objects()) {
        if (o.node_name.empty() && w_.ledger().FindPod(uid) != nullptr) {
          o.node_name = o.annotations.at("hami.io/vgpu-node");
          ASSERT_TRUE(w_.ledger().UpsertPod(o).ok());
          break;
        }
      }
    }
    (void)step;
  }

  void DeleteRandomPod(bool terminate) {
    auto& pods = w_.pod_objects();
    if (pods.empty()) return;
    auto it = pods.begin();
    std::advance(it, rng_.Below(static_cast<int>(pods.size())));
    if (terminate) {
      it->second.phase = PodPhase::kSucceeded;
      ASSERT_TRUE(w_.ledger().UpsertPod(it->second).ok());
      pods.erase(it);
    } else {
      w_.DeletePod(it->first);
    }
  }

  // The long-lived engine (whose cache has seen every earlier step) decides exactly as a new
  // one would; the second ask of the cached engine is answered from its cache.
  void CheckCachedVerdicts(const PodSpec& pod, std::span<const std::string_view> names) {
    PlacementEngine fresh(w_.engine().options());
    Result<Decision> want = fresh.Place(w_.ledger(), pod, names);
    for (int round = 0; round < 2; ++round) {
      Result<Decision> got = w_.engine().Place(w_.ledger(), pod, names);
      ASSERT_EQ(want.ok(), got.ok());
      if (!want.ok()) return;
      ASSERT_EQ(got->node, want->node);
      ASSERT_EQ(got->verdicts.size(), want->verdicts.size());
      for (size_t i = 0; i < want->verdicts.size(); ++i) {
        const NodeVerdict& a = want->verdicts[i];
        const NodeVerdict& b = got->verdicts[i];
        ASSERT_EQ(a.fit, b.fit) << a.node;
        ASSERT_EQ(a.score, b.score) << a.node;
        ASSERT_EQ(a.failure.ToString(), b.failure.ToString()) << a.node;
      }
    }
    ++cache_checks_;
  }

  // Every chosen device is on the chosen node, healthy, not cordoned and of an allowed type.
  void CheckChoice(const PodSpec& pod, const Decision& d) {
    const Ledger& l = w_.ledger();
    const LedgerNode& node = l.nodes()[l.FindNode(d.node)];
    ASSERT_EQ(d.devices.at("NVIDIA").size(), pod.requests.containers.size());
    for (size_t c = 0; c < pod.requests.containers.size(); ++c) {
      const device::ContainerDevices& got = d.devices.at("NVIDIA")[c];
      int want = pod.requests.containers[c].empty() ? 0 : pod.requests.containers[c][0].count;
      ASSERT_EQ(static_cast<int>(got.size()), want);
      std::set<std::string> numas;
      for (const device::ContainerDevice& cd : got) {
        const LedgerDevice* dev = nullptr;
        for (const LedgerDevice& x : node.devices) {
          if (l.strings().uuids.Get(x.uuid) == cd.uuid) dev = &x;
        }
        ASSERT_NE(dev, nullptr) << cd.uuid;
        EXPECT_TRUE(dev->Healthy());
        EXPECT_FALSE(dev->cordoned);
        numas.insert(std::to_string(dev->numa));
        auto use = pod.annotations.find("nvidia.com/use-gputype");
        if (use != pod.annotations.end() && use->second == "a100") {
          EXPECT_NE(l.strings().types.Get(dev->type).find("A100"), std::string::npos);
        }
      }
      if (pod.annotations.count("nvidia.com/numa-bind")) {
        EXPECT_LE(numas.size(), 1u);
      }
    }
  }

  void CheckInvariants(int step) {
    // A fixed-shape probe after every step: its remembered verdicts see every kind of change.
    std::vector<std::string_view> names = w_.NodeNames();
    CheckCachedVerdicts(probe_, names);
    if (HasFailure()) return;
    const Ledger& l = w_.ledger();
    Status s = l.CheckConsistency();
    ASSERT_TRUE(s.ok()) << "step " << step << ": " << s.ToString();
    std::vector<OverCommit> oc = l.OverCommitted();
    ASSERT_TRUE(oc.empty()) << "step " << step << ": " << oc[0].uuid << " over-committed: slots "
                            << oc[0].used_slots << "/" << oc[0].count << " mem " << oc[0].used_mem
                            << "/" << oc[0].devmem << " cores " << oc[0].used_cores << "/"
                            << oc[0].devcore;
    std::unique_ptr<Ledger> rebuilt = w_.Rebuild();
    for (const auto& [uid, r] : memory_only_) ASSERT_TRUE(rebuilt->Reserve(r).ok());
    if (rebuilt->Fingerprint() != l.Fingerprint()) {
      ASSERT_EQ(rebuilt->CanonicalDump(), l.CanonicalDump()) << "step " << step;
    }
  }

  Rng rng_;
  SchedulerWorld w_;
  PodSpec probe_;
  std::map<std::string, Reservation> memory_only_;
  std::map<std::string, std::vector<device::DeviceInfo>> devices_;
  int next_pod_ = 0;
  int placed_ = 0;
  int cache_checks_ = 0;
};

TEST(SchedulerProperties, RandomClustersAndPodStreams) {
  for (uint64_t seed : {1ull, 2ull, 3ull, 4ull, 5ull, 42ull, 2024ull, 77777ull}) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    PropertyRun run(seed);
    run.Run(400);
    if (::testing::Test::HasFailure()) return;
    EXPECT_GT(run.placed(), 20);
    EXPECT_GT(run.cache_checks(), 400);
  }
}

TEST(SchedulerProperties, Deterministic) {
  PropertyRun a(99), b(99);
  a.Run(120);
  b.Run(120);
  EXPECT_EQ(a.fingerprint(), b.fingerprint());
}

}  // namespace
}  // namespace hami::scheduler
