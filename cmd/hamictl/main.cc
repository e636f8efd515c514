// hamictl: the operator/user CLI of hami-cpp. Flag parsing and wiring only; the verbs live in
// src/ctl (ctl/verbs.h).
#include <CLI/CLI.hpp>
#include <iostream>
#include <string>
#include <vector>

#include "ctl/exit_codes.h"
#include "ctl/nvidia_smi.h"
#include "ctl/run_spec.h"
#include "ctl/verbs.h"
#include "vgpu/log.h"

namespace {

struct RegionFlags {
  std::string path;
  bool json = false;
  int wait_ms = 0;
  std::vector<std::string> mem;
  std::vector<std::string> cores;
};

// A repeatable option taking one value per occurrence.
CLI::Option* Repeatable(CLI::App* app, const std::string& name, std::vector<std::string>* into,
                        const std::string& help) {
  return app->add_option(name, *into, help)->allow_extra_args(false)->type_name("VALUE");
}

// A clearer message than CLI11's "A subcommand is required" for a mistyped verb: the word at
// argv[index] under `parent`. Empty when the word names a verb or is not a word at all.
std::string UnknownVerb(CLI::App* parent, int argc, char** argv, int index) {
  if (index >= argc || argv[index][0] == '-') return "";
  std::string word = argv[index], names;
  for (CLI::App* sub : parent->get_subcommands([](CLI::App*) { return true; })) {
    if (sub->get_name() == word) return "";
    names += (names.empty() ? "" : ", ") + sub->get_name();
  }
  return "unknown verb '" + word + "' (expected one of: " + names + ")";
}

// `hamictl run`: flags into `run`.
CLI::App* AddRunVerb(CLI::App& app, hami::ctl::RunFlags* run) {
  CLI::App* run_cmd =
      app.add_subcommand("run", "Run COMMAND with libvgpu.so preloaded under memory and SM quotas");
  Repeatable(run_cmd, "--mem", &run->mem,
             "Memory quota: SIZE for every device or IDX=SIZE (4Gi, 4096m, bytes); repeatable");
  Repeatable(run_cmd, "--cores", &run->cores,
             "SM quota in percent: PCT for every device or IDX=PCT; repeatable");
  run_cmd->add_option("--policy", run->policy, "SM limit policy: default, force or disable");
  run_cmd->add_option("--priority", run->priority, "CUDA_TASK_PRIORITY (0 = high)");
  run_cmd->add_option("--region", run->region,
                      "Region file to use (shared with other commands; kept afterwards)");
  run_cmd->add_flag("--keep-region", run->keep_region,
                    "Keep the temp region after the command");
  run_cmd->add_flag("--sim", run->sim, "Use the simulated GPU driver next to hamictl");
  run_cmd->add_option("--sim-state", run->sim_state,
                      "Simulator state file (default: $HAMI_SIM_STATE or /tmp/hami-sim/state)");
  run_cmd->add_option("--lib", run->lib, "libvgpu.so to preload (default: ../lib/libvgpu.so)");
  run_cmd->add_option("--log-level", run->log_level,
                      "LIBCUDA_LOG_LEVEL, 0 (errors) to 4 (debug)");
  run_cmd->add_flag(
      "--summary", run->summary,
      "After the command, print peak usage, limit and OOM denials per device (stderr)");
  run_cmd->add_option("command", run->command, "COMMAND [ARGS...] (after --)");
  run_cmd->positionals_at_end();
  run_cmd->footer(
      "Usage: hamictl run [FLAGS] -- COMMAND [ARGS...]\n"
      "Exit status: COMMAND's (128+N if killed by signal N); 2 bad flags; 125 hamictl failed;\n"
      "126/127 COMMAND not executable/not found.\n"
      "Examples:\n"
      "  hamictl run --mem 4Gi --cores 30 -- python3 train.py\n"
      "  hamictl run --sim --mem 0=4Gi --summary -- vgpu_probe fill --chunk 256Mi");
  return run_cmd;
}

// The `hamictl region` verbs; main tells which one was given.
struct RegionVerbs {
  CLI::App* region;
  CLI::App* show;
  CLI::App* suspend;
  CLI::App* resume;
  CLI::App* sweep;
  CLI::App* set;
};

// `hamictl region show|suspend|resume|sweep|set`: flags into `f`.
RegionVerbs AddRegionVerbs(CLI::App& app, RegionFlags* f) {
  RegionVerbs v;
  v.region = app.add_subcommand("region", "Inspect or change a shared region");
  v.region->require_subcommand(1);
  v.show = v.region->add_subcommand("show", "Show quotas, usage and processes");
  v.show->add_option("path", f->path, "Region file")->required();
  v.show->add_flag("--json", f->json, "JSON output");
  v.suspend =
      v.region->add_subcommand("suspend", "Pause launches and allocations of the container");
  v.suspend->add_option("path", f->path, "Region file")->required();
  v.suspend->add_option("--wait-ms", f->wait_ms,
                        "Wait up to N ms until every live process reports suspended");
  v.resume = v.region->add_subcommand("resume", "Undo suspend");
  v.resume->add_option("path", f->path, "Region file")->required();
  v.sweep = v.region->add_subcommand("sweep", "Reclaim slots of exited processes");
  v.sweep->add_option("path", f->path, "Region file")->required();
  v.set = v.region->add_subcommand("set", "Change quotas of a live region");
  v.set->add_option("path", f->path, "Region file")->required();
  Repeatable(v.set, "--mem", &f->mem, "IDX=SIZE (or SIZE for every device; 0 = no limit)");
  Repeatable(v.set, "--cores", &f->cores, "IDX=PCT (or PCT for every device; 0 = no limit)");
  return v;
}

}  // namespace

