#include "ctl/run_spec.h"

#include <ctype.h>
#include <stdlib.h>

#include <algorithm>

#include "common/env_limits.h"
#include "vgpu/region.h"

extern char** environ;

namespace hami::ctl {
namespace {

// Parses a small non-negative decimal integer with no sign, spaces or suffix.
bool ParseSmallInt(const std::string& text, int max, int* out) {
  if (text.empty() || text.size() > 9) return false;
  for (char c : text) {
    if (!isdigit(static_cast<unsigned char>(c))) return false;
  }
  int v = atoi(text.c_str());
  if (v > max) return false;
  *out = v;
  return true;
}

// Splits "IDX=VALUE" into a device index and the value; "VALUE" gives device -1.
bool SplitIndexed(const std::string& flag, const std::string& text, int* device, std::string* value,
                  std::string* error) {
  if (text.size() >= 2 && text[0] == '-' && !isdigit(static_cast<unsigned char>(text[1]))) {
    // "--mem --" or "--mem --cores": the value was forgotten.
    *error = flag + " needs a value (got '" + text + "')";
    return false;
  }
  size_t eq = text.find('=');
  if (eq == std::string::npos) {
    *device = -1;
    *value = text;
    return true;
  }
  std::string idx = text.substr(0, eq);
  if (!ParseSmallInt(idx, vgpu::kMaxDevices - 1, device)) {
    *error = flag + " " + text + ": device index '" + idx + "' is not a number between 0 and " +
             std::to_string(vgpu::kMaxDevices - 1);
    return false;
  }
  *value = text.substr(eq + 1);
  return true;
}

std::string Lower(std::string s) {
  for (char& c : s) c = static_cast<char>(tolower(static_cast<unsigned char>(c)));
  return s;
}

bool StartsWith(const std::string& s, const std::string& prefix) {
  return s.compare(0, prefix.size(), prefix) == 0;
}

// True for the variables of the env contract that `run` owns.
bool IsContractVariable(const std::string& key) {
  return key == "CUDA_DEVICE_MEMORY_LIMIT" || StartsWith(key, "CUDA_DEVICE_MEMORY_LIMIT_") ||
         key == "CUDA_DEVICE_SM_LIMIT" || StartsWith(key, "CUDA_DEVICE_SM_LIMIT_") ||
         key == "CUDA_DEVICE_MEMORY_SHARED_CACHE" || key == "GPU_CORE_UTILIZATION_POLICY" ||
         key == "CUDA_TASK_PRIORITY" || key == "CUDA_DISABLE_CONTROL";
}

std::string KeyOf(const std::string& entry) { return entry.substr(0, entry.find('=')); }

}  // namespace

bool ParseMemQuota(const std::string& flag, const std::string& text, bool allow_zero, MemQuota* out,
                   std::string* error) {
  std::string value;
  if (!SplitIndexed(flag, text, &out->device, &value, error)) return false;
  uint64_t bytes = 0;
  if (const char* why = ParseByteSize(value.c_str(), &bytes); why != nullptr) {
    *error = flag + " " + text + ": " + why;
    return false;
  }
  if (bytes == 0 && !allow_zero) {
    *error = flag + " " + text + ": a memory limit must be greater than zero (leave out " + flag +
             " for no limit)";
    return false;
  }
  out->bytes = bytes;
  return true;
}

bool ParseCoreQuota(const std::string& flag, const std::string& text, bool allow_zero,
                    CoreQuota* out, std::string* error) {
  std::string value;
  if (!SplitIndexed(flag, text, &out->device, &value, error)) return false;
  int pct = 0;
  if (const char* why = ParsePercent(value.c_str(), &pct); why != nullptr) {
    *error = flag + " " + text + ": " + why;
    return false;
  }
  if (pct == 0 && !allow_zero) {
    *error = flag + " " + text + ": an SM limit must be between 1 and 100 (leave out " + flag +
             " for no limit)";
    return false;
  }
  out->percent = pct;
  return true;
}

bool ValidateRunFlags(const RunFlags& flags, RunSpec* spec, std::string* error) {
  *spec = RunSpec();
  bool mem_seen[vgpu::kMaxDevices + 1] = {};  // index 0 is "every device"
  for (const auto& text : flags.mem) {
    MemQuota q;
    if (!ParseMemQuota("--mem", text, false, &q, error)) return false;
    if (mem_seen[q.device + 1]) {
      *error = q.device < 0 ? "--mem SIZE given twice"
                            : "--mem given twice for device " + std::to_string(q.device);
      return false;
    }
    mem_seen[q.device + 1] = true;
    spec->mem.push_back(q);
  }
  bool cores_seen[vgpu::kMaxDevices + 1] = {};
  for (const auto& text : flags.cores) {
    CoreQuota q;
    if (!ParseCoreQuota("--cores", text, false, &q, error)) return false;
    if (cores_seen[q.device + 1]) {
      *error = q.device < 0 ? "--cores PCT given twice"
                            : "--cores given twice for device " + std::to_string(q.device);
      return false;
    }
    cores_seen[q.device + 1] = true;
    spec->cores.push_back(q);
  }
  if (!flags.policy.empty()) {
    std::string p = Lower(flags.policy);
    if (p != "default" && p != "force" && p != "disable") {
      *error = "--policy " + flags.policy + ": expected default, force or disable";
      return false;
    }
    spec->policy = p;
  }
  if (!flags.priority.empty()) {
    int p = 0;
    if (!ParseSmallInt(flags.priority, 1000, &p)) {
      *error =
          "--priority " + flags.priority + ": expected an integer between 0 (highest) and 1000";
      return false;
    }
    spec->priority = p;
  }
  if (!flags.log_level.empty()) {
    int level = 0;
    if (!ParseSmallInt(flags.log_level, 4, &level)) {
      *error = "--log-level " + flags.log_level + ": expected 0 (errors) to 4 (debug)";
      return false;
    }
    spec->log_level = level;
  }
  if (!flags.sim_state.empty() && !flags.sim) {
    *error = "--sim-state only makes sense with --sim";
    return false;
  }
  if (flags.command.empty() || flags.command[0].empty()) {
    *error = "no command given: hamictl run [FLAGS] -- COMMAND [ARGS...]";
    return false;
  }
  spec->region = flags.region;
  spec->keep_region = flags.keep_region;
  spec->sim = flags.sim;
  spec->sim_state = flags.sim_state;
  spec->lib = flags.lib;
  spec->summary = flags.summary;
  spec->command = flags.command;
  return true;
}

std::optional<std::string> EnvValue(const std::vector<std::string>& env, const std::string& key) {
  for (const auto& entry : env) {
    if (entry.size() > key.size() && entry[key.size()] == '=' && StartsWith(entry, key)) {
      return entry.substr(key.size() + 1);
    }
  }
  return std::nullopt;
}

std::vector<std::string> BuildRunEnv(const RunSpec& spec, const std::vector<std::string>& base,
                                     const RunPaths& paths, const std::string& region_path) {
  std::vector<std::string> env;
  std::string preload, library_path;
  bool have_library_path = false;
  std::optional<std::string> caller_sim_state;
  for (const auto& entry : base) {
    std::string key = KeyOf(entry);
    std::string value = entry.size() > key.size() ? entry.substr(key.size() + 1) : "";
    if (IsContractVariable(key)) continue;
    if (key == "LD_PRELOAD") {
      preload = value;
      continue;
    }
    if (key == "LIBCUDA_LOG_LEVEL" && spec.log_level) continue;
    if (spec.sim && key == "LD_LIBRARY_PATH") {
      library_path = value;
      have_library_path = true;
      continue;
    }
    if (spec.sim && key == "HAMI_SIM_STATE") {
      caller_sim_state = value;
      continue;
    }
    env.push_back(entry);
  }

  // LD_PRELOAD: the caller's entries first (a sanitizer runtime must be), then libvgpu, once.
  std::string joined;
  size_t pos = 0;
  while (pos <= preload.size()) {
    size_t end = preload.find_first_of(": ", pos);
    if (end == std::string::npos) end = preload.size();
    std::string item = preload.substr(pos, end - pos);
    if (!item.empty() && item != paths.lib) joined += (joined.empty() ? "" : ":") + item;
    pos = end + 1;
  }
  joined += (joined.empty() ? "" : ":") + paths.lib;
  env.push_back("LD_PRELOAD=" + joined);

  for (const auto& q : spec.mem) {
    std::string key = q.device < 0 ? "CUDA_DEVICE_MEMORY_LIMIT"
                                   : "CUDA_DEVICE_MEMORY_LIMIT_" + std::to_string(q.device);
    env.push_back(key + "=" + std::to_string(q.bytes));
  }
  for (const auto& q : spec.cores) {
    std::string key =
        q.device < 0 ? "CUDA_DEVICE_SM_LIMIT" : "CUDA_DEVICE_SM_LIMIT_" + std::to_string(q.device);
    env.push_back(key + "=" + std::to_string(q.percent));
  }
  if (!spec.policy.empty()) env.push_back("GPU_CORE_UTILIZATION_POLICY=" + spec.policy);
  if (spec.priority) env.push_back("CUDA_TASK_PRIORITY=" + std::to_string(*spec.priority));
  if (spec.log_level) env.push_back("LIBCUDA_LOG_LEVEL=" + std::to_string(*spec.log_level));
  env.push_back("CUDA_DEVICE_MEMORY_SHARED_CACHE=" + region_path);

  if (spec.sim) {
    env.push_back("LD_LIBRARY_PATH=" + paths.sim_dir +
                  (have_library_path && !library_path.empty() ? ":" + library_path : ""));
    std::string state = spec.sim_state;
    if (state.empty() && caller_sim_state && !caller_sim_state->empty()) state = *caller_sim_state;
    if (state.empty()) state = kDefaultSimState;
    env.push_back("HAMI_SIM_STATE=" + state);
  }
  return env;
}

std::vector<std::string> CurrentEnvironment() {
  std::vector<std::string> env;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) env.emplace_back(*e);
  return env;
}

}  // namespace hami::ctl
