#include "device/node_config.h"

#include <limits>
#include <set>

#include "device/json_util.h"
#include "device/text_util.h"

namespace hami::device {

std::string_view OperatingModeName(OperatingMode mode) {
  switch (mode) {
    case OperatingMode::kMps:
      return "mps";
    case OperatingMode::kMig:
      return "mig";
    case OperatingMode::kHamiCore:
      break;
  }
  return "hami-core";
}

std::optional<OperatingMode> ParseOperatingMode(std::string_view text) {
  if (text == "hami-core") return OperatingMode::kHamiCore;
  if (text == "mps") return OperatingMode::kMps;
  if (text == "mig") return OperatingMode::kMig;
  return std::nullopt;
}

namespace {

using json_util::Json;

// How the node's devices are shared: operatingmode, devicesplitcount and the two scaling factors.
Status ReadSharingFields(const Json& e, const std::string& path, NodeConfigEntry* n) {
  auto field = [&](std::string_view k) { return json_util::Field(path, k); };
  if (const Json* v = json_util::Member(e, "operatingmode")) {
    std::string mode;
    HAMI_RETURN_IF_ERROR(json_util::ReadString(*v, field("operatingmode"), &mode));
    n->operating_mode = ParseOperatingMode(mode);
    if (!n->operating_mode) {
      return InvalidArgumentError(field("operatingmode") + ": " + text::Quote(mode) +
                                  " is not one of hami-core, mig, mps");
    }
  }
  if (const Json* v = json_util::Member(e, "devicesplitcount")) {
    uint32_t x = 0;
    HAMI_RETURN_IF_ERROR(json_util::ReadUint32(*v, field("devicesplitcount"), &x));
    if (x < 1) return InvalidArgumentError(field("devicesplitcount") + ": must be at least 1");
    n->device_split_count = x;
  }
  for (auto [key, slot] : {std::pair{"devicememoryscaling", &n->device_memory_scaling},
                           std::pair{"devicecorescaling", &n->device_core_scaling}}) {
    if (const Json* v = json_util::Member(e, key)) {
      double x = 0;
      HAMI_RETURN_IF_ERROR(json_util::ReadDouble(*v, field(key), &x));
      if (!(x > 0)) return InvalidArgumentError(field(key) + ": must be greater than 0");
      *slot = x;
    }
  }
  return OkStatus();
}

// libcudaloglevel, 0 to 4, as a number or as a string holding one.
Status ReadLibCudaLogLevel(const Json& v, const std::string& where, std::optional<int32_t>* out) {
  int64_t x = 0;
  if (v.is_string()) {
    const std::string& s = v.get_ref<const std::string&>();
    if (text::ParseInt(s, 0, 4, &x) != nullptr) {
      return InvalidArgumentError(where + ": " + text::Quote(s) +
                                  " is not a level between 0 and 4");
    }
  } else {
    HAMI_RETURN_IF_ERROR(json_util::ReadInt64(v, where, 0, 4, &x));
  }
  *out = static_cast<int32_t>(x);
  return OkStatus();
}

// filterdevices: {"uuid": [string...], "index": [uint32...]}, either list optional.
Status ReadFilterDevices(const Json& v, const std::string& fp, std::optional<FilterDevices>* out) {
  if (!v.is_object()) return InvalidArgumentError(fp + ": expected an object");
  FilterDevices f;
  if (const Json* u = json_util::Member(v, "uuid")) {
    if (!u->is_array()) return InvalidArgumentError(fp + ".uuid: expected an array");
    for (size_t i = 0; i < u->size(); ++i) {
      std::string s;
      HAMI_RETURN_IF_ERROR(json_util::ReadString((*u)[i], json_util::Indexed(fp + ".uuid", i), &s));
      f.uuids.push_back(std::move(s));
    }
  }
  if (const Json* ix = json_util::Member(v, "index")) {
    if (!ix->is_array()) return InvalidArgumentError(fp + ".index: expected an array");
    for (size_t i = 0; i < ix->size(); ++i) {
      uint32_t x = 0;
      HAMI_RETURN_IF_ERROR(
          json_util::ReadUint32((*ix)[i], json_util::Indexed(fp + ".index", i), &x));
      f.indexes.push_back(x);
    }
  }
  *out = std::move(f);
  return OkStatus();
}

// One nodeconfig entry. Fields are read in a fixed order and the first bad one is the error.
Status ReadEntry(const Json& e, const std::string& path, NodeConfigEntry* n) {
  if (!e.is_object()) return InvalidArgumentError(path + ": expected an object");
  HAMI_RETURN_IF_ERROR(json_util::ReadOptional(e, "name", path, &n->name));
  if (n->name.empty()) return InvalidArgumentError(path + ".name: required");
  HAMI_RETURN_IF_ERROR(ReadSharingFields(e, path, n));
  auto field = [&](std::string_view k) { return json_util::Field(path, k); };
  if (const Json* v = json_util::Member(e, "preconfigureddevicememory")) {
    int64_t x = 0;
    HAMI_RETURN_IF_ERROR(json_util::ReadInt64(*v, field("preconfigureddevicememory"), 0,
                                              std::numeric_limits<int64_t>::max(), &x));
    n->preconfigured_device_memory_mib = x;
  }
  if (const Json* v = json_util::Member(e, "libcudaloglevel")) {
    HAMI_RETURN_IF_ERROR(ReadLibCudaLogLevel(*v, field("libcudaloglevel"), &n->lib_cuda_log_level));
  }
  for (auto [key, slot] :
       {std::pair{"enablenumatopology", &n->enable_numa_topology},
        std::pair{"enablegetpreferredallocation", &n->enable_get_preferred_allocation}}) {
    if (const Json* v = json_util::Member(e, key)) {
      bool b = false;
      HAMI_RETURN_IF_ERROR(json_util::ReadBool(*v, field(key), &b));
      *slot = b;
    }
  }
  if (const Json* v = json_util::Member(e, "migstrategy")) {
    std::string s;
    HAMI_RETURN_IF_ERROR(json_util::ReadString(*v, field("migstrategy"), &s));
    n->mig_strategy = s;
  }
  if (const Json* v = json_util::Member(e, "filterdevices")) {
    HAMI_RETURN_IF_ERROR(ReadFilterDevices(*v, field("filterdevices"), &n->filter_devices));
  }
  return OkStatus();
}

}  // namespace

Result<NodeConfigFile> ParseNodeConfigJson(std::string_view text) {
  HAMI_ASSIGN_OR_RETURN(Json j, json_util::Parse(text, "node config"));
  NodeConfigFile file;
  if (j.is_null()) return file;
  if (!j.is_object()) return InvalidArgumentError("node config: expected a JSON object");
  const Json* list = json_util::Member(j, "nodeconfig");
  if (list == nullptr) return file;
  if (!list->is_array()) return InvalidArgumentError("nodeconfig: expected an array");
  std::set<std::string> names;
  for (size_t i = 0; i < list->size(); ++i) {
    NodeConfigEntry n;
    std::string path = json_util::Indexed("nodeconfig", i);
    HAMI_RETURN_IF_ERROR(ReadEntry((*list)[i], path, &n));
    if (!names.insert(n.name).second) {
      return InvalidArgumentError(path + ".name: node " + text::Quote(n.name) +
                                  " is configured twice");
    }
    file.nodes.push_back(std::move(n));
  }
  return file;
}

NodeDeviceSettings ResolveNodeSettings(const NvidiaConfig& global, const NodeConfigFile& file,
                                       std::string_view node_name) {
  NodeDeviceSettings s;
  s.device_split_count = global.device_split_count;
  s.device_memory_scaling = global.device_memory_scaling;
  s.device_core_scaling = global.device_core_scaling;
  s.preconfigured_device_memory_mib = global.preconfigured_device_memory_mib;
  s.lib_cuda_log_level = global.lib_cuda_log_level;
  s.enable_numa_topology = global.enable_numa_topology;
  for (const NodeConfigEntry& n : file.nodes) {
    if (n.name != node_name) continue;
    if (n.operating_mode) s.operating_mode = *n.operating_mode;
    if (n.device_split_count) s.device_split_count = *n.device_split_count;
    if (n.device_memory_scaling) s.device_memory_scaling = *n.device_memory_scaling;
    if (n.device_core_scaling) s.device_core_scaling = *n.device_core_scaling;
    if (n.preconfigured_device_memory_mib) {
      s.preconfigured_device_memory_mib = *n.preconfigured_device_memory_mib;
    }
    if (n.lib_cuda_log_level) s.lib_cuda_log_level = *n.lib_cuda_log_level;
    if (n.enable_numa_topology) s.enable_numa_topology = *n.enable_numa_topology;
    if (n.filter_devices) s.filter_devices = *n.filter_devices;
    if (n.enable_get_preferred_allocation) {
      s.enable_get_preferred_allocation = *n.enable_get_preferred_allocation;
    }
    break;
  }
  return s;
}

}  // namespace hami::device
