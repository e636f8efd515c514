// LockReleaser (see lock_releaser.h).
#include "extender/lock_releaser.h"

#include <algorithm>

#include "common/log.h"
#include "device/node_lock.h"
#include "k8s/object.h"

namespace hami::extender {

LockReleaser::LockReleaser(device::NodeLocker& locker, const Clock& clock, Duration grace,
                           NodeLookup node, std::function<void()> stats_changed)
    : locker_(locker),
      clock_(clock),
      grace_(grace),
      node_(std::move(node)),
      stats_changed_(std::move(stats_changed)),
      queue_(clock) {}

LockReleaser::~LockReleaser() { Stop(); }

void LockReleaser::Start() {
  if (!worker_.joinable()) worker_ = std::thread([this] { Run(); });
}

void LockReleaser::Stop() {
  queue_.ShutDown();
  if (worker_.joinable()) worker_.join();
}

void LockReleaser::Run() {
  queue_.Serve([this](const std::string& key) { Process(key); });
}

bool LockReleaser::ProcessOne() {
  std::string key;
  if (!queue_.TryGet(&key)) return false;
  Process(key);
  queue_.Done(key);
  return true;
}

LockReleaser::Stats LockReleaser::stats() const {
  MutexLock l(stats_mu_);
  return stats_;
}

void LockReleaser::ObservePod(const k8s::Object& pod, bool gone) {
  std::string node = k8s::GetString(pod, "/spec/nodeName");
  if (node.empty()) node = k8s::GetString(pod, "/metadata/annotations/hami.io~1vgpu-node");
  if (node.empty()) return;
  const std::string phase = k8s::GetString(pod, "/metadata/annotations/hami.io~1bind-phase");
  const std::string pod_phase = k8s::GetString(pod, "/status/phase");
  const bool finished = gone || phase == device::kBindPhaseSuccess ||
                        phase == device::kBindPhaseFailed || pod_phase == "Succeeded" ||
                        pod_phase == "Failed";
  if (!finished) return;
  k8s::ObjectPtr n = node_(node);
  if (n == nullptr) return;
  const std::string held = device::NodeLockOf(*n);
  if (held.empty()) return;
  Result<device::NodeLockValue> lock = device::DecodeNodeLock(held);
  const std::string ns = k8s::Namespace(pod), name = k8s::Name(pod);
  if (!lock.ok() || !lock->HeldBy(ns, name)) return;
  QueueRelease(node, ns, name);
}

void LockReleaser::QueueRelease(const std::string& node, const std::string& ns,
                                const std::string& pod) {
  // Releases fall due on a 250 ms grid (at most a quarter of the grace): the worker wakes once
  // per batch rather than once per bound pod. The grace is a lower bound, so a release checked
  // up to that much late is fine.
  const Duration batch = std::min<Duration>(std::chrono::milliseconds(250), grace_ / 4);
  Duration delay = grace_;
  if (batch > Duration::zero()) {
    const Duration due = (clock_.Now() + delay).time_since_epoch();
    delay += (batch - due % batch) % batch;
  }
  // Counted under the stats lock taken before the key is queued: with no grace the worker may
  // release the lock at once, and whoever sees it released must also see it queued.
  {
    MutexLock l(stats_mu_);
    if (!queue_.AddAfter(node + "/" + ns + "/" + pod, delay)) return;
    ++stats_.queued;
  }
  if (stats_changed_) stats_changed_();
}

void LockReleaser::Process(const std::string& key) {
  const size_t a = key.find('/');
  const size_t b = a == std::string::npos ? a : key.find('/', a + 1);
  if (a == std::string::npos || b == std::string::npos) {
    HAMI_LOG(Error) << "lock releaser: malformed key " << key;
    return;
  }
  if (Release(key.substr(0, a), key.substr(a + 1, b - a - 1), key.substr(b + 1)) ||
      queue_.NumRequeues(key) >= 5) {
    queue_.Forget(key);  // done, or given up: the lock's own expiry is the last resort
  } else {
    queue_.AddRateLimited(key);
  }
}

bool LockReleaser::Release(const std::string& node, const std::string& ns,
                           const std::string& pod) {
  // The device plugin normally cleared it during the grace: then the cached node says so and
  // nothing is written.
  k8s::ObjectPtr n = node_(node);
  const std::string held = n != nullptr ? device::NodeLockOf(*n) : std::string();
  Result<device::NodeLockValue> lock = device::DecodeNodeLock(held);
  if (held.empty() || !lock.ok() || !lock->HeldBy(ns, pod)) return true;
  if (Status s = locker_.Release(node, ns, pod, n.get()); !s.ok()) {
    HAMI_LOG(Warning) << "node lock on " << node << " not released: " << s.ToString();
    return false;
  }
  HAMI_LOG(Info) << "node lock on " << node << " released for " << ns << "/" << pod
                 << ": the pod finished allocating and its device plugin did not clear it";
  {
    MutexLock l(stats_mu_);
    ++stats_.released;
  }
  if (stats_changed_) stats_changed_();
  return true;
}

}  // namespace hami::extender
