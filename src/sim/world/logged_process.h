// LoggedProcess: one child process of a simulated or test cluster (an API server, a kubelet,
// etcd, ...) whose stdout and stderr go to a log file, with a wait for a line that says it is
// up. It dies with the process that started it (PR_SET_PDEATHSIG), so no run leaves processes
// behind. Its waits block on events (the process's exit through a pidfd, the log's writes and new
// files beside it through inotify); their deadlines only bound them.
//
//   LoggedProcess p("etcd", dir + "/etcd.log");
//   HAMI_RETURN_IF_ERROR(p.Spawn({bin + "/etcd", ...}, env));
//   HAMI_ASSIGN_OR_RETURN(std::string line, p.WaitForMarker("ready to serve", 60s));
//   ...
//   p.Stop();  // SIGTERM, SIGKILL after a grace period
//
// Thread safety: one owning thread.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <functional>
#include <string>
#include <vector>

#include "common/status.h"

namespace hami::sim {

class LoggedProcess {
 public:
  LoggedProcess(std::string name, std::string log) : name_(std::move(name)), log_(std::move(log)) {}
  ~LoggedProcess() { Stop(); }
  LoggedProcess(const LoggedProcess&) = delete;
  LoggedProcess& operator=(const LoggedProcess&) = delete;

  // Starts argv[0] (a path) with exactly `env`, stdin from /dev/null, appending to the log.
  Status Spawn(const std::vector<std::string>& argv, const std::vector<std::string>& env);
  // How often WaitUntil judges, by default, a condition that no file announces.
  static constexpr std::chrono::milliseconds kProbeInterval{50};
  // For WaitUntil: judge the condition on events only (it reads files in the log's directory).
  static constexpr std::chrono::milliseconds kEventsOnly = std::chrono::milliseconds::max();

  // Waits for `marker` in the output written since Spawn; the whole line that holds it. Woken
  // by writes to the log (inotify) and by the process's exit (pidfd). Unavailable when the
  // process exits first, DeadlineExceeded after `timeout`; both quote the end of the log.
  Result<std::string> WaitForMarker(const std::string& marker, std::chrono::seconds timeout);
  // Waits until `ready()` holds while the process keeps running (the same errors as above).
  // `ready()` is judged at the start, whenever an entry is created, renamed into or closed after
  // writing in the log's directory (a ready file written beside the log and renamed into place,
  // common/ready_file.h), and every `recheck` for what no file announces (an HTTP health
  // endpoint that starts answering has no event to wait for). The process's exit ends the wait
  // at once.
  Status WaitUntil(const std::function<bool()>& ready, std::chrono::seconds timeout,
                   std::chrono::milliseconds recheck = kProbeInterval);

  // SIGTERM, then SIGKILL after `grace`.
  void Stop(std::chrono::milliseconds grace = std::chrono::seconds(10));
  // SIGTERM without waiting (Reap waits), so that several processes stop at once.
  void Terminate();
  // Waits for the process to exit (its pidfd), SIGKILLs it at `deadline`, and reaps it.
  void Reap(std::chrono::steady_clock::time_point deadline);

  bool Running() const { return pid_ > 0; }
  pid_t pid() const { return pid_; }
  const std::string& name() const { return name_; }
  const std::string& log() const { return log_; }
  // The last `lines` lines of what the process wrote since Spawn.
  std::string LogTail(size_t lines) const;

 private:
  // Unavailable (with the log's end) when the process has exited.
  Status CheckAlive(const std::string& what);
  // Blocks until `watch` (an inotify descriptor, or -1) has events, the process exits, `wait`
  // passes or `end` comes.
  void AwaitEvent(int watch, std::chrono::milliseconds wait,
                  std::chrono::steady_clock::time_point end) const;
  // Forgets the reaped process.
  void Reaped();

  std::string name_, log_;
  pid_t pid_ = -1;
  // Readable once the process has exited (pidfd_open(2)); -1 where the kernel refuses one, and
  // the waits then look at the process every kFallbackRecheck (logged_process.cc).
  int pidfd_ = -1;
  size_t offset_ = 0;
};

// The last `lines` lines of `text`.
std::string TailLines(const std::string& text, size_t lines);

}  // namespace hami::sim
