#include "device/config.h"

#include <yaml-cpp/yaml.h>

#include <charconv>
#include <cmath>
#include <exception>
#include <limits>
#include <set>

#include "device/text_util.h"

namespace hami::device {

namespace {

std::string Path(std::string_view section, std::string_view key) {
  return std::string(section) + "." + std::string(key);
}

Status ScalarText(const YAML::Node& n, const std::string& path, std::string* out) {
  if (!n.IsScalar()) return InvalidArgumentError(path + ": expected a scalar value");
  *out = n.Scalar();
  return OkStatus();
}

Status ReadString(const YAML::Node& n, const std::string& path, std::string* out) {
  if (n.IsNull()) {
    out->clear();
    return OkStatus();
  }
  return ScalarText(n, path, out);
}

Status ReadInt(const YAML::Node& n, const std::string& path, int64_t min, int64_t max,
               int64_t* out) {
  std::string s;
  HAMI_RETURN_IF_ERROR(ScalarText(n, path, &s));
  int64_t v = 0;
  if (const char* why = text::ParseInt(text::TrimSpace(s), std::numeric_limits<int64_t>::min(),
                                       std::numeric_limits<int64_t>::max(), &v)) {
    return InvalidArgumentError(
        path + ": " + text::Quote(s) + " is " +
        (std::string_view(why) == "not an integer" ? "not an integer" : "out of range"));
  }
  if (v < min || v > max) {
    return InvalidArgumentError(path + ": " + std::to_string(v) + " is out of range [" +
                                std::to_string(min) + ", " + std::to_string(max) + "]");
  }
  *out = v;
  return OkStatus();
}

template <typename T>
Status ReadIntAs(const YAML::Node& n, const std::string& path, int64_t min, int64_t max, T* out) {
  int64_t v = 0;
  HAMI_RETURN_IF_ERROR(ReadInt(n, path, min, max, &v));
  *out = static_cast<T>(v);
  return OkStatus();
}

Status ReadBool(const YAML::Node& n, const std::string& path, bool* out) {
  std::string s;
  HAMI_RETURN_IF_ERROR(ScalarText(n, path, &s));
  std::string l = text::AsciiLower(text::TrimSpace(s));
  if (l == "true" || l == "yes" || l == "on" || l == "y") {
    *out = true;
  } else if (l == "false" || l == "no" || l == "off" || l == "n") {
    *out = false;
  } else {
    return InvalidArgumentError(path + ": " + text::Quote(s) + " is not true or false");
  }
  return OkStatus();
}

Status ReadPositiveDouble(const YAML::Node& n, const std::string& path, double* out) {
  std::string s;
  HAMI_RETURN_IF_ERROR(ScalarText(n, path, &s));
  std::string_view t = text::TrimSpace(s);
  if (!t.empty() && t.front() == '+') t.remove_prefix(1);
  double v = 0;
  auto [end, ec] = std::from_chars(t.data(), t.data() + t.size(), v);
  if (t.empty() || ec != std::errc() || end != t.data() + t.size() || !std::isfinite(v)) {
    return InvalidArgumentError(path + ": " + text::Quote(s) + " is not a number");
  }
  if (v <= 0) return InvalidArgumentError(path + ": must be greater than 0, got " + s);
  *out = v;
  return OkStatus();
}

Status ReadStringList(const YAML::Node& n, const std::string& path, std::vector<std::string>* out) {
  out->clear();
  if (n.IsNull()) return OkStatus();
  if (!n.IsSequence()) return InvalidArgumentError(path + ": expected a list");
  for (size_t i = 0; i < n.size(); ++i) {
    std::string s;
    HAMI_RETURN_IF_ERROR(ScalarText(n[i], path + "[" + std::to_string(i) + "]", &s));
    out->push_back(std::move(s));
  }
  return OkStatus();
}

// "<N>g.<x>" with N a positive integer and x non-empty.
bool LooksLikeMigProfile(std::string_view p) {
  size_t g = p.find("g.");
  if (g == 0 || g == std::string_view::npos || g + 2 >= p.size()) return false;
  for (size_t i = 0; i < g; ++i) {
    if (p[i] < '0' || p[i] > '9') return false;
  }
  return true;
}

Status ReadAllowlist(const YAML::Node& n, const std::string& path,
                     std::vector<MigAllowlistEntry>* out) {
  out->clear();
  if (n.IsNull()) return OkStatus();
  if (!n.IsSequence()) return InvalidArgumentError(path + ": expected a list");
  for (size_t i = 0; i < n.size(); ++i) {
    std::string ep = path + "[" + std::to_string(i) + "]";
    const YAML::Node e = n[i];
    if (!e.IsMap()) return InvalidArgumentError(ep + ": expected a map with models and profiles");
    MigAllowlistEntry entry;
    for (auto it = e.begin(); it != e.end(); ++it) {
      std::string key = it->first.Scalar();
      if (key == "models") {
        HAMI_RETURN_IF_ERROR(ReadStringList(it->second, ep + ".models", &entry.models));
      } else if (key == "profiles") {
        HAMI_RETURN_IF_ERROR(ReadStringList(it->second, ep + ".profiles", &entry.profiles));
      } else {
        return InvalidArgumentError(ep + "." + key + ": unknown key (want models, profiles)");
      }
    }
    for (size_t k = 0; k < entry.profiles.size(); ++k) {
      if (!LooksLikeMigProfile(entry.profiles[k])) {
        return InvalidArgumentError(ep + ".profiles[" + std::to_string(k) +
                                    "]: " + text::Quote(entry.profiles[k]) +
                                    " is not a MIG profile name like \"1g.10gb\"");
      }
    }
    out->push_back(std::move(entry));
  }
  return OkStatus();
}

Status ParseNvidiaSection(const YAML::Node& n, NvidiaConfig* c,
                          std::vector<std::string>* warnings) {
  constexpr std::string_view kSection = "nvidia";
  if (n.IsNull()) return OkStatus();
  if (!n.IsMap()) return InvalidArgumentError("nvidia: expected a map of settings");
  std::set<std::string> seen;
  for (auto it = n.begin(); it != n.end(); ++it) {
    if (!it->first.IsScalar()) return InvalidArgumentError("nvidia: keys must be plain names");
    const std::string key = it->first.Scalar();
    const YAML::Node v = it->second;  // a copy: the iterator hands out a temporary
    const std::string p = Path(kSection, key);
    if (!seen.insert(key).second) return InvalidArgumentError(p + ": key given twice");
    constexpr int64_t kI32 = std::numeric_limits<int32_t>::max();
    if (key == "resourceCountName") {
      HAMI_RETURN_IF_ERROR(ReadString(v, p, &c->resource_count_name));
    } else if (key == "resourceMemoryName") {
      HAMI_RETURN_IF_ERROR(ReadString(v, p, &c->resource_memory_name));
    } else if (key == "resourceMemoryPercentageName") {
      HAMI_RETURN_IF_ERROR(ReadString(v, p, &c->resource_memory_percentage_name));
    } else if (key == "resourceCoreName") {
      HAMI_RETURN_IF_ERROR(ReadString(v, p, &c->resource_core_name));
    } else if (key == "resourcePriorityName") {
      HAMI_RETURN_IF_ERROR(ReadString(v, p, &c->resource_priority_name));
    } else if (key == "overwriteEnv") {
      HAMI_RETURN_IF_ERROR(ReadBool(v, p, &c->overwrite_env));
    } else if (key == "defaultMemory") {
      HAMI_RETURN_IF_ERROR(ReadIntAs(v, p, 0, kI32, &c->default_memory_mib));
    } else if (key == "defaultCores") {
      HAMI_RETURN_IF_ERROR(ReadIntAs(v, p, 0, 100, &c->default_cores));
    } else if (key == "defaultGPUNum") {
      HAMI_RETURN_IF_ERROR(ReadIntAs(v, p, 0, kI32, &c->default_gpu_num));
    } else if (key == "preConfiguredDeviceMemory") {
      HAMI_RETURN_IF_ERROR(ReadIntAs(v, p, 0, std::numeric_limits<int64_t>::max(),
                                     &c->preconfigured_device_memory_mib));
    } else if (key == "memoryFactor") {
      HAMI_RETURN_IF_ERROR(ReadIntAs(v, p, 0, kI32, &c->memory_factor));
    } else if (key == "deviceSplitCount") {
      HAMI_RETURN_IF_ERROR(ReadIntAs(v, p, 1, kI32, &c->device_split_count));
    } else if (key == "deviceMemoryScaling") {
      HAMI_RETURN_IF_ERROR(ReadPositiveDouble(v, p, &c->device_memory_scaling));
    } else if (key == "deviceCoreScaling") {
      HAMI_RETURN_IF_ERROR(ReadPositiveDouble(v, p, &c->device_core_scaling));
    } else if (key == "enableNumaTopology") {
      HAMI_RETURN_IF_ERROR(ReadBool(v, p, &c->enable_numa_topology));
    } else if (key == "gpuCorePolicy") {
      std::string s;
      HAMI_RETURN_IF_ERROR(ReadString(v, p, &s));
      if (s.empty() || s == "default") {
        c->gpu_core_policy = GpuCorePolicy::kDefault;
      } else if (s == "force") {
        c->gpu_core_policy = GpuCorePolicy::kForce;
      } else if (s == "disable") {
        c->gpu_core_policy = GpuCorePolicy::kDisable;
      } else {
        return InvalidArgumentError(p + ": " + text::Quote(s) +
                                    " is not one of default, force, disable");
      }
    } else if (key == "libCudaLogLevel") {
      HAMI_RETURN_IF_ERROR(ReadIntAs(v, p, 0, 4, &c->lib_cuda_log_level));
    } else if (key == "runtimeClassName") {
      HAMI_RETURN_IF_ERROR(ReadString(v, p, &c->runtime_class_name));
    } else if (key == "disableCoreLimit") {
      HAMI_RETURN_IF_ERROR(ReadBool(v, p, &c->disable_core_limit));
    } else if (key == "migProfileAllowlist") {
      HAMI_RETURN_IF_ERROR(ReadAllowlist(v, p, &c->mig_profile_allowlist));
    } else if (key == "knownMigGeometries") {
      warnings->push_back(p + ": legacy static MIG geometries are not used (dynamic MIG)");
    } else {
      warnings->push_back(p + ": unknown key ignored");
    }
  }
  return ValidateNvidiaConfig(*c);
}

}  // namespace

std::string_view GpuCorePolicyName(GpuCorePolicy p) {
  switch (p) {
    case GpuCorePolicy::kDefault:
      return "default";
    case GpuCorePolicy::kForce:
      return "force";
    case GpuCorePolicy::kDisable:
      return "disable";
  }
  return "default";
}

std::vector<MigAllowlistEntry> DefaultMigProfileAllowlist() {
  return {
      {{"A30"}, {"1g.6gb", "2g.12gb", "4g.24gb"}},
      {{"A100-SXM4-40GB", "A100-40GB-PCIe", "A100-PCIE-40GB"},
       {"1g.5gb", "2g.10gb", "3g.20gb", "7g.40gb"}},
      {{"A100-SXM4-80GB", "A100-80GB-PCIe", "A100-PCIE-80GB"},
       {"1g.10gb", "2g.20gb", "3g.40gb", "7g.79gb"}},
      {{"H100-PCIE-80GB", "H100-SXM5-80GB"}, {"1g.10gb", "2g.20gb", "3g.40gb", "7g.80gb"}},
      {{"H100-PCIE-94GB", "H100-SXM5-94GB"}, {"1g.12gb", "2g.24gb", "3g.47gb", "7g.94gb"}},
      {{"H20", "H100 on GH200"}, {"1g.12gb", "2g.24gb", "3g.48gb", "7g.96gb"}},
      {{"H200 NVL", "H200-SXM5"}, {"1g.18gb", "2g.35gb", "3g.71gb", "7g.141gb"}},
      {{"B200"}, {"1g.23gb", "2g.45gb", "3g.90gb", "7g.180gb"}},
      {{"RTX PRO 6000 Blackwell Server Edition"}, {"1g.24gb", "2g.48gb", "4g.96gb"}},
  };
}

DeviceConfig DefaultDeviceConfig() {
  DeviceConfig c;
  c.nvidia = NvidiaConfig();
  return c;
}

Status ValidateNvidiaConfig(const NvidiaConfig& c) {
  struct {
    const char* key;
    const std::string& value;
  } names[] = {{"resourceCountName", c.resource_count_name},
               {"resourceMemoryName", c.resource_memory_name},
               {"resourceMemoryPercentageName", c.resource_memory_percentage_name},
               {"resourceCoreName", c.resource_core_name},
               {"resourcePriorityName", c.resource_priority_name}};
  for (const auto& n : names) {
    if (n.value.empty()) return InvalidArgumentError(Path("nvidia", n.key) + ": must not be empty");
  }
  if (c.default_memory_mib < 0) return InvalidArgumentError("nvidia.defaultMemory: negative");
  if (c.default_cores < 0 || c.default_cores > 100) {
    return InvalidArgumentError("nvidia.defaultCores: must be between 0 and 100");
  }
  if (c.default_gpu_num < 0) return InvalidArgumentError("nvidia.defaultGPUNum: negative");
  if (c.memory_factor < 0) return InvalidArgumentError("nvidia.memoryFactor: negative");
  if (c.device_split_count < 1) {
    return InvalidArgumentError("nvidia.deviceSplitCount: must be at least 1");
  }
  if (!(c.device_memory_scaling > 0) || !std::isfinite(c.device_memory_scaling)) {
    return InvalidArgumentError("nvidia.deviceMemoryScaling: must be greater than 0");
  }
  if (!(c.device_core_scaling > 0) || !std::isfinite(c.device_core_scaling)) {
    return InvalidArgumentError("nvidia.deviceCoreScaling: must be greater than 0");
  }
  if (c.lib_cuda_log_level < 0 || c.lib_cuda_log_level > 4) {
    return InvalidArgumentError("nvidia.libCudaLogLevel: must be between 0 and 4");
  }
  return OkStatus();
}

Result<DeviceConfig> ParseDeviceConfigYaml(std::string_view text) {
  // yaml-cpp reports problems by throwing; they end here.
  try {
    YAML::Node root = YAML::Load(std::string(text));
    if (root.IsNull()) return InvalidArgumentError("device config: the file has no sections");
    if (!root.IsMap()) {
      return InvalidArgumentError("device config: expected a map of vendor sections at the top");
    }
    DeviceConfig config;
    std::set<std::string> seen;
    for (auto it = root.begin(); it != root.end(); ++it) {
      if (!it->first.IsScalar()) {
        return InvalidArgumentError("device config: section names must be plain names");
      }
      std::string key = it->first.Scalar();
      if (!seen.insert(key).second) return InvalidArgumentError(key + ": section given twice");
      if (key == "nvidia") {
        NvidiaConfig nv;
        HAMI_RETURN_IF_ERROR(ParseNvidiaSection(it->second, &nv, &config.warnings));
        config.nvidia = std::move(nv);
      } else {
        YAML::Emitter out;
        out << it->second;
        if (!out.good()) return InvalidArgumentError(key + ": " + out.GetLastError());
        config.vendor_sections[key] = out.c_str();
      }
    }
    if (seen.empty()) return InvalidArgumentError("device config: the file has no sections");
    return config;
  } catch (const YAML::Exception& e) {
    return InvalidArgumentError(std::string("device config: invalid YAML: ") + e.what());
  } catch (const std::exception& e) {
    return InvalidArgumentError(std::string("device config: ") + e.what());
  }
}

}  // namespace hami::device
