// The demo's cluster (DemoNodes, DemoMigNode, DemoVolcanoNode and the node config), its
// scenarios and text helpers (demo_internal.h), the report's lookups, and the Prometheus text
// parser the demo reads the monitors with (demo.h).

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <sstream>

#include "sim/world/demo.h"
#include "sim/world/demo_internal.h"

namespace hami::sim {

namespace demo_internal {

std::string Lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s;
}

std::string ShortType(const std::string& type) {
  std::string t = type;
  if (t.rfind("NVIDIA-", 0) == 0) t = t.substr(7);
  return t;
}

const std::vector<Scenario>& Scenarios() {
  static const std::vector<Scenario> kScenarios = {
      {"01", "Two pods share one GPU", "01-two-pods-share-one-gpu.yaml"},
      {"02", "Memory isolation only (no SM limit)", "02-memory-only.yaml"},
      {"03", "A whole GPU for one pod", "03-exclusive.yaml"},
      {"04", "30 % of a GPU's memory, on each model", "04-memory-percentage.yaml"},
      {"05", "Policy override: node spread, GPU binpack", "05-policy-override.yaml"},
      {"06", "GPU type selection", "06-gpu-type-selection.yaml"},
      {"07", "GPU UUID pinning", "07-gpu-uuid.yaml"},
      {"08", "Two GPUs on one NUMA node", "08-numa-aware.yaml"},
  };
  return kScenarios;
}

// The number after `key` in `text` ("memory total=8192MiB" -> 8192), or -1.
int64_t NumberAfter(const std::string& text, const std::string& key) {
  size_t at = text.find(key);
  if (at == std::string::npos) return -1;
  return std::strtoll(text.c_str() + at + key.size(), nullptr, 10);
}

}  // namespace demo_internal

namespace {

// One [device] section of the simulated driver's config.
std::string Device(const std::string& name, const std::string& uuid, const std::string& memory,
                   int sm, const std::string& cc, int numa, const std::string& nvlink,
                   int pcie_switch = -1) {
  std::string s = "[device]\nname = " + name + "\nuuid = " + uuid + "\nmemory = " + memory +
                  "\nsm_count = " + std::to_string(sm) + "\ncompute_capability = " + cc +
                  "\nnuma_node = " + std::to_string(numa) + "\n";
  if (!nvlink.empty()) s += "nvlink = " + nvlink + "\n";
  if (pcie_switch >= 0) s += "pcie_switch = " + std::to_string(pcie_switch) + "\n";
  return s;
}

std::string Uuid(char prefix, int i) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "GPU-%c1000000-0000-4000-8000-%012d", prefix, i);
  return buf;
}

}  // namespace

std::vector<WorldNode> DemoNodes() {
  WorldNode a100;
  a100.name = "dgx-a100";
  for (int i = 0; i < 8; ++i) {
    // NVSwitch: every GPU reaches every other one with 2 links.
    std::string links;
    for (int j = 0; j < 8; ++j) {
      if (j == i) continue;
      links += (links.empty() ? "" : ",") + std::to_string(j) + ":2";
    }
    a100.gpu_config += Device("NVIDIA A100-SXM4-80GB", i == 7 ? kDemoPinnedUuid : Uuid('a', i),
                              "80Gi", 108, "8.0", i / 4, links);
  }
  WorldNode v100;
  v100.name = "v100-node";
  const char* v100_links[] = {"1:2,2:1", "0:2,3:1", "3:2,0:1", "2:2,1:1"};
  for (int i = 0; i < 4; ++i) {
    v100.gpu_config +=
        Device("Tesla V100-SXM2-32GB", Uuid('b', i), "32Gi", 80, "7.0", i / 2, v100_links[i]);
  }
  WorldNode t4;
  t4.name = "t4-node";
  for (int i = 0; i < 2; ++i) {
    // A real T4 has 15,360 MiB: seed example 1's two 8 GiB pods do not both fit on one.
    t4.gpu_config += Device("Tesla T4", Uuid('c', i), "15360Mi", 40, "7.5", 0, "", 0);
  }
  return {a100, v100, t4};
}

WorldNode DemoMigNode() {
  WorldNode mig;
  mig.name = "mig-a100";
  mig.gpu_config = Device("NVIDIA A100-SXM4-80GB", Uuid('d', 0), "80Gi", 108, "8.0", 0, "");
  return mig;
}

WorldNode DemoVolcanoNode() {
  WorldNode v;
  v.name = "volcano-t4";
  v.volcano = "vgpu";
  for (int i = 0; i < 2; ++i) {
    v.gpu_config += Device("Tesla T4", Uuid('f', i), "15360Mi", 40, "7.5", 0, "", 0);
  }
  return v;
}

std::string DemoNodeConfigJson() {
  return R"({"nodeconfig":[{"name":"mig-a100","operatingmode":"mig"}]})";
}

const DemoMigPod* DemoMig::Pod(const std::string& name) const {
  for (const DemoMigPod& p : pods) {
    if (p.name == name) return &p;
  }
  return nullptr;
}

const DemoPod* DemoReport::Pod(const std::string& name) const {
  for (const DemoPod& p : pods) {
    if (p.name == name) return &p;
  }
  return nullptr;
}

const DemoGpu* DemoReport::Gpu(const std::string& node, const std::string& uuid) const {
  for (const DemoGpu& g : gpus) {
    if (g.node == node && g.uuid == uuid) return &g;
  }
  return nullptr;
}

bool DemoReport::AllOk() const {
  return !checks.empty() &&
         std::all_of(checks.begin(), checks.end(), [](const DemoCheck& c) { return c.ok; });
}

std::vector<MetricSample> ParseExposition(const std::string& text) {
  std::vector<MetricSample> out;
  std::stringstream ss(text);
  for (std::string line; std::getline(ss, line);) {
    if (line.empty() || line[0] == '#') continue;
    MetricSample s;
    size_t brace = line.find('{');
    size_t space = line.rfind(' ');
    if (space == std::string::npos) continue;
    if (brace != std::string::npos && brace < space) {
      s.name = line.substr(0, brace);
      size_t i = brace + 1;
      while (i < line.size() && line[i] != '}') {
        size_t eq = line.find('=', i);
        if (eq == std::string::npos || eq + 1 >= line.size() || line[eq + 1] != '"') break;
        std::string key = line.substr(i, eq - i), value;
        size_t j = eq + 2;
        for (; j < line.size() && line[j] != '"'; ++j) {
          if (line[j] == '\\' && j + 1 < line.size()) ++j;
          value.push_back(line[j]);
        }
        s.labels[key] = value;
        i = j + 1;
        if (i < line.size() && line[i] == ',') ++i;
      }
    } else {
      s.name = line.substr(0, space);
    }
    s.value = std::strtod(line.c_str() + space + 1, nullptr);
    out.push_back(std::move(s));
  }
  return out;
}

}  // namespace hami::sim
