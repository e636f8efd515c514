// Helpers shared by the World's files (world.h): world.cc (start-up and teardown) and
// world_rbac.cc (RBAC set-up and credentials).
//
// Thread safety: none needed; the World has one owning thread.
#pragma once

#include <chrono>
#include <string>

#include "common/status.h"
#include "k8s/rest_client.h"
#include "sim/world/world.h"

namespace hami::sim::world_internal {

// Writes `text` to `path`, replacing what was there; Internal when the write fails.
Status WriteAll(const std::string& path, const std::string& text);
// Waits until node `n` offers its GPUs: the device plugin's registration annotation and a
// non-zero allocatable count of its resource.
Status WaitForNodeGpus(k8s::RestClient& client, const WorldNode& n, std::chrono::seconds timeout);

}  // namespace hami::sim::world_internal
