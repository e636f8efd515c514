// hami-sim-container-runtime: runc with the simulated NVIDIA driver added to GPU containers
// (sim_runtime_hook.h), for the tests' real node. containerd runs it as its runc (BinaryName);
// HAMI_SIM_RUNTIME_CONFIG names its config file (inherited from containerd through the shim).
// Without that variable every call goes to /usr/sbin/runc untouched.
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "common/file_util.h"
#include "sim/node/sim_runtime_hook.h"

namespace {

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
  if (std::optional<std::string> bundle = hami::sim::CreateBundle(args);
      configured && bundle) {
    const std::string spec_path = *bundle + "/config.json";
    hami::Result<std::string> spec = hami::ReadFileToString(spec_path);
    if (!spec.ok()) return Fail(spec.status().ToString());
    auto edited = hami::sim::AddSimulatedDriver(*spec, config);
    if (!edited.ok()) return Fail(spec_path + ": " + edited.status().ToString());
    if (*edited) {
      hami::Status written = hami::WriteFileAtomically(spec_path, **edited, 0644);
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
