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
// Header-only, for tests. Thread safety: ChangeSignal is safe from any thread; WatchUntil blocks
// its calling thread and evaluates the condition there.
#pragma once

#include <chrono>
#include <functional>
#include <string>
#include <string_view>

#include "common/change_signal.h"
#include "common/status.h"
#include "k8s/api_error.h"
#include "k8s/object.h"
#include "k8s/rest_client.h"
#include "k8s/watch_stream.h"

namespace hami::eventwait {

inline constexpr std::chrono::milliseconds kDefaultTimeout = std::chrono::seconds(30);

// The generation counter of common/change_signal.h, under the name the tests use.
using ChangeSignal = hami::ChangeSignal;

// Waits until `done` holds, where `done` depends on objects of `resource` in namespace `ns` ("" for
// all namespaces or a cluster-scoped resource) and typically reads them from the API server.
// `done` is evaluated once after a list and then after every watch event from that list's
// resourceVersion: any change that follows an evaluation is delivered as an event, so no change is
// missed. True when `done` held; false once `timeout` passes first, or when the resource cannot be
// listed or watched (the caller's assertion then fails with its own message).
inline bool WatchUntil(k8s::RestClient& client, const k8s::Resource& resource, std::string_view ns,
                       const std::function<bool()>& done,
                       std::chrono::milliseconds timeout = kDefaultTimeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  std::string from;  // where the next watch starts; "" = list first
  for (;;) {
    if (from.empty()) {
      Result<k8s::Object> list = client.List(resource, ns);
      if (!list.ok()) return done();
      from = k8s::GetString(*list, "/metadata/resourceVersion");
      if (done()) return true;
      if (from.empty()) return false;  // nothing to watch from: no event could be trusted
    }
    const auto left = deadline - std::chrono::steady_clock::now();
    if (left <= std::chrono::steady_clock::duration::zero()) return done();
    k8s::ListOptions watch;
    watch.resource_version = from;
    watch.allow_watch_bookmarks = true;
    // The server ends the watch at the deadline (rounded up to its one-second resolution), which
    // bounds this call when no event comes.
    watch.timeout_seconds = std::chrono::ceil<std::chrono::seconds>(left).count();
    bool met = false;
    Status s = client.Watch(resource, ns, watch, [&](const k8s::WatchEvent& ev) {
      const std::string at = k8s::ResourceVersion(*ev.object);
      if (!at.empty()) from = at;
      if (ev.type == k8s::WatchEvent::Type::kBookmark) return true;
      met = done();
      return !met;
    });
    if (met) return true;
    if (k8s::IsGone(s)) {
      from.clear();  // the events since `from` are compacted away: list again
    } else if (!s.ok()) {
      return done();
    }
    // Otherwise the server ended the watch (its timeout): resume from the last event seen.
  }
}

}  // namespace hami::eventwait
