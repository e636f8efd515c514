// Event-driven waits (waits.h): objects through list + watch, a file's text through inotify.
#include "sim/world/waits.h"

#include <poll.h>
#include <sys/inotify.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstring>
#include <filesystem>
#include <optional>
#include <string_view>

#include "common/file_util.h"
#include "k8s/api_error.h"

namespace hami::sim {
namespace {

using std::chrono::steady_clock;

// A follow gives up after this many failed watches in a row that delivered nothing: a server
// that keeps refusing the stream is reported instead of being asked again until the deadline.
constexpr int kMaxQuietWatchFailures = 3;

// The watch's timeoutSeconds: the time left, in whole seconds rounded up (at least one, as the API
// takes no less), at most a minute, so that a server gone silent is noticed well before a long
// deadline (RestClient::Watch gives up on a stream a grace after its timeout).
int64_t WatchSeconds(SteadyTime deadline) {
  const auto left = deadline - steady_clock::now();
  if (left >= std::chrono::minutes(1)) return 60;
  return std::max<int64_t>(std::chrono::ceil<std::chrono::seconds>(left).count(), 1);
}

// Failures of the connection rather than of the request, which Recovery::kReconnect goes on
// after (Gone: from a fresh list).
bool ConnectionFailure(const Status& s) {
  return k8s::IsGone(s) || s.code() == StatusCode::kUnavailable ||
         s.code() == StatusCode::kDeadlineExceeded || s.code() == StatusCode::kUnknown;
}

// Whether `recovery` lets a follow go on after its watch failed with `s`.
bool WatchRecovers(Recovery recovery, const Status& s) {
  switch (recovery) {
    case Recovery::kNone:
      return false;
    case Recovery::kRelistOnGone:
      return k8s::IsGone(s);
    case Recovery::kReconnect:
      return ConnectionFailure(s);
  }
  return false;
}

std::string Describe(const k8s::Resource& resource, std::string_view ns, const std::string& name) {
  if (name.empty()) return resource.plural + (ns.empty() ? "" : " in " + std::string(ns));
  return resource.plural + " " + (ns.empty() ? name : std::string(ns) + "/" + name);
}

}  // namespace

Status FollowResource(k8s::RestClient& client, const k8s::Resource& resource, std::string_view ns,
                      const FollowOptions& options,
                      const std::function<bool(const k8s::Object& list)>& on_list,
                      const std::function<bool(const k8s::WatchEvent& event)>& on_event) {
  const std::string what = Describe(resource, ns, options.name);
  k8s::ListOptions selected;
  if (!options.name.empty()) selected.field_selector = "metadata.name=" + options.name;
  std::string from;  // where the next watch starts; "" = list first
  int quiet_failures = 0;
  for (;;) {
    if (options.cancel != nullptr && options.cancel->cancelled()) {
      return Status(StatusCode::kCancelled, "waiting for " + what + ": cancelled");
    }
    if (steady_clock::now() >= options.deadline) {
      return DeadlineExceededError("waiting for " + what + ": deadline passed");
    }
    if (from.empty()) {
      // RestClient retries a failed list with backoff, which paces this loop while the server
      // is unreachable.
      Result<k8s::Object> list = client.ListAll(resource, ns, selected);
      if (!list.ok() && options.recovery == Recovery::kReconnect &&
          ConnectionFailure(list.status())) {
        continue;
      }
      if (!list.ok()) return list.status().WithContext("listing " + what);
      if (on_list(*list)) return OkStatus();
      from = k8s::ResourceVersion(*list);
      if (from.empty()) return InternalError("listing " + what + ": no resourceVersion");
    }
    k8s::ListOptions watch = selected;
    watch.resource_version = from;
    watch.timeout_seconds = WatchSeconds(options.deadline);
    bool done = false;
    bool delivered = false;
    Status s = client.Watch(
        resource, ns, watch,
        [&](const k8s::WatchEvent& ev) {
          delivered = true;
          if (std::string rv = k8s::ResourceVersion(*ev.object); !rv.empty()) from = rv;
          done = on_event(ev);
          return !done;
        },
        options.cancel);
    if (done) return OkStatus();
    quiet_failures = s.ok() || delivered ? 0 : quiet_failures + 1;
    if (s.ok()) continue;  // the server ended the stream (its timeout): resume
    if (s.code() == StatusCode::kCancelled) return s.WithContext("waiting for " + what);
    if (!WatchRecovers(options.recovery, s) || quiet_failures >= kMaxQuietWatchFailures) {
      return s.WithContext("watching " + what);
    }
    if (k8s::IsGone(s)) from.clear();
  }
}

Status WatchObject(k8s::RestClient& client, const k8s::Resource& resource, const std::string& ns,
                   const std::string& name,
                   const std::function<bool(const k8s::Object*)>& on_state, SteadyTime deadline,
                   const Cancellation* cancel) {
  FollowOptions options;
  options.name = name;
  options.deadline = deadline;
  options.cancel = cancel;
  options.recovery = Recovery::kReconnect;
  return FollowResource(
      client, resource, ns, options,
      [&](const k8s::Object& list) {
        const k8s::Object& items = list.at("items");
        return on_state(items.empty() ? nullptr : &items[0]);
      },
      [&](const k8s::WatchEvent& ev) {
        if (ev.type == k8s::WatchEvent::Type::kBookmark) return false;
        return on_state(ev.type == k8s::WatchEvent::Type::kDeleted ? nullptr : ev.object.get());
      });
}

Result<k8s::Object> WaitForObject(k8s::RestClient& client, const k8s::Resource& resource,
                                  const std::string& ns, const std::string& name,
                                  const std::function<bool(const k8s::Object&)>& pred,
                                  std::chrono::milliseconds timeout) {
  std::optional<k8s::Object> last;  // the last state seen, for the deadline's message
  bool held = false;
  Status s = WatchObject(
      client, resource, ns, name,
      [&](const k8s::Object* state) {
        if (state == nullptr) return false;
        last = *state;
        held = pred(*state);
        return held;
      },
      steady_clock::now() + timeout);
  if (s.ok() && held) return *std::move(last);
  const std::string what = Describe(resource, ns, name);
  if (s.code() != StatusCode::kDeadlineExceeded) return s;
  if (!last) return NotFoundError(what + " not found");
  return DeadlineExceededError(what + " did not reach the expected state; last seen " +
                               last->dump());
}

Result<std::string> WaitForFileText(const std::string& path, const std::string& text,
                                    SteadyTime deadline) {
  std::string dir = std::filesystem::path(path).parent_path().string();
  if (dir.empty()) dir = ".";
  const int fd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
  if (fd < 0) return InternalError(std::string("inotify_init1: ") + std::strerror(errno));
  struct Closer {
    int fd;
    ~Closer() { close(fd); }
  } closer{fd};
  if (inotify_add_watch(fd, dir.c_str(), IN_CREATE | IN_MODIFY | IN_MOVED_TO | IN_CLOSE_WRITE) <
      0) {
    return NotFoundError("cannot watch " + dir + ": " + std::strerror(errno));
  }
  for (;;) {
    // Read only once the watch is in place: a write after this read wakes the poll below.
    Result<std::string> content = ReadFileToString(path);
    if (content.ok() && content->find(text) != std::string::npos) return content;
    const int64_t left =
        std::chrono::ceil<std::chrono::milliseconds>(deadline - steady_clock::now()).count();
    if (left <= 0) {
      std::string seen = content.ok() ? content->substr(content->size() > 2000
                                                             ? content->size() - 2000
                                                             : 0)
                                      : content.status().ToString();
      return DeadlineExceededError(path + " never contained \"" + text + "\"; last read: " + seen);
    }
    pollfd p{fd, POLLIN, 0};
    if (poll(&p, 1, static_cast<int>(std::min<int64_t>(left, INT_MAX))) < 0 && errno != EINTR) {
      return InternalError(std::string("poll on inotify: ") + std::strerror(errno));
    }
    // Which file changed does not matter: the loop reads the file again either way.
    char events[4096];
    while (read(fd, events, sizeof(events)) > 0) {
    }
  }
}

}  // namespace hami::sim
