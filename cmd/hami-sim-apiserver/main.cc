// hami-sim-apiserver: runs the simulated Kubernetes API server until SIGINT/SIGTERM.
//
//   hami-sim-apiserver [--host 127.0.0.1] [--port 0] [--tls-cert F --tls-key F | --self-signed]
//                      [--token T [--rbac]] [--write-kubeconfig PATH] [--history-window N]
//
// Prints "listening on <url>" (and flushes) once serving, so scripts can wait for that line.
#include <signal.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "sim/apiserver/api_server.h"

namespace {

void Usage() {
  std::fprintf(
      stderr,
      "usage: hami-sim-apiserver [--host H] [--port N] [--tls-cert F --tls-key F | "
      "--self-signed] [--token T [--rbac]] [--write-kubeconfig PATH] [--history-window N]\n"
      "  --rbac: the --token holder is an administrator; ServiceAccount tokens (kubectl\n"
      "          create token) are authorized by the stored RBAC objects (403 otherwise);\n"
      "          decisions at GET /debug/authorization\n");
}

}  // namespace

int main(int argc, char** argv) {
  hami::sim::ApiServerOptions opts;
  std::string kubeconfig;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "%s needs a value\n", arg.c_str());
        std::exit(2);
      }
      return argv[++i];
    };
    auto number = [&]() -> long {  // NOLINT(runtime/int)
      std::string v = value();
      char* end = nullptr;
      long n = std::strtol(v.c_str(), &end, 10);  // NOLINT(runtime/int)
      if (v.empty() || *end != '\0' || n < 0) {
        std::fprintf(stderr, "%s: not a number: %s\n", arg.c_str(), v.c_str());
        std::exit(2);
      }
      return n;
    };
    if (arg == "--host") {
      opts.host = value();
    } else if (arg == "--port") {
      opts.port = static_cast<int>(number());
    } else if (arg == "--tls-cert") {
      opts.tls_cert_file = value();
    } else if (arg == "--tls-key") {
      opts.tls_key_file = value();
    } else if (arg == "--self-signed") {
      opts.self_signed = true;
    } else if (arg == "--token") {
      opts.token = value();
    } else if (arg == "--rbac") {
      opts.rbac = true;
    } else if (arg == "--write-kubeconfig") {
      kubeconfig = value();
    } else if (arg == "--history-window") {
      opts.history_window = static_cast<size_t>(number());
    } else if (arg == "-h" || arg == "--help") {
      Usage();
      return 0;
    } else {
      std::fprintf(stderr, "unknown flag %s\n", arg.c_str());
      Usage();
      return 2;
    }
  }

  // Block the stop signals before any thread starts so that only sigwait() below sees them.
  sigset_t stop;
  sigemptyset(&stop);
  sigaddset(&stop, SIGINT);
  sigaddset(&stop, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop, nullptr);
  signal(SIGPIPE, SIG_IGN);

  auto server = hami::sim::ApiServer::Start(opts);
  if (!server.ok()) {
    std::fprintf(stderr, "hami-sim-apiserver: %s\n", server.status().ToString().c_str());
    return 1;
  }
  if (!kubeconfig.empty()) {
    hami::Status s = (*server)->WriteKubeconfig(kubeconfig);
    if (!s.ok()) {
      std::fprintf(stderr, "hami-sim-apiserver: %s\n", s.ToString().c_str());
      return 1;
    }
  }
  std::printf("listening on %s\n", (*server)->url().c_str());
  std::fflush(stdout);
  int sig = 0;
  sigwait(&stop, &sig);
  (*server)->Stop();
  return 0;
}
