// hami-sim-world: the README's main job. Starts the whole system on a simulated cluster of three
// GPU nodes (src/sim/world/demo.h), applies the user's eight seed scenarios, then lets a fourth
// node in dynamic MIG mode join for a MIG scenario, and prints where each pod went and why, the
// quota each container got and what it really uses. Exit status 0 only when every expectation
// holds.
//
//   hami-sim-world [--keep] [--dir DIR] [--report-json FILE] [--build-dir DIR] [--examples DIR]
//                  [--control-plane simulated|real --kube-bin DIR [--volcano-bin DIR]]
//
// --keep leaves the world running after the report: it prints the kubeconfig for kubectl and the
// monitors' URLs, and ends every process it started on Ctrl-C or when "stop" is typed.
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <string>

#include "common/log.h"
#include "sim/world/demo.h"

namespace {

// The build tree this binary lives in (<build>/bin/hami-sim-world).
std::string SelfBuildDir() {
  char self[PATH_MAX] = {};
  ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
  if (n <= 0) return "build";
  return std::filesystem::path(std::string(self, static_cast<size_t>(n)))
      .parent_path()
      .parent_path()
      .string();
}

volatile sig_atomic_t g_signal = 0;

// Waits for Ctrl-C/SIGTERM or a "stop" line on stdin (EOF on stdin does not stop it).
void WaitForStop() {
  std::string line;
  bool stdin_open = true;
  while (g_signal == 0) {
    struct pollfd p = {0, POLLIN, 0};
    int r = stdin_open ? poll(&p, 1, 200) : poll(nullptr, 0, 200);
    if (r <= 0 || g_signal != 0) continue;
    char buf[256];
    ssize_t n = read(0, buf, sizeof(buf));
    if (n <= 0) {
      stdin_open = false;
      continue;
    }
    line.append(buf, static_cast<size_t>(n));
    for (size_t nl; (nl = line.find('\n')) != std::string::npos; line.erase(0, nl + 1)) {
      std::string word = line.substr(0, nl);
      while (!word.empty() && (word.back() == ' ' || word.back() == '\r')) word.pop_back();
      if (word == "stop" || word == "quit" || word == "exit") return;
      if (!word.empty()) std::printf("type \"stop\" (or press Ctrl-C) to end the world\n");
    }
  }
}

// Why the control plane options cannot work, or null.
const char* CheckControlPlane(const hami::sim::DemoOptions& o) {
  const bool real = o.control_plane == hami::sim::ControlPlaneKind::kReal;
  if (real && o.kube_bin_dir.empty()) {
    return "--control-plane real needs --kube-bin (the folder `bash scripts/kube-tools.sh` "
           "prints)";
  }
  if (!real && !o.volcano_bin_dir.empty()) {
    return "--volcano-bin needs --control-plane real (Volcano's scheduler needs a real API "
           "server)";
  }
  return nullptr;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{
      "hami-sim-world: hami-cpp on a simulated GPU cluster, running the user's seed scenarios and "
      "a dynamic MIG scenario"};
  hami::sim::DemoOptions o;
  o.build_dir = SelfBuildDir();
  o.examples_dir = HAMI_EXAMPLES_DIR;
  o.chart_dir = HAMI_CHART_DIR;
  std::string report_json;
  bool keep = false;
  int verbosity = 0;
  app.add_flag("--keep", keep, "leave the world running after the report (for kubectl)");
  app.add_option("--dir", o.dir,
                 "working directory for the processes' logs and state "
                 "(default: a fresh temporary one, removed at the end)");
  app.add_option("--report-json", report_json, "also write the report's facts as JSON here");
  app.add_option("--build-dir", o.build_dir, "the build tree holding bin/, lib/ and sim/")
      ->capture_default_str();
  app.add_option("--examples", o.examples_dir, "the seed scenarios' pod specs")
      ->capture_default_str();
  std::string control_plane = "simulated";
  app.add_option("--control-plane", control_plane,
                 "simulated (hami-sim-apiserver and the kube-scheduler stand-in) or real (etcd, "
                 "kube-apiserver, kube-controller-manager and kube-scheduler from --kube-bin)")
      ->check(CLI::IsMember({"simulated", "real"}))
      ->capture_default_str();
  app.add_option("--kube-bin", o.kube_bin_dir,
                 "with --control-plane real: the folder `bash scripts/kube-tools.sh` prints");
  app.add_option("--volcano-bin", o.volcano_bin_dir,
                 "with --control-plane real: the folder `bash scripts/volcano-tools.sh` prints; "
                 "adds scenario 10, document 004's vGPU Job through Volcano's scheduler");
  app.add_option("-v,--v", verbosity, "log verbosity of this process")->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  hami::log::SetVerbosity(verbosity);
  o.control_plane = hami::sim::ParseControlPlaneKind(control_plane).value();
  if (const char* why = CheckControlPlane(o)) {
    std::fprintf(stderr, "hami-sim-world: %s\n", why);
    return 2;
  }

  struct sigaction sa = {};
  sa.sa_handler = [](int sig) { g_signal = sig; };
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);

  o.before_stop = [&](hami::sim::World& w, const hami::sim::DemoReport& r) {
    if (!report_json.empty()) std::ofstream(report_json) << hami::sim::DemoReportJson(r) << "\n";
    if (!keep) return;
    std::printf(
        "\nThe world keeps running (processes' logs in %s).\n"
        "  export KUBECONFIG=%s\n"
        "  kubectl get pods -o wide\n"
        "  kubectl describe pod inference-service-a\n"
        "  kubectl logs inference-service-a\n"
        "  curl -s %s     # hami-scheduler's metrics\n",
        w.dir().c_str(), w.kubeconfig().c_str(), w.SchedulerMetricsUrl().c_str());
    for (const auto& [node, url] : r.monitor_urls) {
      std::printf("  curl -s %s     # %s's monitor\n", url.c_str(), node.c_str());
    }
    std::printf("Type \"stop\" or press Ctrl-C to end every process.\n");
    std::fflush(stdout);
    WaitForStop();
    std::printf("stopping ...\n");
  };
  hami::Result<hami::sim::DemoReport> r = hami::sim::RunDemo(o, std::cout);
  if (!r.ok()) {
    std::fprintf(stderr, "\nhami-sim-world: %s\n", r.status().ToString().c_str());
    return 1;
  }
  if (!report_json.empty() && keep == false && !std::filesystem::exists(report_json)) {
    std::ofstream(report_json) << hami::sim::DemoReportJson(*r) << "\n";
  }
  return r->AllOk() ? 0 : 1;
}
