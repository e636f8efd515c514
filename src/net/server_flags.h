// Command-line flags for the limits of an HttpServer that faces the network, so every binary
// spells them the same way (hami-scheduler's extender/webhook and metrics ports, hami-monitor's):
//
//   --http-max-connections=20000            open connections in all (0: no cap)
//   --http-max-connections-per-address=0    open connections from one remote address (0: no cap)
//   --http-idle-timeout=5s                  an idle keep-alive connection is closed after this
//   --http-read-timeout=10s                 a request's head, and each gap in its body
//   --http-tls-handshake-timeout=10s        a TLS handshake, from the accept
//
//   ServerLimitFlags limits;
//   AddServerLimitFlags(app, &limits);
//   ... parse ...
//   HAMI_RETURN_IF_ERROR(ApplyServerLimitFlags(limits, &http_options));
//
// Thread safety: plain data and pure functions.
#pragma once

#include <cstddef>
#include <string>

#include "common/status.h"
#include "net/http_server.h"

namespace CLI {
class App;
}

namespace hami::net {

struct ServerLimitFlags {
  size_t max_connections = HttpServerOptions{}.max_connections;
  size_t max_connections_per_address = HttpServerOptions{}.max_connections_per_address;
  std::string idle_timeout = "5s";
  std::string read_timeout = "10s";
  std::string handshake_timeout = "10s";
};

void AddServerLimitFlags(CLI::App& app, ServerLimitFlags* flags);

// Copies the limits into `options`. InvalidArgument naming the flag for a duration that does not
// parse or is under a second (the deadlines count whole seconds).
Status ApplyServerLimitFlags(const ServerLimitFlags& flags, HttpServerOptions* options);

}  // namespace hami::net
