// Event-driven waits for tests: a test never sleeps to let something happen, it re-checks its
// condition each time something that could make it true has happened, and gives up only at a
// generous deadline (returning false, so the test fails with its message instead of hanging).
//
//   // An API object: re-checked after a list and on every watch event of the resource.
//   ASSERT_TRUE(WatchUntil(*client, k8s::kPods, "default", [&] { return Bound("p1"); }));
//
//   // State without an API object: whoever may change it calls Notify() afterwards.
//   ChangeSignal changed;                       // shared with the component's observer
//   ASSERT_TRUE(changed.WaitUntil([&] { return sched.Stats().scheduled == 1; }, kDefaultTimeout));
//
// For tests; a test using WatchUntil links hami_sim_waits (src/sim/world). Thread safety:
// ChangeSignal is safe from any thread; WatchUntil blocks its calling thread and evaluates the
// condition there.
#pragma once

#include <chrono>
#include <functional>
#include <string_view>

#include "common/change_signal.h"
#include "common/status.h"
#include "k8s/object.h"
#include "k8s/rest_client.h"
#include "k8s/watch_stream.h"
#include "sim/world/waits.h"

namespace hami::eventwait {

inline constexpr std::chrono::milliseconds kDefaultTimeout = std::chrono::seconds(30);

// The generation counter of common/change_signal.h, under the name the tests use.
using ChangeSignal = hami::ChangeSignal;

// Waits until `done` holds, where `done` depends on objects of `resource` in namespace `ns` ("" for
// all namespaces or a cluster-scoped resource) and typically reads them from the API server.
// `done` is evaluated once after a list and then after every watch event (bookmarks aside) from
// that list's resourceVersion: any change that follows an evaluation is delivered as an event, so
// no change is missed. A watch answered 410 Gone lists again (sim::FollowResource with
// Recovery::kRelistOnGone). True when `done` held; otherwise `done` evaluated once more when
// `timeout` passes first, or when the resource cannot be listed or watched (the caller's assertion
// then fails with its own message).
inline bool WatchUntil(k8s::RestClient& client, const k8s::Resource& resource, std::string_view ns,
                       const std::function<bool()>& done,
                       std::chrono::milliseconds timeout = kDefaultTimeout) {
  sim::FollowOptions options;
  options.deadline = std::chrono::steady_clock::now() + timeout;
  options.recovery = sim::Recovery::kRelistOnGone;
  const Status s = sim::FollowResource(
      client, resource, ns, options, [&](const k8s::Object&) { return done(); },
      [&](const k8s::WatchEvent& ev) {
        return ev.type != k8s::WatchEvent::Type::kBookmark && done();
      });
  return s.ok() || done();
}

}  // namespace hami::eventwait
