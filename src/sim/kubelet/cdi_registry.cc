#include "sim/kubelet/cdi_registry.h"

#include <filesystem>
#include <system_error>

#include "common/file_util.h"
#include "common/log.h"
#include "k8s/yaml_json.h"

namespace hami::sim {

std::set<std::string> CdiDeviceNames(const std::vector<std::string>& dirs) {
  std::set<std::string> names;
  for (const std::string& dir : dirs) {
    std::error_code ec;
    for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
      const std::string ext = entry.path().extension().string();
      if (ext != ".json" && ext != ".yaml" && ext != ".yml") continue;
      const std::string path = entry.path().string();
      Result<std::string> text = ReadFileToString(path);
      Result<k8s::Object> spec = text.ok() ? k8s::YamlToJson(*text) : text.status();
      const k8s::Object* kind = nullptr;
      const k8s::Object* devices = nullptr;
      if (spec.ok() && spec->is_object()) {
        auto k = spec->find("kind");
        auto d = spec->find("devices");
        if (k != spec->end() && k->is_string()) kind = &*k;
        if (d != spec->end() && d->is_array()) devices = &*d;
      }
      if (kind == nullptr || devices == nullptr) {
        HAMI_LOG(Warning) << "CDI spec " << path << " skipped: "
                          << (spec.ok() ? "no kind or devices" : spec.status().message());
        continue;
      }
      for (const k8s::Object& d : *devices) {
        auto name = d.find("name");
        if (name != d.end() && name->is_string()) {
          names.insert(kind->get<std::string>() + "=" + name->get<std::string>());
        }
      }
    }
  }
  return names;
}

}  // namespace hami::sim
