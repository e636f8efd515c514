#include "sim/apiserver/watch_hub.h"

#include <linux/futex.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <nlohmann/json.hpp>

#include "common/thread_name.h"

namespace hami::sim {
namespace {

using SteadyClock = std::chrono::steady_clock;

// How often the dispatcher looks at quiet watches' ServerRunning().
constexpr auto kIdleCheck = std::chrono::milliseconds(200);

// The dispatcher sleeps on a plain futex rather than a condition variable: a writer that finds
// it awake pays one atomic increment, and one that must wake it is never made to wait for it
// (glibc's notify can block until earlier waiters have left).
void FutexWait(std::atomic<uint32_t>* word, uint32_t seen, SteadyClock::time_point until) {
  auto left = until - SteadyClock::now();
  if (left <= SteadyClock::duration::zero()) return;
  left = std::min<SteadyClock::duration>(left, std::chrono::hours(1));
  auto secs = std::chrono::duration_cast<std::chrono::seconds>(left);
  timespec rel{};
  rel.tv_sec = static_cast<time_t>(secs.count());
  rel.tv_nsec = static_cast<long>(  // NOLINT(runtime/int)
      std::chrono::duration_cast<std::chrono::nanoseconds>(left - secs).count());
  static_assert(sizeof(std::atomic<uint32_t>) == sizeof(uint32_t));
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), FUTEX_WAIT_PRIVATE, seen, &rel, nullptr, 0);
}

void FutexWakeOne(std::atomic<uint32_t>* word) {
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), FUTEX_WAKE_PRIVATE, 1, nullptr, nullptr, 0);
}

}  // namespace

bool WatchSpec::Matches(const nlohmann::json& object) const {
  return labels.MatchesObject(object) && fields.Matches(object);
}

void WatchSpec::AppendEvent(const WatchEvent& e, std::string* out) const {
  if (!ns.empty() && e.ns != ns) return;
  const bool now_match = Matches(*e.object);
  const bool was_match = e.previous && Matches(*e.previous);
  std::string_view type = e.type;
  if (e.type == "MODIFIED") {
    if (now_match && !was_match) type = "ADDED";
    if (!now_match && was_match) type = "DELETED";
    if (!now_match && !was_match) return;
  } else if (!now_match) {
    return;
  }
  out->append("{\"type\":\"").append(type).append("\",\"object\":");
  out->append(render ? render(e) : e.text->Get(*e.object));
  out->append("}\n");
}

// One open watch. The dispatcher fills `out` and hands it to Deliver; the watch's own thread
// (Serve) sleeps until it must send something blocking or the watch ends.
struct WatchHub::Watch {
  Watch(WatchSpec s, int64_t from, net::ChunkWriter* w)
      : spec(std::move(s)), start(from), writer(w) {}

  const WatchSpec spec;
  // Guarded by the hub's mu_:
  int64_t start;  // events up to this revision have been sent
  SteadyClock::time_point next_bookmark;
  std::string out;      // gathered in this dispatch
  bool listed = false;  // in watches_ (and counted in watched_)

  net::ChunkWriter* const writer;
  Mutex mu;
  std::condition_variable cv;
  bool draining GUARDED_BY(mu) = false;  // the watch's thread owns the writer and sends `queue`
  bool closing GUARDED_BY(mu) = false;   // send `queue`, then end
  bool done GUARDED_BY(mu) = false;      // the stream is broken or ended
  std::string queue GUARDED_BY(mu);      // event lines not sent yet (one chunk)

  // The dispatcher's steps for this watch, called with the hub's mu_ held.
  // Gathers `e` into `out` when it is of this watch's resource and newer than `start`.
  void Collect(const WatchEvent& e);
  // Hands `out` (and a bookmark when one is due) to the watch's thread, or ends the watch at its
  // deadline or when its server stopped. Returns whether the watch has ended.
  bool Flush(SteadyClock::time_point now);
  void AppendBookmark(SteadyClock::time_point now);
};

