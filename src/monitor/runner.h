// Runner: the monitor's periodic work as a controller. One key on a WorkQueue stands for "update
// the node's regions": a worker takes it, runs the update (RunnerOptions::before_update first,
// then Monitor::Update at the clock's wall time), logs what the update found, and queues the key
// again after the interval. Start/Stop own the worker thread; a test drives Step() on a FakeClock
// instead and sees every update in milliseconds.
//
//   Runner runner(monitor, clock, {.interval = std::chrono::seconds(5)});
//   runner.Start();  // the first update runs at once
//   ...
//   runner.Stop();   // waits for a running update to finish
//
// Thread safety: Start, Stop and Step from one thread; updates() from any.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <string>
#include <thread>

#include "common/clock.h"
#include "k8s/work_queue.h"
#include "monitor/monitor.h"

namespace hami::monitor {

struct RunnerOptions {
  Duration interval = std::chrono::seconds(5);  // between the end of one update and the next
  // Runs before each update on the worker (hami-monitor retries loading NVML there).
  std::function<void()> before_update;
};

class Runner {
 public:
  // `monitor` and `clock` must outlive the runner.
  Runner(Monitor& monitor, const Clock& clock, RunnerOptions options);
  ~Runner();
  Runner(const Runner&) = delete;
  Runner& operator=(const Runner&) = delete;

  void Start();
  void Stop();
  // Runs the update if it is due on the clock now; false when it is not (or after Stop).
  bool Step();
  // Updates run so far.
  uint64_t updates() const { return updates_.load(std::memory_order_acquire); }

 private:
  void Run(const std::string& key);

  Monitor& monitor_;
  const Clock& clock_;
  const RunnerOptions options_;
  k8s::WorkQueue queue_;
  std::thread worker_;
  std::atomic<uint64_t> updates_{0};
};

}  // namespace hami::monitor
