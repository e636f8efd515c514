#include "sim/kubelet/exec_session.h"

#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <stdlib.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

#include <chrono>
#include <nlohmann/json.hpp>
#include <sstream>

#include "common/log.h"
#include "net/http_server.h"
#include "net/websocket.h"

namespace hami::sim {
namespace {

using json = nlohmann::json;
using Clock = std::chrono::steady_clock;

constexpr uint8_t kStdin = 0, kStdout = 1, kStderr = 2, kError = 3, kResize = 4, kClose = 255;

bool Flag(const net::HttpRequest& req, const char* name) {
  std::string v = req.Param(name);
  return v == "true" || v == "1" || v == "True" || v == "TRUE";
}

std::string EnvValue(const std::vector<std::string>& env, const std::string& key) {
  for (const std::string& kv : env) {
    if (kv.size() > key.size() && kv.compare(0, key.size(), key) == 0 && kv[key.size()] == '=') {
      return kv.substr(key.size() + 1);
    }
  }
  return "";
}

bool IsExecutable(const std::string& path) {
  struct stat st{};
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode) && ::access(path.c_str(), X_OK) == 0;
}

void SetNonBlocking(int fd) { ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK); }

// The started process and the parent's ends of its streams (-1 where there is none).
struct Child {
  pid_t pid = -1;
  int pidfd = -1;
  int in = -1;   // stdin (the pty's master with tty)
  int out = -1;  // stdout (the pty's master with tty)
  int err = -1;  // stderr (none with tty)
  bool pty = false;

  void CloseIn() {
    if (in >= 0 && in != out) ::close(in);
    in = -1;
  }
  void CloseOut() {
    if (out >= 0 && out != in) ::close(out);
    out = -1;
  }
  void CloseErr() {
    if (err >= 0) ::close(err);
    err = -1;
  }
  void CloseAll() {
    CloseIn();
    CloseOut();
    CloseErr();
    if (pidfd >= 0) ::close(pidfd);
    pidfd = -1;
  }
  // Kills the whole session (the process runs in a session of its own) and reaps it.
  void Kill() {
    if (pid <= 0) return;
    ::kill(-pid, SIGKILL);
    int status = 0;
    while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    pid = -1;
  }
};

// The pty's slave becomes the child's stdin, stdout and stderr; `c` gets the master, sized 24x80.
// On failure returns false with `*what` set and errno as the failing call left it.
bool OpenPseudoTerminal(posix_spawn_file_actions_t& fa, Child& c, std::string* what) {
  int master = ::posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC);
  if (master < 0 || ::grantpt(master) != 0 || ::unlockpt(master) != 0) {
    if (master >= 0) ::close(master);
    *what = "cannot open a pseudo terminal";
    return false;
  }
  char name[128];
  if (::ptsname_r(master, name, sizeof name) != 0) {
    ::close(master);
    *what = "cannot name the pseudo terminal";
    return false;
  }
  c.pty = true;
  c.in = c.out = master;
  winsize ws{};
  ws.ws_row = 24;
  ws.ws_col = 80;
  ::ioctl(master, TIOCSWINSZ, &ws);
  // Opened after setsid (POSIX_SPAWN_SETSID acts before the file actions): the terminal
  // becomes the process's controlling terminal.
  posix_spawn_file_actions_addopen(&fa, 0, name, O_RDWR, 0);
  posix_spawn_file_actions_adddup2(&fa, 0, 1);
  posix_spawn_file_actions_adddup2(&fa, 0, 2);
  return true;
}

// Child stream `child_fd`: a pipe whose other end goes to *parent_end when `wanted` (the child's
// end is added to `child_ends`, for the parent to close after the spawn), /dev/null otherwise.
// False when the pipe cannot be made.
bool PipeFor(posix_spawn_file_actions_t& fa, std::vector<int>& child_ends, bool wanted,
             int child_fd, bool child_reads, int* parent_end) {
  if (!wanted) {
    posix_spawn_file_actions_addopen(&fa, child_fd, "/dev/null", child_reads ? O_RDONLY : O_WRONLY,
                                     0);
    return true;
  }
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) return false;
  int mine = child_reads ? fds[1] : fds[0], theirs = child_reads ? fds[0] : fds[1];
  *parent_end = mine;
  child_ends.push_back(theirs);
  posix_spawn_file_actions_adddup2(&fa, theirs, child_fd);
  return true;
}

