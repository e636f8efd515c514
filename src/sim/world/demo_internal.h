// Pieces of the demo (demo.h) shared by its files: demo.cc (the run), demo_cluster.cc (the
// cluster), demo_volcano.cc (the Volcano scenario), demo_checks.cc (the seed's expectations)
// and demo_report.cc (the human and JSON reports).
//
// Thread safety: pure functions and immutable data, but for the Volcano scenario's functions
// (the world's owning thread).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/status.h"
#include "sim/world/demo.h"
#include "sim/world/world.h"

namespace hami::sim::demo_internal {

// One seed scenario: its id ("01".."08"), a title for the report, and its file in the examples
// directory.
struct Scenario {
  std::string id, title, file;
};

// The seed scenarios, in the order they are applied and reported.
const std::vector<Scenario>& Scenarios();
// The id of the dynamic MIG scenario, applied and reported after the seed's.
inline constexpr char kMigScenario[] = "09";
// The id of the Volcano scenario, after the MIG one (only with Volcano's binaries).
inline constexpr char kVolcanoScenario[] = "10";

// `s` in ASCII lower case.
std::string Lower(std::string s);
// A registered GPU type without its "NVIDIA-" prefix.
std::string ShortType(const std::string& type);
// The number after `key` in `text` ("memory total=8192MiB" -> 8192), or -1.
int64_t NumberAfter(const std::string& text, const std::string& key);

// Scenario 10 (demo_volcano.cc): starts Volcano's scheduler beside the control plane, lets the
// Volcano node join and applies document 004's queue and vGPU Job; `v` gets the node and the
// Job's pod. Then, once that pod runs, what it got and uses (`metrics`: its node monitor's).
Status StartVolcanoScenario(World& w, const std::string& volcano_bin_dir, DemoVolcano* v);
void CollectVolcano(World& w, const std::vector<MetricSample>& metrics, DemoVolcano* v);

}  // namespace hami::sim::demo_internal
