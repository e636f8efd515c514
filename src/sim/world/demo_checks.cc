// The seed examples' expectations (EvaluateSeedExpectations in demo.h), one check function per
// scenario, evaluated over the facts a demo run collected.

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "sim/world/demo.h"
#include "sim/world/demo_internal.h"

namespace hami::sim {

using demo_internal::Lower;
using demo_internal::ShortType;

namespace {

bool Contains(const std::string& haystack, const std::string& needle) {
  return Lower(haystack).find(Lower(needle)) != std::string::npos;
}

// "find fit node(a), 0 nodes not fit, 3 nodes fit(a:1.5,b:0.25,c:2)" -> {a:1.5, b:0.25, c:2}.
std::map<std::string, double> FitScores(const std::string& why) {
  std::map<std::string, double> scores;
  size_t open = why.find("nodes fit(");
  if (open == std::string::npos) return scores;
  std::string list = why.substr(open + 10);
  list = list.substr(0, list.find(')'));
  std::stringstream ss(list);
  for (std::string item; std::getline(ss, item, ',');) {
    size_t colon = item.rfind(':');
    if (colon == std::string::npos) continue;
    scores[item.substr(0, colon)] = std::strtod(item.c_str() + colon + 1, nullptr);
  }
  return scores;
}

// Collects the pass/fail lines of the seed examples' expectations, one scenario at a time, over
// one report. Lookups tolerate missing pods, containers and GPUs: a missing piece fails the
// check that needs it rather than stopping the evaluation.
class SeedChecks {
 public:
  explicit SeedChecks(const DemoReport& r) : r_(r) {}

  std::vector<DemoCheck> Take() { return std::move(checks_); }

  void Check(const std::string& scenario, bool ok, const std::string& text) {
    checks_.push_back({scenario, ok, text});
  }

  const DemoPod* Pod(const std::string& name) const { return r_.Pod(name); }
  const DemoReport& report() const { return r_; }

  static bool Running(const DemoPod* p) { return p != nullptr && p->phase == "Running"; }

  // The i-th GPU of the pod's first container, or null.
  const DemoGpu* GpuOf(const DemoPod* p, size_t i = 0) const {
    if (p == nullptr || p->containers.empty() || p->containers[0].gpus.size() <= i) {
      return nullptr;
    }
    return r_.Gpu(p->node, p->containers[0].gpus[i]);
  }

  std::string TypeOf(const DemoPod* p) const {
    const DemoGpu* g = GpuOf(p);
    return g == nullptr ? std::string() : g->type;
  }

  static const DemoContainer* First(const DemoPod* p) {
    return p == nullptr || p->containers.empty() ? nullptr : &p->containers[0];
  }

