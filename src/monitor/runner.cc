#include "monitor/runner.h"

#include "common/log.h"
#include "common/thread_name.h"

namespace hami::monitor {

namespace {

constexpr const char* kUpdateKey = "update";

// Update logs its decisions itself; the problems (an unreadable GPU, a region that cannot be
// mapped yet) repeat every interval, so they stay verbose.
void LogProblems(const UpdateResult& r) {
  for (const std::string& p : r.problems) HAMI_VLOG(1) << p;
}

}  // namespace

Runner::Runner(Monitor& monitor, const Clock& clock, RunnerOptions options)
    : monitor_(monitor), clock_(clock), options_(std::move(options)), queue_(clock) {
  queue_.Add(kUpdateKey);
}

Runner::~Runner() { Stop(); }

void Runner::Start() {
  if (worker_.joinable()) return;
  worker_ = std::thread([this] {
    SetCurrentThreadName("monitor-update");
    std::string key;
    while (queue_.Get(&key)) Run(key);
  });
}

void Runner::Stop() {
  queue_.ShutDown();
  if (worker_.joinable()) worker_.join();
}

bool Runner::Step() {
  std::string key;
  if (!queue_.TryGet(&key)) return false;
  Run(key);
  return true;
}

void Runner::Run(const std::string& key) {
  if (options_.before_update) options_.before_update();
  LogProblems(monitor_.Update(clock_.WallNow()));
  updates_.fetch_add(1, std::memory_order_acq_rel);
  queue_.Done(key);
  queue_.AddAfter(key, options_.interval);
}

}  // namespace hami::monitor
