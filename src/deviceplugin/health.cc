#include "deviceplugin/health.h"

#include <set>

#include "common/log.h"
#include "common/thread_name.h"

namespace hami::deviceplugin {
namespace {

// Comma list of XIDs; `on_xid` for each number, `warnings` for the rest.
template <typename Fn>
void ForEachXid(const std::string& var, const std::string& value, Fn on_xid,
                std::vector<std::string>* warnings) {
  size_t start = 0;
  while (start <= value.size()) {
    size_t comma = value.find(',', start);
    if (comma == std::string::npos) comma = value.size();
    std::string item = value.substr(start, comma - start);
    while (!item.empty() && item.front() == ' ') item.erase(0, 1);
    while (!item.empty() && item.back() == ' ') item.pop_back();
    if (!item.empty()) {
      bool digits = item.size() <= 19 && item.find_first_not_of("0123456789") == std::string::npos;
      if (digits) {
        on_xid(std::stoull(item));
      } else if (warnings != nullptr) {
        warnings->push_back(var + ": \"" + item + "\" is not an XID number; skipped");
      }
    }
    start = comma + 1;
  }
}

}  // namespace

XidPolicy ParseXidPolicy(const char* disable_env, const char* enable_env,
                         std::vector<std::string>* warnings) {
  XidPolicy p;
  if (disable_env != nullptr) {
    std::string v = disable_env;
    if (v == "all" || v == "xids") {
      p.disabled = true;
    } else {
      ForEachXid(
          "DP_DISABLE_HEALTHCHECKS", v, [&](uint64_t x) { p.ignored.insert(x); }, warnings);
    }
  }
  if (enable_env != nullptr) {
    ForEachXid(
        "DP_ENABLE_HEALTHCHECKS", enable_env, [&](uint64_t x) { p.ignored.erase(x); }, warnings);
  }
  return p;
}

HealthMonitor::HealthMonitor(GpuDriver& driver, XidPolicy policy, OnUnhealthy on_unhealthy,
                             std::chrono::milliseconds wait_slice)
    : driver_(driver),
      policy_(std::move(policy)),
      on_unhealthy_(std::move(on_unhealthy)),
      wait_slice_(wait_slice) {}

HealthMonitor::~HealthMonitor() { Stop(); }

Result<std::vector<std::string>> HealthMonitor::Start(const std::vector<std::string>& uuids) {
  if (thread_.joinable()) return Status(StatusCode::kFailedPrecondition, "already started");
  std::vector<std::string> unsupported;
  if (policy_.disabled) return unsupported;
  if (Status s = driver_.WatchXids(uuids, &unsupported); !s.ok()) return s;
  uuids_ = uuids;
  thread_ = std::thread([this] {
    SetCurrentThreadName("gpu-health");
    Run();
  });
  return unsupported;
}

void HealthMonitor::Stop() {
  stop_ = true;
  if (thread_.joinable()) thread_.join();
}

void HealthMonitor::Run() {
  std::set<std::string> known(uuids_.begin(), uuids_.end());
  while (!stop_) {
    Result<std::optional<XidEvent>> ev = driver_.WaitXid(wait_slice_);
    if (!ev.ok()) {
      HAMI_LOG(Error) << "GPU health: waiting for driver events failed (" << ev.status().message()
                      << "); marking every GPU unhealthy";
      on_unhealthy_(uuids_, "driver event wait failed: " + ev.status().message());
      return;
    }
    if (!ev->has_value()) continue;
    const XidEvent& e = **ev;
    if (!policy_.MakesUnhealthy(e.xid)) {
      HAMI_LOG(Info) << "GPU health: XID " << e.xid << " on " << (e.uuid.empty() ? "?" : e.uuid)
                     << " is an application error, not a device fault; ignored";
      continue;
    }
    std::string reason = "XID " + std::to_string(e.xid);
    if (e.uuid.empty() || !known.count(e.uuid)) {
      HAMI_LOG(Warning) << "GPU health: " << reason << " on an unknown device ("
                        << (e.uuid.empty() ? "none named" : e.uuid)
                        << "); marking every GPU unhealthy";
      on_unhealthy_(uuids_, reason + " on an unknown device");
      continue;
    }
    if (!e.mig_uuid.empty()) {  // charged to one MIG instance: the GPU's others are fine
      on_unhealthy_({e.mig_uuid}, reason + " in that MIG instance");
      continue;
    }
    on_unhealthy_({e.uuid}, reason);
  }
}

}  // namespace hami::deviceplugin