// The child runs in a session of its own with no signal blocked and every signal at its default.
void InitSpawnAttributes(posix_spawnattr_t* attr) {
  posix_spawnattr_init(attr);
  sigset_t none, all;
  sigemptyset(&none);
  sigfillset(&all);
  posix_spawnattr_setsigmask(attr, &none);
  posix_spawnattr_setsigdefault(attr, &all);
  posix_spawnattr_setflags(attr,
                           POSIX_SPAWN_SETSID | POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
}

// Starts the process with pipes (or a pseudo terminal) for the streams the client asked for.
Result<Child> Spawn(const ExecRequest& req, const ExecProcess& p, const std::string& program) {
  Child c;
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  std::vector<int> child_ends;
  auto fail = [&](const std::string& what) -> Status {
    posix_spawn_file_actions_destroy(&fa);
    for (int fd : child_ends) ::close(fd);
    c.CloseAll();
    return Status(StatusCode::kInternal, what + ": " + std::strerror(errno));
  };
  if (req.tty) {
    std::string what;
    if (!OpenPseudoTerminal(fa, c, &what)) return fail(what);
  } else if (!PipeFor(fa, child_ends, req.in, 0, true, &c.in) ||
             !PipeFor(fa, child_ends, req.out, 1, false, &c.out) ||
             !PipeFor(fa, child_ends, req.err, 2, false, &c.err)) {
    return fail("cannot make pipes");
  }
  posix_spawn_file_actions_addchdir_np(&fa, p.workdir.empty() ? "/" : p.workdir.c_str());
  posix_spawnattr_t attr;
  InitSpawnAttributes(&attr);
  std::vector<std::string> args = p.argv;
  std::vector<std::string> env = p.env;
  if (req.tty && EnvValue(env, "TERM").empty()) env.push_back("TERM=xterm");
  std::vector<char*> argv, envp;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  for (std::string& e : env) envp.push_back(e.data());
  envp.push_back(nullptr);
  int rc = ::posix_spawn(&c.pid, program.c_str(), &fa, &attr, argv.data(), envp.data());
  posix_spawnattr_destroy(&attr);
  if (rc != 0) {
    errno = rc;
    return fail("cannot start " + program);
  }
  posix_spawn_file_actions_destroy(&fa);
  for (int fd : child_ends) ::close(fd);
  c.pidfd = static_cast<int>(::syscall(SYS_pidfd_open, c.pid, 0));
  for (int fd : {c.in, c.out, c.err}) {
    if (fd >= 0) SetNonBlocking(fd);
  }
  return c;
}

// Writes one protocol message (channel byte + data) as a binary frame.
bool Send(net::UpgradedConnection& conn, uint8_t channel, std::string_view data) {
  std::string msg(1, static_cast<char>(channel));
  msg.append(data);
  return conn.Write(net::ws::Frame(net::ws::kBinary, msg));
}

// After our close frame: reads until the client's close (or its end), up to a second, so that
// closing the socket does not reset the connection under the client's last reads.
void AwaitClientClose(net::UpgradedConnection& conn, net::ws::Reader& reader, std::string& in) {
  auto until = Clock::now() + std::chrono::seconds(1);
  std::vector<net::ws::Message> msgs;
  while (Clock::now() < until) {
    if (!conn.HasBuffered()) {
      pollfd pfd{conn.fd(), POLLIN, 0};
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(until - Clock::now());
      if (::poll(&pfd, 1, static_cast<int>(std::max<int64_t>(left.count(), 0))) <= 0) return;
    }
    if (conn.Read(&in) == net::UpgradedConnection::ReadResult::kEnd) return;
    msgs.clear();
    if (!reader.Feed(&in, &msgs)) return;
    for (const net::ws::Message& m : msgs) {
      if (m.opcode == net::ws::kClose) return;
    }
  }
}

}  // namespace

Result<ExecRequest> ParseExecRequest(const net::HttpRequest& req) {
  ExecRequest r;
  auto range = req.params.equal_range("command");
  for (auto it = range.first; it != range.second; ++it) r.command.push_back(it->second);
  if (r.command.empty() || r.command[0].empty()) {
    return Status(StatusCode::kInvalidArgument, "you must specify at least 1 command");
  }
  // kube-apiserver asks a kubelet with input/output/error=1; the names of the API's
  // PodExecOptions (stdin/stdout/stderr=true) are taken as well.
  r.in = Flag(req, "input") || Flag(req, "stdin");
  r.out = Flag(req, "output") || Flag(req, "stdout");
  r.err = Flag(req, "error") || Flag(req, "stderr");
  r.tty = Flag(req, "tty");
  if (r.tty) r.err = false;  // a terminal carries both on one stream
  if (!r.in && !r.out && !r.err) {
    return Status(StatusCode::kInvalidArgument,
                  "you must specify at least 1 of stdin, stdout, stderr");
  }
  return r;
}

