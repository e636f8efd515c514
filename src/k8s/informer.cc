#include "k8s/informer.h"

#include <algorithm>

#include "common/thread_name.h"
#include "k8s/api_error.h"
#include "k8s/object.h"

namespace hami::k8s {

Informer::Informer(RestClient& client, Resource resource, InformerOptions options)
    : client_(client), resource_(std::move(resource)), options_(std::move(options)) {}

Informer::~Informer() { Stop(); }

void Informer::AddEventHandler(InformerHandler handler) { handlers_.push_back(std::move(handler)); }

void Informer::Start() {
  if (thread_.joinable()) return;
  stop_ = std::make_unique<Cancellation>();
  thread_ = std::thread([this] {
    SetCurrentThreadName("inf-" + resource_.plural);
    Run();
  });
}

void Informer::Stop() {
  if (!thread_.joinable()) return;
  stop_->Cancel();
  synced_cv_.notify_all();
  thread_.join();
}

bool Informer::WaitForSync(const Cancellation* cancel) {
  UniqueLock lock(mu_);
  while (!synced_) {
    if (cancel != nullptr && cancel->cancelled()) return false;
    // Bounded waits so an external Cancellation (which has no link to this condition variable)
    // is noticed.
    synced_cv_.wait_for(lock.native(), std::chrono::milliseconds(10));
  }
  return true;
}

bool Informer::HasSynced() const {
  MutexLock lock(mu_);
  return synced_;
}

ObjectPtr Informer::Get(const std::string& key) const {
  MutexLock lock(mu_);
  auto it = store_.find(key);
  return it == store_.end() ? nullptr : it->second;
}

std::vector<ObjectPtr> Informer::List() const {
  MutexLock lock(mu_);
  std::vector<ObjectPtr> out;
  out.reserve(store_.size());
  for (const auto& [k, v] : store_) out.push_back(v);
  return out;
}

size_t Informer::Size() const {
  MutexLock lock(mu_);
  return store_.size();
}

std::string Informer::LastResourceVersion() const {
  MutexLock lock(mu_);
  return resource_version_;
}

Status Informer::Relist() {
  ListOptions lo;
  lo.label_selector = options_.label_selector;
  lo.field_selector = options_.field_selector;
  lo.limit = options_.page_size;
  HAMI_ASSIGN_OR_RETURN(Object list, client_.ListAll(resource_, options_.ns, lo));
  std::map<std::string, ObjectPtr> fresh;
  auto items = list.find("items");
  if (items != list.end() && items->is_array()) {
    for (auto& item : *items) {
      if (!item.is_object()) continue;
      std::string key = ObjectKey(item);
      if (key.empty()) continue;
      if (options_.transform) {
        Object kept = options_.transform(item);
        item = Object();  // freed now, so the next items' copies can reuse its memory
        fresh[key] = std::make_shared<const Object>(std::move(kept));
      } else {
        fresh[key] = std::make_shared<const Object>(std::move(item));
      }
    }
  }
  std::vector<ObjectPtr> added, deleted;
  std::vector<std::pair<ObjectPtr, ObjectPtr>> updated;
  {
    MutexLock lock(mu_);
    for (const auto& [key, obj] : fresh) {
      auto it = store_.find(key);
      if (it == store_.end()) {
        added.push_back(obj);
      } else if (ResourceVersion(*it->second) != ResourceVersion(*obj)) {
        updated.emplace_back(it->second, obj);
      }
    }
    for (const auto& [key, obj] : store_) {
      if (fresh.find(key) == fresh.end()) deleted.push_back(obj);
    }
    store_ = std::move(fresh);
    resource_version_ = GetString(list, "/metadata/resourceVersion");
  }
  for (const InformerHandler& h : handlers_) {
    for (const ObjectPtr& o : deleted) {
      if (h.on_delete) h.on_delete(o);
    }
    for (const ObjectPtr& o : added) {
      if (h.on_add) h.on_add(o);
    }
    for (const auto& [o, n] : updated) {
      if (h.on_update) h.on_update(o, n);
    }
  }
  // Synced only once the handlers have seen the whole list: a consumer that waits for sync
  // (the scheduler before it places pods) must find every listed object in its own state.
  {
    MutexLock lock(mu_);
    synced_ = true;
  }
  synced_cv_.notify_all();
  return OkStatus();
}

void Informer::Apply(const WatchEvent& ev) {
  std::string rv = ResourceVersion(*ev.object);
  if (ev.type == WatchEvent::Type::kBookmark) {
    MutexLock lock(mu_);
    if (!rv.empty()) resource_version_ = rv;
    return;
  }
  std::string key = ObjectKey(*ev.object);
  if (key.empty()) return;
  const ObjectPtr obj = options_.transform
                            ? std::make_shared<const Object>(options_.transform(*ev.object))
                            : ev.object;
  ObjectPtr old_obj;
  {
    MutexLock lock(mu_);
    auto it = store_.find(key);
    if (it != store_.end()) old_obj = it->second;
    if (ev.type == WatchEvent::Type::kDeleted) {
      store_.erase(key);
    } else {
      store_[key] = obj;
    }
    if (!rv.empty()) resource_version_ = rv;
  }
  for (const InformerHandler& h : handlers_) {
    if (ev.type == WatchEvent::Type::kDeleted) {
      if (h.on_delete) h.on_delete(old_obj ? old_obj : obj);
    } else if (old_obj) {
      if (h.on_update) h.on_update(old_obj, obj);
    } else if (h.on_add) {
      h.on_add(obj);
    }
  }
}

Status Informer::WatchOnce(const Cancellation* cancel) {
  ListOptions lo;
  lo.label_selector = options_.label_selector;
  lo.field_selector = options_.field_selector;
  lo.resource_version = LastResourceVersion();
  lo.allow_watch_bookmarks = true;
  lo.timeout_seconds = options_.watch_timeout.count();
  if (options_.resync_period.count() > 0) {
    // End the watch in time for the next resync.
    lo.timeout_seconds = std::max<int64_t>(
        1, std::min<int64_t>(
               lo.timeout_seconds,
               std::chrono::duration_cast<std::chrono::seconds>(options_.resync_period).count()));
  }
  return client_.Watch(
      resource_, options_.ns, lo,
      [&](const WatchEvent& ev) {
        ++watch_events_;
        Apply(ev);
        MaybeResync();
        return true;
      },
      cancel);
}

void Informer::Resync() {
  std::vector<ObjectPtr> all = List();
  for (const InformerHandler& h : handlers_) {
    if (!h.on_update) continue;
    for (const ObjectPtr& o : all) h.on_update(o, o);
  }
}

void Informer::MaybeResync() {
  if (options_.resync_period.count() <= 0) return;
  MonoTime now = client_.clock().Now();
  if (next_resync_ == MonoTime{}) {
    next_resync_ = now + options_.resync_period;
    return;
  }
  if (now >= next_resync_) {
    Resync();
    next_resync_ = now + options_.resync_period;
  }
}

void Informer::Run() {
  Clock& clock = client_.clock();
  bool need_list = true;
  std::chrono::milliseconds backoff = options_.initial_backoff;
  while (!stop_->cancelled()) {
    if (need_list) {
      Status s = Relist();
      if (!s.ok()) {
        if (clock.Sleep(backoff, stop_.get())) break;
        backoff = std::min(backoff * 2, options_.max_backoff);
        continue;
      }
      need_list = false;
      backoff = options_.initial_backoff;
      MaybeResync();
    }
    MonoTime watch_start = clock.Now();
    uint64_t events_before = watch_events_;
    Status s = WatchOnce(stop_.get());
    if (stop_->cancelled()) break;
    MaybeResync();
    if (s.ok() && watch_events_ == events_before &&
        clock.Now() - watch_start < std::chrono::seconds(1)) {
      // A server that closes watches at once would otherwise be hammered in a tight loop.
      s = UnavailableError("watch closed immediately without events");
    }
    if (IsGone(s)) {
      need_list = true;  // resourceVersion compacted: relist at once
    } else if (!s.ok()) {
      if (clock.Sleep(backoff, stop_.get())) break;
      backoff = std::min(backoff * 2, options_.max_backoff);
    } else {
      backoff = options_.initial_backoff;  // normal end of stream: resume at once
    }
  }
}

}  // namespace hami::k8s
