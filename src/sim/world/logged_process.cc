#include "sim/world/logged_process.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/inotify.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <filesystem>
#include <functional>
#include <thread>

#include "common/file_util.h"

namespace hami::sim {

using SteadyClock = std::chrono::steady_clock;

namespace {

using std::chrono::milliseconds;

// Where the kernel gives no pidfd (before Linux 5.3: ENOSYS; a seccomp filter: EPERM) or no
// inotify watch (out of instances or watches), the waits look again this often instead: the
// bounded loop they used before either existed.
constexpr milliseconds kFallbackRecheck{50};

// A process's log so far ("" before it exists); logs of long runs may be large.
std::string ReadAll(const std::string& path) {
  return ReadFileToString(path, size_t{1} << 30).value_or("");
}

// pidfd_open(2) for a child not yet reaped (so its PID cannot have been reused); -1 on failure.
int OpenPidfd(pid_t pid) {
#ifdef SYS_pidfd_open
  return static_cast<int>(syscall(SYS_pidfd_open, pid, 0));
#else
  (void)pid;
  errno = ENOSYS;
  return -1;
#endif
}

// One inotify watch on `path` for `mask`, closed with the object; fd() is -1 when inotify
// refuses (the waits then fall back to kFallbackRecheck).
class PathWatch {
 public:
  PathWatch(const std::string& path, uint32_t mask)
      : fd_(inotify_init1(IN_NONBLOCK | IN_CLOEXEC)) {
    if (fd_ >= 0 && inotify_add_watch(fd_, path.c_str(), mask) < 0) {
      close(fd_);
      fd_ = -1;
    }
  }
  ~PathWatch() {
    if (fd_ >= 0) close(fd_);
  }
  PathWatch(const PathWatch&) = delete;
  PathWatch& operator=(const PathWatch&) = delete;

  int fd() const { return fd_; }

 private:
  int fd_;
};

// The directory a file lives in ("." for a bare name).
std::string DirectoryOf(const std::string& path) {
  std::string dir = std::filesystem::path(path).parent_path().string();
  return dir.empty() ? "." : dir;
}

// Milliseconds until `end`, rounded up, for poll(2): 0 when past, at most INT_MAX.
int MillisUntil(SteadyClock::time_point end) {
  int64_t left = std::chrono::ceil<milliseconds>(end - SteadyClock::now()).count();
  return static_cast<int>(std::clamp<int64_t>(left, 0, INT_MAX));
}

}  // namespace

std::string TailLines(const std::string& text, size_t lines) {
  if (text.empty()) return text;  // (a process that wrote nothing; substr(1) below would abort)
  size_t pos = text.size();
  for (size_t i = 0; i <= lines && pos != std::string::npos && pos > 0; ++i) {
    pos = text.rfind('\n', pos - 1);
  }
  return pos == std::string::npos ? text : text.substr(pos + 1);
}

Status LoggedProcess::Spawn(const std::vector<std::string>& argv,
                            const std::vector<std::string>& env) {
  int fd = open(log_.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd < 0) return Status(StatusCode::kInternal, "cannot open " + log_);
  offset_ = static_cast<size_t>(lseek(fd, 0, SEEK_END));
  std::vector<std::string> a = argv, e = env;
  std::vector<char*> av, ev;
  for (std::string& s : a) av.push_back(s.data());
  av.push_back(nullptr);
  for (std::string& s : e) ev.push_back(s.data());
  ev.push_back(nullptr);
  pid_t parent = getpid();
  pid_t pid = fork();
  if (pid < 0) {
    close(fd);
    return Status(StatusCode::kInternal, "fork failed");
  }
  if (pid == 0) {
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) _exit(127);
    int null = open("/dev/null", O_RDONLY);
    dup2(null, 0);
    dup2(fd, 1);
    dup2(fd, 2);
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, nullptr);
    execve(av[0], av.data(), ev.data());
    _exit(127);
  }
  close(fd);
  pid_ = pid;
  pidfd_ = OpenPidfd(pid);
  return OkStatus();
}

std::string LoggedProcess::LogTail(size_t lines) const {
  std::string text = ReadAll(log_);
  return TailLines(text.size() > offset_ ? text.substr(offset_) : "", lines);
}

Status LoggedProcess::CheckAlive(const std::string& what) {
  int status = 0;
  // ECHILD: someone else reaped it; it is gone all the same (and its pidfd stays readable, so
  // treating it as alive would spin).
  if (pid_t r = pid_ > 0 ? waitpid(pid_, &status, WNOHANG) : 0;
      r == pid_ || (r < 0 && errno == ECHILD)) {
    Reaped();
    return Status(StatusCode::kUnavailable,
                  name_ + " exited before " + what + "; its log ends with:\n" + LogTail(15));
  }
  if (pid_ <= 0) return Status(StatusCode::kUnavailable, name_ + " is not running");
  return OkStatus();
}

