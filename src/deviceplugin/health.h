// GPU health from critical XID errors.
//
// XidPolicy decides which XIDs make a GPU unhealthy. By default every critical XID does except
// those that report an application's own fault rather than the GPU's (13 graphics engine
// exception, 31 memory page fault, 43 stopped channel, 45 preemptive cleanup, 68 video
// processor exception, 109 context switch timeout). Two environment variables adjust it, as in
// NVIDIA's and HAMi's plugins:
//   DP_DISABLE_HEALTHCHECKS  "all" or "xids": no XID makes a GPU unhealthy; otherwise a comma
//                            list of further XIDs to ignore
//   DP_ENABLE_HEALTHCHECKS   comma list of XIDs that count even if ignored above
// Entries that are not numbers are reported and skipped; they never stop the plugin.
//
// HealthMonitor runs the wait loop on its own thread and reports GPUs that turn unhealthy. A GPU
// never turns healthy again while the plugin runs (a GPU that raised a critical XID needs a
// reset, which restarts the plugin's view anyway). A failing driver wait marks every GPU
// unhealthy, as does an XID the driver cannot attribute to a device. An XID the driver charges
// to a MIG instance of a watched GPU is reported for that instance's MIG UUID alone.
//
// Thread safety: XidPolicy is a value. HealthMonitor: Start/Stop from one thread; the callback
// runs on the monitor's thread.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "deviceplugin/gpu_driver.h"

namespace hami::deviceplugin {

struct XidPolicy {
  bool disabled = false;
  std::set<uint64_t> ignored = {13, 31, 43, 45, 68, 109};

  bool MakesUnhealthy(uint64_t xid) const { return !disabled && ignored.count(xid) == 0; }
};

// From the two variables' values (null = unset); `warnings` gets one line per skipped entry.
XidPolicy ParseXidPolicy(const char* disable_env, const char* enable_env,
                         std::vector<std::string>* warnings);

class HealthMonitor {
 public:
  // Called with the GPUs that just turned unhealthy and why ("XID 79", ...).
  using OnUnhealthy =
      std::function<void(const std::vector<std::string>& uuids, const std::string& reason)>;

  // `driver` must outlive the monitor.
  HealthMonitor(GpuDriver& driver, XidPolicy policy, OnUnhealthy on_unhealthy,
                std::chrono::milliseconds wait_slice = std::chrono::milliseconds(500));
  ~HealthMonitor();
  HealthMonitor(const HealthMonitor&) = delete;
  HealthMonitor& operator=(const HealthMonitor&) = delete;

  // Watches `uuids` and starts the loop; once per monitor (the plugin's GPUs are fixed for its
  // lifetime). Returns the UUIDs whose XIDs cannot be watched.
  Result<std::vector<std::string>> Start(const std::vector<std::string>& uuids);
  void Stop();

 private:
  void Run();

  GpuDriver& driver_;
  const XidPolicy policy_;
  const OnUnhealthy on_unhealthy_;
  const std::chrono::milliseconds wait_slice_;
  std::vector<std::string> uuids_;  // written by Start before the thread exists, then read by it
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

}  // namespace hami::deviceplugin
