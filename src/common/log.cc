#include "common/log.h"

#include <sys/syscall.h>
#include <sys/time.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <ctime>
#include <mutex>

#include "common/thread_annotations.h"

namespace hami::log {
namespace {

std::atomic<int> g_verbosity{0};
Mutex g_mu;
std::function<void(Level, std::string_view)> g_sink GUARDED_BY(g_mu);

char LevelChar(Level l) {
  switch (l) {
    case Level::kInfo:
      return 'I';
    case Level::kWarning:
      return 'W';
    case Level::kError:
      return 'E';
  }
  return '?';
}

std::string_view BaseName(const char* file) {
  std::string_view f(file);
  size_t slash = f.rfind('/');
  return slash == std::string_view::npos ? f : f.substr(slash + 1);
}

}  // namespace

void SetVerbosity(int v) { g_verbosity.store(v); }
int Verbosity() { return g_verbosity.load(std::memory_order_relaxed); }

void SetSink(std::function<void(Level, std::string_view)> sink) {
  MutexLock lock(g_mu);
  g_sink = std::move(sink);
}

void Write(Level level, const char* file, int line, std::string_view message) {
  timeval tv{};
  gettimeofday(&tv, nullptr);
  tm local{};
  localtime_r(&tv.tv_sec, &local);
  char head[96];
  std::string_view base = BaseName(file);
  int n =
      std::snprintf(head, sizeof(head), "%c%02d%02d %02d:%02d:%02d.%06ld %7ld ", LevelChar(level),
                    local.tm_mon + 1, local.tm_mday, local.tm_hour, local.tm_min, local.tm_sec,
                    static_cast<long>(tv.tv_usec), static_cast<long>(syscall(SYS_gettid)));
  std::string out(head, n > 0 ? static_cast<size_t>(n) : 0);
  out.append(base);
  out.push_back(':');
  out.append(std::to_string(line));
  out.append("] ");
  out.append(message);
  MutexLock lock(g_mu);
  if (g_sink) {
    g_sink(level, out);
    return;
  }
  out.push_back('\n');
  std::fwrite(out.data(), 1, out.size(), stderr);
}

}  // namespace hami::log
