#include "sim/apiserver/store.h"

#include <nlohmann/json.hpp>

namespace hami::sim {
namespace {

using nlohmann::json;

std::string Key(const std::string& ns, const std::string& name) { return ns + "/" + name; }

std::string NotFoundMessage(const ResourceInfo& r, const std::string& name) {
  return r.qualified() + " \"" + name + "\" not found";
}

}  // namespace

const std::string& LazyText::Get(const json& object) const {
  std::call_once(once_, [&] { text_ = object.dump(); });
  return text_;
}

Store::Store(size_t history_window) : history_window_(history_window < 1 ? 1 : history_window) {}

Store::Appended Store::Append(WatchEvent event) {
  history_.push_back(std::move(event));
  // Events that fall out of the window (and the objects only they still hold) are freed after
  // the lock is released (by Notify).
  Appended out{history_.back().resource, {}};
  while (history_.size() > history_window_) {
    compacted_ = history_.front().revision;
    out.evicted.push_back(std::move(history_.front()));
    history_.pop_front();
  }
  return out;
}

// The listeners run after unlocking: a dispatcher woken while the lock is still held would only
// block on it again, and whoever a listener wakes finds the write in place.
void Store::Notify(Appended appended) {
  for (const auto& listener : write_listeners_) listener(*appended.resource);
}

void Store::AddWriteListener(std::function<void(const ResourceInfo&)> listener) {
  write_listeners_.push_back(std::move(listener));
}

Result<ObjectPtr> Store::Create(const ResourceInfo& resource, const std::string& ns, json object,
                                std::shared_ptr<const LazyText>* text) {
  std::string name = object["metadata"].value("name", "");
  std::string key = Key(ns, name);
  UniqueLock lock(mu_);
  auto& bucket = objects_[&resource];
  if (bucket.count(key)) {
    return AlreadyExistsError(resource.qualified() + " \"" + name + "\" already exists");
  }
  object["metadata"]["resourceVersion"] = std::to_string(++revision_);
  auto ptr = std::make_shared<const json>(std::move(object));
  WatchEvent event{revision_, "ADDED", &resource, ns, ptr, nullptr};
  bucket[key] = Stored{ptr, event.text};
  if (text != nullptr) *text = event.text;
  Appended appended = Append(std::move(event));
  lock.Unlock();
  Notify(std::move(appended));
  return ObjectPtr(ptr);
}

Result<ObjectPtr> Store::Get(const ResourceInfo& resource, const std::string& ns,
                             const std::string& name, std::shared_ptr<const LazyText>* text) const {
  MutexLock lock(mu_);
  auto b = objects_.find(&resource);
  if (b != objects_.end()) {
    auto it = b->second.find(Key(ns, name));
    if (it != b->second.end()) {
      if (text != nullptr) *text = it->second.text;
      return it->second.object;
    }
  }
  return NotFoundError(NotFoundMessage(resource, name));
}

std::vector<ObjectPtr> Store::List(const ResourceInfo& resource, const std::string& ns,
                                   int64_t* revision) const {
  std::vector<ObjectPtr> out;
  MutexLock lock(mu_);
  *revision = revision_;
  auto b = objects_.find(&resource);
  if (b == objects_.end()) return out;
  auto it = ns.empty() ? b->second.begin() : b->second.lower_bound(ns + "/");
  for (; it != b->second.end(); ++it) {
    if (!ns.empty() && it->first.compare(0, ns.size() + 1, ns + "/") != 0) break;
    out.push_back(it->second.object);
  }
  return out;
}

Result<ObjectPtr> Store::Update(
    const ResourceInfo& resource, const std::string& ns, const std::string& name,
    const std::function<Status(const json& current, json& next)>& mutate,
    std::shared_ptr<const LazyText>* text) {
  const std::string key = Key(ns, name);
  // Optimistic: copy and mutate outside the lock (the expensive part), then commit only if no
  // other write landed meanwhile, else start over from the newer state. Readers never see a
  // half-made object and the lock is held for a lookup and an append.
  for (;;) {
    ObjectPtr current;
    {
      MutexLock lock(mu_);
      auto b = objects_.find(&resource);
      if (b != objects_.end()) {
        auto it = b->second.find(key);
        if (it != b->second.end()) current = it->second.object;
      }
    }
    if (current == nullptr) return NotFoundError(NotFoundMessage(resource, name));
    auto next = std::make_shared<json>(*current);
    HAMI_RETURN_IF_ERROR(mutate(*current, *next));
    if (!next->is_object() || !(*next)["metadata"].is_object()) {
      return InvalidArgumentError("the update removed the object's metadata");
    }
    json& md = (*next)["metadata"];
    md["name"] = name;
    UniqueLock lock(mu_);
    auto& bucket = objects_[&resource];
    auto it = bucket.find(key);
    if (it == bucket.end()) return NotFoundError(NotFoundMessage(resource, name));
    // Lost the race: mutate the newer state.
    if (it->second.object != current) continue;
    // `next` is not shared yet, so stamping it here is safe.
    md["resourceVersion"] = std::to_string(++revision_);
    ObjectPtr ptr = std::move(next);
    WatchEvent event{revision_, "MODIFIED", &resource, ns, ptr, current};
    it->second = Stored{ptr, event.text};
    if (text != nullptr) *text = event.text;
    Appended appended = Append(std::move(event));
    lock.Unlock();
    Notify(std::move(appended));
    return ptr;
  }
}

Result<ObjectPtr> Store::Delete(const ResourceInfo& resource, const std::string& ns,
                                const std::string& name,
                                const std::function<Status(const json&)>& precondition) {
  UniqueLock lock(mu_);
  auto& bucket = objects_[&resource];
  auto it = bucket.find(Key(ns, name));
  if (it == bucket.end()) return NotFoundError(NotFoundMessage(resource, name));
  if (precondition) HAMI_RETURN_IF_ERROR(precondition(*it->second.object));
  // The DELETED event carries the last state with the deletion's revision, as the real server.
  json last = *it->second.object;
  last["metadata"]["resourceVersion"] = std::to_string(++revision_);
  auto ptr = std::make_shared<const json>(std::move(last));
  ObjectPtr previous = it->second.object;
  bucket.erase(it);
  Appended appended = Append({revision_, "DELETED", &resource, ns, ptr, previous});
  lock.Unlock();
  Notify(std::move(appended));
  return ObjectPtr(ptr);
}

int64_t Store::revision() const {
  MutexLock lock(mu_);
  return revision_;
}

Status Store::EventsSince(int64_t after, const std::function<bool(const ResourceInfo&)>& want,
                          std::vector<WatchEvent>* out, int64_t* now) const {
  MutexLock lock(mu_);
  if (closed_) return Status(StatusCode::kCancelled, "server shutting down");
  if (after < compacted_) {
    return OutOfRangeError("too old resource version: " + std::to_string(after) + " (" +
                           std::to_string(compacted_ + 1) + ")");
  }
  // history_ is ordered by revision, one event per revision: skip to the first one newer than
  // `after`.
  auto it = history_.begin();
  if (!history_.empty() && after >= history_.front().revision) {
    it += std::min<int64_t>(after - history_.front().revision + 1,
                            static_cast<int64_t>(history_.size()));
  }
  for (; it != history_.end(); ++it) {
    if (it->revision > after && want(*it->resource)) out->push_back(*it);
  }
  *now = std::max(after, revision_);
  return OkStatus();
}

void Store::Close() {
  MutexLock lock(mu_);
  closed_ = true;
}

}  // namespace hami::sim
