// Reading kube-scheduler's ExtenderArgs: the filter's byte-scanning fast path against the general
// (JSON-lexer) reader, on the same body. The second body differs only in its first node name
// being written with a JSON escape ("\u006eode-0" for "node-0"), which sends it to the general
// reader. Median of interleaved runs.
//
//   build/bin/extender_args_bench [--names 5000] [--iterations 300]
#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>
#include <vector>

#include "common/go_flags.h"
#include "extender/extender_args.h"

namespace {

using SteadyClock = std::chrono::steady_clock;

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

std::string Body(int names, bool escaped_first) {
  // A pod as kube-scheduler sends it: what the API server stored, about 1.5 KB.
  std::string body =
      R"({"pod":{"apiVersion":"v1","kind":"Pod","metadata":{"name":"pod-1","namespace":"default",)"
      R"("uid":"0b9f7a52-6c1e-4e43-9d0a-1f2e3d4c5b6a","resourceVersion":"123456",)"
      R"("creationTimestamp":"2026-11-24T10:00:00Z","labels":{"app":"train"},)"
      R"("annotations":{"hami.io/vgpu-devices-to-allocate":""}},"spec":{"schedulerName":)"
      R"("hami-scheduler","restartPolicy":"Always","containers":[{"name":"main","image":)"
      R"("registry.example/train:1.0","resources":{"limits":{"nvidia.com/gpu":"1",)"
      R"("nvidia.com/gpumem":"1024","nvidia.com/gpucores":"10"}}}]},"status":{"phase":"Pending"}},)"
      R"("nodenames":[)";
  for (int i = 0; i < names; ++i) {
    if (i > 0) body += ',';
    body += (i == 0 && escaped_first) ? "\"\\u006eode-0\"" : "\"node-" + std::to_string(i) + "\"";
  }
  body += "]}";
  return body;
}

}  // namespace

int main(int argc, char** argv) {
  int names = 5000, iterations = 300;
  CLI::App app{
      "extender_args_bench: decoding kube-scheduler's ExtenderArgs: the fast path against the "
      "general parser"};
  app.name("extender_args_bench");
  app.add_option("--names", names, "node names per body")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("--iterations", iterations, "bodies decoded per parser")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  if (std::optional<int> exit = hami::ParseGoStyleFlags(app, argc, argv)) return *exit;
  const std::string plain = Body(names, false), escaped = Body(names, true);
  std::vector<double> fast_us, general_us;
  for (int i = 0; i < iterations; ++i) {
    for (int which = 0; which < 2; ++which) {
      const std::string& body = which == 0 ? plain : escaped;
      SteadyClock::time_point a = SteadyClock::now();
      hami::Result<hami::extender::ExtenderArgs> r = hami::extender::ParseExtenderArgs(body);
      SteadyClock::time_point b = SteadyClock::now();
      if (!r.ok() || r->names.size() != static_cast<size_t>(names) || r->names[0] != "node-0") {
        std::fprintf(stderr, "unexpected parse result\n");
        return 1;
      }
      (which == 0 ? fast_us : general_us)
          .push_back(std::chrono::duration<double, std::micro>(b - a).count());
    }
  }
  std::printf(
      "ExtenderArgs with %d node names (%zu bytes): fast path %.1f us, general reader %.1f us"
      " (medians of %d)\n",
      names, plain.size(), Median(fast_us), Median(general_us), iterations);
  return 0;
}
