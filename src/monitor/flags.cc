#include "monitor/flags.h"

#include <CLI/CLI.hpp>
#include <filesystem>

#include "common/duration.h"
#include "common/go_flags.h"
#include "common/log.h"

namespace hami::monitor {

MonitorFlags DefaultMonitorFlags() {
  MonitorFlags f;
  f.hook_path = EnvOr("HOOK_PATH");
  f.node_name = EnvOr("NODE_NAME");
  f.kubeconfig = EnvOr("KUBECONFIG");
  f.resync = EnvOr("HAMI_RESYNC_INTERVAL", f.resync);
  return f;
}

void AddMonitorFlags(CLI::App& app, MonitorFlags* f) {
  app.add_option("--metrics-bind-address", f->metrics_bind, "metrics listen address")
      ->capture_default_str();
  app.add_flag("--legacy-metrics", f->legacy, "also export the pre-rename metric names");
  app.add_option("--hook-path", f->hook_path,
                 "HOOK_PATH: the regions are in <hook-path>/containers");
  app.add_option("--node-name", f->node_name, "this node (default $NODE_NAME)");
  app.add_option("--kubeconfig", f->kubeconfig,
                 "kubeconfig file (default $KUBECONFIG, in-cluster)");
  app.add_option("--context", f->context, "kubeconfig context");
  app.add_option("--nvml-library", f->nvml_library, "NVML to load")->capture_default_str();
  app.add_option("--hook-path-wait", f->hook_wait,
                 "how long to wait at start for the hook path to appear (the device plugin, "
                 "started beside the monitor, creates it)")
      ->capture_default_str();
  app.add_option("--update-interval", f->update_interval,
                 "how often regions, host PIDs and the feedback are updated")
      ->capture_default_str();
  app.add_option("--resync-interval", f->resync,
                 "a gone pod's directory is removed this long after its last change "
                 "(default $HAMI_RESYNC_INTERVAL or 5m)");
  app.add_flag("--no-feedback", f->no_feedback,
               "do not run the priority / utilisation-switch feedback loop");
  app.add_option("--ready-file", f->ready_file,
                 "once serving, write the metrics address and the PID to this file as JSON");
  net::AddServerLimitFlags(app, &f->limits);
  app.add_option("-v,--v", f->verbosity, "log verbosity")->capture_default_str();
}

namespace {

// A duration flag: at least `min` (strictly more when `positive`).
Status ParseDuration(const std::string& what, const std::string& text, const char* example,
                     bool positive, Duration* out) {
  Result<std::chrono::milliseconds> d = ParseGoDuration(text);
  if (!d.ok() || d->count() < 0 || (positive && d->count() == 0)) {
    return InvalidArgumentError(what + " \"" + text + "\": expected a duration like " + example);
  }
  *out = *d;
  return OkStatus();
}

}  // namespace

Result<MonitorConfig> MonitorConfigFromFlags(const MonitorFlags& f) {
  MonitorConfig c;
  HAMI_RETURN_IF_ERROR(net::ApplyServerLimitFlags(f.limits, &c.http));
  if (f.hook_path.empty()) {
    return InvalidArgumentError("the hook path is unknown: set HOOK_PATH or --hook-path");
  }
  if (f.node_name.empty()) {
    return InvalidArgumentError("the node name is unknown: set NODE_NAME or --node-name");
  }
  HAMI_RETURN_IF_ERROR(ParseDuration("--hook-path-wait", f.hook_wait, "30s", false, &c.hook_wait));
  HAMI_RETURN_IF_ERROR(
      ParseDuration("--update-interval", f.update_interval, "5s", true, &c.update_interval));
  Duration resync{0};
  HAMI_RETURN_IF_ERROR(ParseDuration("resync interval", f.resync, "5m", false, &resync));
  c.resync_delay = std::chrono::duration_cast<std::chrono::seconds>(resync);
  if (Status s = net::SplitHostPort(f.metrics_bind, &c.http.host, &c.http.port); !s.ok()) {
    return InvalidArgumentError("--metrics-bind-address: " + s.message());
  }
  c.hook_path = f.hook_path;
  c.node_name = f.node_name;
  c.kubeconfig = f.kubeconfig;
  c.context = f.context;
  c.nvml_library = f.nvml_library;
  c.ready_file = f.ready_file;
  c.legacy = f.legacy;
  c.feedback = !f.no_feedback;
  c.verbosity = f.verbosity;
  return c;
}

Status AwaitHookPath(const std::string& hook_path, Duration wait, Clock& clock) {
  auto is_dir = [&] {
    std::error_code ec;
    return std::filesystem::is_directory(hook_path, ec);
  };
  if (!is_dir() && wait.count() > 0) {
    HAMI_LOG(Warning) << "hook path " << hook_path << " does not exist yet; waiting up to "
                      << std::chrono::duration_cast<std::chrono::seconds>(wait).count()
                      << "s for the device plugin to create it";
    const MonoTime until = clock.Now() + wait;
    while (!is_dir() && clock.Now() < until) {
      clock.Sleep(std::chrono::milliseconds(200), nullptr);
    }
  }
  if (is_dir()) return OkStatus();
  return Status(StatusCode::kFailedPrecondition,
                "the hook path " + hook_path +
                    " is not a directory: it must be the device plugin's HOOK_PATH (the chart's "
                    "/usr/local/vgpu), whose containers/ folder holds the containers' regions");
}

}  // namespace hami::monitor
