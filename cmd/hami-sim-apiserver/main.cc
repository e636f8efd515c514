// hami-sim-apiserver: runs the simulated Kubernetes API server until SIGINT/SIGTERM.
//
//   hami-sim-apiserver [--host 127.0.0.1] [--port 0] [--tls-cert F --tls-key F | --self-signed]
//                      [--token T [--rbac]] [--write-kubeconfig PATH] [--history-window N]
//
// Prints "listening on <url>" (and flushes) once serving, so scripts can wait for that line.

#include <CLI/CLI.hpp>
#include <cstdio>
#include <optional>
#include <string>

#include "common/go_flags.h"
#include "common/ready_file.h"
#include "common/stop_signals.h"
#include "sim/apiserver/api_server.h"

int main(int argc, char** argv) {
  hami::StopSignals signals;  // before any thread starts: every thread inherits the mask
  hami::sim::ApiServerOptions opts;
  std::string kubeconfig, ready_file;
  CLI::App app{
      "hami-sim-apiserver: an in-memory Kubernetes API server (watch, patches, binding, "
      "admission webhooks, RBAC) for kubectl and the simulated cluster. Prints \"listening on "
      "<url>\" once serving; stops on SIGINT or SIGTERM."};
  app.add_option("--host", opts.host, "address to listen on")->capture_default_str();
  app.add_option("--port", opts.port, "port to listen on; 0 picks a free one (see the printed url)")
      ->check(CLI::Range(0, 65535))
      ->capture_default_str();
  auto* cert = app.add_option("--tls-cert", opts.tls_cert_file,
                              "serve HTTPS with this PEM certificate (re-read when it changes)");
  auto* key = app.add_option("--tls-key", opts.tls_key_file, "the PEM key of --tls-cert");
  cert->needs(key);
  key->needs(cert);
  app.add_flag("--self-signed", opts.self_signed,
               "serve HTTPS with a generated certificate for 127.0.0.1 and localhost")
      ->excludes(cert)
      ->excludes(key);
  auto* token = app.add_option("--token", opts.token,
                               "bearer token every request needs (but /healthz, /livez, /readyz); "
                               "none: no authentication");
  app.add_flag("--rbac", opts.rbac,
               "the --token holder is an administrator; ServiceAccount tokens (kubectl create "
               "token) are authorized by the stored RBAC objects (403 otherwise); decisions at "
               "GET /debug/authorization")
      ->needs(token);
  app.add_option("--write-kubeconfig", kubeconfig,
                 "write a kubeconfig for this server (url, CA, token) to this file");
  app.add_option("--ready-file", ready_file,
                 "once serving, write its url and PID to this file as JSON");
  app.add_option("--history-window", opts.history_window,
                 "watch events kept for resumption; older resourceVersions get 410 Gone")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.name("hami-sim-apiserver");
  if (std::optional<int> exit = hami::ParseGoStyleFlags(app, argc, argv)) return *exit;

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
  if (hami::Status s = hami::WriteReadyFile(ready_file, {{"url", (*server)->url()}}); !s.ok()) {
    std::fprintf(stderr, "hami-sim-apiserver: %s\n", s.ToString().c_str());
    return 1;
  }
  std::printf("listening on %s\n", (*server)->url().c_str());
  std::fflush(stdout);
  signals.Wait();
  (*server)->Stop();
  return 0;
}
