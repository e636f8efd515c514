#include "sim/node/sim_runtime_hook.h"

#include <algorithm>
#include <sstream>

#include <nlohmann/json.hpp>

namespace hami::sim {
namespace {

std::string Trim(const std::string& s) {
  size_t b = s.find_first_not_of(" \t\r");
  if (b == std::string::npos) return "";
  size_t e = s.find_last_not_of(" \t\r");
  return s.substr(b, e - b + 1);
}

nlohmann::json BindMount(const std::string& source, const std::string& destination, bool ro) {
  nlohmann::json options = {"rbind", "nosuid", "nodev"};
  options.push_back(ro ? "ro" : "rw");
  return {{"destination", destination}, {"type", "bind"}, {"source", source},
          {"options", options}};
}

// NVIDIA_VISIBLE_DEVICES's value in a process.env list, or nullopt when it is not there.
std::optional<std::string> VisibleDevices(const nlohmann::json& env) {
  static const std::string kKey = "NVIDIA_VISIBLE_DEVICES=";
  std::optional<std::string> value;
  for (const auto& e : env) {
    const std::string& s = e.get_ref<const std::string&>();
    if (s.compare(0, kKey.size(), kKey) == 0) value = s.substr(kKey.size());  // the last wins
  }
  return value;
}

// Sets KEY=value in process.env, replacing an entry of the same key.
void SetEnv(nlohmann::json& env, const std::string& key, const std::string& value) {
  const std::string prefix = key + "=";
  for (auto& e : env) {
    if (e.get_ref<const std::string&>().compare(0, prefix.size(), prefix) == 0) {
      e = prefix + value;
      return;
    }
  }
  env.push_back(prefix + value);
}

// Whether the OCI process `process` names GPUs; InvalidArgument for a malformed env.
Result<bool> NamesGpus(const nlohmann::json& process) {
  if (!process.is_object() || !process.contains("env")) return false;
  const nlohmann::json& env = process["env"];
  if (!env.is_array()) return InvalidArgumentError("process.env is not a list");
  for (const auto& e : env) {
    if (!e.is_string()) return InvalidArgumentError("process.env holds a non-string");
  }
  std::optional<std::string> visible = VisibleDevices(env);
  return visible && !visible->empty() && *visible != "void";
}

void SetDriverEnv(nlohmann::json& env, const SimRuntimeConfig& config) {
  SetEnv(env, "HAMI_SIM_CONFIG", config.gpu_config);
  SetEnv(env, "HAMI_SIM_STATE", config.gpu_state);
  SetEnv(env, "HAMI_SIM_HOST_PROC", kHostProcMount);
}

// Where runc's command is in its arguments: its global flags come first, and the command is the
// first word that is not one of them or the value of one (--root, --log, --log-format and --criu
// take a value). args.size() when there is none.
size_t CommandIndex(const std::vector<std::string>& args) {
  size_t i = 0;
  for (; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a == "--root" || a == "--log" || a == "--log-format" || a == "--criu") {
      ++i;
      continue;
    }
    if (a.empty() || a[0] != '-') break;
  }
  return std::min(i, args.size());
}

}  // namespace

Result<SimRuntimeConfig> ParseSimRuntimeConfig(const std::string& text) {
  SimRuntimeConfig c;
  std::istringstream in(text);
  int n = 0;
  for (std::string line; std::getline(in, line);) {
    ++n;
    line = Trim(line.substr(0, line.find('#')));
    if (line.empty()) continue;
    size_t eq = line.find('=');
    if (eq == std::string::npos) {
      return InvalidArgumentError("line " + std::to_string(n) + ": expected key = value");
    }
    std::string key = Trim(line.substr(0, eq)), value = Trim(line.substr(eq + 1));
    if (key == "runc") {
      c.runc = value;
    } else if (key == "lib_dir") {
      c.lib_dir = value;
    } else if (key == "gpu_config") {
      c.gpu_config = value;
    } else if (key == "gpu_state") {
      c.gpu_state = value;
    } else if (key == "nvidia_smi") {
      c.nvidia_smi = value;
    } else {
      return InvalidArgumentError("line " + std::to_string(n) + ": unknown key '" + key + "'");
    }
  }
  for (const auto& [key, value] : {std::pair<const char*, const std::string*>{"runc", &c.runc},
                                   {"lib_dir", &c.lib_dir},
                                   {"gpu_config", &c.gpu_config},
                                   {"gpu_state", &c.gpu_state}}) {
    if (value->empty() || (*value)[0] != '/') {
      return InvalidArgumentError(std::string(key) + " must be an absolute path");
    }
  }
  if (!c.nvidia_smi.empty() && c.nvidia_smi[0] != '/') {
    return InvalidArgumentError("nvidia_smi must be an absolute path");
  }
  return c;
}

