// Upstream HAMi's dynamic-MIG end-to-end scenarios (its hack/hami-mig-e2e.sh) replayed on the
// simulated world (src/sim/world): one node, kNode, of A100-SXM4-80GBs in operating mode mig,
// the real scheduler binaries, and hami-sim-kubelet and hami-device-plugin on the simulated
// driver. Under the chart's allowlist its GPUs offer (src/sim/gpu/mig_profiles.cc; placements in
// memory slices of eight) 1g.10gb: 9728 MiB at slices 0..6; 2g.20gb: 19968 MiB at 0, 2, 4;
// 3g.40gb: 40192 MiB at 0, 4; 7g.80gb: 80384 MiB at 0. The scheduler gives a request the
// smallest profile that holds it, filling 1g and 3g from the top and the others from slice 0, so
// the placements below follow from the requests whatever order the pods are taken in. Each test
// starts its own world.
//
// kube-scheduler tries a pod it found unschedulable again only at a cluster event, and the event
// that frees room (a pod gone or finished) may reach it before hami-scheduler has seen the change
// (docs/deploy.md, known limitations); the pod then waits for the next event. Waits for a pod that
// fits only after such a change therefore nudge it with a label change now and then.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/types.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <iostream>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "common/file_util.h"
#include "device/mig_allocation.h"
#include "device/node_registration.h"
#include "k8s/api_error.h"
#include "k8s/typed.h"
#include "sim/world/waits.h"
#include "sim/world/world.h"
#include "tests/e2e/mig_e2e_util.h"
#include "tests/event_wait.h"

