#include "sim/gpu/proc_liveness.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

namespace hami::sim {

uint64_t ProcessStartTime(pid_t pid) {
  char path[64];
  snprintf(path, sizeof(path), "/proc/%d/stat", static_cast<int>(pid));
  int fd = open(path, O_RDONLY | O_CLOEXEC);
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