std::optional<std::string> CreateBundle(const std::vector<std::string>& args) {
  const size_t i = CommandIndex(args);
  if (i >= args.size() || (args[i] != "create" && args[i] != "run")) return std::nullopt;
  for (size_t j = i + 1; j < args.size(); ++j) {
    const std::string& a = args[j];
    if ((a == "--bundle" || a == "-b") && j + 1 < args.size()) return args[j + 1];
    if (a.rfind("--bundle=", 0) == 0) return a.substr(9);
    if (a.rfind("-b=", 0) == 0) return a.substr(3);
  }
  return std::string(".");
}

std::optional<std::string> ExecProcessFile(const std::vector<std::string>& args) {
  const size_t i = CommandIndex(args);
  if (i >= args.size() || args[i] != "exec") return std::nullopt;
  for (size_t j = i + 1; j < args.size(); ++j) {
    if ((args[j] == "--process" || args[j] == "-p") && j + 1 < args.size()) return args[j + 1];
    if (args[j].rfind("--process=", 0) == 0) return args[j].substr(10);
  }
  return std::nullopt;
}

Result<std::optional<std::string>> ProcessWithDriverEnv(const std::string& process_json,
                                                        const SimRuntimeConfig& config) {
  nlohmann::json process = nlohmann::json::parse(process_json, nullptr, false);
  if (process.is_discarded() || !process.is_object()) {
    return InvalidArgumentError("process.json is not a JSON object");
  }
  HAMI_ASSIGN_OR_RETURN(bool gpus, NamesGpus(process));
  if (!gpus) return std::nullopt;
  SetDriverEnv(process["env"], config);
  return std::optional<std::string>(process.dump());
}

Result<std::optional<std::string>> AddSimulatedDriver(const std::string& spec_json,
                                                      const SimRuntimeConfig& config) {
  nlohmann::json spec = nlohmann::json::parse(spec_json, nullptr, /*allow_exceptions=*/false);
  if (spec.is_discarded() || !spec.is_object()) {
    return InvalidArgumentError("config.json is not a JSON object");
  }
  if (!spec.contains("process") || !spec["process"].is_object()) return std::nullopt;
  nlohmann::json& process = spec["process"];
  HAMI_ASSIGN_OR_RETURN(bool gpus, NamesGpus(process));
  if (!gpus) return std::nullopt;
  nlohmann::json& env = process["env"];

  if (!spec.contains("mounts")) spec["mounts"] = nlohmann::json::array();
  nlohmann::json& mounts = spec["mounts"];
  if (!mounts.is_array()) return InvalidArgumentError("mounts is not a list");
  const std::string libs = "/usr/lib/x86_64-linux-gnu/";
  for (const char* lib : {"libcuda.so.1", "libnvidia-ml.so.1"}) {
    mounts.push_back(BindMount(config.lib_dir + "/" + lib, libs + lib, /*ro=*/true));
  }
  mounts.push_back(BindMount(config.gpu_config, config.gpu_config, /*ro=*/true));
  // The state file itself (a file, created by the node's device plugin before any container):
  // its folder may hold the kubelet's own (the world's node folder).
  mounts.push_back(BindMount(config.gpu_state, config.gpu_state, /*ro=*/false));
  mounts.push_back(BindMount("/proc", kHostProcMount, /*ro=*/true));
  if (!config.nvidia_smi.empty()) {
    mounts.push_back(BindMount(config.nvidia_smi, "/usr/bin/nvidia-smi", /*ro=*/true));
  }
  SetDriverEnv(env, config);
  return std::optional<std::string>(spec.dump());
}

Result<std::optional<std::string>> RaiseOomScoreAdj(const std::string& spec_json, int floor) {
  nlohmann::json spec = nlohmann::json::parse(spec_json, nullptr, /*allow_exceptions=*/false);
  if (spec.is_discarded() || !spec.is_object()) {
    return InvalidArgumentError("config.json is not a JSON object");
  }
  if (!spec.contains("process") || !spec["process"].is_object()) return std::nullopt;
  nlohmann::json& process = spec["process"];
  if (!process.contains("oomScoreAdj")) return std::nullopt;
  if (!process["oomScoreAdj"].is_number_integer()) {
    return InvalidArgumentError("process.oomScoreAdj is not an integer");
  }
  if (process["oomScoreAdj"].get<int64_t>() >= floor) return std::nullopt;
  process["oomScoreAdj"] = floor;
  return std::optional<std::string>(spec.dump());
}

std::optional<int> SpecOomScoreAdj(const std::string& spec_json) {
  nlohmann::json spec = nlohmann::json::parse(spec_json, nullptr, /*allow_exceptions=*/false);
  if (spec.is_discarded() || !spec.is_object() || !spec.contains("process") ||
      !spec["process"].is_object() || !spec["process"].contains("oomScoreAdj") ||
      !spec["process"]["oomScoreAdj"].is_number_integer()) {
    return std::nullopt;
  }
  return spec["process"]["oomScoreAdj"].get<int>();
}

}  // namespace hami::sim