namespace hami::e2e {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;
using std::chrono::steady_clock;

constexpr const char* kMigConfig = R"({"nodeconfig":[{"name":"node-m","operatingmode":"mig"}]})";
constexpr const char* kHamiCoreConfig =
    R"({"nodeconfig":[{"name":"node-m","operatingmode":"hami-core"}]})";

// Requests (nvidia.com/gpumem, MiB) and the memory of the profile each gets.
constexpr int kSmall = 9000;    // 1g.10gb
constexpr int kMedium = 19000;  // 2g.20gb
constexpr int kLarge = 30000;   // 3g.40gb
constexpr uint64_t k1gMiB = 9728;
constexpr uint64_t k2gMiB = 19968;
constexpr uint64_t k3gMiB = 40192;
constexpr uint64_t k7gMiB = 80384;

constexpr milliseconds kNudgeEvery = seconds(5);

WorldOptions DynamicMigNode(int gpus) {
  WorldOptions o = MigNode(gpus);
  o.node_config_json = kMigConfig;
  return o;
}

std::string Gpumem(int mib) {
  return "        nvidia.com/gpu: 1\n        nvidia.com/gpumem: " + std::to_string(mib) + "\n";
}

// Runs `vgpu_probe info` (what the container's CUDA sees), then holds a CUDA context on the
// device, and so keeps its MIG device in use, until killed; logs "ready" once it holds it. With
// `ignore_term` SIGTERM is ignored (an ignored signal stays ignored across exec), so only SIGKILL
// stops it.
std::string Hold(bool ignore_term = false) {
  const std::string probe = HAMI_BUILD_DIR "/bin/vgpu_probe";
  return "[\"sh\", \"-c\", \"" + std::string(ignore_term ? "trap '' TERM; " : "") + probe +
         " info && exec " + probe + " crash-hold --bytes 1048576\"]";
}

bool RunningOrDone(const k8s::Object& p) { return Running(p) || Terminal(p); }

bool Bound(const k8s::Object& p) { return !k8s::GetString(p, "/spec/nodeName").empty(); }

// A label change on pod `name` while it has no node: an update of the pod, which kube-scheduler
// takes as a reason to try it again. A bound pod is left alone (the plugin's own update of it
// must not meet a conflict).
void Nudge(World& w, const std::string& name) {
  Result<k8s::Object> p = k8s::GetPod(w.client(), "default", name);
  if (!p.ok() || Bound(*p)) return;
  const std::string stamp = std::to_string(steady_clock::now().time_since_epoch().count());
  (void)w.client().Patch(k8s::kPods, "default", name, k8s::PatchType::kMerge,
                         R"({"metadata":{"labels":{"hami-e2e-nudge":")" + stamp + R"("}}})");
}

// World::WaitForPod, nudging the pod every kNudgeEvery while `pred` does not hold yet.
Result<k8s::Object> WaitForPodNudged(World& w, const std::string& name,
                                     const std::function<bool(const k8s::Object&)>& pred,
                                     milliseconds timeout = seconds(60)) {
  const auto end = steady_clock::now() + timeout;
  for (;;) {
    const auto left = std::chrono::duration_cast<milliseconds>(end - steady_clock::now());
    Result<k8s::Object> p =
        w.WaitForPod("default", name, pred, std::clamp(left, milliseconds(0), kNudgeEvery));
    if (p.ok() || p.status().code() != StatusCode::kDeadlineExceeded || left <= kNudgeEvery) {
      return p;
    }
    Nudge(w, name);
  }
}

// Waits until `done` (which reads the pods through the API) holds, judged again on every change
// of a pod in the namespace; pods of `nudge` still unbound are nudged every kNudgeEvery.
bool WatchPodsUntil(World& w, const std::function<bool()>& done,
                    const std::vector<std::string>& nudge, milliseconds timeout) {
  const auto end = steady_clock::now() + timeout;
  for (;;) {
    const auto left = std::chrono::duration_cast<milliseconds>(end - steady_clock::now());
    if (eventwait::WatchUntil(w.client(), k8s::kPods, "default", done,
                              std::clamp(left, milliseconds(0), kNudgeEvery))) {
      return true;
    }
    if (left <= kNudgeEvery) return false;
    for (const std::string& n : nudge) Nudge(w, n);
  }
}

// The MIG device UUIDs a `hami-simctl mig` listing names (one per compute instance).
std::set<std::string> MigUuids(const std::string& listing) {
  std::set<std::string> out;
  std::istringstream in(listing);
  std::string token;
  while (in >> token) {
    if (token.rfind("MIG-", 0) == 0) out.insert(token);
  }
  return out;
}

// The line of a `hami-simctl mig` listing that names `mig_uuid` ("" when none does).
std::string LineNaming(const std::string& listing, const std::string& mig_uuid) {
  std::istringstream in(listing);
  std::string line;
  while (std::getline(in, line)) {
    if (line.find(mig_uuid) != std::string::npos) return line;
  }
  return "";
}

// Waits (up to 30 s) until the node's MIG devices are exactly `want`: the set `hami-simctl mig`
// lists then. A poll: the driver's state has no event.
std::set<std::string> WaitForMigDevices(World& w, const std::set<std::string>& want) {
  const auto end = steady_clock::now() + seconds(30);
  std::set<std::string> have;
  for (;;) {
    Result<std::string> out = w.SimCtl(kNode, {"mig"});
    if (out.ok()) have = MigUuids(*out);
    if (have == want || steady_clock::now() >= end) return have;
    std::this_thread::sleep_for(milliseconds(200));  // polls the driver's state
  }
}

// The MIG UUID the plugin recorded for the pod's first container ("" when none).
std::string MigUuidOf(const k8s::Object& pod) {
  device::MigAllocation m = Realised(pod);
  return m.runtime ? m.runtime->mig_uuid : "";
}

// The PID of the pod's first container ("hami-sim://<pid>" in its status), or -1.
pid_t ContainerPid(const k8s::Object& pod) {
  auto status = pod.find("status");
  if (status == pod.end() || !status->is_object()) return -1;
  auto list = status->find("containerStatuses");
  if (list == status->end() || !list->is_array() || list->empty()) return -1;
  const Json& first = list->front();
  const std::string id = first.is_object() ? first.value("containerID", "") : "";
  const std::string prefix = "hami-sim://";
  if (id.rfind(prefix, 0) != 0) return -1;
  return static_cast<pid_t>(std::atol(id.c_str() + prefix.size()));
}

// The operating mode of every GPU the node registers ("" when none is registered, "mixed" when
// they differ).
std::string RegisteredMode(const k8s::Object& node) {
  Result<std::vector<device::DeviceInfo>> devs =
      device::DecodeNodeDevices(Annotation(node, "hami.io/node-nvidia-register"));
  if (!devs.ok() || devs->empty()) return "";
  std::set<std::string> modes;
  for (const device::DeviceInfo& d : *devs) modes.insert(d.mode.empty() ? "hami-core" : d.mode);
  return modes.size() == 1 ? *modes.begin() : "mixed";
}

// The pods in the namespace as the API server lists them now (empty when it cannot).
std::vector<k8s::Object> ListedPods(World& w) {
  Result<k8s::Object> list = k8s::ListPods(w.client(), "default");
  std::vector<k8s::Object> out;
  if (!list.ok()) return out;
  auto items = list->find("items");
  if (items == list->end() || !items->is_array()) return out;
  for (const Json& p : *items) out.push_back(p);
  return out;
}

std::string Tail(const std::string& text, size_t n = 4000) {
  return text.size() > n ? text.substr(text.size() - n) : text;
}

// One world per test. When a test fails, the ends of the node's and the scheduler's logs and the
// driver's MIG state are printed before the world goes.
class NodeE2EMigReplay : public ::testing::Test {
 protected:
  void TearDown() override {
    if (HasFailure() && w_) {
      const std::string node = kNode;
      for (const std::string& p :
           {node + "-kubelet", node + "-plugin", std::string("hami-scheduler")}) {
        Result<std::string> log = ReadFileToString(w_->LogFile(p));
        std::cerr << "---- " << p << " (its log's end)\n"
                  << Tail(log.ok() ? *log : log.status().ToString()) << "\n";
      }
      Result<std::string> mig = w_->SimCtl(kNode, {"mig"});
      std::cerr << "---- hami-simctl mig\n" << (mig.ok() ? *mig : mig.status().ToString()) << "\n";
    }
    w_.reset();
  }

