// Event-driven waits for the world (world.h) and the end-to-end tests: an API object followed
// through the API server's watch, a file's text followed through inotify. Nothing here sleeps to
// look again; a deadline only bounds how long a wait may take before it fails.
//
//   Result<k8s::Object> node = WaitForObject(client, k8s::kNodes, "", "node-a",
//                                            [](const k8s::Object& n) { return Ready(n); },
//                                            std::chrono::seconds(20));
//   Status s = WaitForFileText(log_path, "ready", std::chrono::steady_clock::now() + 10s);
//
// Deadlines: a watch asks the API server to end it by the deadline (timeoutSeconds, whole seconds
// rounded up), so a wait on an object may end up to a second after it; an API server that stops
// answering altogether is given up on a grace later (RestClient::Watch).
//
// Thread safety: functions of their arguments; callbacks run on the calling thread.
#pragma once

#include <chrono>
#include <functional>
#include <string>

#include "common/clock.h"
#include "common/status.h"
#include "k8s/object.h"
#include "k8s/rest_client.h"

namespace hami::sim {

using SteadyTime = std::chrono::steady_clock::time_point;

// Hands every state of the object `name` of `resource` (in `ns`; "" when cluster-scoped) to
// `on_state`, in the order the API server reports them, until `on_state` returns true. The first
// state is the object as listed when the wait starts; nullptr stands for "does not exist" (at the
// start, or after a deletion). A watch the server ends is resumed where it stopped; after 410 Gone
// the object is listed again, so a state may then be handed over a second time.
// OK when `on_state` returned true; DeadlineExceeded at `deadline`; Cancelled when `cancel` (may be
// null) fires, noticed within a second; the API server's error when it refuses the list or the
// watch (a lost connection is not an error: the object is listed again).
Status WatchObject(k8s::RestClient& client, const k8s::Resource& resource, const std::string& ns,
                   const std::string& name,
                   const std::function<bool(const k8s::Object*)>& on_state, SteadyTime deadline,
                   const Cancellation* cancel = nullptr);

// The first state of the object for which `pred` holds (WatchObject). NotFound when the object
// never existed during the wait; DeadlineExceeded, naming the last state seen, when it existed but
// `pred` never held.
Result<k8s::Object> WaitForObject(k8s::RestClient& client, const k8s::Resource& resource,
                                  const std::string& ns, const std::string& name,
                                  const std::function<bool(const k8s::Object&)>& pred,
                                  std::chrono::milliseconds timeout);

// Waits until the file at `path` contains `text`, woken by inotify on its directory (creation,
// writes, renames into place), so the file need not exist yet but its directory must. The file's
// content once it does; NotFound when the directory cannot be watched; DeadlineExceeded at
// `deadline`.
Result<std::string> WaitForFileText(const std::string& path, const std::string& text,
                                    SteadyTime deadline);

}  // namespace hami::sim
