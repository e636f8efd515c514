// Helpers shared by the World's files (world.h): world.cc (start-up and teardown) and
// world_rbac.cc (RBAC set-up and credentials).
//
// Thread safety: none needed; the World has one owning thread.
#pragma once

#include <string>

#include "common/status.h"

namespace hami::sim::world_internal {

// Writes `text` to `path`, replacing what was there; Internal when the write fails.
Status WriteAll(const std::string& path, const std::string& text);

}  // namespace hami::sim::world_internal
