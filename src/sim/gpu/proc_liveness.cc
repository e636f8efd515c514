#include "sim/gpu/proc_liveness.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

namespace hami::sim {
namespace {

// The procfs the driver's questions go to: HAMI_SIM_HOST_PROC_FD when it names an open
// directory, else HAMI_SIM_HOST_PROC when it names a directory that opens (the host's procfs
// mounted into a container), else the process's own /proc (AT_FDCWD with absolute paths).
int ProcDirFd() {
  static const int fd = [] {
    const char* v = getenv("HAMI_SIM_HOST_PROC_FD");
    if (v == nullptr || *v == '\0') {
      const char* path = getenv("HAMI_SIM_HOST_PROC");
      if (path == nullptr || *path == '\0') return -1;
      // Kept open for the process's life: every later question is asked through it.
      return open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    }
    char* end = nullptr;
    long n = strtol(v, &end, 10);  // NOLINT(runtime/int)
    struct stat st;
    if (*end != '\0' || n < 0 || n > 1 << 20 || fstat(static_cast<int>(n), &st) != 0 ||
        !S_ISDIR(st.st_mode)) {
      return -1;
    }
    return static_cast<int>(n);
  }();
  return fd;
}

int OpenProc(const char* rel) {
  int dir = ProcDirFd();
  if (dir >= 0) return openat(dir, rel, O_RDONLY | O_CLOEXEC);
  char path[80];
  snprintf(path, sizeof(path), "/proc/%s", rel);
  return open(path, O_RDONLY | O_CLOEXEC);
}

}  // namespace

pid_t SimSelfPid() {
  int dir = ProcDirFd();
  if (dir < 0) return getpid();
  // "self" in a procfs resolves to the caller's PID in that procfs's namespace.
  char buf[32];
  ssize_t n = readlinkat(dir, "self", buf, sizeof(buf) - 1);
  if (n <= 0) return getpid();
  buf[n] = '\0';
  long pid = strtol(buf, nullptr, 10);  // NOLINT(runtime/int)
  return pid > 0 ? static_cast<pid_t>(pid) : getpid();
}

uint64_t ProcessStartTime(pid_t pid) {
  char rel[48];
  snprintf(rel, sizeof(rel), "%d/stat", static_cast<int>(pid));
  int fd = OpenProc(rel);
  if (fd < 0) return 0;
  char buf[1024];
  ssize_t n = read(fd, buf, sizeof(buf) - 1);
  close(fd);
  if (n <= 0) return 0;
  buf[n] = '\0';
  // The command name (field 2) may contain spaces and parentheses: parse after the last ')'.
  char* p = strrchr(buf, ')');
  if (p == nullptr || p[1] != ' ') return 0;
  p += 2;
  char state = *p;
  if (state == 'Z' || state == 'X' || state == 'x') return 0;
  // p is at field 3; advance to field 22.
  for (int field = 3; field < 22; ++field) {
    p = strchr(p, ' ');
    if (p == nullptr) return 0;
    ++p;
  }
  // +1 keeps a (theoretical) start time of 0 distinct from "no such process".
  return strtoull(p, nullptr, 10) + 1;
}

bool ProcessAlive(pid_t pid, uint64_t start_time) {
  if (pid <= 0) return false;
  uint64_t now_start = ProcessStartTime(pid);
  return now_start != 0 && now_start == start_time;
}

}  // namespace hami::sim
