// hami-simctl: inspect and poke the simulated GPU node. See commands.h and
// src/sim/gpu/README.md.
//
//   hami-simctl [--state PATH] [--config FILE]
//       status | inject-xid --device N --xid CODE [--gi ID [--ci ID]] | mig |
//       mig-attach --uuid MIG-... --pid PID | mig-create --device N --profile NAME [--start S] |
//       mig-destroy --device N --gi ID | mig-mode --device N --enable|--disable | reset

#include <CLI/CLI.hpp>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>

#include "commands.h"
#include "common/go_flags.h"
#include "sim/gpu/shared_state.h"

namespace {

// What the subcommands' flags parse into.
struct Args {
  int device = 0;
  uint32_t xid = 0;
  hami::simctl::XidInstance instance;
  std::string mig_uuid;
  int pid = 0;
  std::string profile;
  int start = -1;  // none: the driver picks
  int64_t gi_id = -1;
  bool enable = false, disable = false;
};

struct Subcommands {
  CLI::App* status;
  CLI::App* reset;
  CLI::App* xid;
  CLI::App* mig;
  CLI::App* attach;
  CLI::App* create;
  CLI::App* destroy;
  CLI::App* mode;
};

void AddDevice(CLI::App* cmd, Args& args) {
  cmd->add_option("--device", args.device, "physical device index")
      ->required()
      ->check(CLI::Range(0, 1023));
}

// The MIG operator commands (commands.h).
void AddMigCommands(CLI::App& app, Args& args, Subcommands& c) {
  c.create = app.add_subcommand(
      "mig-create",
      "make a GPU instance and a compute instance spanning it (as nvidia-smi mig -cgi NAME -C); "
      "prints the MIG device's UUID first");
  AddDevice(c.create, args);
  c.create
      ->add_option("--profile", args.profile,
                   "GPU instance profile as NVML names it, without \"MIG \" (1g.10gb, "
                   "1g.10gb+me, 3g.40gb ...)")
      ->required();
  c.create
      ->add_option("--start", args.start,
                   "memory slice it starts at (default: the free placement the driver picks)")
      ->check(CLI::Range(0, 7));
  c.destroy = app.add_subcommand(
      "mig-destroy", "destroy a GPU instance and its compute instances (nvidia-smi mig -dci -dgi)");
  AddDevice(c.destroy, args);
  c.destroy->add_option("--gi", args.gi_id, "the GPU instance id (see `hami-simctl mig`)")
      ->required()
      ->check(CLI::Range(0, 1023));
  c.mode = app.add_subcommand("mig-mode", "turn MIG on or off (nvidia-smi -mig 1|0)");
  AddDevice(c.mode, args);
  CLI::Option* on = c.mode->add_flag("--enable", args.enable, "turn MIG on");
  c.mode->add_flag("--disable", args.disable, "turn MIG off")->excludes(on);
}

Subcommands AddCommands(CLI::App& app, Args& args) {
  Subcommands c{};
  c.status = app.add_subcommand("status", "devices, memory per process, utilisation");
  c.reset = app.add_subcommand("reset", "discard the shared state file");
  c.xid = app.add_subcommand("inject-xid", "post an XID error on a physical device");
  AddDevice(c.xid, args);
  c.xid->add_option("--xid", args.xid, "the XID code")->required();
  c.xid
      ->add_option("--gi", args.instance.gi_id,
                   "charge the XID to this GPU instance of the device (must exist; NVML reports "
                   "it as the event's gpuInstanceId)")
      ->check(CLI::Range(0, 1023));
  c.xid
      ->add_option("--ci", args.instance.ci_id,
                   "and to this compute instance of it (needs --gi; the event's computeInstanceId)")
      ->check(CLI::Range(0, 1023));
  c.mig = app.add_subcommand("mig", "MIG mode, GPU instances and compute instances");
  c.attach = app.add_subcommand(
      "mig-attach", "test hook: count a running process as running inside a MIG device");
  c.attach->add_option("--uuid", args.mig_uuid, "the MIG device's UUID (MIG-...)")->required();
  c.attach->add_option("--pid", args.pid, "a running process")->required();
  AddMigCommands(app, args, c);
  return c;
}

}  // namespace

int main(int argc, char** argv) {
  namespace simctl = hami::simctl;
  CLI::App app{
      "hami-simctl: inspect and poke the simulated GPU node. The state file is --state, else "
      "$HAMI_SIM_STATE, else /tmp/hami-sim/state."};
  std::string state = hami::sim::StatePathFromEnv();
  const char* env_config = std::getenv("HAMI_SIM_CONFIG");
  std::string config = env_config != nullptr ? env_config : "";
  app.add_option("--state", state,
                 "the simulated node's shared state file (HAMI_SIM_STATE of its kubelet and "
                 "device plugin)")
      ->capture_default_str();
  app.add_option("--config", config,
                 "the node's device config (default $HAMI_SIM_CONFIG; none: the built-in node "
                 "of two A100s); the state must have been made from it")
      ->capture_default_str();
  app.require_subcommand(1);
  Args a;
  const Subcommands c = AddCommands(app, a);
  app.name("hami-simctl");
  if (std::optional<int> exit = hami::ParseGoStyleFlags(app, argc, argv)) return *exit;
  FILE* out = stdout;
  FILE* err = stderr;
  if (c.status->parsed()) return simctl::Status(state, config, out, err);
  if (c.reset->parsed()) return simctl::Reset(state, out, err);
  if (c.mig->parsed()) return simctl::MigList(state, config, out, err);
  if (c.attach->parsed()) return simctl::MigAttach(state, config, a.mig_uuid, a.pid, out, err);
  if (c.create->parsed()) {
    return simctl::MigCreate(state, config, a.device, a.profile, a.start, out, err);
  }
  if (c.destroy->parsed()) return simctl::MigDestroy(state, config, a.device, a.gi_id, out, err);
  if (c.mode->parsed()) {
    if (!a.enable && !a.disable) {
      fprintf(err, "hami-simctl mig-mode: give --enable or --disable\n");
      return 2;
    }
    return simctl::MigMode(state, config, a.device, a.enable, out, err);
  }
  return simctl::InjectXid(state, config, a.device, a.xid, a.instance, out, err);
}
