// Event-driven waits for the world (world.h) and the tests: API objects followed through the API
// server's list and watch, a file's text followed through inotify. Nothing here sleeps to look
// again; a deadline only bounds how long a wait may take before it fails.
//
//   Result<k8s::Object> node = WaitForObject(client, k8s::kNodes, "", "node-a",
//                                            [](const k8s::Object& n) { return Ready(n); },
//                                            std::chrono::seconds(20));
//   Status s = WaitForFileText(log_path, "ready", std::chrono::steady_clock::now() + 10s);
//
// FollowResource is the one list + watch + resume loop; WatchObject, WaitForObject and the tests'
// waits (tests/event_wait.h WatchUntil, the burst test's streams) are built on it.
//
// Deadlines: a watch asks the API server to end it by the deadline (timeoutSeconds, whole seconds
// rounded up), so a wait on an object may end up to a second after it; an API server that stops
// answering altogether is given up on a grace later (RestClient::Watch). No watch asks for more
// than a minute, so that a silent server is noticed early in a long wait or an endless follow.
//
// Thread safety: functions of their arguments; callbacks run on the calling thread.
#pragma once

#include <chrono>
#include <functional>
#include <string>
#include <string_view>

#include "common/clock.h"
#include "common/status.h"
#include "k8s/object.h"
#include "k8s/rest_client.h"
#include "k8s/watch_stream.h"

namespace hami::sim {

using SteadyTime = std::chrono::steady_clock::time_point;

// What a follow (FollowResource) does when a list or a watch fails. Each level adds to the one
// before it.
enum class Recovery {
  // Every failure ends the follow. For a consumer that must see every change as an event: a
  // fresh list would not tell it what was deleted in between.
  kNone,
  // A watch answered 410 Gone (its position is no longer in the server's history) lists again;
  // any other failure ends the follow.
  kRelistOnGone,
  // A lost connection (Unavailable, DeadlineExceeded, Unknown) does not end the follow either: a
  // list is asked again, a watch resumed where it stopped.
  kReconnect,
};

struct FollowOptions {
  std::string name{};  // "" = every object of the resource in the namespace; else only this one
  SteadyTime deadline = SteadyTime::max();  // max() = none
  const Cancellation* cancel = nullptr;  // may be null
  Recovery recovery = Recovery::kNone;
};

// Follows the objects of `resource` in `ns` ("" for all namespaces or a cluster-scoped resource;
// only `options.name` when set) until a callback returns true. `on_list` gets the list the follow
// starts from (every page merged; `items` is an array), and again after each relist; `on_event`
// then gets every watch event from that list's resourceVersion on, bookmarks included, in the
// server's order. A watch the server ends is resumed after the last event seen. Both callbacks run
// on the calling thread, one at a time.
// OK when a callback returned true; DeadlineExceeded at `options.deadline`; Cancelled when
// `options.cancel` fires (noticed within a second); otherwise the first failure that
// `options.recovery` does not cover, or the third failed watch in a row that delivered nothing (a
// server that keeps refusing the stream is reported rather than asked again until the deadline).
Status FollowResource(k8s::RestClient& client, const k8s::Resource& resource, std::string_view ns,
                      const FollowOptions& options,
                      const std::function<bool(const k8s::Object& list)>& on_list,
                      const std::function<bool(const k8s::WatchEvent& event)>& on_event);

// Hands every state of the object `name` of `resource` (in `ns`; "" when cluster-scoped) to
// `on_state`, in the order the API server reports them, until `on_state` returns true. The first
// state is the object as listed when the wait starts; nullptr stands for "does not exist" (at the
// start, or after a deletion). It is a FollowResource with Recovery::kReconnect: a watch that the
// server ends or whose connection is lost is resumed where it stopped; after 410 Gone the object
// is listed again, so a state may then be handed over a second time.
// OK when `on_state` returned true; DeadlineExceeded at `deadline`; Cancelled when `cancel` (may be
// null) fires, noticed within a second; the API server's error when it refuses the list or the
// watch (a lost connection is not one).
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
