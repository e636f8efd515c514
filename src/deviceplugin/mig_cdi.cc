#include "deviceplugin/mig_cdi.h"

#include <charconv>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <system_error>

#include "common/file_util.h"
#include "common/log.h"
#include "deviceplugin/allocation.h"
#include "k8s/yaml_json.h"

namespace hami::deviceplugin {
namespace {

using Json = nlohmann::json;

constexpr std::string_view kSpecPrefix = "hami-mig-";
constexpr std::string_view kSpecSuffix = ".json";

Json DeviceNode(const std::string& path) { return Json{{"path", path}}; }

// The edits every NVIDIA container needs when no toolkit spec says more.
Json DefaultCommonEdits() {
  Json nodes = Json::array();
  for (const char* p : {"/dev/nvidiactl", "/dev/nvidia-uvm", "/dev/nvidia-uvm-tools"}) {
    nodes.push_back(DeviceNode(p));
  }
  return Json{{"deviceNodes", nodes}};
}

// The MIG UUID a spec file of ours is for; "" for any other file.
std::string SpecUuid(const std::string& file_name) {
  if (file_name.size() <= kSpecPrefix.size() + kSpecSuffix.size() ||
      file_name.compare(0, kSpecPrefix.size(), kSpecPrefix) != 0 ||
      file_name.compare(file_name.size() - kSpecSuffix.size(), kSpecSuffix.size(), kSpecSuffix) !=
          0) {
    return "";
  }
  return file_name.substr(kSpecPrefix.size(),
                          file_name.size() - kSpecPrefix.size() - kSpecSuffix.size());
}

}  // namespace

std::map<std::string, uint32_t> ParseMigMinors(std::string_view text) {
  std::map<std::string, uint32_t> out;
  std::istringstream in{std::string(text)};
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream fields(line);
    std::string key, minor, extra;
    if (!(fields >> key >> minor) || (fields >> extra)) continue;
    uint32_t v = 0;
    auto [p, ec] = std::from_chars(minor.data(), minor.data() + minor.size(), v);
    if (ec != std::errc() || p != minor.data() + minor.size() || key.rfind("gpu", 0) != 0) continue;
    out[key] = v;
  }
  return out;
}

Result<std::string> CdiCommonEdits(std::string_view spec_text) {
  HAMI_ASSIGN_OR_RETURN(Json spec, k8s::YamlToJson(std::string(spec_text)));
  if (!spec.is_object()) return InvalidArgumentError("a CDI spec is a mapping");
  auto kind = spec.find("kind");
  if (kind == spec.end() || !kind->is_string() || *kind != kCdiGpuKind) {
    return NotFoundError(std::string("not a spec of kind ") + kCdiGpuKind);
  }
  auto edits = spec.find("containerEdits");
  if (edits == spec.end() || !edits->is_object() || edits->empty()) {
    return NotFoundError("the spec has no spec-wide containerEdits");
  }
  // Replacing bytes that are not UTF-8 (a YAML file may hold any): dump() throws on them.
  return edits->dump(-1, ' ', false, Json::error_handler_t::replace);
}

std::string MigCdiSpecFileName(const std::string& mig_uuid) {
  return std::string(kSpecPrefix) + mig_uuid + std::string(kSpecSuffix);
}

Result<std::string> MigCdiSpec(const MigInstance& instance, const MigCdiNode& node) {
  auto minor = node.gpu_minor.find(instance.gpu_uuid);
  if (minor == node.gpu_minor.end()) {
    return FailedPreconditionError("the device node of GPU " + instance.gpu_uuid +
                                   " is unknown (the driver gave no minor number)");
  }
  Json nodes = Json::array({DeviceNode("/dev/nvidia" + std::to_string(minor->second))});
  const std::string gi = "gpu" + std::to_string(minor->second) + "/gi" +
                         std::to_string(instance.device.gi_id);
  for (const std::string& cap :
       {gi + "/access", gi + "/ci" + std::to_string(instance.device.ci_id) + "/access"}) {
    if (auto c = node.caps_minor.find(cap); c != node.caps_minor.end()) {
      nodes.push_back(DeviceNode("/dev/nvidia-caps/nvidia-cap" + std::to_string(c->second)));
    }
  }
  Json common = DefaultCommonEdits();
  if (!node.common_edits.empty()) {
    Json parsed = Json::parse(node.common_edits, nullptr, /*allow_exceptions=*/false);
    if (parsed.is_object()) common = std::move(parsed);
  }
  Json spec = {
      {"cdiVersion", "0.5.0"},
      {"kind", kCdiGpuKind},
      {"devices",
       Json::array({Json{{"name", instance.device.uuid},
                         {"containerEdits", Json{{"deviceNodes", nodes}}}}})},
      {"containerEdits", common},
  };
  return spec.dump(2, ' ', false, Json::error_handler_t::replace) + "\n";
}

