// Command lines written for Go programs: Go's flag package takes `-name=value` and
// `--name=value` alike, and HAMi's manifests use both (`-v=4`, `--config-file=...`). CLI11
// wants two dashes for long names, so the binaries that keep upstream's flags pass their
// arguments through GoStyleArgs first.
//
//   CLI::App app{"..."};
//   app.add_option(...);
//   if (std::optional<int> exit = ParseGoStyleFlags(app, argc, argv)) return *exit;
//
// Thread safety: pure functions.
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace CLI {
class App;
}

namespace hami {

// argv[1..] with every single-dash argument longer than one letter ("-v=4", "-leader-elect")
// given a second dash, in reverse order (what CLI::App::parse(std::vector) expects).
std::vector<std::string> GoStyleArgs(int argc, char** argv);

// Parses GoStyleArgs(argc, argv) into `app`. nullopt: go on; otherwise the process's exit status
// (0 after --help; 2, as Go's flag package, after it printed what is wrong with a flag).
std::optional<int> ParseGoStyleFlags(CLI::App& app, int argc, char** argv);

// An environment variable the upstream binaries read, or `fallback` when unset or empty.
std::string EnvOr(const char* name, const std::string& fallback = "");

}  // namespace hami