 private:
  const DemoReport& r_;
  std::vector<DemoCheck> checks_;
};

std::string NameOr(const DemoPod* p) { return p ? p->name : std::string("?"); }

// The container's measured SM use, rounded to a whole percent, or "?".
std::string SmUtilText(const DemoContainer* c) {
  return c ? std::to_string(static_cast<int>(std::lround(c->sm_util))) : "?";
}

void CheckTwoPodsShareOneGpu(SeedChecks& k) {
  const DemoPod* a = k.Pod("inference-service-a");
  const DemoPod* b = k.Pod("inference-service-b");
  k.Check("01", SeedChecks::Running(a) && SeedChecks::Running(b), "both pods run");
  k.Check("01",
          k.GpuOf(a) != nullptr && k.GpuOf(b) != nullptr && a->node == b->node &&
              k.GpuOf(a)->uuid == k.GpuOf(b)->uuid,
          "both on the same physical GPU");
  for (const DemoPod* p : {a, b}) {
    const DemoContainer* c = SeedChecks::First(p);
    k.Check("01",
            c != nullptr && c->quota_mib == std::vector<int64_t>{8192} &&
                c->quota_cores == std::vector<int>{50} && c->sees_mib == 8192 &&
                c->sm_limit_env == "50",
            NameOr(p) + " sees 8192 MiB and runs with a 50 % SM limit");
  }
  for (const DemoPod* p : {a, b}) {
    const DemoContainer* c = SeedChecks::First(p);
    k.Check("01", c != nullptr && c->sm_util >= 0 && c->sm_util <= 60,
            NameOr(p) + " is held to its share of the SMs (uses " + SmUtilText(c) + " %)");
  }
}

void CheckMemoryOnly(SeedChecks& k) {
  const DemoPod* mem = k.Pod("memory-only-isolation");
  const DemoContainer* mc = SeedChecks::First(mem);
  k.Check("02", SeedChecks::Running(mem) && mc != nullptr && mc->sees_mib == 4096,
          "the container sees 4096 MiB");
  k.Check("02", mc != nullptr && mc->sm_limit_env == "(unset)",
          "no CUDA_DEVICE_SM_LIMIT: compute is not limited");
}

void CheckExclusive(SeedChecks& k) {
  const DemoPod* ex = k.Pod("training-job");
  const DemoGpu* exg = k.GpuOf(ex);
  const DemoContainer* exc = SeedChecks::First(ex);
  bool alone = exg != nullptr;
  for (const DemoPod& p : k.report().pods) {
    if (&p == ex || p.node != (ex ? ex->node : "")) continue;
    for (const DemoContainer& c : p.containers) {
      for (const std::string& u : c.gpus) alone &= exg == nullptr || u != exg->uuid;
    }
  }
  k.Check("03",
          SeedChecks::Running(ex) && exc != nullptr && exg != nullptr &&
              exc->quota_cores == std::vector<int>{100} &&
              exc->quota_mib == std::vector<int64_t>{exg->memory_mib},
          "it holds 100 % of a GPU and all of its memory");
  k.Check("03", alone, "no other pod shares that GPU");
}

void CheckMemoryPercentage(SeedChecks& k) {
  std::set<std::string> models;
  int pct_pods = 0;
  for (const DemoPod& p : k.report().pods) {
    if (p.scenario != "04") continue;
    ++pct_pods;
    const DemoGpu* g = k.GpuOf(&p);
    const DemoContainer* c = SeedChecks::First(&p);
    bool ok = p.phase == "Running" && g != nullptr && c != nullptr && c->quota_mib.size() == 1 &&
              c->quota_mib[0] == g->memory_mib * 30 / 100 && c->sees_mib == c->quota_mib[0];
    if (g != nullptr) models.insert(g->type);
    k.Check("04", ok,
            p.name + ": " + (g ? ShortType(g->type) : "?") + " " +
                (g ? std::to_string(g->memory_mib) : "?") + " MiB x 30 % = " +
                (c && !c->quota_mib.empty() ? std::to_string(c->quota_mib[0]) : "?") + " MiB");
  }
  k.Check("04", pct_pods >= 3 && models.size() == 3, "30 % of the memory of each of the 3 models");
}

void CheckPolicyOverride(SeedChecks& k) {
  const DemoPod* bp = k.Pod("binpack-inference");
  std::map<std::string, double> scores = FitScores(bp ? bp->why : "");
  bool spread = SeedChecks::Running(bp) && scores.count(bp->node) != 0;
  for (const auto& [n, s] : scores) spread &= s >= scores[bp ? bp->node : ""];
  k.Check("05", spread, "node spread: it went to the least loaded node that fits");
  // GPU binpack: it joined a GPU another pod already used, when its node had one with room.
  const DemoGpu* bpg = k.GpuOf(bp);
  bool shared = false, other_used = false;
  for (const DemoPod& p : k.report().pods) {
    if (&p == bp || p.scenario >= "05" || bp == nullptr || p.node != bp->node) continue;
    for (const DemoContainer& c : p.containers) {
      for (const std::string& u : c.gpus) {
        other_used = true;
        shared |= bpg != nullptr && u == bpg->uuid;
      }
    }
  }
  k.Check("05", SeedChecks::Running(bp) && (shared || !other_used),
          "GPU binpack: it shares a GPU already in use on that node");
  // Sharing, the SM limit is enforced (a GPU split evenly would give it half).
  const DemoContainer* bpc = SeedChecks::First(bp);
  k.Check("05", !shared || (bpc != nullptr && bpc->sm_util >= 0 && bpc->sm_util <= 35),
          "on the shared GPU it is held to its 25 % SM limit (uses " + SmUtilText(bpc) + " %)");
}

void CheckGpuTypeSelection(SeedChecks& k) {
  const DemoPod* a100 = k.Pod("a100-only-task");
  k.Check("06", SeedChecks::Running(a100) && Contains(k.TypeOf(a100), "A100"),
          "a100-only-task runs on an A100");
  const DemoPod* old = k.Pod("exclude-old-gpu");
  k.Check("06",
          SeedChecks::Running(old) && !k.TypeOf(old).empty() && !Contains(k.TypeOf(old), "T4") &&
              !Contains(k.TypeOf(old), "P100"),
          "exclude-old-gpu avoids T4 and P100");
  const DemoPod* sel = k.Pod("selective-gpu");
  std::string st = k.TypeOf(sel);
  k.Check("06",
          SeedChecks::Running(sel) && (Contains(st, "A100") || Contains(st, "V100")) &&
              !Contains(st, "A100-SXM"),
          "selective-gpu runs on an A100 or V100 but not an SXM A100");
  const DemoPod* h100 = k.Pod("h100-only-task");
  k.Check("06",
          h100 != nullptr && h100->phase == "Pending" && h100->node.empty() &&
              h100->why.find("CardTypeMismatch") != std::string::npos,
          "a pod asking for an H100 stays Pending, and the scheduler says the type does not match");
}

void CheckUuidPinning(SeedChecks& k) {
  const DemoPod* pin = k.Pod("uuid-pinned-task");
  k.Check("07", SeedChecks::Running(pin) && k.GpuOf(pin) && k.GpuOf(pin)->uuid == kDemoPinnedUuid,
          "uuid-pinned-task runs on " + std::string(kDemoPinnedUuid));
  const DemoPod* nouse = k.Pod("uuid-exclude-task");
  k.Check("07",
          SeedChecks::Running(nouse) && k.GpuOf(nouse) && k.GpuOf(nouse)->uuid != kDemoPinnedUuid,
          "uuid-exclude-task runs on another GPU");
}

void CheckNumaAware(SeedChecks& k) {
  const DemoPod* numa = k.Pod("numa-aware-training");
  const DemoGpu *n0 = k.GpuOf(numa, 0), *n1 = k.GpuOf(numa, 1);
  const DemoContainer* nc = SeedChecks::First(numa);
  k.Check("08",
          SeedChecks::Running(numa) && n0 && n1 && n0->uuid != n1->uuid && n0->numa == n1->numa &&
              nc && nc->quota_mib == std::vector<int64_t>{32768, 32768},
          "two GPUs on one NUMA node, 32768 MiB each");
}

// The MIG scenario (DemoMig): profiles chosen by size, each container bounded by its instance,
// the overflow explained, a deleted pod's instance destroyed and its placement reused, and the
// driver and the monitor agreeing on what is left.
void CheckDynamicMig(SeedChecks& k) {
  const DemoMig& m = k.report().mig;
  const std::string id = demo_internal::kMigScenario;
  if (m.node.empty()) {
    k.Check(id, false, "the MIG node joined");
    return;
  }
  // Device memory of the A100-80GB profiles the pods get (the driver's profile table).
  const std::map<std::string, int64_t> kProfileMib = {{"1g.10gb", 9728}, {"3g.40gb", 40192}};
  auto placed = [&](const char* name, const char* profile) {
    const DemoMigPod* p = m.Pod(name);
    auto mib = kProfileMib.find(profile);
    bool ok = p != nullptr && p->phase == "Running" && p->node == m.node &&
              p->profile == profile && p->mig_uuid.rfind("MIG-", 0) == 0 &&
              mib != kProfileMib.end() && p->sees_mib == mib->second;
    k.Check(id, ok,
            std::string(name) + " runs on its own " + profile + " instance and its CUDA sees " +
                (mib == kProfileMib.end() ? "?" : std::to_string(mib->second)) + " MiB" +
                (p != nullptr && p->sees_mib >= 0 && ok == false
                     ? " (saw " + std::to_string(p->sees_mib) + ")"
                     : ""));
    return p;
  };
  const DemoMigPod* s1 = placed("mig-small-1", "1g.10gb");
  const DemoMigPod* s2 = placed("mig-small-2", "1g.10gb");
  const DemoMigPod* med = placed("mig-medium", "3g.40gb");
  std::set<std::string> uuids;
  for (const DemoMigPod* p : {s1, s2, med}) {
    if (p != nullptr && !p->mig_uuid.empty()) uuids.insert(p->mig_uuid);
  }
  k.Check(id, uuids.size() == 3, "the three pods hold three different MIG devices");
  const DemoMigPod* over = m.Pod("mig-overflow");
  k.Check(id,
          over != nullptr && over->phase == "Pending" && over->node.empty() &&
              over->why.find("CardMigTopologyInfeasible") != std::string::npos,
          "mig-overflow (2g.20gb) stays Pending: no free placement of two slices is left "
          "(CardMigTopologyInfeasible)");
  k.Check(id, m.destroyed && !m.deleted_mig_uuid.empty(),
          "deleting " + m.deleted + " destroys its MIG device once its container has exited");
  const DemoMigPod* again = m.Pod("mig-replacement");
  k.Check(id,
          again != nullptr && s1 != nullptr && again->phase == "Running" &&
              again->profile == "1g.10gb" && again->placement == s1->placement &&
              again->sees_mib == 9728,
          "mig-replacement gets a new 1g.10gb instance at the placement it freed");
  std::vector<std::string> live;
  for (const DemoMigPod* p : {s2, med, again}) {
    if (p != nullptr && !p->mig_uuid.empty()) live.push_back(p->mig_uuid);
  }
  std::sort(live.begin(), live.end());
  k.Check(id, live.size() == 3 && m.driver_devices == live,
          "the driver holds exactly the running pods' MIG devices (" +
              std::to_string(m.driver_devices.size()) + ")");
  k.Check(id, live.size() == 3 && m.monitor_devices == live,
          "hami-monitor exports hami_mig_device_info for each of them");
}

// The Volcano scenario (DemoVolcano), when it ran: the Job's trainer placed by Volcano on the
// Volcano node and held by libvgpu.so to the 4096 MiB it asked for.
void CheckVolcano(SeedChecks& k) {
  const DemoVolcano& v = k.report().volcano;
  if (v.node.empty()) return;
  const std::string id = demo_internal::kVolcanoScenario;
  constexpr int64_t kQuota = 4096;
  k.Check(id,
          v.phase == "Running" && v.pod_node == v.node && v.bind_phase == "success" &&
              !v.gpu.empty(),
          "the vGPU Job's trainer runs on " + v.node + ", placed by Volcano's scheduler and "
          "served by hami-device-plugin (bind phase success)");
  k.Check(id, v.quota_mib == kQuota && v.sees_mib == kQuota,
          "Volcano assigned it 4096 MiB and its CUDA sees 4096 MiB" +
              (v.sees_mib >= 0 && v.sees_mib != kQuota
                   ? " (saw " + std::to_string(v.sees_mib) + ")"
                   : std::string()));
  k.Check(id,
          v.limit_bytes == double(kQuota) * 1048576.0 && v.used_bytes > 0 &&
              v.used_bytes <= v.limit_bytes,
          "hami-monitor reports its 4096 MiB limit and a use within it");
}

}  // namespace

std::vector<DemoCheck> EvaluateSeedExpectations(const DemoReport& r) {
  SeedChecks k(r);
  CheckTwoPodsShareOneGpu(k);
  CheckMemoryOnly(k);
  CheckExclusive(k);
  CheckMemoryPercentage(k);
  CheckPolicyOverride(k);
  CheckGpuTypeSelection(k);
  CheckUuidPinning(k);
  CheckNumaAware(k);
  CheckDynamicMig(k);
  CheckVolcano(k);
  return k.Take();
}

}  // namespace hami::sim
