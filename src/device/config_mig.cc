// The MIG settings of the nvidia section (migProfileAllowlist, knownMigGeometries) and the YAML
// readers device/config.cc shares with them (config_yaml.h).
#include <set>

#include "device/config_yaml.h"
#include "device/text_util.h"

namespace hami::device::config_yaml {

namespace {

// "<N>g.<x>" with N a positive integer and x non-empty.
bool LooksLikeMigProfile(std::string_view p) {
  size_t g = p.find("g.");
  if (g == 0 || g == std::string_view::npos || g + 2 >= p.size()) return false;
  for (size_t i = 0; i < g; ++i) {
    if (p[i] < '0' || p[i] > '9') return false;
  }
  return true;
}

Status ReadGeometryInstances(const YAML::Node& n, const std::string& path,
                             std::vector<MigGeometryInstance>* out) {
  if (!n.IsSequence() || n.size() == 0) {
    return InvalidArgumentError(path + ": expected a non-empty list of {name, memory, count}");
  }
  for (size_t i = 0; i < n.size(); ++i) {
    const std::string ip = path + "[" + std::to_string(i) + "]";
    const YAML::Node e = n[i];
    if (!e.IsMap()) return InvalidArgumentError(ip + ": expected a map with name, memory, count");
    MigGeometryInstance inst;
    for (auto it = e.begin(); it != e.end(); ++it) {
      const std::string key = it->first.Scalar();
      if (key == "name") {
        HAMI_RETURN_IF_ERROR(ScalarText(it->second, ip + ".name", &inst.name));
      } else if (key == "memory") {
        HAMI_RETURN_IF_ERROR(ReadInt(it->second, ip + ".memory", 1, kI32, &inst.memory_mib));
      } else if (key == "count") {
        HAMI_RETURN_IF_ERROR(ReadIntAs(it->second, ip + ".count", 1, 64, &inst.count));
      } else {
        return InvalidArgumentError(ip + "." + key + ": unknown key (want name, memory, count)");
      }
    }
    if (!LooksLikeMigProfile(inst.name)) {
      return InvalidArgumentError(ip + ".name: " + text::Quote(inst.name) +
                                  " is not a MIG profile name like \"1g.10gb\"");
    }
    if (inst.memory_mib == 0 || inst.count == 0) {
      return InvalidArgumentError(ip + ": memory and count are required");
    }
    out->push_back(std::move(inst));
  }
  return OkStatus();
}

Status ReadGeometryGroup(const YAML::Node& g, const std::string& gp, MigGeometryGroup* group) {
  for (auto it = g.begin(); it != g.end(); ++it) {
    const std::string key = it->first.Scalar();
    if (key == "group") {
      HAMI_RETURN_IF_ERROR(ScalarText(it->second, gp + ".group", &group->group));
    } else if (key == "geometries") {
      HAMI_RETURN_IF_ERROR(
          ReadGeometryInstances(it->second, gp + ".geometries", &group->instances));
    } else {
      return InvalidArgumentError(gp + "." + key + ": unknown key (want group, geometries)");
    }
  }
  if (group->group.empty() || group->group.find_first_of("-[]:,;") != std::string::npos) {
    return InvalidArgumentError(gp + ".group: " + text::Quote(group->group) +
                                " must be a non-empty name without '-', '[', ']', ':', ',' or "
                                "';' (Volcano's scheduler splits MIG device IDs on '-')");
  }
  if (group->instances.empty()) return InvalidArgumentError(gp + ".geometries: required");
  return OkStatus();
}

}  // namespace

Status ScalarText(const YAML::Node& n, const std::string& path, std::string* out) {
  if (!n.IsScalar()) return InvalidArgumentError(path + ": expected a scalar value");
  *out = n.Scalar();
  return OkStatus();
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

Status ReadKnownGeometries(const YAML::Node& n, const std::string& path,
                           std::vector<KnownMigGeometry>* out, std::vector<std::string>* warnings) {
  out->clear();
  if (n.IsNull()) return OkStatus();
  if (!n.IsSequence()) return InvalidArgumentError(path + ": expected a list");
  for (size_t i = 0; i < n.size(); ++i) {
    const std::string ep = path + "[" + std::to_string(i) + "]";
    const YAML::Node e = n[i];
    if (!e.IsMap()) return InvalidArgumentError(ep + ": expected a map with models and "
                                                     "allowedGeometries");
    KnownMigGeometry entry;
    YAML::Node groups;
    for (auto it = e.begin(); it != e.end(); ++it) {
      const std::string key = it->first.Scalar();
      if (key == "models") {
        HAMI_RETURN_IF_ERROR(ReadStringList(it->second, ep + ".models", &entry.models));
      } else if (key == "allowedGeometries") {
        groups = it->second;
      } else {
        return InvalidArgumentError(ep + "." + key +
                                    ": unknown key (want models, allowedGeometries)");
      }
    }
    if (entry.models.empty()) return InvalidArgumentError(ep + ".models: required");
    if (!groups.IsSequence() || groups.size() == 0) {
      return InvalidArgumentError(ep + ".allowedGeometries: expected a non-empty list");
    }
    if (groups[0].IsSequence()) {
      warnings->push_back(path + ": HAMi's older form (geometries without group names) is not "
                                 "used; Volcano's form names each group");
      out->clear();
      return OkStatus();
    }
    std::set<std::string> names;
    for (size_t k = 0; k < groups.size(); ++k) {
      const std::string gp = ep + ".allowedGeometries[" + std::to_string(k) + "]";
      if (!groups[k].IsMap()) {
        return InvalidArgumentError(gp + ": expected a map with group and geometries");
      }
      MigGeometryGroup group;
      HAMI_RETURN_IF_ERROR(ReadGeometryGroup(groups[k], gp, &group));
      if (!names.insert(group.group).second) {
        return InvalidArgumentError(gp + ".group: " + text::Quote(group.group) + " given twice");
      }
      entry.groups.push_back(std::move(group));
    }
    out->push_back(std::move(entry));
  }
  return OkStatus();
}

}  // namespace hami::device::config_yaml
