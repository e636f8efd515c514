// The YAML readers device/config.cc and device/config_mig.cc share (yaml-cpp's types, so only
// those .cc files include this); not part of device/config.h's API. Every reader names the
// setting's path ("nvidia.deviceSplitCount") in its error.
#pragma once

#include <yaml-cpp/yaml.h>

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "common/status.h"
#include "device/config.h"

namespace hami::device::config_yaml {

inline constexpr int64_t kI32 = std::numeric_limits<int32_t>::max();  // bound of int32_t settings

Status ScalarText(const YAML::Node& n, const std::string& path, std::string* out);
// An integer in [min, max].
Status ReadInt(const YAML::Node& n, const std::string& path, int64_t min, int64_t max,
               int64_t* out);
template <typename T>
Status ReadIntAs(const YAML::Node& n, const std::string& path, int64_t min, int64_t max, T* out) {
  int64_t v = 0;
  HAMI_RETURN_IF_ERROR(ReadInt(n, path, min, max, &v));
  *out = static_cast<T>(v);
  return OkStatus();
}

// A list of scalars (null: empty).
Status ReadStringList(const YAML::Node& n, const std::string& path,
                      std::vector<std::string>* out);

// nvidia.migProfileAllowlist.
Status ReadAllowlist(const YAML::Node& n, const std::string& path,
                     std::vector<MigAllowlistEntry>* out);
// nvidia.knownMigGeometries: Volcano's form is read; HAMi's older form (allowedGeometries as a
// list of lists, without group names) is left unread with a warning.
Status ReadKnownGeometries(const YAML::Node& n, const std::string& path,
                           std::vector<KnownMigGeometry>* out, std::vector<std::string>* warnings);

}  // namespace hami::device::config_yaml