  // Starts the world of `o` (a fatal failure when it cannot).
  void Start(const WorldOptions& o) {
    Result<std::unique_ptr<World>> started = World::Start(o);
    ASSERT_TRUE(started.ok()) << started.status().ToString();
    w_ = std::move(*started);
  }

  // Creates the pods of `names`, each with `limits` and `command`, in one go.
  void ApplyAll(const std::vector<std::string>& names, const std::string& limits,
                const std::string& command) {
    std::string yaml;
    for (const std::string& n : names) {
      yaml += (yaml.empty() ? "" : "---\n") + PodYaml(n, limits, command);
    }
    Result<std::vector<std::string>> made = w_->Apply(yaml, "default");
    ASSERT_TRUE(made.ok()) << made.status().ToString();
    ASSERT_EQ(made->size(), names.size());
  }

  // Waits until pod `name` runs and its container holds its device: that pod, or nullopt (the
  // test has failed then).
  std::optional<k8s::Object> HeldPod(const std::string& name) {
    Result<k8s::Object> p = w_->WaitForPod("default", name, RunningOrDone);
    if (!p.ok() || !Running(*p)) {
      ADD_FAILURE() << name << " does not run: "
                    << (p.ok() ? p->dump() : p.status().ToString());
      return std::nullopt;
    }
    Result<std::string> ready = w_->WaitForLog("default", name, "main", "ready");
    if (!ready.ok()) {
      ADD_FAILURE() << name << " holds no device: " << ready.status().ToString();
      return std::nullopt;
    }
    return *p;
  }

  // Restarts the node's plugin on node config `config` (the operating mode is read at start),
  // running `while_stopped` (may be empty) in between, and waits until the node's registration
  // shows every GPU in `mode`.
  void RestartPluginIn(const std::string& config, const std::string& mode,
                       const std::function<void()>& while_stopped = {}) {
    ASSERT_TRUE(w_->StopPlugin(kNode).ok());
    if (while_stopped) while_stopped();
    ASSERT_TRUE(WriteFileAtomically(w_->dir() + "/config.json", config, 0644).ok());
    Status started = w_->StartPlugin(kNode);
    ASSERT_TRUE(started.ok()) << started.ToString();
    Result<k8s::Object> node = w_->WaitForNode(
        kNode, [&](const k8s::Object& n) { return RegisteredMode(n) == mode; });
    ASSERT_TRUE(node.ok()) << node.status().ToString();
  }

