#include "device/config.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <exception>
#include <limits>
#include <set>

#include "device/config_internal.h"
#include "device/config_yaml.h"
#include "device/text_util.h"

namespace hami::device {

namespace {

using config_internal::SortTemplates;
using config_yaml::kI32;
using config_yaml::ReadAllowlist;
using config_yaml::ReadInt;
using config_yaml::ReadIntAs;
using config_yaml::ReadKnownGeometries;
using config_yaml::ReadStringList;
using config_yaml::ScalarText;

std::string Path(std::string_view section, std::string_view key) {
  return std::string(section) + "." + std::string(key);
}

Status ReadString(const YAML::Node& n, const std::string& path, std::string* out) {
  if (n.IsNull()) {
    out->clear();
    return OkStatus();
  }
  return ScalarText(n, path, out);
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
    } else if (key == "defaultMemory" || key == "defaultMem") {  // the latter: the user's docs
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
    } else if (key == "gpuMemoryFactor") {
      HAMI_RETURN_IF_ERROR(ReadIntAs(v, p, 1, kI32, &c->gpu_memory_factor));
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
      HAMI_RETURN_IF_ERROR(ReadKnownGeometries(v, p, &c->known_mig_geometries, warnings));
    } else {
      warnings->push_back(p + ": unknown key ignored");
    }
  }
  return ValidateNvidiaConfig(*c);
}

// Other vendors' sections: a flat one is read by its name, defaults and section-specific keys.
struct FlatSectionSpec {
  std::string_view name;
  VendorResources defaults;
  std::vector<std::string_view> extra_strings;  // section-specific resource-name keys
  std::vector<std::string_view> extra_bools;
};

const std::vector<FlatSectionSpec>& FlatSections() {
  static const std::vector<FlatSectionSpec>* specs = [] {
    auto* v = new std::vector<FlatSectionSpec>();
    auto add = [&](std::string_view name, std::string count, std::string memory, std::string core,
                   int32_t factor, std::map<std::string, std::string> extra = {},
                   std::vector<std::string_view> bools = {}) {
      FlatSectionSpec s;
      s.name = name;
      s.defaults.count = std::move(count);
      s.defaults.memory = std::move(memory);
      s.defaults.core = std::move(core);
      s.defaults.memory_factor = factor;
      for (const auto& [k, val] : extra) s.extra_strings.push_back(k);
      s.defaults.extra = std::move(extra);
      s.extra_bools = std::move(bools);
      for (std::string_view b : s.extra_bools) s.defaults.extra[std::string(b)] = "false";
      v->push_back(std::move(s));
    };
    // Memory factors are the units these vendors' memory resources count in (MiB per unit).
    add("cambricon", "cambricon.com/vmlu", "cambricon.com/mlu.smlu.vmemory",
        "cambricon.com/mlu.smlu.vcore", 256);
    add("hygon", "hygon.com/dcunum", "hygon.com/dcumem", "hygon.com/dcucores", 1);
    add("metax", "metax-tech.com/gpu", "", "", 1024,
        {{"resourceVCountName", "metax-tech.com/sgpu"},
         {"resourceVMemoryName", "metax-tech.com/vmemory"},
         {"resourceVCoreName", "metax-tech.com/vcore"}},
        {"sgpuTopologyAware"});
    add("enflame", "enflame.com/gcu", "enflame.com/gcu-memory", "enflame.com/gcu-core", 1,
        {{"resourceNameGCU", "enflame.com/gcu"},
         {"resourceNameDRSGCU", "enflame.com/drs-gcu"},
         {"resourceNameGCUMemory", "enflame.com/gcu-memory"},
         {"resourceNameGCUCore", "enflame.com/gcu-core"},
         {"resourceNameVGCU", "enflame.com/vgcu"},
         {"resourceNameVGCUPercentage", "enflame.com/vgcu-percentage"}});
    add("mthreads", "mthreads.com/vgpu", "mthreads.com/sgpu-memory", "mthreads.com/sgpu-core", 512);
    add("kunlun", "kunlunxin.com/xpu", "", "", 1,
        {{"resourceVCountName", "kunlunxin.com/vxpu"},
         {"resourceVMemoryName", "kunlunxin.com/vxpu-memory"}});
    add("awsneuron", "aws.amazon.com/neuron", "", "aws.amazon.com/neuroncore", 1);
    add("amd", "amd.com/gpu", "amd.com/gpumem", "amd.com/gpucores", 1);
    add("vastai", "vastaitech.com/va", "", "", 1);
    add("biren", "birentech.com/gpu", "", "", 1);
    // A count alone asks for whole cards on these vendors (their chart default cores are 100).
    for (FlatSectionSpec& spec : *v) {
      if (spec.name == "cambricon" || spec.name == "hygon" || spec.name == "metax" ||
          spec.name == "amd") {
        spec.defaults.default_cores = 100;
      }
    }
    return v;
  }();
  return *specs;
}

