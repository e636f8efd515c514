// `kubectl exec` on the simulated kubelet: the remote-command protocol over WebSocket that
// kubectl speaks (subprotocols v5.channel.k8s.io and v4.channel.k8s.io), run against a local
// process started in a container's environment.
//
// The protocol: every WebSocket message is binary and starts with a channel byte: 0 stdin (from
// the client), 1 stdout, 2 stderr, 3 the final status (a metav1.Status in JSON: Success, or
// Failure with reason NonZeroExitCode and the exit code as the cause "ExitCode"), 4 terminal
// resize ({"Width":W,"Height":H}); v5 adds channel 255, whose message [255, N] closes channel N
// (kubectl closes stdin that way at its end of input). With tty the process gets a pseudo
// terminal and stderr is merged into stdout, as with a container runtime.
//
// A real kubelet also speaks SPDY/3.1, which kube-apiserver uses towards kubelets when it
// translates a client's WebSocket stream (feature TranslateStreamCloseWebsocketRequests); the
// simulated kubelet speaks WebSocket only, so an API server in front of it must pass the
// WebSocket through (the simulated API server does; the real control plane of the tests runs
// with that translation turned off).
//
// Thread safety: ParseExecRequest and the JSON helpers are pure; RunExecSession runs on the
// calling thread (the HTTP worker that owns the upgraded connection).
#pragma once

#include <string>
#include <vector>

#include "common/status.h"

namespace hami::net {
struct HttpRequest;
class UpgradedConnection;
}  // namespace hami::net

namespace hami::sim {

constexpr const char* kExecProtocolV5 = "v5.channel.k8s.io";
constexpr const char* kExecProtocolV4 = "v4.channel.k8s.io";

// The exec query as kubelet reads it: command (repeated), input, output, error and tty ("1" or
// "true"; stdin, stdout and stderr are taken for the first three too). InvalidArgument without
// a command or with no stream at all.
struct ExecRequest {
  std::vector<std::string> command;
  bool in = false;
  bool out = false;
  bool err = false;
  bool tty = false;
};
Result<ExecRequest> ParseExecRequest(const net::HttpRequest& req);

// The first protocol the client offers that this kubelet speaks; "" when none.
std::string ChooseExecProtocol(const std::vector<std::string>& offered);

// The final status for a wait(2) status: Success, or Failure with the exit code (128 + the
// signal for a process killed by one, as container runtimes report it).
std::string ExitStatusJson(int wait_status);
// A Failure that is not an exit code (the command could not be started): kubectl prints
// `message` and exits 1.
std::string ErrorStatusJson(const std::string& message);

// What the session runs: argv[0] is resolved against the PATH in `env` (as the container's own
// runtime would) unless it holds a '/'.
struct ExecProcess {
  std::vector<std::string> argv;
  std::vector<std::string> env;  // KEY=VALUE
  std::string workdir;
};

// Resolves argv[0] through the PATH in env; NotFound with the runtime's wording when absent.
Result<std::string> ResolveExecProgram(const ExecProcess& p);

// Runs one session on a connection already switched to `protocol`: starts the process, relays
// the streams until it exits and its output is drained, sends the final status and a normal
// close. When the client goes away or the server stops first, the process group is killed.
// Returns the process's wait status (-1 when it did not start or was killed for that reason).
int RunExecSession(net::UpgradedConnection& conn, const std::string& protocol,
                   const ExecRequest& req, const ExecProcess& process);

}  // namespace hami::sim
