#include "net/server_flags.h"

#include <CLI/CLI.hpp>
#include <chrono>

#include "common/duration.h"

namespace hami::net {

void AddServerLimitFlags(CLI::App& app, ServerLimitFlags* flags) {
  app.add_option("--http-max-connections", flags->max_connections,
                 "open connections the HTTP servers keep (0: no cap); at the cap the least "
                 "recently active idle one is closed")
      ->capture_default_str();
  app.add_option("--http-max-connections-per-address", flags->max_connections_per_address,
                 "open connections from one remote address (0: no cap)")
      ->capture_default_str();
  app.add_option("--http-idle-timeout", flags->idle_timeout,
                 "an idle keep-alive connection is closed after this")
      ->capture_default_str();
  app.add_option("--http-read-timeout", flags->read_timeout,
                 "a request's head must arrive within this, and no gap in its body be longer")
      ->capture_default_str();
  app.add_option("--http-tls-handshake-timeout", flags->handshake_timeout,
                 "a TLS handshake must finish within this from the connection's accept")
      ->capture_default_str();
}

namespace {

Status Seconds(const std::string& flag, const std::string& text, std::chrono::seconds* out) {
  Result<std::chrono::milliseconds> d = ParseGoDuration(text);
  if (!d.ok() || *d < std::chrono::seconds(1)) {
    return InvalidArgumentError("--" + flag + " \"" + text +
                                "\": expected a duration of at least 1s, like 10s");
  }
  *out = std::chrono::ceil<std::chrono::seconds>(*d);
  return OkStatus();
}

}  // namespace

Status ApplyServerLimitFlags(const ServerLimitFlags& flags, HttpServerOptions* options) {
  options->max_connections = flags.max_connections;
  options->max_connections_per_address = flags.max_connections_per_address;
  HAMI_RETURN_IF_ERROR(
      Seconds("http-idle-timeout", flags.idle_timeout, &options->keep_alive_timeout));
  HAMI_RETURN_IF_ERROR(Seconds("http-read-timeout", flags.read_timeout, &options->read_timeout));
  return Seconds("http-tls-handshake-timeout", flags.handshake_timeout,
                 &options->handshake_timeout);
}

}  // namespace hami::net
