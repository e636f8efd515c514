// Pieces of the demo (demo.h) shared by its files: demo.cc (the cluster and the run),
// demo_checks.cc (the seed's expectations) and demo_report.cc (the human and JSON reports).
//
// Thread safety: pure functions and immutable data.
#pragma once

#include <string>
#include <vector>

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

// `s` in ASCII lower case.
std::string Lower(std::string s);
// A registered GPU type without its "NVIDIA-" prefix.
std::string ShortType(const std::string& type);

}  // namespace hami::sim::demo_internal
