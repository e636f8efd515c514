#include "net/server_flags.h"

#include <gtest/gtest.h>

#include <CLI/CLI.hpp>

namespace hami::net {
namespace {

TEST(ServerLimitFlagsTest, DefaultsAreTheServersOwn) {
  CLI::App app;
  ServerLimitFlags flags;
  AddServerLimitFlags(app, &flags);
  app.parse(std::vector<std::string>{});
  HttpServerOptions o;
  o.keep_alive_timeout = std::chrono::seconds(99);
  ASSERT_TRUE(ApplyServerLimitFlags(flags, &o).ok());
  HttpServerOptions defaults;
  EXPECT_EQ(o.max_connections, defaults.max_connections);
  EXPECT_EQ(o.max_connections_per_address, defaults.max_connections_per_address);
  EXPECT_EQ(o.keep_alive_timeout, defaults.keep_alive_timeout);
  EXPECT_EQ(o.read_timeout, defaults.read_timeout);
  EXPECT_EQ(o.handshake_timeout, defaults.handshake_timeout);
}

TEST(ServerLimitFlagsTest, FlagsReachTheOptionsAndBadDurationsNameTheFlag) {
  CLI::App app;
  ServerLimitFlags flags;
  AddServerLimitFlags(app, &flags);
  // CLI11 takes arguments in reverse order.
  app.parse(std::vector<std::string>{
      "--http-tls-handshake-timeout=1500ms", "--http-idle-timeout=1m",
      "--http-max-connections-per-address=50", "--http-max-connections=300"});
  HttpServerOptions o;
  ASSERT_TRUE(ApplyServerLimitFlags(flags, &o).ok());
  EXPECT_EQ(o.max_connections, 300u);
  EXPECT_EQ(o.max_connections_per_address, 50u);
  EXPECT_EQ(o.keep_alive_timeout, std::chrono::seconds(60));
  EXPECT_EQ(o.handshake_timeout, std::chrono::seconds(2));  // whole seconds, rounded up

  flags.read_timeout = "500ms";
  Status s = ApplyServerLimitFlags(flags, &o);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("--http-read-timeout \"500ms\""), std::string::npos) << s.message();
  flags.read_timeout = "soon";
  EXPECT_FALSE(ApplyServerLimitFlags(flags, &o).ok());
}

}  // namespace
}  // namespace hami::net
