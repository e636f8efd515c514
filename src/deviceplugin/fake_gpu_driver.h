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

#include "deviceplugin/gpu_driver.h"

namespace hami::deviceplugin {

class FakeGpuDriver final : public GpuDriver {
 public:
  explicit FakeGpuDriver(Inventory inventory = {}) : inventory_(std::move(inventory)) {}

  void SetInventory(Inventory inv) {
    std::lock_guard<std::mutex> l(mu_);
    inventory_ = std::move(inv);
  }
  void SetDiscoveryError(Status s) {
    std::lock_guard<std::mutex> l(mu_);
    discovery_error_ = std::move(s);
  }
  void SetWaitError(Status s) {
    std::lock_guard<std::mutex> l(mu_);
    wait_error_ = std::move(s);
    cv_.notify_all();
  }
  void SetUnsupported(std::set<std::string> uuids) {
    std::lock_guard<std::mutex> l(mu_);
    unsupported_ = std::move(uuids);
  }
  void Inject(XidEvent e) {
    std::lock_guard<std::mutex> l(mu_);
    events_.push_back(std::move(e));
    cv_.notify_all();
  }
  int discoveries() const {
    std::lock_guard<std::mutex> l(mu_);
    return discoveries_;
  }

  Result<Inventory> Discover() override {
    std::lock_guard<std::mutex> l(mu_);
    ++discoveries_;
    if (!discovery_error_.ok()) return discovery_error_;
    return inventory_;
  }
  Status WatchXids(const std::vector<std::string>& uuids,
                   std::vector<std::string>* unsupported) override {
    std::lock_guard<std::mutex> l(mu_);
    for (const std::string& u : uuids) {
      if (unsupported_.count(u) && unsupported != nullptr) unsupported->push_back(u);
    }
    return OkStatus();
  }
  Result<std::optional<XidEvent>> WaitXid(std::chrono::milliseconds timeout) override {
    std::unique_lock<std::mutex> l(mu_);
    cv_.wait_for(l, timeout, [&] { return !events_.empty() || !wait_error_.ok(); });
    if (!wait_error_.ok()) return wait_error_;
    if (events_.empty()) return std::optional<XidEvent>();
    XidEvent e = events_.front();
    events_.pop_front();
    return std::optional<XidEvent>(e);
  }

 private:
  mutable std::mutex mu_;
  std::condition_variable cv_;
  Inventory inventory_;                // guarded by mu_
  Status discovery_error_;             // guarded by mu_
  Status wait_error_;                  // guarded by mu_
  std::set<std::string> unsupported_;  // guarded by mu_
  std::deque<XidEvent> events_;        // guarded by mu_
  int discoveries_ = 0;                // guarded by mu_
};

}  // namespace hami::deviceplugin
