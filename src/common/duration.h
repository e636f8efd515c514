// Durations written the way Go's time.ParseDuration reads them ("30s", "5m", "1h30m", "100ms",
// "1.5s"), as Kubernetes configuration files and upstream HAMi's flags use them.
//
// Thread safety: pure function.
#pragma once

#include <chrono>
#include <string_view>

#include "common/status.h"

namespace hami {

// Non-negative durations only; "0" needs no unit. InvalidArgument naming the text otherwise.
// Sub-millisecond parts are truncated.
Result<std::chrono::milliseconds> ParseGoDuration(std::string_view text);

}  // namespace hami
