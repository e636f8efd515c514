// Command lines written for Go programs: Go's flag package takes `-name=value` and
// `--name=value` alike, and HAMi's manifests use both (`-v=4`, `--config-file=...`). CLI11
// wants two dashes for long names, so the binaries that keep upstream's flags pass their
// arguments through GoStyleArgs first.
//
//   std::vector<std::string> args = GoStyleArgs(argc, argv);
//   app.parse(args);  // CLI11's vector overload: arguments last-first, as returned
//
// Thread safety: pure function.
#pragma once

#include <string>
#include <vector>

namespace hami {

// argv[1..] with every single-dash argument longer than one letter ("-v=4", "-leader-elect")
// given a second dash, in reverse order (what CLI::App::parse(std::vector) expects).
std::vector<std::string> GoStyleArgs(int argc, char** argv);

}  // namespace hami