void LoggedProcess::Reaped() {
  pid_ = -1;
  if (pidfd_ >= 0) close(pidfd_);
  pidfd_ = -1;
}

void LoggedProcess::AwaitEvent(int watch, milliseconds wait, SteadyClock::time_point end) const {
  if (pidfd_ < 0 || watch < 0) wait = std::min(wait, kFallbackRecheck);
  pollfd fds[2];
  nfds_t n = 0;
  if (pidfd_ >= 0) fds[n++] = {pidfd_, POLLIN, 0};
  if (watch >= 0) fds[n++] = {watch, POLLIN, 0};
  // `wait` may be kEventsOnly (milliseconds::max()): compare rather than add it to now().
  int ms = MillisUntil(end);
  if (wait.count() < ms) ms = static_cast<int>(wait.count());
  // A timeout or EINTR is fine: the caller looks again either way.
  if (poll(fds, n, ms) <= 0 || watch < 0) return;
  // Which event it was does not matter (the caller reads what it needs again): drop them all.
  char events[4096];
  while (read(watch, events, sizeof(events)) > 0) {
  }
}

Result<std::string> LoggedProcess::WaitForMarker(const std::string& marker,
                                                 std::chrono::seconds timeout) {
  auto end = SteadyClock::now() + timeout;
  // The log exists since Spawn; watched before the first read, so no write goes unnoticed.
  PathWatch writes(log_, IN_MODIFY);
  for (;;) {
    std::string text = ReadAll(log_);
    text = text.size() > offset_ ? text.substr(offset_) : "";
    if (size_t at = text.find(marker); at != std::string::npos) {
      size_t b = text.rfind('\n', at);
      b = b == std::string::npos ? 0 : b + 1;
      size_t e = text.find('\n', at);
      return text.substr(b, e == std::string::npos ? std::string::npos : e - b);
    }
    HAMI_RETURN_IF_ERROR(CheckAlive("it was ready"));
    if (SteadyClock::now() > end) {
      return Status(StatusCode::kDeadlineExceeded,
                    name_ + " not ready after " + std::to_string(timeout.count()) +
                        " s; its log ends with:\n" + TailLines(text, 15));
    }
    AwaitEvent(writes.fd(), kEventsOnly, end);
  }
}

Status LoggedProcess::WaitUntil(const std::function<bool()>& ready, std::chrono::seconds timeout,
                                milliseconds recheck) {
  auto end = SteadyClock::now() + timeout;
  // Entries appearing or finished, not every write: the log and its neighbours (an audit log)
  // grow with each probe of an HTTP endpoint, which would wake this wait to probe again at once.
  PathWatch entries(DirectoryOf(log_), IN_CREATE | IN_MOVED_TO | IN_CLOSE_WRITE);
  for (;;) {
    if (ready()) return OkStatus();
    HAMI_RETURN_IF_ERROR(CheckAlive("it was ready"));
    if (SteadyClock::now() > end) {
      return Status(StatusCode::kDeadlineExceeded, name_ + " not ready after " +
                                                       std::to_string(timeout.count()) +
                                                       " s; its log ends with:\n" + LogTail(15));
    }
    AwaitEvent(entries.fd(), recheck, end);
  }
}

void LoggedProcess::Stop(milliseconds grace) {
  Terminate();
  Reap(SteadyClock::now() + grace);
}

void LoggedProcess::Terminate() {
  if (pid_ > 0) kill(pid_, SIGTERM);
}

void LoggedProcess::Reap(SteadyClock::time_point deadline) {
  if (pid_ <= 0) return;
  int status = 0;
  if (pidfd_ >= 0) {
    pollfd exited{pidfd_, POLLIN, 0};
    int r;
    while ((r = poll(&exited, 1, MillisUntil(deadline))) < 0 && errno == EINTR) {
    }
    // Still running at the deadline (or poll failed, which would leave waitpid blocking).
    if (r <= 0) kill(pid_, SIGKILL);
  } else {
    // No pidfd (see kFallbackRecheck): look every 5 ms, as before pidfds.
    pid_t r;
    while ((r = waitpid(pid_, &status, WNOHANG)) == 0 && SteadyClock::now() <= deadline) {
      std::this_thread::sleep_for(milliseconds(5));
    }
    if (r != 0) return Reaped();  // exited (or reaped elsewhere: ECHILD)
    kill(pid_, SIGKILL);
  }
  while (waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
  }
  Reaped();
}

}  // namespace hami::sim