std::string ChooseExecProtocol(const std::vector<std::string>& offered) {
  for (const std::string& p : offered) {
    if (p == kExecProtocolV5 || p == kExecProtocolV4) return p;
  }
  return "";
}

std::string ExitStatusJson(int wait_status) {
  int code = WIFEXITED(wait_status)     ? WEXITSTATUS(wait_status)
             : WIFSIGNALED(wait_status) ? 128 + WTERMSIG(wait_status)
                                        : 1;
  if (code == 0) return R"({"metadata":{},"status":"Success"})";
  json s = {{"metadata", json::object()},
            {"status", "Failure"},
            {"message", "command terminated with non-zero exit code: exit status " +
                            std::to_string(code)},
            {"reason", "NonZeroExitCode"},
            {"details",
             {{"causes", {{{"reason", "ExitCode"}, {"message", std::to_string(code)}}}}}}};
  return s.dump();
}

std::string ErrorStatusJson(const std::string& message) {
  json s = {{"metadata", json::object()},
            {"status", "Failure"},
            {"message", message},
            {"reason", "InternalError"},
            {"code", 500}};
  return s.dump();
}

Result<std::string> ResolveExecProgram(const ExecProcess& p) {
  if (p.argv.empty() || p.argv[0].empty()) {
    return Status(StatusCode::kInvalidArgument, "no command");
  }
  const std::string& cmd = p.argv[0];
  if (cmd.find('/') != std::string::npos) {
    std::string path = cmd[0] == '/' || p.workdir.empty() ? cmd : p.workdir + "/" + cmd;
    if (IsExecutable(path)) return path;
    return Status(StatusCode::kNotFound,
                  "exec: \"" + cmd + "\": stat " + cmd + ": no such file or directory");
  }
  std::string path = EnvValue(p.env, "PATH");
  if (path.empty()) path = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";
  std::istringstream dirs(path);
  std::string dir;
  while (std::getline(dirs, dir, ':')) {
    if (dir.empty()) continue;
    std::string candidate = dir + "/" + cmd;
    if (IsExecutable(candidate)) return candidate;
  }
  return Status(StatusCode::kNotFound,
                "exec: \"" + cmd + "\": executable file not found in $PATH");
}

// Blocks SIGPIPE on this thread for its lifetime: writing to a process's input after it exited
// must fail with EPIPE, not end the kubelet. A SIGPIPE left pending is taken before unblocking.
class NoSigpipe {
 public:
  NoSigpipe() {
    sigemptyset(&pipe_);
    sigaddset(&pipe_, SIGPIPE);
    pthread_sigmask(SIG_BLOCK, &pipe_, &old_);
  }
  ~NoSigpipe() {
    timespec zero{0, 0};
    while (sigtimedwait(&pipe_, nullptr, &zero) > 0) {
    }
    pthread_sigmask(SIG_SETMASK, &old_, nullptr);
  }

 private:
  sigset_t pipe_, old_;
};

namespace {

// One session's relay between the client's WebSocket and the started process. Single-threaded:
// it lives on the stack of RunExecSession.
class ExecSession {
 public:
  ExecSession(net::UpgradedConnection& conn, bool v5) : conn_(conn), v5_(v5) {}

  // Sends the final status and a normal close, then waits briefly for the client's close.
  void Finish(const std::string& status_json) {
    if (Send(conn_, kError, status_json) &&
        conn_.Write(net::ws::Frame(net::ws::kClose, net::ws::ClosePayload(net::ws::kCloseNormal,
                                                                          "")))) {
      AwaitClientClose(conn_, reader_, in_);
    }
  }

  // Relays the streams of `c` until it exited and its output is drained, then finishes. Returns
  // the wait status, or -1 when the session was abandoned (the process group is then killed).
  int Relay(Child c);

 private:
  // The descriptors of one poll round and where each sits in `fds` (-1: not polled).
  struct PollSet {
    pollfd fds[5];
    int n = 0;
    int out_i = -1, err_i = -1, pid_i = -1, in_i = -1;
  };