MigCdiSpecs::MigCdiSpecs(GpuDriver& driver, MigCdiOptions options)
    : driver_(driver), options_(std::move(options)) {}

void MigCdiSpecs::ReadNode() {
  node_read_ = true;
  for (const std::string& path : options_.toolkit_specs) {
    if (!std::filesystem::exists(path)) continue;
    Result<std::string> text = ReadFileToString(path);
    Result<std::string> edits = text.ok() ? CdiCommonEdits(*text) : text.status();
    if (edits.ok()) {
      HAMI_LOG(Info) << "MIG CDI specs take their spec-wide edits from " << path;
      node_.common_edits = std::move(*edits);
      break;
    }
    HAMI_LOG(Warning) << "the CDI spec " << path << " gives no spec-wide edits: "
                      << edits.status().message();
  }
  if (node_.common_edits.empty()) {
    HAMI_LOG(Warning) << "no NVIDIA toolkit CDI spec found; MIG CDI specs name /dev/nvidiactl "
                         "and the UVM nodes only, the driver's libraries must come from the "
                         "container runtime's hook";
  }
  if (Result<std::string> minors = ReadFileToString(options_.mig_minors); minors.ok()) {
    node_.caps_minor = ParseMigMinors(*minors);
  } else {
    HAMI_LOG(Info) << "MIG CDI specs name no capability device nodes: "
                   << minors.status().message();
  }
}

Status MigCdiSpecs::Sync(const std::vector<MigInstance>& instances) {
  MutexLock l(mu_);
  Status first = OkStatus();
  auto fail = [&](const Status& s) {
    HAMI_LOG(Error) << "MIG CDI spec: " << s.message();
    if (first.ok()) first = s;
  };
  auto remove = [&](const std::string& uuid) {
    std::error_code rm;
    std::filesystem::remove(options_.spec_dir + "/" + MigCdiSpecFileName(uuid), rm);
    if (rm) {
      fail(InternalError("cannot remove the CDI spec of " + uuid + ": " + rm.message()));
      return;
    }
    HAMI_LOG(Info) << "removed the CDI spec of " << uuid << " (the MIG device is gone)";
  };
  std::set<std::string> wanted;
  for (const MigInstance& inst : instances) wanted.insert(inst.device.uuid);
  if (!node_read_) {
    // The first call (at start): the node's facts, and the specs of devices destroyed while no
    // plugin ran. Later calls know every spec there is theirs from written_.
    ReadNode();
    std::error_code ec;
    std::filesystem::create_directories(options_.spec_dir, ec);
    if (ec) fail(InternalError("cannot make " + options_.spec_dir + ": " + ec.message()));
    for (const auto& entry : std::filesystem::directory_iterator(options_.spec_dir, ec)) {
      const std::string uuid = SpecUuid(entry.path().filename().string());
      if (!uuid.empty() && !wanted.count(uuid)) remove(uuid);
    }
    if (ec) fail(InternalError("cannot list " + options_.spec_dir + ": " + ec.message()));
  }
  for (auto it = written_.begin(); it != written_.end();) {
    if (wanted.count(*it)) {
      ++it;
      continue;
    }
    remove(*it);
    it = written_.erase(it);
  }
  bool rediscovered = false;
  for (const MigInstance& inst : instances) {
    if (written_.count(inst.device.uuid)) continue;
    if (!node_.gpu_minor.count(inst.gpu_uuid) && !rediscovered) {
      rediscovered = true;
      if (Result<Inventory> inv = driver_.Discover(); inv.ok()) {
        for (const GpuInfo& g : inv->gpus) {
          if (g.minor) node_.gpu_minor[g.uuid] = *g.minor;
        }
      }
    }
    Result<std::string> text = MigCdiSpec(inst, node_);
    if (!text.ok()) {
      fail(Status(text.status().code(), inst.device.uuid + ": " + text.status().message()));
      continue;
    }
    const std::string path = options_.spec_dir + "/" + MigCdiSpecFileName(inst.device.uuid);
    if (Status s = WriteFileAtomically(path, *text, 0644); !s.ok()) {
      fail(s);
      continue;
    }
    written_.insert(inst.device.uuid);
    HAMI_LOG(Info) << "wrote the CDI spec of " << inst.device.uuid << " for pod " << inst.pod
                   << " to " << path;
  }
  return first;
}

}  // namespace hami::deviceplugin