  std::unique_ptr<World> w_;
};

// Concurrent 1g and 2g: three small and two medium pods created at once on one GPU all run, each
// on its own instance of the profile its request names, on placements that do not overlap (which
// ones depends on the order the scheduler sees them in: each goes where it leaves the most room),
// and each container sees exactly its instance's memory.
TEST_F(NodeE2EMigReplay, ConcurrentSmallAndMediumPodsGetDisjointInstances) {
  ASSERT_NO_FATAL_FAILURE(Start(DynamicMigNode(1)));
  World& w = *w_;
  const std::vector<std::pair<std::string, int>> pods = {{"small-0", kSmall},
                                                         {"medium-0", kMedium},
                                                         {"small-1", kSmall},
                                                         {"medium-1", kMedium},
                                                         {"small-2", kSmall}};
  std::string yaml;
  for (const auto& [name, mib] : pods) {
    yaml += (yaml.empty() ? "" : "---\n") + PodYaml(name, Gpumem(mib), Hold());
  }
  ASSERT_TRUE(w.Apply(yaml, "default").ok());

  std::vector<device::MigPlacement> taken;
  std::set<uint32_t> small_starts, medium_starts;
  std::set<std::string> uuids;
  for (const auto& [name, mib] : pods) {
    std::optional<k8s::Object> p = HeldPod(name);
    ASSERT_TRUE(p.has_value());
    device::MigAllocation m = Realised(*p);
    ASSERT_TRUE(m.runtime.has_value()) << name;
    const bool small = mib == kSmall;
    EXPECT_EQ(m.profile, small ? "1g.10gb" : "2g.20gb") << name;
    EXPECT_EQ(SeenTotal(w, name), (small ? k1gMiB : k2gMiB) * kMiB) << name;
    for (const device::MigPlacement& t : taken) {
      EXPECT_FALSE(t.Overlaps(m.placement))
          << name << " at " << m.placement.start << "+" << m.placement.size << " overlaps "
          << t.start << "+" << t.size;
    }
    taken.push_back(m.placement);
    (small ? small_starts : medium_starts).insert(m.placement.start);
    uuids.insert(m.runtime->mig_uuid);
  }
  EXPECT_EQ(small_starts.size(), 3u);
  EXPECT_EQ(medium_starts.size(), 2u);
  EXPECT_EQ(uuids.size(), pods.size());
  Result<std::string> listed = w.SimCtl(kNode, {"mig"});
  ASSERT_TRUE(listed.ok()) << listed.status().ToString();
  EXPECT_EQ(MigUuids(*listed), uuids) << *listed;
}

// Exactly one 1g and three 2g fill the GPU: the 2g at 0, 2 and 4 and the 1g in slice 6, the one
// left beside them. One more pod, even of the smallest profile, finds no placement: it stays
// Pending with no node, and the scheduler says why.
TEST_F(NodeE2EMigReplay, OneSmallAndThreeMediumFillTheGpu) {
  ASSERT_NO_FATAL_FAILURE(Start(DynamicMigNode(1)));
  World& w = *w_;
  ASSERT_TRUE(w.Apply(PodYaml("small", Gpumem(kSmall), Hold()), "default").ok());
  const std::vector<std::string> mediums = {"medium-0", "medium-1", "medium-2"};
  ASSERT_NO_FATAL_FAILURE(ApplyAll(mediums, Gpumem(kMedium), Hold()));

  std::optional<k8s::Object> small_pod = HeldPod("small");
  ASSERT_TRUE(small_pod.has_value());
  device::MigAllocation small = Realised(*small_pod);
  EXPECT_EQ(small.profile, "1g.10gb");
  EXPECT_EQ(small.placement, (device::MigPlacement{6, 1}));
  std::set<uint32_t> starts;
  std::set<std::string> uuids = {small.runtime ? small.runtime->mig_uuid : ""};
  for (const std::string& name : mediums) {
    std::optional<k8s::Object> p = HeldPod(name);
    ASSERT_TRUE(p.has_value());
    device::MigAllocation m = Realised(*p);
    EXPECT_EQ(m.profile, "2g.20gb") << name;
    starts.insert(m.placement.start);
    if (m.runtime) uuids.insert(m.runtime->mig_uuid);
  }
  EXPECT_EQ(starts, (std::set<uint32_t>{0, 2, 4}));
  Result<std::string> listed = w.SimCtl(kNode, {"mig"});
  ASSERT_TRUE(listed.ok()) << listed.status().ToString();
  EXPECT_EQ(MigUuids(*listed), uuids) << *listed;

  ASSERT_TRUE(w.Apply(PodYaml("overflow", Gpumem(kSmall), kInfo), "default").ok());
  EXPECT_NE(EventSaying(w, "overflow", "CardMigTopologyInfeasible"), "");
  Result<k8s::Object> overflow = k8s::GetPod(w.client(), "default", "overflow");
  ASSERT_TRUE(overflow.ok()) << overflow.status().ToString();
  EXPECT_EQ(PodPhase(*overflow), "Pending");
  EXPECT_FALSE(Bound(*overflow)) << overflow->dump();
}

// Delete then immediate replacement: on a full GPU (as above) a medium pod is deleted and one of
// the same size created at once, before the deleted pod's instance is gone. The replacement waits
// while the deleted pod still holds its placement, then gets that placement with a new MIG device
// there (the old one destroyed by the periodic reclaim or by the Allocate that needs its place),
// and no MIG device outlives its pod.
TEST_F(NodeE2EMigReplay, DeletedPodsPlacementGoesToItsImmediateReplacement) {
  ASSERT_NO_FATAL_FAILURE(Start(DynamicMigNode(1)));
  World& w = *w_;
  ASSERT_TRUE(w.Apply(PodYaml("small", Gpumem(kSmall), Hold()), "default").ok());
  const std::vector<std::string> mediums = {"medium-0", "medium-1", "medium-2"};
  ASSERT_NO_FATAL_FAILURE(ApplyAll(mediums, Gpumem(kMedium), Hold()));
  std::map<std::string, device::MigAllocation> held;
  for (const std::string& name : {std::string("small"), mediums[0], mediums[1], mediums[2]}) {
    std::optional<k8s::Object> p = HeldPod(name);
    ASSERT_TRUE(p.has_value());
    held[name] = Realised(*p);
    ASSERT_TRUE(held[name].runtime.has_value()) << name;
  }
  // The medium pod in the middle of the GPU goes (its process ends at the SIGTERM).
  std::string victim;
  for (const std::string& name : mediums) {
    if (held[name].placement.start == 2) victim = name;
  }
  ASSERT_FALSE(victim.empty());
  ASSERT_TRUE(w.client().Delete(k8s::kPods, "default", victim).ok());
  ASSERT_TRUE(w.Apply(PodYaml("replacement", Gpumem(kMedium), Hold()), "default").ok());

  Result<k8s::Object> r = WaitForPodNudged(w, "replacement", RunningOrDone);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ(PodPhase(*r), "Running") << r->dump();
  // Not before the deleted pod was gone: until then its placement was its own.
  EXPECT_TRUE(k8s::IsNotFound(k8s::GetPod(w.client(), "default", victim).status()));
  device::MigAllocation m = Realised(*r);
  ASSERT_TRUE(m.runtime.has_value());
  EXPECT_EQ(m.profile, "2g.20gb");
  EXPECT_EQ(m.placement, held[victim].placement);
  EXPECT_NE(m.runtime->mig_uuid, held[victim].runtime->mig_uuid);
  ASSERT_TRUE(w.WaitForLog("default", "replacement", "main", "ready").ok());
  EXPECT_EQ(SeenTotal(w, "replacement"), k2gMiB * kMiB);

  std::set<std::string> live = {m.runtime->mig_uuid};
  for (const auto& [name, a] : held) {
    if (name != victim) live.insert(a.runtime->mig_uuid);
  }
  EXPECT_EQ(WaitForMigDevices(w, live), live);
}

// A deleted pod whose process ignores SIGTERM keeps its MIG device for as long as the process
// lives: the reclaim finds the device in use and leaves it for a later pass, and meanwhile
// another pod is allocated and runs (upstream fails every MIG Allocate on the node in that time,
// its B2). Once the process exits, the pod goes and then its device.
TEST_F(NodeE2EMigReplay, TerminatingPodKeepsItsInstanceWhileItsProcessRuns) {
  ASSERT_NO_FATAL_FAILURE(Start(DynamicMigNode(1)));
  World& w = *w_;
  // A grace period far past the test's length: only the test ends the process.
  ASSERT_TRUE(
      w.Apply(PodYaml("stubborn", Gpumem(kMedium), Hold(/*ignore_term=*/true), "", 600), "default")
          .ok());
  std::optional<k8s::Object> stubborn = HeldPod("stubborn");
  ASSERT_TRUE(stubborn.has_value());
  const std::string uuid = MigUuidOf(*stubborn);
  ASSERT_FALSE(uuid.empty());
  const pid_t pid = ContainerPid(*stubborn);
  ASSERT_GT(pid, 0) << stubborn->dump();
  // The driver counts the container's process inside its MIG device.
  Result<std::string> listed = w.SimCtl(kNode, {"mig"});
  ASSERT_TRUE(listed.ok()) << listed.status().ToString();
  EXPECT_NE(LineNaming(*listed, uuid).find("pid " + std::to_string(pid)), std::string::npos)
      << *listed;

  ASSERT_TRUE(w.client().Delete(k8s::kPods, "default", "stubborn").ok());
  // A reclaim pass has tried the device since, found the process inside it and kept it.
  Result<std::string> kept =
      sim::WaitForFileText(w.LogFile(std::string(kNode) + "-plugin"),
                           "pod default/stubborn) of a finished pod stays for now",
                           steady_clock::now() + seconds(30));
  ASSERT_TRUE(kept.ok()) << kept.status().ToString();

  ASSERT_TRUE(w.Apply(PodYaml("newcomer", Gpumem(kSmall), Hold()), "default").ok());
  std::optional<k8s::Object> newcomer = HeldPod("newcomer");
  ASSERT_TRUE(newcomer.has_value());
  EXPECT_EQ(Realised(*newcomer).profile, "1g.10gb");
  EXPECT_EQ(SeenTotal(w, "newcomer"), k1gMiB * kMiB);
  // Still terminating, and its device still there.
  Result<k8s::Object> still = k8s::GetPod(w.client(), "default", "stubborn");
  ASSERT_TRUE(still.ok()) << "gone while its process ran: " << still.status().ToString();
  EXPECT_FALSE(k8s::GetString(*still, "/metadata/deletionTimestamp").empty());
  listed = w.SimCtl(kNode, {"mig"});
  ASSERT_TRUE(listed.ok()) << listed.status().ToString();
  EXPECT_NE(listed->find(uuid), std::string::npos) << *listed;

  // The process exits, as it would at the end of the grace period: the pod goes, then its
  // device; the newcomer's stays.
  ASSERT_EQ(::kill(pid, SIGKILL), 0);
  Status gone = sim::WatchObject(
      w.client(), k8s::kPods, "default", "stubborn",
      [](const k8s::Object* p) { return p == nullptr; }, steady_clock::now() + seconds(30));
  EXPECT_TRUE(gone.ok()) << gone.ToString();
  EXPECT_TRUE(Destroyed(w, uuid));
  const std::set<std::string> live = {MigUuidOf(*newcomer)};
  EXPECT_EQ(WaitForMigDevices(w, live), live);
}

// Mixed reclaim: a large, a medium and a small pod run to completion on one GPU; every instance
// they had is destroyed, after which a pod asking for the whole GPU (nvidia.com/gpu alone, which
// upstream refuses on a MIG node, its B6; here the largest profile) gets the 7g instance over
// the freed slices.
TEST_F(NodeE2EMigReplay, FinishedPodsOfMixedProfilesFreeTheWholeGpu) {
  ASSERT_NO_FATAL_FAILURE(Start(DynamicMigNode(1)));
  World& w = *w_;
  struct Case {
    const char* name;
    int mib;
    const char* profile;
    uint64_t seen_mib;
  };
  const std::vector<Case> cases = {{"large", kLarge, "3g.40gb", k3gMiB},
                                   {"medium", kMedium, "2g.20gb", k2gMiB},
                                   {"small", kSmall, "1g.10gb", k1gMiB}};
  std::string yaml;
  for (const Case& c : cases) {
    yaml += (yaml.empty() ? "" : "---\n") + PodYaml(c.name, Gpumem(c.mib), kInfo);
  }
  ASSERT_TRUE(w.Apply(yaml, "default").ok());
  std::vector<std::string> uuids;
  for (const Case& c : cases) {
    Result<k8s::Object> p = WaitForPodNudged(w, c.name, Terminal);
    ASSERT_TRUE(p.ok()) << c.name << ": " << p.status().ToString();
    EXPECT_EQ(PodPhase(*p), "Succeeded") << c.name << ": " << p->dump();
    device::MigAllocation m = Realised(*p);
    ASSERT_TRUE(m.runtime.has_value()) << c.name;
    EXPECT_EQ(m.profile, c.profile) << c.name;
    EXPECT_EQ(SeenTotal(w, c.name), c.seen_mib * kMiB) << c.name;
    uuids.push_back(m.runtime->mig_uuid);
  }
  for (const std::string& u : uuids) EXPECT_TRUE(Destroyed(w, u)) << u;
  EXPECT_EQ(WaitForMigDevices(w, {}), std::set<std::string>{});

  ASSERT_TRUE(w.Apply(PodYaml("whole", "        nvidia.com/gpu: 1\n", kInfo), "default").ok());
  Result<k8s::Object> whole = WaitForPodNudged(w, "whole", Terminal);
  ASSERT_TRUE(whole.ok()) << whole.status().ToString();
  EXPECT_EQ(PodPhase(*whole), "Succeeded") << whole->dump();
  device::MigAllocation m = Realised(*whole);
  EXPECT_EQ(m.profile, "7g.80gb");
  EXPECT_EQ(m.placement, (device::MigPlacement{0, 8}));
  EXPECT_EQ(SeenTotal(w, "whole"), k7gMiB * kMiB);
}

// Burst: nine medium pods at once on a node of two GPUs. Exactly six run, one per 2g placement
// (three per GPU); the other three stay Pending and unbound with the scheduler's
// CardMigTopologyInfeasible. No pod reaches the node without a placement: none fails, and no
// Allocate does (no UnexpectedAdmissionError, no AllocationFailed).
TEST_F(NodeE2EMigReplay, BurstRunsOnePodPerPlacementAndQueuesTheRest) {
  ASSERT_NO_FATAL_FAILURE(Start(DynamicMigNode(2)));
  World& w = *w_;
  std::vector<std::string> names;
  for (int i = 0; i < 9; ++i) names.push_back("burst-" + std::to_string(i));
  ASSERT_NO_FATAL_FAILURE(ApplyAll(names, Gpumem(kMedium), Hold()));
  auto settled = [&] {
    int running = 0, waiting = 0;
    for (const k8s::Object& p : ListedPods(w)) {
      if (Running(p)) ++running;
      if (PodPhase(p) == "Pending" && !Bound(p)) ++waiting;
    }
    return running == 6 && waiting == 3;
  };
  ASSERT_TRUE(WatchPodsUntil(w, settled, names, seconds(90)));

  std::map<std::string, std::set<uint32_t>> starts;  // by GPU
  std::set<std::string> uuids;
  std::vector<std::string> waiting;
  for (const k8s::Object& p : ListedPods(w)) {
    const std::string name = k8s::Name(p);
    EXPECT_NE(PodPhase(p), "Failed") << p.dump();
    if (!Running(p)) {
      EXPECT_FALSE(Bound(p)) << p.dump();
      waiting.push_back(name);
      continue;
    }
    device::MigAllocation m = Realised(p);
    EXPECT_EQ(m.profile, "2g.20gb") << name;
    EXPECT_TRUE(starts[m.gpu_uuid].insert(m.placement.start).second)
        << name << ": placement " << m.placement.start << " of " << m.gpu_uuid << " given twice";
    if (m.runtime) uuids.insert(m.runtime->mig_uuid);
  }
  ASSERT_EQ(waiting.size(), 3u);
  for (const std::string& name : waiting) {
    EXPECT_NE(EventSaying(w, name, "CardMigTopologyInfeasible"), "") << name;
  }
  ASSERT_EQ(starts.size(), 2u);
  for (const auto& [gpu, s] : starts) EXPECT_EQ(s, (std::set<uint32_t>{0, 2, 4})) << gpu;
  EXPECT_EQ(uuids.size(), 6u);
  EXPECT_EQ(WaitForMigDevices(w, uuids), uuids);

  // Still six bound after all that, and no Allocate failed on the way.
  int bound = 0;
  for (const k8s::Object& p : ListedPods(w)) bound += Bound(p) ? 1 : 0;
  EXPECT_EQ(bound, 6);
  Result<k8s::Object> events = w.client().List(k8s::kEvents, "default");
  ASSERT_TRUE(events.ok()) << events.status().ToString();
  auto items = events->find("items");
  ASSERT_TRUE(items != events->end() && items->is_array());
  for (const Json& e : *items) {
    const std::string reason = e.is_object() ? e.value("reason", "") : "";
    EXPECT_TRUE(reason != "UnexpectedAdmissionError" && reason != "AllocationFailed") << e.dump();
  }
  Result<std::string> kubelet = ReadFileToString(w.LogFile(std::string(kNode) + "-kubelet"));
  ASSERT_TRUE(kubelet.ok()) << kubelet.status().ToString();
  EXPECT_EQ(kubelet->find(" rejected: "), std::string::npos) << Tail(*kubelet);
}

// A node switched between hami-core and mig through its config (read by the plugin at start):
// under hami-core a pod gets a vGPU under libvgpu's quota; restarted in mig, the plugin turns MIG
// on and registers the GPU in mode mig, where a pod asking for vgpu-mode mig gets a MIG instance
// and one asking for hami-core waits with the scheduler's reason. Going back, the plugin never
// turns MIG off (as upstream's, its issue #2974: a GPU left in MIG mode is not shared under
// hami-core), so the operator does, once the MIG devices are gone; then the waiting hami-core
// pod runs.
TEST_F(NodeE2EMigReplay, SwitchingTheNodeBetweenHamiCoreAndMig) {
  WorldOptions o = MigNode(1);
  o.node_config_json = kHamiCoreConfig;
  ASSERT_NO_FATAL_FAILURE(Start(o));
  World& w = *w_;
  Result<k8s::Object> node = k8s::GetNode(w.client(), kNode);
  ASSERT_TRUE(node.ok()) << node.status().ToString();
  EXPECT_EQ(RegisteredMode(*node), "hami-core");
  ASSERT_TRUE(w.Apply(PodYaml("core-before", Gpumem(4096), kInfo), "default").ok());
  Result<k8s::Object> before = w.WaitForPod("default", "core-before", Terminal);
  ASSERT_TRUE(before.ok()) << before.status().ToString();
  EXPECT_EQ(PodPhase(*before), "Succeeded") << before->dump();
  EXPECT_EQ(SeenTotal(w, "core-before"), uint64_t{4096} * kMiB);

  ASSERT_NO_FATAL_FAILURE(RestartPluginIn(kMigConfig, "mig"));
  const std::string mig_mode = "    nvidia.com/vgpu-mode: mig\n";
  ASSERT_TRUE(w.Apply(PodYaml("mig-pod", Gpumem(kSmall), kInfo, mig_mode), "default").ok());
  Result<k8s::Object> mig = WaitForPodNudged(w, "mig-pod", Terminal);
  ASSERT_TRUE(mig.ok()) << mig.status().ToString();
  EXPECT_EQ(PodPhase(*mig), "Succeeded") << mig->dump();
  device::MigAllocation m = Realised(*mig);
  ASSERT_TRUE(m.runtime.has_value());
  EXPECT_EQ(m.profile, "1g.10gb");
  EXPECT_EQ(SeenTotal(w, "mig-pod"), k1gMiB * kMiB);
  const std::string core_mode = "    nvidia.com/vgpu-mode: hami-core\n";
  ASSERT_TRUE(w.Apply(PodYaml("core-pod", Gpumem(4096), kInfo, core_mode), "default").ok());
  EXPECT_NE(EventSaying(w, "core-pod", "CardTypeMismatch"), "");
  Result<k8s::Object> waiting = k8s::GetPod(w.client(), "default", "core-pod");
  ASSERT_TRUE(waiting.ok()) << waiting.status().ToString();
  EXPECT_EQ(PodPhase(*waiting), "Pending");
  EXPECT_FALSE(Bound(*waiting)) << waiting->dump();

  // Back to hami-core: the finished pod's MIG device is reclaimed first, then MIG goes off (an
  // operator's nvidia-smi -mig 0) while the plugin is down.
  ASSERT_TRUE(Destroyed(w, m.runtime->mig_uuid));
  ASSERT_NO_FATAL_FAILURE(RestartPluginIn(kHamiCoreConfig, "hami-core", [&] {
    Result<std::string> off = w.SimCtl(kNode, {"mig-mode", "--device", "0", "--disable"});
    EXPECT_TRUE(off.ok()) << off.status().ToString();
  }));
  Result<k8s::Object> core = WaitForPodNudged(w, "core-pod", Terminal);
  ASSERT_TRUE(core.ok()) << core.status().ToString();
  EXPECT_EQ(PodPhase(*core), "Succeeded") << core->dump();
  EXPECT_EQ(SeenTotal(w, "core-pod"), uint64_t{4096} * kMiB);
  EXPECT_EQ(Annotation(*core, "hami.io/vgpu-mig-allocations"), "");
}

// Upstream's B8, on a node whose container runtime resolves CDI names (containerd with CDI on)
// and a plugin told to name devices through CDI only: the MIG device made at Allocate is in no
// spec the toolkit generated at boot, so the plugin writes one for it before Allocate answers.
// The container starts and its CUDA sees the instance; once the pod has finished, the device and
// its spec go. (Without the plugin's spec the kubelet refuses the container: "unresolvable CDI
// devices nvidia.com/gpu=MIG-...".)
TEST_F(NodeE2EMigReplay, CdiNamedMigDevicesResolveThroughThePluginsSpecs) {
  WorldOptions o = DynamicMigNode(1);
  o.nodes[0].cdi_runtime = true;
  o.nodes[0].plugin_env.push_back("DEVICE_LIST_STRATEGY=cdi-cri");
  ASSERT_NO_FATAL_FAILURE(Start(o));
  World& w = *w_;
  ASSERT_TRUE(w.Apply(PodYaml("cdi-pod", Gpumem(kSmall), Hold()), "default").ok());
  std::optional<k8s::Object> p = HeldPod("cdi-pod");
  ASSERT_TRUE(p.has_value());
  device::MigAllocation m = Realised(*p);
  ASSERT_TRUE(m.runtime.has_value());
  EXPECT_EQ(SeenTotal(w, "cdi-pod"), k1gMiB * kMiB);
  const std::string cdi = w.dir() + "/" + kNode + "/cdi";
  const std::string spec_file = cdi + "/hami-mig-" + m.runtime->mig_uuid + ".json";
  Result<std::string> text = ReadFileToString(spec_file);
  ASSERT_TRUE(text.ok()) << text.status().ToString();
  Json spec = Json::parse(*text, nullptr, false);
  ASSERT_TRUE(spec.is_object()) << *text;
  EXPECT_EQ(spec["kind"], "nvidia.com/gpu");
  EXPECT_EQ(spec["devices"][0]["name"], m.runtime->mig_uuid);
  // The spec-wide edits are the toolkit's (the world wrote its spec at the node's start).
  EXPECT_EQ(spec["containerEdits"]["env"], Json::array({"NVIDIA_VISIBLE_DEVICES=void"}));

  ASSERT_TRUE(w.client().Delete(k8s::kPods, "default", "cdi-pod").ok());
  EXPECT_EQ(WaitForMigDevices(w, {}), std::set<std::string>{});
  // The spec goes in the same reclaim pass, just after the device (a poll: files have no event).
  const auto end = steady_clock::now() + seconds(30);
  while (std::filesystem::exists(spec_file) && steady_clock::now() < end) {
    std::this_thread::sleep_for(milliseconds(100));
  }
  EXPECT_FALSE(std::filesystem::exists(spec_file));
  EXPECT_TRUE(std::filesystem::exists(cdi + "/nvidia.yaml"));  // not the plugin's to remove
}

}  // namespace
}  // namespace hami::e2e
