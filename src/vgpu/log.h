// Logging for the preload library: printf-style, no allocation, one write(2) per line to stderr.
//
// Levels follow LIBCUDA_LOG_LEVEL: 0 errors only, 1 + warnings, 2 + notices (default: one line
// per enforcement decision a user may ask about), 3 + info, 4 + debug.
//
// Thread safety: safe from any thread; SetLogLevel is a relaxed atomic store.
#pragma once

namespace hami::vgpu {

enum LogLevel : int { kLogError = 0, kLogWarn = 1, kLogNotice = 2, kLogInfo = 3, kLogDebug = 4 };

void SetLogLevel(int level);
int GetLogLevel();
// Reads LIBCUDA_LOG_LEVEL; an invalid value keeps the default and logs a warning.
void InitLogLevelFromEnv();
void Log(int level, const char* fmt, ...) __attribute__((format(printf, 2, 3)));

}  // namespace hami::vgpu

#define VGPU_LOG(level, ...)                      \
  do {                                            \
    if ((level) <= ::hami::vgpu::GetLogLevel()) { \
      ::hami::vgpu::Log((level), __VA_ARGS__);    \
    }                                             \
  } while (0)
#define VGPU_ERROR(...) VGPU_LOG(::hami::vgpu::kLogError, __VA_ARGS__)
#define VGPU_WARN(...) VGPU_LOG(::hami::vgpu::kLogWarn, __VA_ARGS__)
#define VGPU_NOTICE(...) VGPU_LOG(::hami::vgpu::kLogNotice, __VA_ARGS__)
#define VGPU_INFO(...) VGPU_LOG(::hami::vgpu::kLogInfo, __VA_ARGS__)
#define VGPU_DEBUG(...) VGPU_LOG(::hami::vgpu::kLogDebug, __VA_ARGS__)
