// hami-simctl: inspect and poke the simulated GPU node. See commands.h and
// src/sim/gpu/README.md.
//
//   hami-simctl [--state PATH] status | inject-xid --device N --xid CODE | reset

#include <CLI/CLI.hpp>
#include <cstdint>
#include <cstdio>
#include <optional>
#include <string>

#include "commands.h"
#include "common/go_flags.h"
#include "sim/gpu/shared_state.h"

int main(int argc, char** argv) {
  CLI::App app{
      "hami-simctl: inspect and poke the simulated GPU node. The state file is --state, else "
      "$HAMI_SIM_STATE, else /tmp/hami-sim/state."};
  std::string state_path = hami::sim::StatePathFromEnv();
  app.add_option("--state", state_path, "the simulated node's shared state file")
      ->capture_default_str();
  app.require_subcommand(1);
  CLI::App* status = app.add_subcommand("status", "devices, memory per process, utilisation");
  CLI::App* reset = app.add_subcommand("reset", "discard the shared state file");
  CLI::App* xid = app.add_subcommand("inject-xid", "post an XID error on a physical device");
  int device = 0;
  uint32_t code = 0;
  xid->add_option("--device", device, "physical device index")
      ->required()
      ->check(CLI::Range(0, 1023));
  xid->add_option("--xid", code, "the XID code")->required();
  app.name("hami-simctl");
  if (std::optional<int> exit = hami::ParseGoStyleFlags(app, argc, argv)) return *exit;
  if (status->parsed()) return hami::simctl::Status(state_path, stdout, stderr);
  if (reset->parsed()) return hami::simctl::Reset(state_path, stdout, stderr);
  return hami::simctl::InjectXid(state_path, device, code, stdout, stderr);
}
