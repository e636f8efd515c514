// WatchHub: the simulated API server's watch fan-out. One dispatcher thread reads each batch of
// new store events once and writes it to every open watch; the watches' own HTTP worker threads
// sleep until their watch ends.
//
// Why: with a thread per watch, every write woke each watcher's thread (a futex wake, a context
// switch and, in glibc's condition variable, sometimes a block of the writer until the woken
// thread ran) and each of them took the store's lock to copy its events. The dispatcher wakes
// once per batch, whatever the number of watches, and writes without blocking. A watch whose
// connection does not take the whole batch at once (a slow reader, or TLS, which cannot write
// partially) is handed to its own thread, which sends the rest blocking while the dispatcher
// queues further events for it; nobody else waits for it.
//
// Semantics are those of the per-watch loop it replaces: events of the watch's resource,
// namespace and selectors in revision order (MODIFIED becomes ADDED/DELETED when an object enters
// or leaves the selection), all events of one dispatch in one chunk, BOOKMARKs every
// `bookmark_every` when asked for, the stream ending at its deadline, an ERROR 410 event when the
// watch's position fell out of the store's history window, and every stream ending when the
// store is closed. A watch also ends when its writer's ServerRunning() turns false (checked at
// every dispatch and at least every 200 ms).
//
// Thread safety: Serve may be called from any number of threads; the hub must outlive every
// Serve call and Stop joins the dispatcher (after which Serve returns at once).
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "common/thread_annotations.h"
#include "net/http_server.h"
#include "sim/apiserver/resources.h"
#include "sim/apiserver/selectors.h"
#include "sim/apiserver/store.h"

namespace hami::sim {

struct WatchSpec {
  const ResourceInfo* resource = nullptr;
  std::string ns;  // "" = every namespace
  LabelSelector labels;
  FieldSelector fields;
  // Renders an event's object (kubectl's Table rows); null = the stored JSON text.
  std::function<std::string(const WatchEvent&)> render;
  bool bookmarks = false;
  std::chrono::milliseconds bookmark_every{10000};
  std::chrono::steady_clock::time_point deadline;

  bool Matches(const nlohmann::json& object) const;
  // Appends the event's line ({"type":...,"object":...}\n) to *out when it concerns this watch.
  void AppendEvent(const WatchEvent& event, std::string* out) const;
};

class WatchHub {
 public:
  // `expired_event` renders the ERROR event line (with its trailing newline) that ends a watch
  // whose position fell out of the history window; its argument is the store's message.
  WatchHub(Store& store, const ResourceRegistry& registry,
           std::function<std::string(const std::string&)> expired_event);
  ~WatchHub();
  WatchHub(const WatchHub&) = delete;
  WatchHub& operator=(const WatchHub&) = delete;

  // Starts the dispatcher and adds its write listener to the store.
  void Start();
  // Ends every watch and joins the dispatcher. Idempotent.
  void Stop();

  // Runs one watch on the calling thread until it ends: the events of spec.resource newer than
  // `start` (the caller has sent everything up to it), bookmarks, the deadline. Returns when the
  // stream ends, breaks or the hub stops.
  void Serve(WatchSpec spec, int64_t start, net::ChunkWriter& writer);

 private:
  struct Watch;

  void Loop();
  // The store's write listener: wakes the dispatcher when the resource is watched.
  void OnWrite(const ResourceInfo& resource);
  void Wake();
  size_t IndexOf(const ResourceInfo& resource) const;
  // Sends what the dispatcher gathered for `w` (without blocking; see the class comment).
  static void Deliver(Watch& w, std::string data);
  static void End(Watch& w, std::string last_words);

  Store& store_;
  const ResourceRegistry& registry_;
  const std::function<std::string(const std::string&)> expired_event_;
  // Open watches per resource (index in registry_.all()): writes to unwatched resources (events,
  // leases) do not wake the dispatcher.
  std::unique_ptr<std::atomic<int>[]> watched_;
  // The dispatcher's futex word: bumped by each wake-up; `sleeping_` says whether a wake-up must
  // also enter the kernel.
  std::atomic<uint32_t> seq_{0};
  std::atomic<bool> sleeping_{false};

  Mutex mu_;
  std::vector<std::shared_ptr<Watch>> watches_ GUARDED_BY(mu_);
  int64_t position_ GUARDED_BY(mu_) = 0;  // every event up to here has been dispatched
  bool stopping_ GUARDED_BY(mu_) = false;
  std::thread thread_;
};

}  // namespace hami::sim
