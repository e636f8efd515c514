#include "device/node_registration.h"

#include <limits>
#include <set>

#include "device/json_util.h"
#include "device/text_util.h"

namespace hami::device {

namespace {

using json_util::Json;

void AppendKey(std::string* out, bool* first, const char* key) {
  if (!*first) out->push_back(',');
  *first = false;
  out->push_back('"');
  out->append(key);
  out->append("\":");
}

void AppendMigProfiles(std::string* out, const std::vector<MigProfile>& profiles) {
  out->push_back('[');
  for (size_t i = 0; i < profiles.size(); ++i) {
    const MigProfile& p = profiles[i];
    if (i > 0) out->push_back(',');
    out->append("{\"name\":");
    json_util::AppendGoString(out, p.name);
    out->append(",\"memoryMB\":" + std::to_string(p.memory_mib));
    out->append(",\"core\":" + std::to_string(p.core));
    out->append(",\"sliceCount\":" + std::to_string(p.slice_count));
    out->append(",\"placements\":");
    if (p.placements.empty()) {
      out->append("null");  // a Go nil slice
    } else {
      out->push_back('[');
      for (size_t k = 0; k < p.placements.size(); ++k) {
        if (k > 0) out->push_back(',');
        out->append("{\"start\":" + std::to_string(p.placements[k].start) +
                    ",\"size\":" + std::to_string(p.placements[k].size) + "}");
      }
      out->push_back(']');
    }
    out->push_back('}');
  }
  out->push_back(']');
}

Status DecodeMigProfile(const Json& j, const std::string& path, MigProfile* p) {
  if (!j.is_object()) return InvalidArgumentError(path + ": expected an object");
  HAMI_RETURN_IF_ERROR(json_util::ReadOptional(j, "name", path, &p->name));
  HAMI_RETURN_IF_ERROR(json_util::ReadOptional(j, "memoryMB", path, &p->memory_mib));
  HAMI_RETURN_IF_ERROR(json_util::ReadOptional(j, "core", path, &p->core));
  HAMI_RETURN_IF_ERROR(json_util::ReadOptional(j, "sliceCount", path, &p->slice_count));
  if (const Json* pl = json_util::Member(j, "placements")) {
    std::string pl_path = json_util::Field(path, "placements");
    if (!pl->is_array()) return InvalidArgumentError(pl_path + ": expected an array");
    for (size_t k = 0; k < pl->size(); ++k) {
      const Json& e = (*pl)[k];
      std::string e_path = json_util::Indexed(pl_path, k);
      if (!e.is_object()) return InvalidArgumentError(e_path + ": expected an object");
      MigPlacement placement;
      HAMI_RETURN_IF_ERROR(json_util::ReadOptional(e, "start", e_path, &placement.start));
      HAMI_RETURN_IF_ERROR(json_util::ReadOptional(e, "size", e_path, &placement.size));
      p->placements.push_back(placement);
    }
  }
  return OkStatus();
}

Status DecodeDevice(const Json& j, const std::string& path, DeviceInfo* d) {
  if (!j.is_object()) return InvalidArgumentError(path + ": expected an object");
  HAMI_RETURN_IF_ERROR(json_util::ReadOptional(j, "id", path, &d->id));
  HAMI_RETURN_IF_ERROR(json_util::ReadOptional(j, "index", path, &d->index));
  HAMI_RETURN_IF_ERROR(json_util::ReadOptional(j, "count", path, &d->count));
  HAMI_RETURN_IF_ERROR(json_util::ReadOptional(j, "devmem", path, &d->devmem));
  HAMI_RETURN_IF_ERROR(json_util::ReadOptional(j, "devcore", path, &d->devcore));
  HAMI_RETURN_IF_ERROR(json_util::ReadOptional(j, "type", path, &d->type));
  HAMI_RETURN_IF_ERROR(json_util::ReadOptional(j, "numa", path, &d->numa));
  HAMI_RETURN_IF_ERROR(json_util::ReadOptional(j, "mode", path, &d->mode));
  HAMI_RETURN_IF_ERROR(json_util::ReadOptional(j, "health", path, &d->health));
  if (const Json* ci = json_util::Member(j, "custominfo"); ci != nullptr && !ci->is_null()) {
    std::string ci_path = json_util::Field(path, "custominfo");
    if (!ci->is_object()) return InvalidArgumentError(ci_path + ": expected an object");
    for (auto it = ci->begin(); it != ci->end(); ++it) {
      if (it->is_string()) {
        d->custom[it.key()] = it->get<std::string>();
      } else if (it->is_number() || it->is_boolean()) {
        d->custom[it.key()] = it->dump();
      }  // nested values: nothing a vendor module reads
    }
  }
  if (const Json* mp = json_util::Member(j, "migProfiles")) {
    std::string mp_path = json_util::Field(path, "migProfiles");
    if (!mp->is_array()) return InvalidArgumentError(mp_path + ": expected an array");
    for (size_t k = 0; k < mp->size(); ++k) {
      MigProfile p;
      HAMI_RETURN_IF_ERROR(DecodeMigProfile((*mp)[k], json_util::Indexed(mp_path, k), &p));
      d->mig_profiles.push_back(std::move(p));
    }
  }
  return OkStatus();
}

bool HasLegacySeparator(std::string_view s) {
  return s.find(',') != std::string_view::npos || s.find(':') != std::string_view::npos;
}

}  // namespace

Status ValidateNodeDevices(const std::vector<DeviceInfo>& devices) {
  std::set<std::string_view> seen;
  for (size_t i = 0; i < devices.size(); ++i) {
    const DeviceInfo& d = devices[i];
    std::string where = "device " + std::to_string(i);
    if (d.id.empty()) return InvalidArgumentError(where + ": empty device id");
    where += " (" + text::Quote(d.id) + ")";
    if (d.id.find_first_of(",:;") != std::string::npos) {
      return InvalidArgumentError(where + ": device id must not contain ',', ':' or ';'");
    }
    if (!seen.insert(d.id).second) return InvalidArgumentError(where + ": duplicate device id");
    if (!text::IsValidUtf8(d.id) || !text::IsValidUtf8(d.type) || !text::IsValidUtf8(d.mode)) {
      return InvalidArgumentError(where + ": id, type and mode must be valid UTF-8");
    }
    if (d.count < 0) return InvalidArgumentError(where + ": count must not be negative");
    if (d.devmem < 0) return InvalidArgumentError(where + ": devmem must not be negative");
    if (d.devcore < 0) return InvalidArgumentError(where + ": devcore must not be negative");
  }
  return OkStatus();
}

std::string EncodeNodeDevicesJson(const std::vector<DeviceInfo>& devices) {
  std::string out = "[";
  for (size_t i = 0; i < devices.size(); ++i) {
    const DeviceInfo& d = devices[i];
    if (i > 0) out.push_back(',');
    out.push_back('{');
    bool first = true;
    if (!d.id.empty()) {
      AppendKey(&out, &first, "id");
      json_util::AppendGoString(&out, d.id);
    }
    if (d.index != 0) {
      AppendKey(&out, &first, "index");
      out += std::to_string(d.index);
    }
    if (d.count != 0) {
      AppendKey(&out, &first, "count");
      out += std::to_string(d.count);
    }
    if (d.devmem != 0) {
      AppendKey(&out, &first, "devmem");
      out += std::to_string(d.devmem);
    }
    if (d.devcore != 0) {
      AppendKey(&out, &first, "devcore");
      out += std::to_string(d.devcore);
    }
    if (!d.type.empty()) {
      AppendKey(&out, &first, "type");
      json_util::AppendGoString(&out, d.type);
    }
    if (d.numa != 0) {
      AppendKey(&out, &first, "numa");
      out += std::to_string(d.numa);
    }
    if (!d.mode.empty()) {
      AppendKey(&out, &first, "mode");
      json_util::AppendGoString(&out, d.mode);
    }
    if (!d.mig_profiles.empty()) {
      AppendKey(&out, &first, "migProfiles");
      AppendMigProfiles(&out, d.mig_profiles);
    }
    if (d.health) {
      AppendKey(&out, &first, "health");
      out += "true";
    }
    out.push_back('}');
  }
  out.push_back(']');
  return out;
}

Result<std::vector<DeviceInfo>> DecodeNodeDevicesJson(std::string_view text) {
  HAMI_ASSIGN_OR_RETURN(Json j, json_util::Parse(text, "node device registration"));
  std::vector<DeviceInfo> devices;
  if (j.is_null()) return devices;
  if (!j.is_array()) {
    return InvalidArgumentError("node device registration: expected a JSON array, got " +
                                std::string(j.type_name()));
  }
  devices.reserve(j.size());
  for (size_t i = 0; i < j.size(); ++i) {
    DeviceInfo d;
    HAMI_RETURN_IF_ERROR(DecodeDevice(j[i], json_util::Indexed("devices", i), &d));
    devices.push_back(std::move(d));
  }
  HAMI_RETURN_IF_ERROR(ValidateNodeDevices(devices));
  return devices;
}

Result<std::string> EncodeNodeDevicesLegacy(const std::vector<DeviceInfo>& devices,
                                            LegacyFields fields) {
  std::string out;
  for (size_t i = 0; i < devices.size(); ++i) {
    const DeviceInfo& d = devices[i];
    if (HasLegacySeparator(d.id) || HasLegacySeparator(d.type) || HasLegacySeparator(d.mode)) {
      return InvalidArgumentError("device " + std::to_string(i) +
                                  ": id, type and mode must not contain ',' or ':' in the "
                                  "legacy registration format");
    }
    if (d.id.empty()) {
      return InvalidArgumentError("device " + std::to_string(i) + ": empty device id");
    }
    if (!d.mig_profiles.empty()) {
      return InvalidArgumentError("device " + std::to_string(i) +
                                  ": MIG profiles cannot be expressed in the legacy format");
    }
    if (fields == LegacyFields::kSeven && (d.index != 0 || d.mode != kModeHamiCore)) {
      return InvalidArgumentError("device " + std::to_string(i) +
                                  ": the seven-field format implies index 0 and mode hami-core");
    }
    out += d.id;
    out += ',' + std::to_string(d.count);
    out += ',' + std::to_string(d.devmem);
    out += ',' + std::to_string(d.devcore);
    out += ',' + d.type;
    out += ',' + std::to_string(d.numa);
    out += d.health ? ",true" : ",false";
    if (fields == LegacyFields::kNine) {
      out += ',' + std::to_string(d.index);
      out += ',' + d.mode;
    }
    out += ':';
  }
  return out;
}

Result<std::vector<DeviceInfo>> DecodeNodeDevicesLegacy(std::string_view text) {
  if (text.find(':') == std::string_view::npos) {
    return InvalidArgumentError("node device registration: missing ':' device separator in " +
                                text::Quote(text));
  }
  std::vector<DeviceInfo> devices;
  size_t n = 0;
  for (std::string_view segment : text::Split(text, ':')) {
    if (segment.empty()) continue;
    std::string where = "device " + std::to_string(n++);
    std::vector<std::string_view> f = text::Split(segment, ',');
    if (f.size() != 7 && f.size() != 9) {
      return InvalidArgumentError(where + ": expected 7 or 9 comma-separated fields, got " +
                                  std::to_string(f.size()) + " in " + text::Quote(segment));
    }
    DeviceInfo d;
    d.id = std::string(f[0]);
    d.type = std::string(f[4]);
    constexpr int64_t kMin32 = std::numeric_limits<int32_t>::min();
    constexpr int64_t kMax32 = std::numeric_limits<int32_t>::max();
    struct IntField {
      const char* name;
      std::string_view text;
      int64_t min, max;
      int64_t value = 0;
    } ints[] = {{"count", f[1], kMin32, kMax32},
                {"devmem", f[2], kMin32, kMax32},
                {"devcore", f[3], kMin32, kMax32},
                {"numa", f[5], kMin32, kMax32}};
    for (IntField& field : ints) {
      if (const char* why = text::ParseInt(field.text, field.min, field.max, &field.value)) {
        return InvalidArgumentError(where + ": " + field.name + " " + text::Quote(field.text) +
                                    ": " + why);
      }
    }
    d.count = static_cast<int32_t>(ints[0].value);
    d.devmem = static_cast<int32_t>(ints[1].value);
    d.devcore = static_cast<int32_t>(ints[2].value);
    d.numa = static_cast<int32_t>(ints[3].value);
    if (!text::ParseBool(f[6], &d.health)) {
      return InvalidArgumentError(where + ": health " + text::Quote(f[6]) + ": not a boolean");
    }
    d.mode = std::string(kModeHamiCore);
    if (f.size() == 9) {
      int64_t index = 0;
      if (const char* why = text::ParseInt(f[7], 0, std::numeric_limits<uint32_t>::max(), &index)) {
        return InvalidArgumentError(where + ": index " + text::Quote(f[7]) + ": " + why);
      }
      d.index = static_cast<uint32_t>(index);
      d.mode = std::string(f[8]);
    }
    devices.push_back(std::move(d));
  }
  HAMI_RETURN_IF_ERROR(ValidateNodeDevices(devices));
  return devices;
}

Result<std::vector<DeviceInfo>> DecodeNodeDevices(std::string_view text) {
  std::string_view t = text::TrimSpace(text);
  if (!t.empty() && (t.front() == '[' || t == "null")) return DecodeNodeDevicesJson(text);
  return DecodeNodeDevicesLegacy(text);
}

}  // namespace hami::device
