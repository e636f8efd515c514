// Timestamps as HAMi writes them into annotations.
//
//  - RFC 3339 with second precision, as Go's time.RFC3339 layout formats it
//    ("2024-05-01T08:30:00Z", "2024-05-01T16:30:00+08:00"); parsing also accepts a fraction of
//    a second, like Go. Used by the node lock.
//  - Go's time.DateTime layout "2006-01-02 15:04:05", a naive wall-clock time without zone (the
//    writer's local time). Used by the handshake annotation.
//
// Years are limited to 0000..9999 (four digits), as in the layouts.
//
// Thread safety: pure functions.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "common/status.h"

namespace hami::device {

// A naive calendar date and time of day.
struct CivilTime {
  int32_t year = 1970;
  int32_t month = 1;   // 1..12
  int32_t day = 1;     // 1..31
  int32_t hour = 0;    // 0..23
  int32_t minute = 0;  // 0..59
  int32_t second = 0;  // 0..59

  friend bool operator==(const CivilTime&, const CivilTime&) = default;
};

// Seconds since the Unix epoch of `t` read in a zone `utc_offset_seconds` east of UTC.
int64_t CivilToUnix(const CivilTime& t, int32_t utc_offset_seconds);
// The civil time of `unix_seconds` in a zone `utc_offset_seconds` east of UTC.
CivilTime UnixToCivil(int64_t unix_seconds, int32_t utc_offset_seconds);

// "YYYY-MM-DD HH:MM:SS".
std::string FormatDateTime(const CivilTime& t);
Result<CivilTime> ParseDateTime(std::string_view text);

// An instant plus the zone offset it was written with (kept so values round-trip byte for byte).
struct Timestamp {
  int64_t unix_seconds = 0;
  int32_t nanos = 0;               // 0..999999999; dropped by FormatRfc3339 like Go's RFC3339
  int32_t utc_offset_seconds = 0;  // whole minutes, |offset| < 24h

  friend bool operator==(const Timestamp&, const Timestamp&) = default;
};

std::string FormatRfc3339(const Timestamp& t);
Result<Timestamp> ParseRfc3339(std::string_view text);

}  // namespace hami::device
