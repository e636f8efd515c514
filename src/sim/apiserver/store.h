// Store: the simulated API server's in-memory object database. Objects are immutable JSON values
// behind shared pointers, keyed by resource type and "<namespace>/<name>"; every write takes the
// next value of one cluster-wide resourceVersion counter (like etcd's revision) and appends a
// watch event to a bounded history. Watchers resume from any revision still in the history; older
// revisions are reported as OutOfRange (the HTTP layer turns that into 410 Gone).
//
// Thread safety: all methods are safe to call concurrently. Update's mutation callback runs
// outside the store's lock and may run more than once (when another write to the object lands
// first it is called again on the newer state), so it must depend on its arguments only. Delete's
// precondition runs under the lock: keep it short and never call back into the store from it.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <vector>

#include "common/status.h"
#include "common/thread_annotations.h"
#include "sim/apiserver/resources.h"

namespace hami::sim {

using ObjectPtr = std::shared_ptr<const nlohmann::json>;

// An object's JSON text, made by the first reader that needs it (a watcher, the write's reply, a
// GET) and shared by the rest: one serialisation per write, not one per watcher and request.
class LazyText {
 public:
  const std::string& Get(const nlohmann::json& object) const;

 private:
  mutable std::once_flag once_;
  mutable std::string text_;
};

struct WatchEvent {
  int64_t revision = 0;
  std::string type;  // ADDED, MODIFIED, DELETED
  const ResourceInfo* resource = nullptr;
  std::string ns;
  ObjectPtr object;    // the new state (the last state for DELETED)
  ObjectPtr previous;  // the state before a MODIFIED/DELETED; null for ADDED
  std::shared_ptr<const LazyText> text = std::make_shared<LazyText>();  // `object` as JSON
};

class Store {
 public:
  // `history_window`: how many events are kept for watch resumption.
  explicit Store(size_t history_window);
  Store(const Store&) = delete;
  Store& operator=(const Store&) = delete;

  // Stores `object` (metadata.name must be set) and stamps metadata.resourceVersion.
  // AlreadyExists when the name is taken.
  // `text` (optional) receives the stored object's JSON text holder, shared with its watch event.
  Result<ObjectPtr> Create(const ResourceInfo& resource, const std::string& ns,
                           nlohmann::json object, std::shared_ptr<const LazyText>* text = nullptr);
  // NotFound when absent.
  Result<ObjectPtr> Get(const ResourceInfo& resource, const std::string& ns,
                        const std::string& name,
                        std::shared_ptr<const LazyText>* text = nullptr) const;
  // Objects of `resource` in `ns` ("" = every namespace) in (namespace, name) order, and the
  // revision the snapshot was taken at.
  std::vector<ObjectPtr> List(const ResourceInfo& resource, const std::string& ns,
                              int64_t* revision) const;
  // Read-modify-write: `mutate` gets the current object and a copy of it to edit (an error
  // aborts the update and is returned); see the class comment on retries. The name cannot change. A
  // mutation that changes nothing still counts as an update (new resourceVersion), as on the real
  // server for PUT.
  Result<ObjectPtr> Update(
      const ResourceInfo& resource, const std::string& ns, const std::string& name,
      const std::function<Status(const nlohmann::json& current, nlohmann::json& next)>& mutate,
      std::shared_ptr<const LazyText>* text = nullptr);
  // Deletes after `precondition` (may be null) accepts the current object; returns the last state.
  Result<ObjectPtr> Delete(const ResourceInfo& resource, const std::string& ns,
                           const std::string& name,
                           const std::function<Status(const nlohmann::json&)>& precondition);

  int64_t revision() const;

  // Non-blocking: appends the events newer than `after` whose resource `want` accepts, in
  // revision order, and sets *now to the revision they are complete up to. OutOfRange when
  // `after` fell out of the history window; Cancelled after Close().
  Status EventsSince(int64_t after, const std::function<bool(const ResourceInfo&)>& want,
                     std::vector<WatchEvent>* out, int64_t* now) const;

  // Adds a function called after every write, outside the store's lock, with the written
  // resource (the watch fan-out's wake-up; the server's on_write option). Added before the store
  // is shared; each must be cheap and must not call back into the store.
  void AddWriteListener(std::function<void(const ResourceInfo&)> listener);

  // Later EventsSince calls return Cancelled.
  void Close();

 private:
  // A write in two steps: Append (lock held) records the event and drops what falls out of the
  // history window; Notify (lock released) calls the write listeners and frees those events.
  struct Appended {
    const ResourceInfo* resource;
    std::vector<WatchEvent> evicted;
  };
  Appended Append(WatchEvent event) REQUIRES(mu_);
  void Notify(Appended appended);

  const size_t history_window_;
  mutable Mutex mu_;
  int64_t revision_ GUARDED_BY(mu_) = 0;
  // An object and the text of its latest write (what its watch event, the write's reply and
  // later GETs send).
  struct Stored {
    ObjectPtr object;
    std::shared_ptr<const LazyText> text;
  };
  std::map<const ResourceInfo*, std::map<std::string, Stored>> objects_ GUARDED_BY(mu_);
  std::deque<WatchEvent> history_ GUARDED_BY(mu_);
  int64_t compacted_ GUARDED_BY(mu_) = 0;  // highest revision dropped from history_
  bool closed_ GUARDED_BY(mu_) = false;
  std::vector<std::function<void(const ResourceInfo&)>> write_listeners_;  // fixed once shared
};

}  // namespace hami::sim
