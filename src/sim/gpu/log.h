// Diagnostics of the simulated driver, written to stderr with a "[hami-sim]" prefix.
//
// Errors and warnings are always written; debug lines only when HAMI_SIM_LOG=1 (read once).
// Never allocates on the debug-disabled path.
//
// Thread safety: thread-safe (one write(2) per line).
#pragma once

namespace hami::sim {

bool SimDebugEnabled();
void SimLogError(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
void SimLogWarn(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
void SimLogDebugImpl(const char* fmt, ...) __attribute__((format(printf, 1, 2)));

#define SimLogDebug(...)                                                           \
  do {                                                                             \
    if (::hami::sim::SimDebugEnabled()) ::hami::sim::SimLogDebugImpl(__VA_ARGS__); \
  } while (0)

}  // namespace hami::sim
