#include "common/go_flags.h"

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdlib>

namespace hami {

std::vector<std::string> GoStyleArgs(int argc, char** argv) {
  std::vector<std::string> out;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a.size() > 2 && a[0] == '-' && a[1] != '-') a = "-" + a;
    out.push_back(std::move(a));
  }
  std::reverse(out.begin(), out.end());
  return out;
}

std::optional<int> ParseGoStyleFlags(CLI::App& app, int argc, char** argv) {
  std::vector<std::string> args = GoStyleArgs(argc, argv);
  try {
    app.parse(args);
  } catch (const CLI::ParseError& e) {
    // --help and --version end with 0; a flag error with 2, as Go's flag package exits.
    return app.exit(e) == 0 ? 0 : 2;
  }
  return std::nullopt;
}

std::string EnvOr(const char* name, const std::string& fallback) {
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0' ? std::string(v) : fallback;
}

}  // namespace hami
