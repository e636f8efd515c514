// FakeGpuDriver: an in-memory GpuDriver for unit tests. The inventory is set directly; XID
// events are queued with Inject() and handed out by WaitXid in order; FailDiscovery/FailWait
// make the next calls fail.
//
// Thread safety: all methods may be called from any thread.
#pragma once

#include <condition_variable>
#include <deque>
#include <mutex>
#include <set>

#include "common/thread_annotations.h"
#include "deviceplugin/gpu_driver.h"

namespace hami::deviceplugin {

class FakeGpuDriver final : public GpuDriver {
 public:
  explicit FakeGpuDriver(Inventory inventory = {}) : inventory_(std::move(inventory)) {}

  void SetInventory(Inventory inv) {
    MutexLock l(mu_);
    inventory_ = std::move(inv);
  }
  void SetDiscoveryError(Status s) {
    MutexLock l(mu_);
    discovery_error_ = std::move(s);
  }
  void SetWaitError(Status s) {
    MutexLock l(mu_);
    wait_error_ = std::move(s);
    cv_.notify_all();
  }
  void SetUnsupported(std::set<std::string> uuids) {
    MutexLock l(mu_);
    unsupported_ = std::move(uuids);
  }
  void Inject(XidEvent e) {
    MutexLock l(mu_);
    events_.push_back(std::move(e));
    cv_.notify_all();
  }
  int discoveries() const {
    MutexLock l(mu_);
    return discoveries_;
  }

  Result<Inventory> Discover() override {
    MutexLock l(mu_);
    ++discoveries_;
    if (!discovery_error_.ok()) return discovery_error_;
    return inventory_;
  }
  Status WatchXids(const std::vector<std::string>& uuids,
                   std::vector<std::string>* unsupported) override {
    MutexLock l(mu_);
    for (const std::string& u : uuids) {
      if (unsupported_.count(u) && unsupported != nullptr) unsupported->push_back(u);
    }
    return OkStatus();
  }
  Result<std::optional<XidEvent>> WaitXid(std::chrono::milliseconds timeout) override {
    UniqueLock l(mu_);
    cv_.wait_for(l.native(), timeout,
                 [&]() REQUIRES(mu_) { return !events_.empty() || !wait_error_.ok(); });
    if (!wait_error_.ok()) return wait_error_;
    if (events_.empty()) return std::optional<XidEvent>();
    XidEvent e = events_.front();
    events_.pop_front();
    return std::optional<XidEvent>(e);
  }

 private:
  mutable Mutex mu_;
  std::condition_variable cv_;
  Inventory inventory_ GUARDED_BY(mu_);
  Status discovery_error_ GUARDED_BY(mu_);
  Status wait_error_ GUARDED_BY(mu_);
  std::set<std::string> unsupported_ GUARDED_BY(mu_);
  std::deque<XidEvent> events_ GUARDED_BY(mu_);
  int discoveries_ GUARDED_BY(mu_) = 0;
};

}  // namespace hami::deviceplugin
