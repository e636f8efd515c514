// Process logging for the services (scheduler, simulated control plane, tools): one line per
// event, klog-like so operators can read it next to Kubernetes components:
//
//   I1122 10:15:03.123456   4711 filter.cc:88] pod default/train: placed on node-a (score 13.75)
//
//   HAMI_LOG(Info) << "pod " << key << ": placed on " << node;
//   HAMI_VLOG(4) << "filter request " << body.size() << " bytes";   // only with -v=4 or more
//
// Levels: Info, Warning, Error. HAMI_VLOG(n) is Info gated by the verbosity (-v). Lines go to
// stderr unless a sink is installed (tests capture lines that way).
//
// Thread safety: every function may be called from any thread; lines never interleave.
// SetSink/SetVerbosity are meant for start-up and tests.
#pragma once

#include <functional>
#include <sstream>
#include <string>
#include <string_view>

namespace hami::log {

enum class Level { kInfo, kWarning, kError };

void SetVerbosity(int v);
int Verbosity();
// Receives every formatted line (without the trailing newline); nullptr restores stderr.
void SetSink(std::function<void(Level, std::string_view)> sink);
void Write(Level level, const char* file, int line, std::string_view message);

// Collects one line and writes it on destruction.
class Line {
 public:
  Line(Level level, const char* file, int line) : level_(level), file_(file), line_(line) {}
  ~Line() { Write(level_, file_, line_, stream_.str()); }
  Line(const Line&) = delete;
  Line& operator=(const Line&) = delete;
  std::ostream& stream() { return stream_; }

 private:
  Level level_;
  const char* file_;
  int line_;
  std::ostringstream stream_;
};

}  // namespace hami::log

#define HAMI_LOG(severity) \
  ::hami::log::Line(::hami::log::Level::k##severity, __FILE__, __LINE__).stream()
// A loop rather than if/else, so `if (x) HAMI_VLOG(2) << ...; else ...` binds as written.
#define HAMI_VLOG(n)                                                                            \
  for (bool hami_vlog_on = ::hami::log::Verbosity() >= (n); hami_vlog_on; hami_vlog_on = false) \
  HAMI_LOG(Info)
