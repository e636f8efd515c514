#include "vgpu/log.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include <atomic>

namespace hami::vgpu {
namespace {

std::atomic<int> g_level{kLogNotice};

const char* LevelName(int level) {
  switch (level) {
    case kLogError:
      return "ERROR";
    case kLogWarn:
      return "WARN";
    case kLogNotice:
      return "NOTICE";
    case kLogInfo:
      return "INFO";
    default:
      return "DEBUG";
  }
}

}  // namespace

void SetLogLevel(int level) { g_level.store(level, std::memory_order_relaxed); }
int GetLogLevel() { return g_level.load(std::memory_order_relaxed); }

void InitLogLevelFromEnv() {
  const char* v = getenv("LIBCUDA_LOG_LEVEL");
  if (v == nullptr || *v == '\0') return;
  char* end = nullptr;
  long level = strtol(v, &end, 10);
  if (end == v || *end != '\0' || level < 0 || level > 4) {
    Log(kLogWarn, "LIBCUDA_LOG_LEVEL=%s is not a level between 0 and 4; keeping %d", v,
        GetLogLevel());
    return;
  }
  SetLogLevel(static_cast<int>(level));
}

void Log(int level, const char* fmt, ...) {
  char buf[1024];
  int n = snprintf(buf, sizeof(buf), "[hami-vgpu %d %s] ", static_cast<int>(getpid()),
                   LevelName(level));
  if (n < 0) return;
  va_list ap;
  va_start(ap, fmt);
  int m = vsnprintf(buf + n, sizeof(buf) - static_cast<size_t>(n), fmt, ap);
  va_end(ap);
  if (m < 0) return;
  size_t len = static_cast<size_t>(n) + static_cast<size_t>(m);
  if (len > sizeof(buf) - 2) len = sizeof(buf) - 2;
  buf[len++] = '\n';
  ssize_t ignored = write(2, buf, len);
  (void)ignored;
}

}  // namespace hami::vgpu
