#include "common/ready_file.h"

#include <unistd.h>

#include <nlohmann/json.hpp>

#include "common/file_util.h"

namespace hami {

Status WriteReadyFile(const std::string& path, const ReadyFields& fields) {
  if (path.empty()) return OkStatus();
  nlohmann::json j = nlohmann::json::object();
  for (const auto& [k, v] : fields) j[k] = v;
  j["pid"] = std::to_string(getpid());
  Status s = WriteFileAtomically(path, j.dump() + "\n", 0644);
  if (!s.ok()) return Status(s.code(), "writing the ready file: " + s.message());
  return OkStatus();
}

Result<ReadyFields> ReadReadyFile(const std::string& path) {
  HAMI_ASSIGN_OR_RETURN(std::string text, ReadFileToString(path, 1 << 16));
  nlohmann::json j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object()) return InvalidArgumentError(path + " is not a JSON object");
  ReadyFields out;
  for (const auto& [k, v] : j.items()) {
    if (!v.is_string()) return InvalidArgumentError(path + ": \"" + k + "\" is not a string");
    out[k] = v.get<std::string>();
  }
  return out;
}

}  // namespace hami