int main(int argc, char** argv) {
  // The region code logs through libvgpu's logger; hamictl reports results itself.
  hami::vgpu::SetLogLevel(hami::vgpu::kLogWarn);

  // Called as nvidia-smi (the link the simulated kubelet puts in GPU containers).
  std::string self = argc > 0 ? argv[0] : "";
  if (self.substr(self.find_last_of('/') + 1) == "nvidia-smi") {
    return hami::ctl::NvidiaSmiMain(std::vector<std::string>(argv + 1, argv + argc), std::cout,
                                    std::cerr);
  }

  CLI::App app{"hamictl: run commands under GPU quotas and inspect their shared regions",
               "hamictl"};
  app.require_subcommand(1);
  app.set_help_all_flag("--help-all", "Show help for every verb");

  hami::ctl::RunFlags run;
  CLI::App* run_cmd = AddRunVerb(app, &run);
  RegionFlags region;
  const RegionVerbs verbs = AddRegionVerbs(app, &region);

  bool smi_json = false;
  CLI::App* smi = app.add_subcommand("smi", "nvidia-smi-like view through NVML");
  smi->add_flag("--json", smi_json, "JSON output");

  std::string build_dir;
  CLI::App* demo =
      app.add_subcommand("demo", "Show quotas at work on the simulated GPU (the README's demo)");
  demo->add_option("--build-dir", build_dir, "Build tree with bin/, lib/ and sim/");

  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    std::string why = UnknownVerb(&app, argc, argv, 1);
    if (why.empty() && argc > 1 && std::string(argv[1]) == "region") {
      why = UnknownVerb(verbs.region, argc, argv, 2);
    }
    std::cerr << "hamictl: " << (why.empty() ? e.what() : why) << " (see hamictl --help)\n";
    return hami::ctl::kExitUsage;
  }

  using namespace hami::ctl;
  const std::string& path = region.path;
  if (*run_cmd) return RunVerb(run, std::cerr);
  if (*verbs.show) return RegionShowVerb(path, region.json, std::cout, std::cerr);
  if (*verbs.suspend) return RegionSuspendVerb(path, region.wait_ms, std::cout, std::cerr);
  if (*verbs.resume) return RegionResumeVerb(path, std::cout, std::cerr);
  if (*verbs.sweep) return RegionSweepVerb(path, std::cout, std::cerr);
  if (*verbs.set) return RegionSetVerb(path, region.mem, region.cores, std::cout, std::cerr);
  if (*smi) return SmiVerb(smi_json, std::cout, std::cerr);
  if (*demo) return DemoVerb(build_dir, std::cout, std::cerr);
  return kExitUsage;
}
