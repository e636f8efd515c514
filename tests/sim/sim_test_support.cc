#include "sim_test_support.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

namespace hami::simtest {

Child Spawn(const std::vector<std::string>& argv, const Env& env) {
  int in[2], out[2], err[2];
  if (pipe2(in, O_CLOEXEC) != 0 || pipe2(out, O_CLOEXEC) != 0 || pipe2(err, O_CLOEXEC) != 0) {
    abort();
  }
  pid_t pid = fork();
  if (pid == 0) {
    dup2(in[0], 0);
    dup2(out[1], 1);
    dup2(err[1], 2);
    for (const auto& [k, v] : env) {
      if (v == "\x01") {
        unsetenv(k.c_str());
      } else {
        setenv(k.c_str(), v.c_str(), 1);
      }
    }
    std::vector<char*> args;
    for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    execv(args[0], args.data());
    _exit(127);
  }
  close(in[0]);
  close(out[1]);
  close(err[1]);
  return Child{pid, in[1], out[0], err[0]};
}

bool ReadLine(int fd, std::string* line) {
  line->clear();
  char c;
  for (;;) {
    ssize_t n = read(fd, &c, 1);
    if (n <= 0) return !line->empty();
    if (c == '\n') return true;
    line->push_back(c);
  }
}

std::string ReadAll(int fd) {
  std::string s;
  char buf[4096];
  ssize_t n;
  while ((n = read(fd, buf, sizeof(buf))) > 0) s.append(buf, static_cast<size_t>(n));
  return s;
}

int Finish(Child* c, std::string* out, std::string* err) {
  if (c->in_fd >= 0) close(c->in_fd);
  c->in_fd = -1;
  std::string o = ReadAll(c->out_fd);
  std::string e = ReadAll(c->err_fd);
  close(c->out_fd);
  close(c->err_fd);
  int status = 0;
  waitpid(c->pid, &status, 0);
  if (out != nullptr) *out += o;
  if (err != nullptr) *err += e;
  if (!e.empty()) fprintf(stderr, "[child %d stderr] %s", static_cast<int>(c->pid), e.c_str());
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

bool Cuda::Load() {
  lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (lib == nullptr) {
    fprintf(stderr, "dlopen libcuda.so.1: %s\n", dlerror());
    return false;
  }
  bool ok = true;
#define HAMI_CU_FN(name)                                         \
  name = reinterpret_cast<decltype(&::name)>(dlsym(lib, #name)); \
  if (name == nullptr) {                                         \
    fprintf(stderr, "missing export %s\n", #name);               \
    ok = false;                                                  \
  }
#include "sim_test_cuda_fns.inc"
#undef HAMI_CU_FN
  return ok;
}

bool Nvml::Load() {
  lib = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
  if (lib == nullptr) {
    fprintf(stderr, "dlopen libnvidia-ml.so.1: %s\n", dlerror());
    return false;
  }
  bool ok = true;
#define HAMI_NVML_FN(name)                                       \
  name = reinterpret_cast<decltype(&::name)>(dlsym(lib, #name)); \
  if (name == nullptr) {                                         \
    fprintf(stderr, "missing export %s\n", #name);               \
    ok = false;                                                  \
  }
#include "sim_test_nvml_fns.inc"
#undef HAMI_NVML_FN
  return ok;
}

}  // namespace hami::simtest