const FlatSectionSpec* FindFlatSection(std::string_view name) {
  for (const FlatSectionSpec& s : FlatSections()) {
    if (s.name == name) return &s;
  }
  return nullptr;
}

// Keys every flat section takes (the user's documents give them to all vendors).
Status ReadCommonVendorKey(const std::string& key, const YAML::Node& v, const std::string& p,
                           VendorResources* c, bool* matched) {
  *matched = true;
  if (key == "resourceCountName") return ReadString(v, p, &c->count);
  if (key == "resourceMemoryName") return ReadString(v, p, &c->memory);
  if (key == "resourceMemoryPercentageName") return ReadString(v, p, &c->memory_percentage);
  if (key == "resourceCoreName") return ReadString(v, p, &c->core);
  if (key == "memoryFactor") return ReadIntAs(v, p, 1, kI32, &c->memory_factor);
  if (key == "defaultMem" || key == "defaultMemory") {
    return ReadIntAs(v, p, 0, kI32, &c->default_memory_mib);
  }
  if (key == "defaultCores") return ReadIntAs(v, p, 0, 100, &c->default_cores);
  if (key == "deviceSplitCount") return ReadIntAs(v, p, 1, kI32, &c->device_split_count);
  *matched = false;
  return OkStatus();
}

Status ParseFlatSection(const FlatSectionSpec& spec, std::string_view written_as,
                        const YAML::Node& n, VendorResources* c,
                        std::vector<std::string>* warnings) {
  *c = spec.defaults;
  const std::string section(written_as);
  if (n.IsNull()) return OkStatus();
  if (!n.IsMap()) return InvalidArgumentError(section + ": expected a map of settings");
  std::set<std::string> seen;
  for (auto it = n.begin(); it != n.end(); ++it) {
    if (!it->first.IsScalar()) return InvalidArgumentError(section + ": keys must be plain names");
    const std::string key = it->first.Scalar();
    const YAML::Node v = it->second;
    const std::string p = Path(section, key);
    if (!seen.insert(key).second) return InvalidArgumentError(p + ": key given twice");
    bool matched = false;
    HAMI_RETURN_IF_ERROR(ReadCommonVendorKey(key, v, p, c, &matched));
    if (matched) continue;
    if (std::find(spec.extra_strings.begin(), spec.extra_strings.end(), key) !=
        spec.extra_strings.end()) {
      HAMI_RETURN_IF_ERROR(ReadString(v, p, &c->extra[key]));
    } else if (std::find(spec.extra_bools.begin(), spec.extra_bools.end(), key) !=
               spec.extra_bools.end()) {
      bool b = false;
      HAMI_RETURN_IF_ERROR(ReadBool(v, p, &b));
      c->extra[key] = b ? "true" : "false";
    } else {
      warnings->push_back(p + ": unknown key ignored");
    }
  }
  return OkStatus();
}

