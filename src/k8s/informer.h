// Informer: a list+watch cache of one resource type with event handlers.
//
// Failed lists and watches back off exponentially (initial_backoff..max_backoff on the client's
// Clock); so does a watch the server closes within a second without sending anything.
//
// It lists (in pages), replaces its store, then watches from the list's resourceVersion. Every
// event and bookmark advances the resume point; when a watch ends (server timeout, dropped
// connection, or a watch that went silent: RestClient::Watch gives up watch_timeout plus a
// grace after it started) the next one resumes from there, and a 410 Gone (HTTP or ERROR event)
// triggers a relist whose differences against the store are delivered as add/update/delete. A
// periodic resync (optional) re-delivers every cached object as an update with old == new.
//
//   Informer pods(client, kPods, {.ns = "", .field_selector = "spec.nodeName=n1"});
//   pods.AddEventHandler({.on_add = [](const ObjectPtr& p) { ... }});
//   pods.Start();
//   pods.WaitForSync(nullptr);
//   ObjectPtr p = pods.Get("default/p");
//
// Handlers run on the informer's thread, one event at a time, in order, outside the store lock
// (they may read the informer). The steps Start() loops over (Relist, WatchOnce, Resync) are public
// so tests can drive them deterministically without a thread.
//
// Thread safety: Get/List/HasSynced/LastResourceVersion from any thread. AddEventHandler before
// Start. Start/Stop from one controlling thread. The step functions must not run concurrently with
// Start().
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "common/clock.h"
#include "common/status.h"
#include "common/thread_annotations.h"
#include "k8s/object_fwd.h"
#include "k8s/rest_client.h"

namespace hami::k8s {

struct InformerOptions {
  std::string ns{};  // "" = all namespaces
  std::string label_selector{};
  std::string field_selector{};
  int64_t page_size = 500;
  std::chrono::seconds watch_timeout{300};         // server-side timeout of each watch
  std::chrono::milliseconds resync_period{0};      // 0 = never
  std::chrono::milliseconds initial_backoff{200};  // after a failed list/watch
  std::chrono::milliseconds max_backoff{30000};
  // When set, every listed or watched object (not bookmarks) is replaced by what this returns
  // before it is cached or handed to a handler: a consumer that reads a few fields keeps only
  // those (client-go's TransformFunc). It must keep metadata name, namespace and
  // resourceVersion.
  std::function<Object(const Object&)> transform{};
};

struct InformerHandler {
  std::function<void(const ObjectPtr&)> on_add{};
  std::function<void(const ObjectPtr& old_obj, const ObjectPtr& new_obj)> on_update{};
  std::function<void(const ObjectPtr&)> on_delete{};  // the last known state
};

class Informer {
 public:
  Informer(RestClient& client, Resource resource, InformerOptions options);
  ~Informer();  // Stop()s
  Informer(const Informer&) = delete;
  Informer& operator=(const Informer&) = delete;

  void AddEventHandler(InformerHandler handler);

  // Runs the list/watch loop on a background thread until Stop().
  void Start();
  void Stop();
  // Blocks until the first list completed and every handler was given its objects, or `cancel`
  // fired; true when synced. HasSynced turns true at the same point.
  bool WaitForSync(const Cancellation* cancel);
  bool HasSynced() const;

  // Cache reads. Keys are "namespace/name" or "name" (cluster-scoped).
  ObjectPtr Get(const std::string& key) const;
  std::vector<ObjectPtr> List() const;
  size_t Size() const;
  std::string LastResourceVersion() const;

  // --- Steps of the loop ---
  // Lists everything, replaces the store and dispatches the differences.
  Status Relist();
  // One watch from LastResourceVersion(); OK when the stream ended normally; IsGone() on 410.
  Status WatchOnce(const Cancellation* cancel);
  // Re-delivers every cached object as on_update(obj, obj).
  void Resync();

 private:
  void Run();
  void Apply(const WatchEvent& ev);
  void MaybeResync();

  RestClient& client_;
  const Resource resource_;
  const InformerOptions options_;
  std::vector<InformerHandler> handlers_;  // fixed after Start

  mutable Mutex mu_;
  std::condition_variable synced_cv_;
  std::map<std::string, ObjectPtr> store_ GUARDED_BY(mu_);
  std::string resource_version_ GUARDED_BY(mu_);
  bool synced_ GUARDED_BY(mu_) = false;

  MonoTime next_resync_{};     // loop thread only
  uint64_t watch_events_ = 0;  // loop thread only
  std::unique_ptr<Cancellation> stop_;
  std::thread thread_;
};

}  // namespace hami::k8s
