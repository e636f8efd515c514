// hami-simctl: inspect and poke the simulated GPU node. See commands.h and
// src/sim/gpu/README.md.
//
//   hami-simctl [--state PATH] [--config FILE]
//       status | inject-xid --device N --xid CODE | mig | mig-attach --uuid MIG-... --pid PID |
//       reset

#include <CLI/CLI.hpp>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
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
  const char* env_config = std::getenv("HAMI_SIM_CONFIG");
  std::string config_path = env_config != nullptr ? env_config : "";
  app.add_option("--state", state_path,
                 "the simulated node's shared state file (HAMI_SIM_STATE of its kubelet and "
                 "device plugin)")
      ->capture_default_str();
  app.add_option("--config", config_path,
                 "the node's device config (default $HAMI_SIM_CONFIG; none: the built-in node "
                 "of two A100s); the state must have been made from it")
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
  CLI::App* mig = app.add_subcommand("mig", "MIG mode, GPU instances and compute instances");
  CLI::App* attach = app.add_subcommand(
      "mig-attach", "test hook: count a running process as running inside a MIG device");
  std::string mig_uuid;
  int pid = 0;
  attach->add_option("--uuid", mig_uuid, "the MIG device's UUID (MIG-...)")->required();
  attach->add_option("--pid", pid, "a running process")->required();
  app.name("hami-simctl");
  if (std::optional<int> exit = hami::ParseGoStyleFlags(app, argc, argv)) return *exit;
  if (status->parsed()) return hami::simctl::Status(state_path, config_path, stdout, stderr);
  if (reset->parsed()) return hami::simctl::Reset(state_path, stdout, stderr);
  if (mig->parsed()) return hami::simctl::MigList(state_path, config_path, stdout, stderr);
  if (attach->parsed()) {
    return hami::simctl::MigAttach(state_path, config_path, mig_uuid, pid, stdout, stderr);
  }
  return hami::simctl::InjectXid(state_path, config_path, device, code, stdout, stderr);
}