Status ParseAscendTemplates(const YAML::Node& n, const std::string& path,
                            std::vector<AscendTemplate>* out) {
  out->clear();
  if (n.IsNull()) return OkStatus();
  if (!n.IsSequence()) return InvalidArgumentError(path + ": expected a list");
  for (size_t i = 0; i < n.size(); ++i) {
    const std::string ep = path + "[" + std::to_string(i) + "]";
    const YAML::Node e = n[i];
    if (!e.IsMap()) return InvalidArgumentError(ep + ": expected a map (name, memory, aiCore)");
    AscendTemplate t;
    for (auto it = e.begin(); it != e.end(); ++it) {
      const std::string key = it->first.Scalar();
      const YAML::Node v = it->second;
      if (key == "name") {
        HAMI_RETURN_IF_ERROR(ReadString(v, ep + ".name", &t.name));
      } else if (key == "memory") {
        HAMI_RETURN_IF_ERROR(ReadInt(v, ep + ".memory", 1, kI32, &t.memory_mib));
      } else if (key == "aiCore") {
        HAMI_RETURN_IF_ERROR(ReadIntAs(v, ep + ".aiCore", 0, kI32, &t.ai_core));
      } else if (key == "aiCPU") {
        HAMI_RETURN_IF_ERROR(ReadIntAs(v, ep + ".aiCPU", 0, kI32, &t.ai_cpu));
      } else {
        return InvalidArgumentError(ep + "." + key +
                                    ": unknown key (want name, memory, aiCore, aiCPU)");
      }
    }
    if (t.name.empty()) return InvalidArgumentError(ep + ".name: missing");
    if (t.memory_mib == 0) return InvalidArgumentError(ep + ".memory: missing");
    out->push_back(std::move(t));
  }
  return OkStatus();
}

Status ParseAscendChip(const YAML::Node& e, const std::string& ep, AscendChipConfig* c,
                       std::vector<std::string>* warnings) {
  if (!e.IsMap()) return InvalidArgumentError(ep + ": expected a map of chip settings");
  for (auto it = e.begin(); it != e.end(); ++it) {
    const std::string key = it->first.Scalar();
    const YAML::Node v = it->second;
    const std::string p = ep + "." + key;
    if (key == "chipName") {
      HAMI_RETURN_IF_ERROR(ReadString(v, p, &c->chip_name));
    } else if (key == "commonWord") {
      HAMI_RETURN_IF_ERROR(ReadString(v, p, &c->common_word));
    } else if (key == "resourceName") {
      HAMI_RETURN_IF_ERROR(ReadString(v, p, &c->resource_name));
    } else if (key == "resourceMemoryName") {
      HAMI_RETURN_IF_ERROR(ReadString(v, p, &c->resource_memory_name));
    } else if (key == "resourceCoreName") {
      HAMI_RETURN_IF_ERROR(ReadString(v, p, &c->resource_core_name));
    } else if (key == "memoryAllocatable") {
      HAMI_RETURN_IF_ERROR(ReadInt(v, p, 0, kI32, &c->memory_allocatable));
    } else if (key == "memoryCapacity") {
      HAMI_RETURN_IF_ERROR(ReadInt(v, p, 0, kI32, &c->memory_capacity));
    } else if (key == "memoryFactor") {
      HAMI_RETURN_IF_ERROR(ReadIntAs(v, p, 0, kI32, &c->memory_factor));
    } else if (key == "aiCore") {
      HAMI_RETURN_IF_ERROR(ReadIntAs(v, p, 0, kI32, &c->ai_core));
    } else if (key == "aiCPU") {
      HAMI_RETURN_IF_ERROR(ReadIntAs(v, p, 0, kI32, &c->ai_cpu));
    } else if (key == "runtimeClassName") {
      HAMI_RETURN_IF_ERROR(ReadString(v, p, &c->runtime_class_name));
    } else if (key == "overwriteEnv") {
      HAMI_RETURN_IF_ERROR(ReadBool(v, p, &c->overwrite_env));
    } else if (key == "superPod") {
      HAMI_RETURN_IF_ERROR(ReadBool(v, p, &c->super_pod));
    } else if (key == "templates") {
      HAMI_RETURN_IF_ERROR(ParseAscendTemplates(v, p, &c->templates));
    } else {
      warnings->push_back(p + ": unknown key ignored");
    }
  }
  if (c->common_word.empty()) return InvalidArgumentError(ep + ".commonWord: missing");
  if (c->resource_name.empty()) return InvalidArgumentError(ep + ".resourceName: missing");
  if (c->memory_capacity < c->memory_allocatable) {
    return InvalidArgumentError(ep + ".memoryCapacity: " + std::to_string(c->memory_capacity) +
                                " is below memoryAllocatable " +
                                std::to_string(c->memory_allocatable));
  }
  SortTemplates(c);
  return OkStatus();
}

