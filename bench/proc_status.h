// A field of /proc/<pid>/status in KiB (VmRSS, VmHWM, ...), or -1 when absent: the benchmarks'
// memory figures for the processes they measure.
#pragma once

#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>

namespace hami::bench {

inline long ProcStatusKb(int pid, const char* field) {  // NOLINT(runtime/int)
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(field, 0) == 0) return std::atol(line.c_str() + std::strlen(field) + 1);
  }
  return -1;
}

}  // namespace hami::bench
