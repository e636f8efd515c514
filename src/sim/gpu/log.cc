#include "sim/gpu/log.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <algorithm>

namespace hami::sim {
namespace {

__attribute__((format(printf, 2, 0))) void Emit(const char* level, const char* fmt, va_list ap) {
  char buf[1024];
  int n = snprintf(buf, sizeof(buf), "[hami-sim %d] %s: ", static_cast<int>(getpid()), level);
  if (n < 0) return;
  int m = vsnprintf(buf + n, sizeof(buf) - static_cast<size_t>(n) - 1, fmt, ap);
  if (m < 0) return;
  size_t len = std::min(static_cast<size_t>(n + m), sizeof(buf) - 2);
  buf[len++] = '\n';
  ssize_t ignored = write(STDERR_FILENO, buf, len);
  (void)ignored;
}

}  // namespace

bool SimDebugEnabled() {
  static const bool enabled = [] {
    const char* v = getenv("HAMI_SIM_LOG");
    return v != nullptr && (strcmp(v, "1") == 0 || strcmp(v, "true") == 0);
  }();
  return enabled;
}

void SimLogError(const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  Emit("error", fmt, ap);
  va_end(ap);
}

void SimLogWarn(const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  Emit("warning", fmt, ap);
  va_end(ap);
}

void SimLogDebugImpl(const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  Emit("debug", fmt, ap);
  va_end(ap);
}

}  // namespace hami::sim