// `vnpus:` {hamiVnpuCore, configs: [...]}.
Status ParseVnpus(const YAML::Node& n, AscendConfig* out, std::vector<std::string>* warnings) {
  out->chips = DefaultAscendChips();
  if (n.IsNull()) return OkStatus();
  if (!n.IsMap()) return InvalidArgumentError("vnpus: expected a map (hamiVnpuCore, configs)");
  for (auto it = n.begin(); it != n.end(); ++it) {
    const std::string key = it->first.Scalar();
    const YAML::Node v = it->second;
    if (key == "hamiVnpuCore") {
      HAMI_RETURN_IF_ERROR(ReadBool(v, "vnpus.hamiVnpuCore", &out->hami_vnpu_core));
    } else if (key == "configs") {
      if (!v.IsSequence()) return InvalidArgumentError("vnpus.configs: expected a list");
      out->chips.clear();
      std::set<std::string> words;
      for (size_t i = 0; i < v.size(); ++i) {
        const std::string ep = "vnpus.configs[" + std::to_string(i) + "]";
        AscendChipConfig c;
        HAMI_RETURN_IF_ERROR(ParseAscendChip(v[i], ep, &c, warnings));
        if (!words.insert(c.common_word).second) {
          return InvalidArgumentError(ep + ".commonWord: " + text::Quote(c.common_word) +
                                      " given twice");
        }
        out->chips.push_back(std::move(c));
      }
    } else {
      warnings->push_back("vnpus." + key + ": unknown key ignored");
    }
  }
  return OkStatus();
}

// The flat `ascend:` form: one chip named by its count resource (huawei.com/<commonWord>),
// whose memory and templates are the chart's for that chip.
Status ParseFlatAscend(const YAML::Node& n, AscendConfig* out, std::vector<std::string>* warnings) {
  VendorResources r;
  r.count = "huawei.com/Ascend910B3";
  r.memory = "huawei.com/Ascend910B3-memory";
  r.core = "huawei.com/Ascend910B3-core";
  FlatSectionSpec spec{"ascend", r, {}, {"hamiVnpuCore"}};
  spec.defaults.extra["hamiVnpuCore"] = "false";
  HAMI_RETURN_IF_ERROR(ParseFlatSection(spec, "ascend", n, &r, warnings));
  constexpr std::string_view kPrefix = "huawei.com/";
  if (r.count.rfind(kPrefix, 0) != 0 || r.count.size() == kPrefix.size()) {
    return InvalidArgumentError("ascend.resourceCountName: " + text::Quote(r.count) +
                                " is not huawei.com/<chip>, e.g. huawei.com/Ascend910B3");
  }
  std::string word = r.count.substr(kPrefix.size());
  for (AscendChipConfig& c : DefaultAscendChips()) {
    if (c.common_word != word) continue;
    c.resource_name = r.count;
    if (!r.memory.empty()) c.resource_memory_name = r.memory;
    if (!r.core.empty()) c.resource_core_name = r.core;
    if (r.memory_factor > 1) c.memory_factor = r.memory_factor;
    out->hami_vnpu_core = r.extra["hamiVnpuCore"] == "true";
    out->flat_form = true;
    out->chips = {std::move(c)};
    return OkStatus();
  }
  std::string known;
  for (const AscendChipConfig& c : DefaultAscendChips()) {
    known += (known.empty() ? "" : ", ") + c.common_word;
  }
  return InvalidArgumentError("ascend.resourceCountName: no Ascend chip named " +
                              text::Quote(word) + " (known: " + known +
                              "); describe other chips under vnpus.configs");
}

