// Helpers shared by the SchedulerService's source files (service*.cc); not part of its API.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "common/status.h"

namespace hami::extender::service_internal {

// An extender answer carrying only an error.
std::string ErrorReply(std::string_view message);

// "ns/name".
std::string PodKey(std::string_view ns, std::string_view name);

// The local time zone's offset at `unix_seconds` (HAMi's handshake times are local civil time).
int32_t LocalOffsetSeconds(int64_t unix_seconds);

// A write whose answer never came: it may or may not have been applied.
inline bool OutcomeUnknown(const Status& s) {
  return s.code() == StatusCode::kUnknown || s.code() == StatusCode::kDeadlineExceeded ||
         s.code() == StatusCode::kUnavailable;
}

}  // namespace hami::extender::service_internal
