// hami-sim-container-runtime: runc with the simulated NVIDIA driver added to GPU containers
// (sim_runtime_hook.h), for the tests' real node. containerd runs it as its runc (BinaryName);
// HAMI_SIM_RUNTIME_CONFIG names its config file (inherited from containerd through the shim).
// Without that variable no driver is added and runc is /usr/sbin/runc. On a kernel that refuses
// to lower OOM scores, a container's score is kept at the floor (RaiseOomScoreAdj).
#include <unistd.h>

#include <climits>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "common/file_util.h"
#include "sim/node/sim_runtime_hook.h"

namespace {

// Whether this process may set its OOM score adjustment to `value` (tried, then put back).
bool CanSetOomScore(int value) {
  FILE* f = std::fopen("/proc/self/oom_score_adj", "r+");
  if (f == nullptr) return true;
  int current = 0;
  bool can = std::fscanf(f, "%d", &current) == 1;
  std::rewind(f);
  can = can && std::fprintf(f, "%d\n", value) > 0 && std::fflush(f) == 0;
  if (can) {
    std::rewind(f);
    std::fprintf(f, "%d\n", current);
    std::fflush(f);
  }
  std::fclose(f);
  return can;
}

// The lowest OOM score the container may get: INT_MIN when its spec's own can be set here, else
// 0 when that can, else 1000.
int OomScoreFloor(const std::string& spec) {
  std::optional<int> wanted = hami::sim::SpecOomScoreAdj(spec);
  if (!wanted || CanSetOomScore(*wanted)) return INT_MIN;
  return CanSetOomScore(0) ? 0 : 1000;
}

int Fail(const std::string& message) {
  // runc's caller (containerd's shim) reports runc's error output with the failed create.
  std::fprintf(stderr, "hami-sim-container-runtime: %s\n", message.c_str());
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  using hami::sim::SimRuntimeConfig;
  std::vector<std::string> args(argv + 1, argv + argc);
  SimRuntimeConfig config;
  const char* config_path = std::getenv("HAMI_SIM_RUNTIME_CONFIG");
  bool configured = config_path != nullptr && *config_path != '\0';
  if (configured) {
    hami::Result<std::string> text = hami::ReadFileToString(config_path);
    if (!text.ok()) return Fail(text.status().ToString());
    hami::Result<SimRuntimeConfig> parsed = hami::sim::ParseSimRuntimeConfig(*text);
    if (!parsed.ok()) return Fail(std::string(config_path) + ": " + parsed.status().ToString());
    config = *parsed;
  }
  if (std::optional<std::string> bundle = hami::sim::CreateBundle(args)) {
    const std::string spec_path = *bundle + "/config.json";
    hami::Result<std::string> spec = hami::ReadFileToString(spec_path);
    if (!spec.ok()) return Fail(spec.status().ToString());
    std::string text = *spec;
    bool changed = false;
    if (configured) {
      auto edited = hami::sim::AddSimulatedDriver(text, config);
      if (!edited.ok()) return Fail(spec_path + ": " + edited.status().ToString());
      if (*edited) text = **edited, changed = true;
    }
    const int floor = OomScoreFloor(text);
    auto raised = hami::sim::RaiseOomScoreAdj(text, floor);
    if (!raised.ok()) return Fail(spec_path + ": " + raised.status().ToString());
    if (*raised) {
      std::fprintf(stderr,
                   "hami-sim-container-runtime: this kernel refuses OOM scores below %d; the "
                   "container keeps %d\n",
                   floor, floor);
      text = **raised, changed = true;
    }
    if (changed) {
      hami::Status written = hami::WriteFileAtomically(spec_path, text, 0644);
      if (!written.ok()) return Fail(written.ToString());
    }
  }
  if (std::optional<std::string> file = hami::sim::ExecProcessFile(args); file && configured) {
    hami::Result<std::string> process = hami::ReadFileToString(*file);
    if (!process.ok()) return Fail(process.status().ToString());
    auto edited = hami::sim::ProcessWithDriverEnv(*process, config);
    if (!edited.ok()) return Fail(*file + ": " + edited.status().ToString());
    if (*edited) {
      hami::Status written = hami::WriteFileAtomically(*file, **edited, 0644);
      if (!written.ok()) return Fail(written.ToString());
    }
  }
  std::vector<char*> runc_argv;
  runc_argv.push_back(const_cast<char*>(config.runc.c_str()));
  for (int i = 1; i < argc; ++i) runc_argv.push_back(argv[i]);
  runc_argv.push_back(nullptr);
  execv(config.runc.c_str(), runc_argv.data());
  return Fail("cannot run " + config.runc);
}
