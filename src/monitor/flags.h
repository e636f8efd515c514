// The hami-monitor command line: the flags as typed (MonitorFlags, defaults from the environment
// as upstream's vgpu-monitor reads it), checked once into MonitorConfig, so main only wires.
//
//   MonitorFlags flags = DefaultMonitorFlags();
//   AddMonitorFlags(app, &flags);
//   ... parse ...
//   Result<MonitorConfig> config = MonitorConfigFromFlags(flags);  // every mistake named
//
// Thread safety: plain data and functions without shared state.
#pragma once

#include <chrono>
#include <string>

#include "common/clock.h"
#include "common/status.h"
#include "net/http_server.h"
#include "net/server_flags.h"

namespace CLI {
class App;
}

namespace hami::monitor {

struct MonitorFlags {
  std::string metrics_bind = ":9394";
  std::string hook_path;   // $HOOK_PATH
  std::string node_name;   // $NODE_NAME
  std::string kubeconfig;  // $KUBECONFIG; empty: in-cluster
  std::string context;
  std::string nvml_library = "libnvidia-ml.so.1";
  std::string hook_wait = "30s";
  std::string update_interval = "5s";
  std::string resync = "5m";  // $HAMI_RESYNC_INTERVAL
  std::string ready_file;
  bool legacy = false;
  bool no_feedback = false;
  int verbosity = 0;
  net::ServerLimitFlags limits;
};

// The defaults, with the environment's HOOK_PATH, NODE_NAME, KUBECONFIG and
// HAMI_RESYNC_INTERVAL.
MonitorFlags DefaultMonitorFlags();
void AddMonitorFlags(CLI::App& app, MonitorFlags* flags);

struct MonitorConfig {
  net::HttpServerOptions http;  // the metrics server: address, port and limits
  std::string hook_path, node_name, kubeconfig, context, nvml_library, ready_file;
  Duration hook_wait{0};  // how long to wait at start for the hook path
  Duration update_interval{0};
  std::chrono::seconds resync_delay{0};
  bool legacy = false;
  bool feedback = true;
  int verbosity = 0;
};

// InvalidArgument naming the flag (or the variable to set) for the first thing wrong.
Result<MonitorConfig> MonitorConfigFromFlags(const MonitorFlags& flags);

// Waits up to `wait` (on `clock`, polling every 200 ms) for the hook path to be a directory: the
// device plugin, started beside the monitor, creates it. FailedPrecondition with what the path
// must be when it never appears.
Status AwaitHookPath(const std::string& hook_path, Duration wait, Clock& clock);

}  // namespace hami::monitor