void WatchHub::Watch::Collect(const WatchEvent& e) {
  if (spec.resource == e.resource && e.revision > start) spec.AppendEvent(e, &out);
}

bool WatchHub::Watch::Flush(SteadyClock::time_point now) {
  bool ended = false;
  if (now >= spec.deadline || !writer->ServerRunning()) {
    End(*this, std::move(out));
    ended = true;
  } else {
    if (spec.bookmarks && now >= next_bookmark) AppendBookmark(now);
    if (!out.empty()) Deliver(*this, std::move(out));
    MutexLock wl(mu);
    ended = done || closing;
  }
  out.clear();
  return ended;
}

void WatchHub::Watch::AppendBookmark(SteadyClock::time_point now) {
  const ResourceInfo& r = *spec.resource;
  out.append("{\"type\":\"BOOKMARK\",\"object\":{\"kind\":\"")
      .append(r.kind)
      .append("\",\"apiVersion\":\"")
      .append(r.api_version())
      .append("\",\"metadata\":{\"resourceVersion\":\"")
      .append(std::to_string(start))
      .append("\"}}}\n");
  next_bookmark = now + spec.bookmark_every;
}

WatchHub::WatchHub(Store& store, const ResourceRegistry& registry,
                   std::function<std::string(const std::string&)> expired_event)
    : store_(store),
      registry_(registry),
      expired_event_(std::move(expired_event)),
      watched_(new std::atomic<int>[registry.all().size()]) {
  for (size_t i = 0; i < registry_.all().size(); ++i) watched_[i].store(0);
}

WatchHub::~WatchHub() { Stop(); }

size_t WatchHub::IndexOf(const ResourceInfo& resource) const {
  return static_cast<size_t>(&resource - registry_.all().data());
}

void WatchHub::Start() {
  store_.AddWriteListener([this](const ResourceInfo& r) { OnWrite(r); });
  thread_ = std::thread([this] {
    SetCurrentThreadName("watch-hub");
    Loop();
  });
}

void WatchHub::Stop() {
  {
    MutexLock lock(mu_);
    if (stopping_) return;
    stopping_ = true;
    for (auto& w : watches_) {
      End(*w, "");
      w->listed = false;
    }
    watches_.clear();
  }
  Wake();
  if (thread_.joinable()) thread_.join();
}

void WatchHub::OnWrite(const ResourceInfo& resource) {
  if (watched_[IndexOf(resource)].load(std::memory_order_relaxed) > 0) Wake();
}

void WatchHub::Wake() {
  seq_.fetch_add(1);
  if (sleeping_.load()) FutexWakeOne(&seq_);
}

void WatchHub::Deliver(Watch& w, std::string data) {
  MutexLock lock(w.mu);
  if (w.done || w.closing) return;
  if (w.draining) {
    w.queue += data;
    return;
  }
  bool pending = false;
  if (!w.writer->TryWrite(data, &pending)) {
    w.done = true;
    w.cv.notify_one();
  } else if (pending) {
    w.draining = true;
    w.cv.notify_one();
  }
}

void WatchHub::End(Watch& w, std::string last_words) {
  MutexLock lock(w.mu);
  if (w.done || w.closing) return;
  w.queue += last_words;
  w.closing = true;
  w.cv.notify_one();
}

