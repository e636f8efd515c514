// hami-kube-control-plane: a real Kubernetes control plane (etcd, kube-apiserver,
// kube-controller-manager, and optionally kube-scheduler) on loopback ports, from the binaries
// scripts/kube-tools.sh builds. For tests and for trying hami-cpp's manifests by hand.
//
//   hami-kube-control-plane --kube-bin "$(bash scripts/kube-tools.sh)" --dir /tmp/cp
//
// Prints "kubeconfig: <path>" (a cluster administrator's) and then "ready" on stdout, and runs
// until SIGINT/SIGTERM or until stdin closes or says "stop"; then it stops every process it
// started. Each process logs to <dir>/<name>.log; the API server's audit log is <dir>/audit.log.
#include <poll.h>
#include <signal.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <filesystem>
#include <string>

#include "common/file_util.h"
#include "common/log.h"
#include "sim/world/kube_control_plane.h"

namespace {

volatile sig_atomic_t g_signal = 0;

// Until a signal, EOF on stdin, or a "stop" line.
void WaitForStop() {
  std::string line;
  while (g_signal == 0) {
    struct pollfd p = {0, POLLIN, 0};
    if (poll(&p, 1, 200) <= 0 || g_signal != 0) continue;
    char buf[256];
    ssize_t n = read(0, buf, sizeof(buf));
    if (n <= 0) return;
    line.append(buf, static_cast<size_t>(n));
    for (size_t nl; (nl = line.find('\n')) != std::string::npos; line.erase(0, nl + 1)) {
      if (line.compare(0, 4, "stop") == 0) return;
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"hami-kube-control-plane: etcd, kube-apiserver and kube-controller-manager on "
               "loopback, for tests"};
  hami::sim::KubeControlPlaneOptions o;
  std::string scheduler_config;
  bool no_controller_manager = false;
  int verbosity = 0;
  app.add_option("--kube-bin", o.bin_dir,
                 "folder with etcd, kube-apiserver, kube-controller-manager, kube-scheduler "
                 "(what `bash scripts/kube-tools.sh` prints)")
      ->required();
  app.add_option("--dir", o.dir, "working directory (created; kept)")->required();
  app.add_flag("--no-controller-manager", no_controller_manager,
               "start no kube-controller-manager");
  app.add_option("--scheduler-config", scheduler_config,
                 "also start kube-scheduler with this KubeSchedulerConfiguration file");
  app.add_option("--apiserver-arg", o.apiserver_args, "an extra kube-apiserver flag (repeatable)");
  app.add_option("-v,--v", verbosity, "log verbosity")->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  hami::log::SetVerbosity(verbosity);
  o.controller_manager = !no_controller_manager;
  o.on_start = [](const std::string& name) {
    std::fprintf(stderr, "%s is up\n", name.c_str());
  };

  struct sigaction sa = {};
  sa.sa_handler = [](int sig) { g_signal = sig; };
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);

  std::error_code ec;
  std::filesystem::create_directories(o.dir, ec);
  if (ec) {
    std::fprintf(stderr, "hami-kube-control-plane: cannot create %s: %s\n", o.dir.c_str(),
                 ec.message().c_str());
    return 1;
  }
  o.dir = std::filesystem::absolute(o.dir).string();
  auto cp = hami::sim::KubeControlPlane::Start(o);
  if (!cp.ok()) {
    std::fprintf(stderr, "hami-kube-control-plane: %s\n", cp.status().ToString().c_str());
    return 1;
  }
  if (!scheduler_config.empty()) {
    hami::Result<std::string> text = hami::ReadFileToString(scheduler_config);
    if (!text.ok()) {
      std::fprintf(stderr, "hami-kube-control-plane: cannot read %s\n", scheduler_config.c_str());
      return 1;
    }
    hami::Status s = (*cp)->StartScheduler(*text);
    if (!s.ok()) {
      std::fprintf(stderr, "hami-kube-control-plane: %s\n", s.ToString().c_str());
      return 1;
    }
  }
  std::printf("kubeconfig: %s\nserver: %s\naudit-log: %s\nready\n",
              (*cp)->admin_kubeconfig().c_str(), (*cp)->server().c_str(),
              (*cp)->audit_log().c_str());
  std::fflush(stdout);
  WaitForStop();
  return 0;
}
