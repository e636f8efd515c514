// NodeLocker: HAMi's per-node allocation lock, the `hami.io/mutex.lock` node annotation
// ("<RFC3339 time>,<pod namespace>,<pod name>"), compatible with upstream device plugins, which
// read the holder to find the pod a kubelet Allocate call is for and clear the lock when done.
//
// Protocol (every write is a merge patch carrying the node's resourceVersion, so two schedulers
// can never both believe they set it; a 409 re-reads and tries again):
//   - absent                        -> set it for the pod
//   - held by the same pod          -> already ours
//   - unreadable, or older than the expiry (--node-lock-timeout, 5 min) -> taken over
//   - its holder pod is gone, finished allocating (`hami.io/bind-phase` success or failed), is
//     bound to another node or was bound without `allocating`, or is still unbound with no
//     bind-phase more than kBindInFlightSeconds after the lock was taken
//                                   -> taken over (the holder will never release it)
//   - otherwise (allocating, or its Binding is in flight) -> Unavailable "node lock contention"
// Release clears the annotation only when this pod holds it (owner check).
//
// The first read may come from the caller's informer cache (saves a GET on the bind path); a
// stale copy only costs a 409 and a re-read.
//
// Thread safety: all methods may be called concurrently (state lives in the API server).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "common/clock.h"
#include "common/status.h"
#include "k8s/object_fwd.h"
#include "k8s/rest_client.h"

namespace hami::device {

inline constexpr std::string_view kBindPhaseAnnotation = "hami.io/bind-phase";
inline constexpr std::string_view kBindTimeAnnotation = "hami.io/bind-time";
inline constexpr std::string_view kBindPhaseAllocating = "allocating";
inline constexpr std::string_view kBindPhaseSuccess = "success";
inline constexpr std::string_view kBindPhaseFailed = "failed";
// How long a lock may name an unbound pod without bind-phase before it counts as abandoned: the
// bind that took it posts the Binding (which stamps bind-phase) right after.
inline constexpr int64_t kBindInFlightSeconds = 60;

// The node's `hami.io/mutex.lock` value, "" when absent.
std::string NodeLockOf(const k8s::Object& node);
// Whether two versions of a node differ in nothing but that annotation (and resourceVersion or
// managedFields). Such an update cannot change the node's registration, health or devices; it is
// two of every pod's writes, so the scheduler skips its registration pass for them.
bool OnlyNodeLockChanged(const k8s::Object& before, const k8s::Object& after);

struct NodeLockOptions {
  int64_t expire_seconds = 300;
  int max_attempts = 5;  // conflicts re-read and retry up to this many writes
};

class NodeLocker {
 public:
  // `client` and `clock` must outlive the locker.
  NodeLocker(k8s::RestClient& client, const Clock& clock, NodeLockOptions options = {});
  NodeLocker(const NodeLocker&) = delete;
  NodeLocker& operator=(const NodeLocker&) = delete;

  // A write that rides with the lock: it goes out in one pipelined batch with the first lock
  // write (one round trip for both; the scheduler's placement annotations). It is not sent when
  // Acquire ends before writing (contention, errors) and not repeated by conflict retries.
  struct Companion {
    k8s::RestClient::PatchItem patch;
    bool sent = false;
    Result<k8s::WriteAck> result = Status(StatusCode::kUnknown, "not sent");
  };

  // OK when the pod holds the lock afterwards; Unavailable (message names the holder) on
  // contention.
  // `cached_node` and `companion` may be null.
  Status Acquire(std::string_view node, std::string_view ns, std::string_view pod,
                 const k8s::Object* cached_node, Companion* companion = nullptr);
  // Clears the lock if `ns/pod` holds it; OK when it is absent or someone else's.
  // `cached_node` (may be null) replaces the first read, as for Acquire.
  Status Release(std::string_view node, std::string_view ns, std::string_view pod,
                 const k8s::Object* cached_node = nullptr);

  const NodeLockOptions& options() const { return options_; }

 private:
  // Whether the current lock value may be replaced; `why` says for the log.
  bool Stale(std::string_view node, std::string_view value, std::string* why, std::string* holder);
  // Sets (`value`) or clears (null) the lock, on the node's resourceVersion `rv`; `companion`
  // (not yet sent, may be null) goes first in the same batch.
  Status Write(std::string_view node, const std::string& rv, const std::string* value,
               Companion* companion = nullptr);

  k8s::RestClient& client_;
  const Clock& clock_;
  const NodeLockOptions options_;
};

// A vendor's own node lock (Cambricon's `cambricon.com/dsmlu.lock`): the annotation holds the
// RFC 3339 time it was taken, and the vendor's device plugin removes it when its allocation is
// done. Taken when absent, unreadable or older than `expire_seconds`; otherwise Unavailable
// naming the annotation and its age. Writes carry the node's resourceVersion (a 409 re-reads).
Status TakeTimestampLock(k8s::RestClient& client, const Clock& clock, std::string_view node,
                         const std::string& annotation, int64_t expire_seconds = 120);
// Removes it (a bind that failed after taking it).
Status ClearTimestampLock(k8s::RestClient& client, std::string_view node,
                          const std::string& annotation);

}  // namespace hami::device
