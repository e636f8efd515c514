#include "common/subprocess.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <sstream>

namespace hami {

Subprocess::Subprocess(const std::vector<std::string>& argv, const std::vector<std::string>& env) {
  int in[2], out[2], err[2];
  if (pipe2(in, O_CLOEXEC) != 0 || pipe2(out, O_CLOEXEC) != 0 || pipe2(err, O_CLOEXEC) != 0) {
    result_.err = "pipe failed";
    return;
  }
  // Build argv/envp before forking: the child may only call async-signal-safe functions.
  std::vector<char*> a, e;
  for (const auto& s : argv) a.push_back(const_cast<char*>(s.c_str()));
  a.push_back(nullptr);
  for (const auto& s : env) e.push_back(const_cast<char*>(s.c_str()));
  e.push_back(nullptr);
  pid_ = fork();
  if (pid_ == 0) {
    dup2(in[0], 0);
    dup2(out[1], 1);
    dup2(err[1], 2);
    execve(a[0], a.data(), e.data());
    _exit(127);
  }
  close(in[0]);
  close(out[1]);
  close(err[1]);
  stdin_ = in[1];
  out_ = out[0];
  err_ = err[0];
}

Subprocess::~Subprocess() {
  if (pid_ > 0 && !waited_) {
    kill(pid_, SIGKILL);
    Wait();
  }
  if (stdin_ >= 0) close(stdin_);
}

const std::string& Subprocess::ReadUntil(const std::string& marker) {
  while (out_ >= 0 && result_.out.find(marker) == std::string::npos) {
    char buf[4096];
    ssize_t n = read(out_, buf, sizeof(buf));
    if (n <= 0) break;
    result_.out.append(buf, static_cast<size_t>(n));
  }
  return result_.out;
}

bool Subprocess::WriteStdin(const std::string& data) {
  size_t done = 0;
  while (stdin_ >= 0 && done < data.size()) {
    ssize_t n = write(stdin_, data.data() + done, data.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    done += static_cast<size_t>(n);
  }
  return stdin_ >= 0;
}

void Subprocess::CloseStdin() {
  if (stdin_ >= 0) close(stdin_);
  stdin_ = -1;
}

void Subprocess::Signal(int sig) {
  if (pid_ > 0 && !waited_) kill(pid_, sig);
}

ProcessResult Subprocess::Wait() {
  if (waited_ || pid_ <= 0) return result_;
  CloseStdin();
  // Drain both pipes together so that neither fills up and blocks the child.
  struct pollfd fds[2] = {{out_, POLLIN, 0}, {err_, POLLIN, 0}};
  int open_fds = 2;
  while (open_fds > 0) {
    if (poll(fds, 2, -1) < 0) {
      if (errno == EINTR) continue;
      break;
    }
    for (auto& f : fds) {
      if (f.fd < 0 || (f.revents & (POLLIN | POLLHUP | POLLERR)) == 0) continue;
      char buf[4096];
      ssize_t n = read(f.fd, buf, sizeof(buf));
      if (n <= 0) {
        close(f.fd);
        f.fd = -1;
        --open_fds;
      } else {
        (&f == &fds[0] ? result_.out : result_.err).append(buf, static_cast<size_t>(n));
      }
    }
  }
  out_ = err_ = -1;
  int status = 0;
  while (waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
  }
  waited_ = true;
  result_.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return result_;
}

ProcessResult RunProcess(const std::vector<std::string>& argv,
                         const std::vector<std::string>& env) {
  Subprocess p(argv, env);
  return p.Wait();
}

std::map<std::string, std::string> KeyValues(const std::string& text, const std::string& key) {
  std::istringstream in(text);
  std::string line;
  std::map<std::string, std::string> kv;
  while (std::getline(in, line)) {
    bool labelled = line.compare(0, key.size(), key) == 0 &&
                    (line.size() == key.size() || line[key.size()] == ' ');
    if (!labelled && line.find(key + "=") == std::string::npos) continue;
    std::istringstream tokens(line);
    std::string tok;
    while (tokens >> tok) {
      auto eq = tok.find('=');
      if (eq != std::string::npos) kv[tok.substr(0, eq)] = tok.substr(eq + 1);
    }
    break;
  }
  return kv;
}

std::map<std::string, std::string> KeyValueLines(const std::string& text) {
  std::istringstream in(text);
  std::map<std::string, std::string> kv;
  for (std::string line; std::getline(in, line);) {
    size_t eq = line.find('=');
    if (eq != std::string::npos) kv[line.substr(0, eq)] = line.substr(eq + 1);
  }
  return kv;
}

void SetEnv(std::vector<std::string>& env, const std::string& entry) {
  std::string prefix = entry.substr(0, entry.find('=') + 1);
  std::erase_if(env,
                [&](const std::string& e) { return e.compare(0, prefix.size(), prefix) == 0; });
  env.push_back(entry);
}

std::string FindOnPath(const std::string& name) {
  const char* path = std::getenv("PATH");
  std::string all = path ? path : "";
  size_t pos = 0;
  while (pos <= all.size()) {
    size_t colon = all.find(':', pos);
    std::string dir = all.substr(pos, colon == std::string::npos ? std::string::npos : colon - pos);
    std::string candidate = dir + "/" + name;
    if (!dir.empty() && ::access(candidate.c_str(), X_OK) == 0) return candidate;
    if (colon == std::string::npos) break;
    pos = colon + 1;
  }
  return "";
}

}  // namespace hami
