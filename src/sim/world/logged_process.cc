#include "sim/world/logged_process.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <functional>
#include <thread>

#include "common/file_util.h"

namespace hami::sim {

using SteadyClock = std::chrono::steady_clock;

namespace {

// A process's log so far ("" before it exists); logs of long runs may be large.
std::string ReadAll(const std::string& path) {
  return ReadFileToString(path, size_t{1} << 30).value_or("");
}

}  // namespace

std::string TailLines(const std::string& text, size_t lines) {
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
  return OkStatus();
}

std::string LoggedProcess::LogTail(size_t lines) const {
  std::string text = ReadAll(log_);
  return TailLines(text.size() > offset_ ? text.substr(offset_) : "", lines);
}

Status LoggedProcess::CheckAlive(const std::string& what) {
  int status = 0;
  if (pid_ > 0 && waitpid(pid_, &status, WNOHANG) == pid_) {
    pid_ = -1;
    return Status(StatusCode::kUnavailable,
                  name_ + " exited before " + what + "; its log ends with:\n" + LogTail(15));
  }
  if (pid_ <= 0) return Status(StatusCode::kUnavailable, name_ + " is not running");
  return OkStatus();
}

Result<std::string> LoggedProcess::WaitForMarker(const std::string& marker,
                                                 std::chrono::seconds timeout) {
  auto end = SteadyClock::now() + timeout;
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
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

Status LoggedProcess::WaitUntil(const std::function<bool()>& ready, std::chrono::seconds timeout) {
  auto end = SteadyClock::now() + timeout;
  for (;;) {
    if (ready()) return OkStatus();
    HAMI_RETURN_IF_ERROR(CheckAlive("it was ready"));
    if (SteadyClock::now() > end) {
      return Status(StatusCode::kDeadlineExceeded, name_ + " not ready after " +
                                                       std::to_string(timeout.count()) +
                                                       " s; its log ends with:\n" + LogTail(15));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
}

void LoggedProcess::Stop(std::chrono::milliseconds grace) {
  Terminate();
  Reap(SteadyClock::now() + grace);
}

void LoggedProcess::Terminate() {
  if (pid_ > 0) kill(pid_, SIGTERM);
}

void LoggedProcess::Reap(SteadyClock::time_point deadline) {
  if (pid_ <= 0) return;
  int status = 0;
  while (waitpid(pid_, &status, WNOHANG) == 0) {
    if (SteadyClock::now() > deadline) {
      kill(pid_, SIGKILL);
      waitpid(pid_, &status, 0);
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  pid_ = -1;
}

}  // namespace hami::sim