Status ParseIluvatars(const YAML::Node& n, std::vector<IluvatarChipConfig>* out,
                      std::vector<std::string>* warnings) {
  *out = DefaultIluvatarChips();
  if (n.IsNull()) return OkStatus();
  if (!n.IsSequence()) return InvalidArgumentError("iluvatars: expected a list of chips");
  out->clear();
  std::set<std::string> words;
  for (size_t i = 0; i < n.size(); ++i) {
    const std::string ep = "iluvatars[" + std::to_string(i) + "]";
    const YAML::Node e = n[i];
    if (!e.IsMap()) return InvalidArgumentError(ep + ": expected a map of chip settings");
    IluvatarChipConfig c;
    for (auto it = e.begin(); it != e.end(); ++it) {
      const std::string key = it->first.Scalar();
      const YAML::Node v = it->second;
      const std::string p = ep + "." + key;
      if (key == "chipName") {
        HAMI_RETURN_IF_ERROR(ReadString(v, p, &c.chip_name));
      } else if (key == "commonWord") {
        HAMI_RETURN_IF_ERROR(ReadString(v, p, &c.common_word));
      } else if (key == "resourceCountName") {
        HAMI_RETURN_IF_ERROR(ReadString(v, p, &c.count));
      } else if (key == "resourceMemoryName") {
        HAMI_RETURN_IF_ERROR(ReadString(v, p, &c.memory));
      } else if (key == "resourceCoreName") {
        HAMI_RETURN_IF_ERROR(ReadString(v, p, &c.core));
      } else {
        warnings->push_back(p + ": unknown key ignored");
      }
    }
    if (c.common_word.empty()) return InvalidArgumentError(ep + ".commonWord: missing");
    if (c.count.empty()) return InvalidArgumentError(ep + ".resourceCountName: missing");
    if (!words.insert(c.common_word).second) {
      return InvalidArgumentError(ep + ".commonWord: " + text::Quote(c.common_word) +
                                  " given twice");
    }
    out->push_back(std::move(c));
  }
  return OkStatus();
}

}  // namespace

std::optional<VendorResources> VendorSectionDefaults(std::string_view section) {
  const FlatSectionSpec* spec = FindFlatSection(section);
  if (spec == nullptr) return std::nullopt;
  return spec->defaults;
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
      const std::string name = key == "kunlunxin" ? "kunlun" : key;  // the user's docs' name
      if (key == "nvidia") {
        NvidiaConfig nv;
        HAMI_RETURN_IF_ERROR(ParseNvidiaSection(it->second, &nv, &config.warnings));
        config.nvidia = std::move(nv);
      } else if (const FlatSectionSpec* spec = FindFlatSection(name)) {
        if (config.vendors.count(name) != 0) {
          return InvalidArgumentError(key + ": the same section as kunlun/kunlunxin, given twice");
        }
        HAMI_RETURN_IF_ERROR(
            ParseFlatSection(*spec, key, it->second, &config.vendors[name], &config.warnings));
      } else if (key == "vnpus" || key == "ascend") {
        if (config.ascend) return InvalidArgumentError(key + ": vnpus and ascend given together");
        AscendConfig a;
        HAMI_RETURN_IF_ERROR(key == "vnpus" ? ParseVnpus(it->second, &a, &config.warnings)
                                            : ParseFlatAscend(it->second, &a, &config.warnings));
        config.ascend = std::move(a);
      } else if (key == "iluvatars") {
        std::vector<IluvatarChipConfig> chips;
        HAMI_RETURN_IF_ERROR(ParseIluvatars(it->second, &chips, &config.warnings));
        config.iluvatars = std::move(chips);
      } else {
        config.warnings.push_back(key + ": unknown vendor section ignored");
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
