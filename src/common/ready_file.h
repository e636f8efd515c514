// Ready files: how a service tells whoever started it that it serves, and where. Given
// `--ready-file=PATH`, a binary writes PATH once its ports are open: one JSON object of strings,
// its PID and its addresses, for example
//
//   {"pid":"4242","extender":"https://127.0.0.1:40123","metrics":"127.0.0.1:40125"}
//
// The file appears whole (written beside and renamed), so a reader that finds it may trust it.
// The simulated world and the scripts wait for these files instead of matching log lines, so a
// reworded log line cannot break them.
//
// Thread safety: functions without shared state.
#pragma once

#include <map>
#include <string>

#include "common/status.h"

namespace hami {

using ReadyFields = std::map<std::string, std::string>;

// Writes `fields` and "pid" (this process) to `path`. Nothing when `path` is empty.
Status WriteReadyFile(const std::string& path, const ReadyFields& fields);

// The fields of a ready file: NotFound while there is none, InvalidArgument when it is not a
// JSON object of strings.
Result<ReadyFields> ReadReadyFile(const std::string& path);

}  // namespace hami