  PollSet Watched() const;
  // Ends the session early (client gone, protocol error, server stopping); code 0 sends no close.
  void Abandon(uint16_t code, const std::string& why);
  // Reads and handles what the client sent. False when the session was abandoned.
  bool ReadClient();
  // One binary message's channel and data: stdin, a terminal resize, or v5's close of stdin.
  void OnChannelMessage(uint8_t channel, std::string_view data);
  // Writes pending client input once the process's stdin is writable.
  void WriteStdin(const PollSet& p);
  // Sends what the process wrote on stdout/stderr. False when the session was abandoned.
  bool ForwardOutput(const PollSet& p);
  // Reaps the process once it exited and starts the drain of its remaining output.
  void CheckExited(const PollSet& p);

  net::UpgradedConnection& conn_;
  const bool v5_;
  std::string in_;  // bytes from the client not yet parsed
  net::ws::Reader reader_{net::ws::Reader::Side::kServer};
  Child c_;
  std::string to_stdin_;        // client input the process has not taken yet
  bool stdin_closing_ = false;  // the client closed stdin: close it once to_stdin_ is written
  bool exited_ = false;
  int wait_status_ = 0;
  Clock::time_point drain_until_{};
  std::vector<net::ws::Message> msgs_;
  char chunk_[32768];
};

int ExecSession::Relay(Child c) {
  c_ = c;
  for (;;) {
    if (exited_ && c_.out < 0 && c_.err < 0) break;
    if (exited_ && Clock::now() >= drain_until_) break;  // a background child holds the output
    if (!conn_.ServerRunning()) {
      Abandon(net::ws::kCloseGoingAway, "kubelet stopping");
      return -1;
    }
    PollSet p = Watched();
    int timeout = conn_.HasBuffered() ? 0 : 200;
    if (exited_) timeout = std::min(timeout, 50);
    if (::poll(p.fds, static_cast<nfds_t>(p.n), timeout) < 0 && errno != EINTR) {
      Abandon(net::ws::kCloseInternalError, "poll failed");
      return -1;
    }
    if (conn_.HasBuffered() || (p.fds[0].revents & (POLLIN | POLLHUP | POLLERR)) != 0) {
      if (!ReadClient()) return -1;
    }
    WriteStdin(p);
    if (stdin_closing_ && to_stdin_.empty() && !c_.pty) c_.CloseIn();
    if (!ForwardOutput(p)) return -1;
    CheckExited(p);
  }
  c_.CloseAll();
  Finish(ExitStatusJson(wait_status_));
  return wait_status_;
}

ExecSession::PollSet ExecSession::Watched() const {
  PollSet p;
  p.fds[p.n++] = {conn_.fd(), POLLIN, 0};
  p.out_i = c_.out >= 0 ? p.n : -1;
  if (c_.out >= 0) p.fds[p.n++] = {c_.out, POLLIN, 0};
  p.err_i = c_.err >= 0 ? p.n : -1;
  if (c_.err >= 0) p.fds[p.n++] = {c_.err, POLLIN, 0};
  p.pid_i = !exited_ && c_.pidfd >= 0 ? p.n : -1;
  if (p.pid_i >= 0) p.fds[p.n++] = {c_.pidfd, POLLIN, 0};
  p.in_i = c_.in >= 0 && !to_stdin_.empty() && !c_.pty ? p.n : -1;
  if (p.in_i >= 0) p.fds[p.n++] = {c_.in, POLLOUT, 0};
  return p;
}

void ExecSession::Abandon(uint16_t code, const std::string& why) {
  if (code != 0) {
    (void)conn_.Write(net::ws::Frame(net::ws::kClose, net::ws::ClosePayload(code, why)));
  }
  c_.Kill();
  c_.CloseAll();
}

bool ExecSession::ReadClient() {
  using net::ws::Message;
  if (conn_.Read(&in_) == net::UpgradedConnection::ReadResult::kEnd) {
    Abandon(0, "");
    return false;
  }
  msgs_.clear();
  if (!reader_.Feed(&in_, &msgs_)) {
    Abandon(reader_.close_code(), reader_.error());
    return false;
  }
  for (Message& m : msgs_) {
    if (m.opcode == net::ws::kPing) {
      if (!conn_.Write(net::ws::Frame(net::ws::kPong, m.payload))) {
        Abandon(0, "");
        return false;
      }
      continue;
    }
    if (m.opcode == net::ws::kClose) {
      (void)conn_.Write(
          net::ws::Frame(net::ws::kClose, net::ws::ClosePayload(net::ws::kCloseNormal, "")));
      Abandon(0, "");
      return false;
    }
    if (m.opcode != net::ws::kBinary || m.payload.empty()) continue;
    const auto channel = static_cast<uint8_t>(m.payload[0]);
    OnChannelMessage(channel, std::string_view(m.payload).substr(1));
  }
  return true;
}

void ExecSession::OnChannelMessage(uint8_t channel, std::string_view data) {
  if (channel == kStdin && c_.in >= 0 && !stdin_closing_) {
    if (c_.pty) {
      // A terminal's input is small and interactive: write it through now.
      while (!data.empty()) {
        ssize_t w = ::write(c_.in, data.data(), data.size());
        if (w <= 0) break;
        data.remove_prefix(static_cast<size_t>(w));
      }
    } else {
      to_stdin_.append(data);
    }
  } else if (channel == kResize && c_.pty) {
    json size = json::parse(data, nullptr, false);
    if (size.is_object()) {
      winsize ws{};
      ws.ws_col = static_cast<unsigned short>(size.value("Width", 80));
      ws.ws_row = static_cast<unsigned short>(size.value("Height", 24));
      ::ioctl(c_.out, TIOCSWINSZ, &ws);
    }
  } else if (channel == kClose && v5_ && data.size() == 1 &&
             static_cast<uint8_t>(data[0]) == kStdin) {
    stdin_closing_ = true;
  }
}

void ExecSession::WriteStdin(const PollSet& p) {
  if (p.in_i < 0 || (p.fds[p.in_i].revents & (POLLOUT | POLLERR | POLLHUP)) == 0) return;
  ssize_t w = ::write(c_.in, to_stdin_.data(), to_stdin_.size());
  if (w > 0) {
    to_stdin_.erase(0, static_cast<size_t>(w));
  } else if (w < 0 && errno != EAGAIN && errno != EINTR) {
    to_stdin_.clear();  // the process closed its input
    stdin_closing_ = true;
  }
}

bool ExecSession::ForwardOutput(const PollSet& p) {
  for (auto [idx, channel] : {std::pair{p.out_i, kStdout}, std::pair{p.err_i, kStderr}}) {
    if (idx < 0 || (p.fds[idx].revents & (POLLIN | POLLHUP | POLLERR)) == 0) continue;
    int& fd = channel == kStdout ? c_.out : c_.err;
    ssize_t r = ::read(fd, chunk_, sizeof chunk_);
    if (r > 0) {
      if (!Send(conn_, channel, std::string_view(chunk_, static_cast<size_t>(r)))) {
        Abandon(0, "");
        return false;
      }
    } else if (r == 0 || (errno != EAGAIN && errno != EINTR)) {
      // End of output (EIO on a terminal whose last holder closed it; a terminal's input is
      // the same descriptor and goes with it).
      if (channel == kStdout) {
        if (c_.pty) c_.CloseIn();
        c_.CloseOut();
      } else {
        c_.CloseErr();
      }
    }
  }
  return true;
}

void ExecSession::CheckExited(const PollSet& p) {
  // Without a pidfd (an old kernel) the process is looked at on every round.
  if (exited_ || (p.pid_i >= 0 && (p.fds[p.pid_i].revents & POLLIN) == 0)) return;
  if (::waitpid(c_.pid, &wait_status_, WNOHANG) == c_.pid) {
    exited_ = true;
    c_.pid = -1;
    drain_until_ = Clock::now() + std::chrono::seconds(2);
    if (!c_.pty) c_.CloseIn();
  }
}

}  // namespace

int RunExecSession(net::UpgradedConnection& conn, const std::string& protocol,
                   const ExecRequest& req, const ExecProcess& process) {
  NoSigpipe no_sigpipe;
  ExecSession session(conn, protocol == kExecProtocolV5);
  Result<std::string> program = ResolveExecProgram(process);
  if (!program.ok()) {
    session.Finish(ErrorStatusJson(program.status().message()));
    return -1;
  }
  Result<Child> spawned = Spawn(req, process, *program);
  if (!spawned.ok()) {
    session.Finish(ErrorStatusJson(spawned.status().message()));
    return -1;
  }
  return session.Relay(*spawned);
}

}  // namespace hami::sim
