// The demo's reports (demo.h): the human one, scenario by scenario with each pod's placement,
// quota and measured use, and the facts as JSON.

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>

#include "sim/world/demo.h"
#include "sim/world/demo_internal.h"

namespace hami::sim {

using Json = nlohmann::json;
using demo_internal::Scenario;
using demo_internal::Scenarios;
using demo_internal::ShortType;

namespace {

std::string Mib(double bytes) {
  if (bytes < 0) return "-";
  return std::to_string(static_cast<int64_t>(std::llround(bytes / 1048576.0)));
}

// A pod that does not run: its phase and the scheduler's reason.
std::string WaitingLine(const std::string& name, const std::string& phase,
                        const std::string& why) {
  char buf[512];
  std::snprintf(buf, sizeof(buf), "  %-22s %-8s %s\n", name.c_str(), phase.c_str(),
                why.empty() ? "(no decision yet)" : why.c_str());
  return buf;
}

// The check lines of one scenario.
std::string CheckLines(const DemoReport& r, const std::string& scenario) {
  std::string out;
  for (const DemoCheck& c : r.checks) {
    if (c.scenario == scenario) {
      out += std::string("    ") + (c.ok ? "ok   " : "FAIL ") + c.text + "\n";
    }
  }
  return out;
}

std::string PodLine(const DemoReport& r, const DemoPod& p) {
  if (p.phase != "Running") return WaitingLine(p.name, p.phase, p.why);
  char buf[512];
  std::string out;
  for (const DemoContainer& c : p.containers) {
    std::string gpus, quota;
    for (size_t i = 0; i < c.gpus.size(); ++i) {
      const DemoGpu* g = r.Gpu(p.node, c.gpus[i]);
      gpus += (i ? "+" : "") + (g ? std::to_string(g->index) : std::string("?"));
      if (i == 0 && g != nullptr) gpus = ShortType(g->type) + " #" + gpus;
    }
    if (!c.quota_mib.empty()) {
      quota = std::to_string(c.quota_mib[0]) + " MiB";
      if (c.quota_mib.size() > 1) quota += " x" + std::to_string(c.quota_mib.size());
      quota += c.quota_cores.empty() || c.quota_cores[0] == 0
                   ? ", SM unlimited"
                   : ", SM " + std::to_string(c.quota_cores[0]) + " %";
    }
    std::string used =
        c.used_bytes < 0
            ? "(no sample yet)"
            : Mib(c.used_bytes) + " MiB, SM " +
                  (c.sm_util < 0 ? "-" : std::to_string(static_cast<int>(std::lround(c.sm_util)))) +
                  " %";
    if (!c.quota_cores.empty() && c.quota_cores[0] > 0 && c.quota_cores[0] < 100 &&
        c.sm_util > c.quota_cores[0] + 10) {
      used += " (alone on its GPU: the default core policy lends it idle SMs)";
    }
    std::snprintf(buf, sizeof(buf), "  %-22s %-9s %-28s quota %-24s uses %s\n", p.name.c_str(),
                  p.node.c_str(), gpus.c_str(), quota.c_str(), used.c_str());
    out += buf;
  }
  // Why it went there, as the scheduler said it (its FilteringSucceed event).
  if (!p.why.empty()) out += "      scheduler: " + p.why + "\n";
  return out;
}

// Scenario 09: each MIG pod with its profile, placement, device and what its CUDA saw.
std::string RenderMig(const DemoReport& r) {
  const DemoMig& m = r.mig;
  const std::string node =
      m.node.empty() ? std::string("did not run") : m.node + ", one A100-SXM4-80GB";
  std::string out = "\n[" + std::string(demo_internal::kMigScenario) +
                    "] Dynamic MIG on a node that joins in operating mode mig  (" + node + ")\n";
  char buf[512];
  for (const DemoMigPod& p : m.pods) {
    if (p.phase != "Running") {
      out += WaitingLine(p.name, p.phase, p.why);
    } else {
      std::string where = p.profile + " at slice " + std::to_string(p.placement);
      std::snprintf(buf, sizeof(buf), "  %-22s %-9s %-22s %s, CUDA sees %lld MiB\n",
                    p.name.c_str(), p.node.c_str(), where.c_str(), p.mig_uuid.c_str(),
                    static_cast<long long>(p.sees_mib));
      out += buf;
    }
    if (p.name == m.deleted) {
      out += "      deleted afterwards; its MIG device " +
             std::string(m.destroyed ? "was destroyed" : "was NOT seen destroyed") + "\n";
    }
  }
  return out + CheckLines(r, demo_internal::kMigScenario);
}

// Scenario 10, when it ran: the Volcano Job's trainer, its GPU and quota, what it uses.
std::string RenderVolcano(const DemoReport& r) {
  const DemoVolcano& v = r.volcano;
  if (v.node.empty()) return "";
  std::string out = "\n[" + std::string(demo_internal::kVolcanoScenario) +
                    "] Volcano: document 004's vGPU Job through Volcano's scheduler  (" + v.node +
                    ")\n";
  if (v.phase != "Running") return out + WaitingLine(v.pod, v.phase, "") +
                                   CheckLines(r, demo_internal::kVolcanoScenario);
  char buf[512];
  std::snprintf(buf, sizeof(buf),
                "  %-22s %-9s %s  quota %lld MiB  uses %.0f MiB, CUDA sees %lld MiB\n",
                v.pod.c_str(), v.pod_node.c_str(), v.gpu.c_str(),
                static_cast<long long>(v.quota_mib), v.used_bytes / 1048576.0,
                static_cast<long long>(v.sees_mib));
  return out + buf + CheckLines(r, demo_internal::kVolcanoScenario);
}

}  // namespace

std::string RenderDemoReport(const DemoReport& r) {
  std::string out;
  for (const Scenario& s : Scenarios()) {
    out += "\n[" + s.id + "] " + s.title + "  (" + s.file + ")\n";
    for (const DemoPod& p : r.pods) {
      if (p.scenario == s.id) out += PodLine(r, p);
    }
    out += CheckLines(r, s.id);
  }
  out += RenderMig(r);
  out += RenderVolcano(r);
  size_t failed = static_cast<size_t>(
      std::count_if(r.checks.begin(), r.checks.end(), [](const DemoCheck& c) { return !c.ok; }));
  char buf[256];
  std::snprintf(buf, sizeof(buf),
                "\n%s: %zu of %zu checks hold (started in %.1f s, %.1f s in all)\n",
                failed == 0 ? "PASS" : "FAIL", r.checks.size() - failed, r.checks.size(),
                r.startup_seconds, r.total_seconds);
  out += buf;
  return out;
}

std::string DemoReportJson(const DemoReport& r) {
  Json j;
  j["gpus"] = Json::array();
  for (const DemoGpu& g : r.gpus) {
    j["gpus"].push_back({{"node", g.node},
                         {"uuid", g.uuid},
                         {"type", g.type},
                         {"index", g.index},
                         {"numa", g.numa},
                         {"memory_mib", g.memory_mib}});
  }
  j["pods"] = Json::array();
  for (const DemoPod& p : r.pods) {
    Json cs = Json::array();
    for (const DemoContainer& c : p.containers) {
      cs.push_back({{"name", c.name},
                    {"gpus", c.gpus},
                    {"quota_mib", c.quota_mib},
                    {"quota_cores", c.quota_cores},
                    {"sees_mib", c.sees_mib},
                    {"sm_limit_env", c.sm_limit_env},
                    {"used_bytes", c.used_bytes},
                    {"limit_bytes", c.limit_bytes},
                    {"sm_util", c.sm_util}});
    }
    j["pods"].push_back({{"scenario", p.scenario},
                         {"name", p.name},
                         {"phase", p.phase},
                         {"node", p.node},
                         {"why", p.why},
                         {"containers", cs}});
  }
  Json mig_pods = Json::array();
  for (const DemoMigPod& p : r.mig.pods) {
    mig_pods.push_back({{"name", p.name},
                        {"phase", p.phase},
                        {"node", p.node},
                        {"why", p.why},
                        {"profile", p.profile},
                        {"placement", p.placement},
                        {"mig_uuid", p.mig_uuid},
                        {"sees_mib", p.sees_mib}});
  }
  j["mig"] = {{"node", r.mig.node},
              {"gpu_uuid", r.mig.gpu_uuid},
              {"pods", mig_pods},
              {"deleted", r.mig.deleted},
              {"deleted_mig_uuid", r.mig.deleted_mig_uuid},
              {"destroyed", r.mig.destroyed},
              {"driver_devices", r.mig.driver_devices},
              {"monitor_devices", r.mig.monitor_devices}};
  if (!r.volcano.node.empty()) {
    const DemoVolcano& v = r.volcano;
    j["volcano"] = {{"node", v.node},           {"pod", v.pod},
                    {"phase", v.phase},         {"pod_node", v.pod_node},
                    {"bind_phase", v.bind_phase}, {"gpu", v.gpu},
                    {"quota_mib", v.quota_mib}, {"sees_mib", v.sees_mib},
                    {"used_bytes", v.used_bytes}, {"limit_bytes", v.limit_bytes}};
  }
  j["checks"] = Json::array();
  for (const DemoCheck& c : r.checks) {
    j["checks"].push_back({{"scenario", c.scenario}, {"ok", c.ok}, {"text", c.text}});
  }
  j["monitor_urls"] = r.monitor_urls;
  j["scheduler_metrics_url"] = r.scheduler_metrics_url;
  j["kubeconfig"] = r.kubeconfig;
  j["startup_seconds"] = r.startup_seconds;
  j["total_seconds"] = r.total_seconds;
  return j.dump(2);
}

}  // namespace hami::sim