void WatchHub::Serve(WatchSpec spec, int64_t start, net::ChunkWriter& writer) {
  const size_t index = IndexOf(*spec.resource);
  auto w = std::make_shared<Watch>(std::move(spec), start, &writer);
  std::string expired;
  {
    MutexLock lock(mu_);
    if (stopping_) return;
    // The dispatcher only reads events newer than its position: whatever of this watch lies
    // between `start` and there is sent from here. With no other watch the dispatcher's position
    // is stale (unwatched writes do not wake it) and is moved up to now.
    const bool first = watches_.empty();
    if (start < position_ || first) {
      std::vector<WatchEvent> events;
      int64_t now = start;
      const ResourceInfo* r = w->spec.resource;
      Status s = store_.EventsSince(
          start, [r](const ResourceInfo& x) { return &x == r; }, &events, &now);
      if (s.code() == StatusCode::kOutOfRange) {
        expired = expired_event_(s.message());
      } else if (!s.ok()) {
        return;  // the store is closed
      } else {
        for (const WatchEvent& e : events) w->spec.AppendEvent(e, &w->out);
        w->start = now;
        if (first) position_ = std::max(position_, now);
      }
    }
    if (expired.empty()) {
      w->next_bookmark = SteadyClock::now() + w->spec.bookmark_every;
      w->listed = true;
      watches_.push_back(w);
      watched_[index].fetch_add(1);
      if (!w->out.empty()) Deliver(*w, std::move(w->out));
      w->out.clear();
    }
  }
  if (!expired.empty()) {
    (void)writer.Write(expired);
    return;
  }
  // A write that landed just before this watch was counted found nobody to wake.
  Wake();

  UniqueLock l(w->mu);
  for (;;) {
    w->cv.wait(l.native(), [&]() REQUIRES(w->mu) { return w->done || w->draining || w->closing; });
    if (w->done) break;
    std::string more;
    more.swap(w->queue);
    const bool last = w->closing;
    l.Unlock();
    bool ok = writer.Drain() && (more.empty() || writer.Write(more));
    l.Lock();
    if (!ok || last) {
      w->done = true;
      break;
    }
    if (w->queue.empty()) w->draining = false;
  }
  l.Unlock();
  MutexLock lock(mu_);
  if (w->listed) {
    w->listed = false;
    watched_[index].fetch_sub(1);
    watches_.erase(std::find(watches_.begin(), watches_.end(), w));
  }
}

void WatchHub::Loop() {
  std::vector<WatchEvent> events;
  for (;;) {
    const uint32_t seen = seq_.load();
    SteadyClock::time_point wake_at = SteadyClock::now() + std::chrono::hours(1);
    {
      MutexLock lock(mu_);
      if (stopping_) return;
      events.clear();
      int64_t now_rev = position_;
      Status s =
          watches_.empty()
              ? OkStatus()
              : store_.EventsSince(
                    position_,
                    [this](const ResourceInfo& r) { return watched_[IndexOf(r)].load() > 0; },
                    &events, &now_rev);
      std::string words;
      if (s.code() == StatusCode::kOutOfRange) {
        // The dispatcher fell a whole history window behind: which watches missed events is
        // unknown, so every watch is told to relist, as the real server does for a lagging one.
        words = expired_event_(s.message());
        now_rev = store_.revision();
      } else if (!s.ok()) {
        words = "";  // the store is closed: end every stream
      }
      if (!s.ok()) {
        for (auto& w : watches_) {
          End(*w, words);
          w->listed = false;
          watched_[IndexOf(*w->spec.resource)].fetch_sub(1);
        }
        watches_.clear();
        position_ = std::max(position_, now_rev);
      } else {
        for (const WatchEvent& e : events) {
          for (auto& w : watches_) w->Collect(e);
        }
        position_ = now_rev;
        const SteadyClock::time_point now = SteadyClock::now();
        for (size_t i = 0; i < watches_.size();) {
          Watch& w = *watches_[i];
          w.start = std::max(w.start, position_);
          const bool ended = w.Flush(now);
          if (ended) {
            w.listed = false;
            watched_[IndexOf(*w.spec.resource)].fetch_sub(1);
            watches_.erase(watches_.begin() + static_cast<std::ptrdiff_t>(i));
            continue;
          }
          // A consumer that went away (an in-process watcher cancelling) is noticed within
          // kIdleCheck even when no event comes.
          wake_at = std::min({wake_at, w.spec.deadline, now + kIdleCheck});
          if (w.spec.bookmarks) wake_at = std::min(wake_at, w.next_bookmark);
          ++i;
        }
      }
    }
    sleeping_.store(true);
    if (seq_.load() == seen) FutexWait(&seq_, seen, wake_at);
    sleeping_.store(false);
  }
}

}  // namespace hami::sim
