// Fuzzes libvgpu's environment configuration: the input is a list of KEY=VALUE lines that
// becomes the process environment seen by LoadConfig.
#include <stdint.h>

#include <map>
#include <sstream>
#include <string>

#include "vgpu/config.h"
#include "vgpu/log.h"

namespace {
std::map<std::string, std::string> g_env;
const char* Env(const char* name) {
  auto it = g_env.find(name);
  return it == g_env.end() ? nullptr : it->second.c_str();
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  hami::vgpu::SetLogLevel(-1);  // keep the fuzzer's output readable
  g_env.clear();
  std::istringstream in(std::string(reinterpret_cast<const char*>(data), size));
  std::string line;
  while (std::getline(in, line)) {
    auto eq = line.find('=');
    if (eq != std::string::npos) g_env[line.substr(0, eq)] = line.substr(eq + 1);
  }
  hami::vgpu::Config cfg;
  hami::vgpu::LoadConfig(Env, &cfg);
  for (int i = 0; i < hami::vgpu::kMaxDevices; ++i) {
    if (cfg.init.sm_limit[i] > 100) __builtin_trap();
  }
  if (cfg.region_path[0] == '\0') __builtin_trap();
  return 0;
}
